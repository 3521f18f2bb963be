"""Live serving: a fit(X, shm=name, model_file=path) in one process trains into a shared segment while
asgd.attach(name, path) in another serves recommend from the factors as they train."""

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import asgd

TRAINER = textwrap.dedent("""
    import sys
    import numpy as np
    import asgd
    sys.path.insert(0, sys.argv[3])
    from conftest import Ratings
    big = Ratings(users=3000, items=1500, count=200000, seed=7)
    model = asgd.MatrixFactorization(factors=8, iterations=int(sys.argv[4]), random_state=1, threads=2)
    model.fit((big.users, big.items, big.values), shm=sys.argv[1], model_file=sys.argv[2])
    print("trained", model.history_[-1]["epoch"], flush=True)
""")


def test_attach_serves_the_factors_another_process_trains(tmp_path):
    name = f"asgd-pytest-live-{os.getpid()}"
    model_file = tmp_path / "live.model"
    tests = os.path.dirname(os.path.abspath(__file__))
    trainer = subprocess.Popen([sys.executable, "-c", TRAINER, name, str(model_file), tests, "400"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 60
        while not model_file.exists():  # written as training begins
            assert trainer.poll() is None, trainer.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        live = asgd.attach(name, model_file)
        assert isinstance(live, asgd.MatrixFactorization)
        assert not live.user_factors.flags.writeable
        first = live.item_factors.copy()
        time.sleep(0.3)
        ids, scores = live.recommend(np.arange(5), N=10)
        assert ids.shape == (5, 10) and np.all(ids >= 0)
        # The view reads the segment: it moved while training went on, with no reload.
        assert trainer.poll() is None, "training ended before a second read: make it longer"
        assert not np.array_equal(live.item_factors, first)
    finally:
        trainer.kill() if trainer.poll() is None else None
        trainer.wait()
    # The killed trainer's segment stays until removed; the attached model keeps its mapping after that.
    assert live.remove_segment()
    assert live.recommend(0, N=3)[0].size == 3


def test_a_fit_into_a_segment_finishes_and_removes_it(tmp_path, ratings):
    name = f"asgd-pytest-seg-{os.getpid()}"
    model_file = tmp_path / "m.model"
    X = (ratings.users, ratings.items, ratings.values)
    model = asgd.BayesianPersonalizedRanking(factors=4, iterations=3, random_state=1, threads=1, positive=4)
    model.fit(X, shm=name, model_file=model_file)
    attached = asgd.attach(name, model_file)
    assert isinstance(attached, asgd.BayesianPersonalizedRanking)
    assert np.array_equal(attached.item_factors, model.item_factors)
    assert np.array_equal(asgd.load(model_file).item_factors, model.item_factors)
    assert model.remove_segment()
    assert not model.remove_segment()
    with pytest.raises(ValueError):
        asgd.attach(name, model_file)
    with pytest.raises(ValueError, match="shm: give model_file too"):
        model.fit(X, shm=name)
    with pytest.raises(OSError):
        asgd.attach(name, tmp_path / "missing.model")
