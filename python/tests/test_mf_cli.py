"""A model trained in Python is the CLI's and the CLI's is Python's: with one worker and a seed, `asgd mf train`
writes the file model.save writes, byte for byte; `asgd mf recommend` and `asgd mf predict` answer what
recommend and predict answer, in both directions."""

import numpy as np

import asgd


def train_both(ratings, cli, tmp_path, seed):
    """The same ratings trained by the CLI (from a file) and by Python (from arrays): (cli_file, python_file)."""
    train_file = tmp_path / "train.txt"
    ratings.write(train_file)
    cli_model = tmp_path / "cli.model"
    cli("mf", "train", train_file, cli_model, "-k", 6, "-t", 4, "-s", 1, "--seed", seed, "-r", 0.03,
        "--l2", 0.04, "--bias-l2", 0.06, "-q")
    model = asgd.MatrixFactorization(factors=6, iterations=4, learning_rate=0.03, regularization=0.04,
                                     bias_regularization=0.06, random_state=seed, threads=1)
    model.fit((ratings.users, ratings.items, ratings.values))
    python_model = tmp_path / "python.model"
    model.save(python_model)
    return cli_model, python_model, model


def test_one_worker_and_a_seed_give_the_clis_model_byte_for_byte(ratings, cli, tmp_path):
    cli_model, python_model, model = train_both(ratings, cli, tmp_path, seed=11)
    assert python_model.read_bytes() == cli_model.read_bytes()
    loaded = asgd.load(cli_model)
    assert np.array_equal(loaded.user_factors, model.user_factors)
    assert np.array_equal(loaded.item_factors, model.item_factors)
    # Another seed, another model: the comparison can tell them apart.
    other = asgd.MatrixFactorization(factors=6, iterations=4, learning_rate=0.03, regularization=0.04,
                                     bias_regularization=0.06, random_state=12, threads=1)
    other.fit((ratings.users, ratings.items, ratings.values))
    assert not np.array_equal(other.user_factors, model.user_factors)


def test_the_cli_recommends_from_a_python_model_what_python_does(ratings, cli, tmp_path):
    model = asgd.MatrixFactorization(factors=5, iterations=3, random_state=4, threads=2).fit(
        (ratings.users, ratings.items, ratings.values))
    path = tmp_path / "model"
    model.save(path)
    for user in (3, 0, ratings.user_count - 1):
        lines = cli("mf", "recommend", path, "--user", user, "-k", 10).split("\n")
        pairs = [line.split("\t") for line in lines if line]
        ids, scores = model.recommend(user, N=10)
        assert [int(item) for item, _ in pairs] == ids.tolist()
        assert [float(score) for _, score in pairs] == [round(float(s), 4) for s in scores]
    # And asgd.load gives the same lists back.
    again_ids, again_scores = asgd.load(path).recommend(3, N=10)
    assert np.array_equal(again_ids, model.recommend(3, N=10)[0])


def test_a_cli_model_predicts_in_python_what_mf_predict_writes(ratings, cli, tmp_path):
    # External ids that are not rows: users 1000 + 3u, items "i<n>"; Python finds the rows by the model's names.
    train, test = ratings.split()
    train_file, test_file = tmp_path / "train.txt", tmp_path / "test.txt"
    for path, (u, i, r) in ((train_file, train), (test_file, test)):
        with open(path, "w") as f:
            for a, b, c in zip(u, i, r):
                f.write(f"{1000 + 3 * a} i{b} {float(c):.9g}\n")
    model_file, out = tmp_path / "model", tmp_path / "predictions.txt"
    cli("mf", "train", train_file, model_file, "-k", 8, "-t", 40, "--l2", 0.02, "-s", 2, "-q")
    cli("mf", "predict", test_file, model_file, out)
    written = np.loadtxt(out, dtype=np.float32)

    model = asgd.load(model_file)
    user_row = {name: row for row, name in enumerate(model.user_names)}
    item_row = {name: row for row, name in enumerate(model.item_names)}
    users = np.array([user_row[str(1000 + 3 * u)] for u in test[0]])
    items = np.array([item_row[f"i{i}"] for i in test[1]])
    predicted = model.predict(users, items)
    # The CLI prints 6 significant digits.
    np.testing.assert_allclose(predicted, written, rtol=1e-5, atol=0)
    assert float(np.sqrt(np.mean((predicted - test[2]) ** 2))) < 1.25 * ratings.noise
