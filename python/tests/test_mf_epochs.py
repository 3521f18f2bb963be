"""fit's validation set and epoch callback, and partial_fit: the callback gets (epoch, loss) once per epoch
from the training thread, an exception it raises stops the run; Ctrl-C still stops a run with a callback;
partial_fit goes on from the current factors and grows the model for new ids."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import asgd
from conftest import Ratings


def test_the_callback_gets_each_epoch_and_the_validation_set_is_scored(ratings):
    train, test = ratings.split()
    seen = []
    model = asgd.MatrixFactorization(factors=8, iterations=25, learning_rate=0.02, regularization=0.02,
                                     random_state=3, threads=2)
    model.fit(train, validation=test, callback=lambda epoch, loss: seen.append((epoch, loss,
                                                                                threading.get_ident())))
    assert [e for e, _, _ in seen] == list(range(1, 26))
    assert [loss for _, loss, _ in seen] == [h["loss"] for h in model.history_]
    assert seen[-1][1] < 0.7 * seen[0][1]
    # Called from the training thread, not the one that called fit.
    assert all(ident != threading.get_ident() for _, _, ident in seen)
    rmse = [h["validation_rmse"] for h in model.history_]
    assert rmse[-1] < rmse[0]
    # The last epoch's score is the model's: RMSE of its predictions on the validation set.
    predicted = model.predict(test[0], test[1])
    assert rmse[-1] == pytest.approx(float(np.sqrt(np.mean((predicted - test[2]) ** 2))), rel=1e-4)
    assert rmse[-1] < 1.3 * ratings.noise


def test_an_exception_in_the_callback_stops_the_run_and_is_raised(ratings):
    X = (ratings.users, ratings.items, ratings.values)
    model = asgd.MatrixFactorization(factors=4, iterations=1, random_state=1, threads=1).fit(X)
    before = model.user_factors.copy()
    calls = []

    def stop_at_three(epoch, loss):
        calls.append(epoch)
        if epoch == 3:
            raise RuntimeError("enough")

    model.set_params(iterations=1000)
    with pytest.raises(RuntimeError, match="enough"):
        model.fit(X, callback=stop_at_three)
    assert calls == [1, 2, 3]
    assert np.array_equal(model.user_factors, before)
    with pytest.raises(TypeError, match="callback: expected a callable"):
        model.fit(X, callback=3)


def test_ctrl_c_stops_a_fit_with_a_callback():
    big = Ratings(users=3000, items=1500, count=200000, seed=7)
    X = (big.users, big.items, big.values)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    epochs = []
    model = asgd.MatrixFactorization(factors=4, iterations=20000, random_state=1, threads=2)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, callback=lambda epoch, loss: epochs.append(epoch))
    timer.cancel()
    assert time.monotonic() - start < 5
    assert 0 < len(epochs) < 20000


def test_partial_fit_goes_on_from_the_factors_and_grows_new_ids(ratings):
    X = (ratings.users, ratings.items, ratings.values)
    model = asgd.MatrixFactorization(factors=8, iterations=10, regularization=0.02, random_state=2, threads=1)
    model.fit(X)
    last = model.history_[-1]["loss"]
    model.partial_fit(X, epochs=2)
    assert len(model.history_) == 2
    fresh = asgd.MatrixFactorization(factors=8, iterations=2, regularization=0.02, random_state=2,
                                     threads=1).fit(X)
    # Measured on this data: the epoch after 10 is as low as the 10th, well below a new run's first.
    assert model.history_[0]["loss"] < 1.05 * last
    assert model.history_[0]["loss"] < 0.9 * fresh.history_[0]["loss"]
    # Two new users and one new item: the model grows, the old rows go on training.
    users = np.concatenate([ratings.users, [ratings.user_count, ratings.user_count + 1]])
    items = np.concatenate([ratings.items, [ratings.item_count, 0]])
    values = np.concatenate([ratings.values, [4.0, 3.0]]).astype(np.float32)
    model.partial_fit((users, items, values), epochs=1)
    assert model.user_factors.shape == (ratings.user_count + 2, 8)
    assert model.item_factors.shape == (ratings.item_count + 1, 8)
    assert model.recommend(ratings.user_count + 1, N=3)[0].size == 3


def test_bpr_takes_a_callback_and_partial_fit_but_no_validation(ratings):
    X = (ratings.users, ratings.items, ratings.values)
    losses = []
    model = asgd.BayesianPersonalizedRanking(factors=4, iterations=5, random_state=1, threads=1, positive=4)
    model.fit(X, callback=lambda epoch, loss: losses.append(loss))
    assert len(losses) == 5 and losses[-1] < losses[0]
    model.partial_fit(X, epochs=3)
    assert len(model.history_) == 3 and model.history_[0]["loss"] < losses[0]
    with pytest.raises(ValueError, match="validation: for MatrixFactorization only"):
        model.fit(X, validation=X)
