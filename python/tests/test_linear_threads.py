"""SGDClassifier.fit releases the GIL (another Python thread runs meanwhile) and Ctrl-C stops it with
KeyboardInterrupt, the classifier keeping its previous fit."""

import os
import signal
import threading
import time

import numpy as np
import scipy.sparse

import asgd

# 100,000 examples of 20 features each (of 1000; scipy.sparse.random takes seconds to draw them): an epoch takes
# milliseconds, thousands of them minutes unless stopped.
RNG = np.random.default_rng(3)
X = scipy.sparse.csr_matrix((RNG.random(2000000, dtype=np.float32), RNG.integers(0, 1000, 2000000),
                             np.arange(0, 2000001, 20)), shape=(100000, 1000))
X.sum_duplicates()
Y = (X @ RNG.normal(size=1000) > 0).astype(int)


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
    # Fit for at least half a second however fast the machine is: more epochs until it takes that long.
    epochs = 4
    try:
        while True:
            start = time.monotonic()
            asgd.SGDClassifier(epochs=epochs, n_jobs=1, random_state=1).fit(X, Y)
            end = time.monotonic()
            if end - start > 0.5 or epochs > 4 * 4**6:
                break
            epochs *= 4
    finally:
        stop.set()
        counter.join()
    during = [n for t, n in counts if start < t < end]
    assert end - start > 0.5
    # With the GIL held for the whole fit the counter would not move at all until it returned.
    assert len(during) > 20


def test_ctrl_c_stops_fit_with_keyboard_interrupt():
    signal.signal(signal.SIGINT, signal.default_int_handler)
    clf = asgd.SGDClassifier(epochs=1, n_jobs=1, random_state=1).fit(X, Y)
    before = clf.coef_.copy()
    clf.set_params(epochs=100000, n_jobs=2)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        clf.fit(X, Y)
        raise AssertionError("fit ran to its end: the interrupt was not seen")
    except KeyboardInterrupt:
        pass
    finally:
        timer.cancel()
    elapsed = time.monotonic() - start
    assert 0.5 <= elapsed < 5, elapsed
    # The classifier is the one fitted before, untouched.
    assert np.array_equal(clf.coef_, before)
    assert clf.score(X, Y) > 0.5
