"""verbose=True prints the engine's progress (rate, ETA) and the run's summary; every fit keeps the run's report
(losses per epoch, updates/s, the staleness histogram as numpy) for MatrixFactorization,
BayesianPersonalizedRanking (report_) and Word2Vec (report)."""

import io
import sys

import numpy as np
import pytest

import asgd
from conftest import Ratings

# Big enough that an epoch outlasts the engine's first progress event.
BIG = Ratings(users=3000, items=1500, count=200000, seed=7)
TRIPLES = (BIG.users, BIG.items, BIG.values)


def test_verbose_prints_progress_with_rate_and_eta_then_the_summary(capsys):
    model = asgd.MatrixFactorization(factors=4, iterations=3, random_state=1, threads=2, verbose=True)
    model.fit(TRIPLES)
    err = capsys.readouterr().err
    lines = err.split("\n")
    # One line rewritten in place (\r), ended once, then the library's summary.
    assert "\r" in lines[0] and "mf: 100.0%  epoch 3" in lines[0] and "updates/s" in lines[0]
    assert "ETA " in lines[0] and "loss " in lines[0]
    assert lines[1].startswith("mf: ") and model.report_.summary in lines[1]
    assert "staleness mean" in lines[1]
    # Quiet by default.
    asgd.BayesianPersonalizedRanking(factors=4, iterations=2, random_state=1, threads=2, positive=4).fit(TRIPLES)
    assert capsys.readouterr().err == ""
    asgd.BayesianPersonalizedRanking(factors=4, iterations=2, random_state=1, threads=2, positive=4,
                                     verbose=True).fit(TRIPLES)
    assert "bpr: 100.0%  epoch 2" in capsys.readouterr().err


def test_the_report_holds_losses_rate_and_the_staleness_histogram():
    model = asgd.MatrixFactorization(factors=4, iterations=4, random_state=1, threads=2).fit(TRIPLES)
    r = model.report_
    assert r is model.report_ and r["losses"] is r.losses
    np.testing.assert_array_equal(r.losses, [h["loss"] for h in model.history_])
    assert r.losses.dtype == np.float64 and r.losses.shape == (4,)
    assert r.examples == 4 * BIG.values.size
    assert r.examples_per_second == pytest.approx(r.examples / r.seconds)
    assert not r.stopped
    # The histogram counts steps (4096 ratings each, the CLI's) by how many other workers' updates landed while
    # they ran; its mean and max are the library's.
    h = r.staleness
    assert h.dtype == np.uint64 and h.shape == (65,)
    steps = int(h.sum())
    assert steps >= 4 * BIG.values.size // 4096
    assert r.max_staleness == int(np.nonzero(h)[0].max()) or r.max_staleness >= 64
    if r.max_staleness < 64:
        assert r.mean_staleness == pytest.approx(float(np.arange(65) @ h) / steps)
    # One worker: no other worker's update ever lands during a step.
    alone = asgd.MatrixFactorization(factors=4, iterations=2, random_state=1, threads=1).fit(TRIPLES).report_
    assert alone.staleness[0] == alone.staleness.sum() > 0 and alone.max_staleness == 0
    with pytest.raises(AttributeError, match="no 'nothing'"):
        r.nothing


def test_word2vec_verbose_and_its_report(tmp_path, capsys):
    rng = np.random.default_rng(0)
    corpus = tmp_path / "corpus.txt"
    with open(corpus, "w") as f:
        for _ in range(4000):
            f.write(" ".join(f"w{int(x) % 300}" for x in rng.zipf(1.3, 12)) + "\n")
    model = asgd.Word2Vec(corpus_file=corpus, vector_size=16, min_count=1, epochs=3, workers=2, seed=3,
                          verbose=True)
    err = capsys.readouterr().err
    assert "w2v: 100.0%  epoch 3" in err and "words/s" in err and "ETA " in err
    assert model.report.summary in err
    r = model.report
    assert r.losses.shape == (3,) and r["epochs"] == 3
    assert r.words_per_second > 0 and r.corpus_words == 4000 * 12
    assert r.staleness.shape == (65,) and r.staleness.sum() > 0
    asgd.Word2Vec(corpus_file=corpus, vector_size=16, min_count=1, epochs=1, workers=2)
    assert capsys.readouterr().err == ""


class Broken(io.StringIO):
    def write(self, text):
        raise OSError("stderr is gone")


def test_a_progress_line_that_cannot_be_printed_stops_the_fit_with_its_error(monkeypatch):
    monkeypatch.setattr(sys, "stderr", Broken())
    model = asgd.MatrixFactorization(factors=4, iterations=1, random_state=1, threads=1).fit(TRIPLES)
    before = model.user_factors.copy()
    model.set_params(iterations=20000, verbose=True)
    with pytest.raises(OSError, match="stderr is gone"):
        model.fit(TRIPLES)
    assert np.array_equal(model.user_factors, before)
