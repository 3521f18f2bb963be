"""fit releases the GIL (another Python thread runs meanwhile) and Ctrl-C stops it with KeyboardInterrupt,
the model left at its last finished epoch."""

import numpy as np

import asgd
from conftest import Ratings, assert_other_thread_runs, interrupted_after_half_a_second

# Big enough that an epoch takes about 10 ms: thousands of them would take minutes unless stopped.
BIG = Ratings(users=3000, items=1500, count=200000, seed=7)
TRIPLES = (BIG.users, BIG.items, BIG.values)


def test_another_thread_runs_during_fit():
    assert_other_thread_runs(
        lambda iterations: asgd.MatrixFactorization(factors=8, iterations=iterations, random_state=1,
                                                    threads=1).fit(TRIPLES), 100)


def test_ctrl_c_stops_fit_with_keyboard_interrupt_at_the_last_finished_epoch():
    model = asgd.MatrixFactorization(factors=4, iterations=1, random_state=1, threads=1).fit(TRIPLES)
    before = model.user_factors.copy()
    model.set_params(iterations=20000)
    interrupted_after_half_a_second(lambda: model.fit(TRIPLES))
    # The model is the stopped fit's at its last finished epoch: with one worker, a seed and a constant rate,
    # that of a fit of just those epochs, byte for byte (the unfinished epoch's updates undone).
    done = len(model.history_)
    assert 0 < done < 20000
    assert [h["epoch"] for h in model.history_] == list(range(1, done + 1))
    assert model.report_.stopped and len(model.report_.losses) >= done
    assert not np.array_equal(model.user_factors, before)
    same = asgd.MatrixFactorization(factors=4, iterations=done, random_state=1, threads=1).fit(TRIPLES)
    assert np.array_equal(model.user_factors, same.user_factors)
    assert np.array_equal(model.item_factors, same.item_factors)
