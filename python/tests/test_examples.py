"""The Python examples (examples/python) run end to end on generated data, with small sizes: the recommender
pipeline (u.data -> fit -> RMSE, NDCG@10 -> recommend -> save -> reload -> live serving from another process)
and the embeddings one (corpus -> Word2Vec -> neighbours -> analogies)."""

import os
import re
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python")


def run(example, *args):
    done = subprocess.run([sys.executable, os.path.join(EXAMPLES, example), *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    return done.stdout


def number(pattern, text):
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in:\n{text}"
    return float(found.group(1))


def test_the_recommender_example(cli):
    out = run("recommender.py", "--asgd", os.environ["ASGD_CLI"], "--users", 300, "--items", 200, "--count", 20000,
              "--noise", 0.3, "--factors", 8, "--iterations", 40, "--live-iterations", 300, "--seed", 3)
    assert "u.data: 20000 ratings, 300 users, 200 items" in out
    # Learned: 0.40 measured, against 0.60 for the training mean and the noise floor 0.3; and a ranking better
    # than nothing.
    rmse = number(r"RMSE on held-out ratings: ([0-9.]+)", out)
    assert rmse < 0.8 * number(r"predicting the mean ([0-9.]+)", out)
    assert rmse < 1.5 * 0.3
    assert number(r"NDCG@10 ([0-9.]+)", out) > 0
    assert "same top 5: True" in out
    assert number(r"live: (\d+) reads", out) >= 1


def test_the_embeddings_example():
    out = run("embeddings.py", "--sentences", 4000, "--vector-size", 32, "--workers", 1, "--seed", 2)
    assert "vocabulary 132" in out
    assert "king : queen :: man : woman" in out
    assert number(r"analogies: ([0-9.]+)% of 132 questions", out) >= 90
