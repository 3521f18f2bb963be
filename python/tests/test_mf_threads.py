"""fit releases the GIL (another Python thread runs meanwhile) and Ctrl-C stops it with KeyboardInterrupt,
the model left at its last finished epoch."""

import os
import signal
import threading
import time

import numpy as np

import asgd
from conftest import Ratings

# Big enough that an epoch takes about 10 ms: thousands of them would take minutes unless stopped.
BIG = Ratings(users=3000, items=1500, count=200000, seed=7)
TRIPLES = (BIG.users, BIG.items, BIG.values)


def test_another_thread_runs_during_fit():
    counts = []
    stop = threading.Event()

    def count():
        n = 0
        while not stop.is_set():
            n += 1
            if n % 1000 == 0:
                counts.append((time.monotonic(), n))

    counter = threading.Thread(target=count)
    counter.start()
    time.sleep(0.05)
    # Fit for at least half a second however fast the machine is: more iterations until it takes that long.
    iterations = 100
    try:
        while True:
            start = time.monotonic()
            asgd.MatrixFactorization(factors=8, iterations=iterations, random_state=1, threads=1).fit(TRIPLES)
            end = time.monotonic()
            if end - start > 0.5 or iterations > 100 * 2**8:
                break
            iterations *= 4
    finally:
        stop.set()
        counter.join()
    during = [n for t, n in counts if start < t < end]
    assert end - start > 0.5
    # With the GIL held for the whole fit the counter would not move at all until it returned.
    assert len(during) > 20


def test_ctrl_c_stops_fit_with_keyboard_interrupt_at_the_last_finished_epoch():
    signal.signal(signal.SIGINT, signal.default_int_handler)
    model = asgd.MatrixFactorization(factors=4, iterations=1, random_state=1, threads=1).fit(TRIPLES)
    before = model.user_factors.copy()
    model.set_params(iterations=20000)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        model.fit(TRIPLES)
        raise AssertionError("fit ran to its end: the interrupt was not seen")
    except KeyboardInterrupt:
        pass
    finally:
        timer.cancel()
    elapsed = time.monotonic() - start
    assert 0.5 <= elapsed < 5, elapsed
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
