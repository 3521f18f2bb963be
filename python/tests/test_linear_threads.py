"""SGDClassifier.fit releases the GIL (another Python thread runs meanwhile) and Ctrl-C stops it with
KeyboardInterrupt, the classifier keeping its previous fit."""

import numpy as np
import scipy.sparse

import asgd
from conftest import assert_other_thread_runs, interrupted_after_half_a_second

# 100,000 examples of 20 features each (of 1000; scipy.sparse.random takes seconds to draw them): an epoch takes
# milliseconds, thousands of them minutes unless stopped.
RNG = np.random.default_rng(3)
X = scipy.sparse.csr_matrix((RNG.random(2000000, dtype=np.float32), RNG.integers(0, 1000, 2000000),
                             np.arange(0, 2000001, 20)), shape=(100000, 1000))
X.sum_duplicates()
Y = (X @ RNG.normal(size=1000) > 0).astype(int)


def test_another_thread_runs_during_fit():
    assert_other_thread_runs(lambda epochs: asgd.SGDClassifier(epochs=epochs, n_jobs=1, random_state=1).fit(X, Y), 4)


def test_ctrl_c_stops_fit_with_keyboard_interrupt():
    clf = asgd.SGDClassifier(epochs=1, n_jobs=1, random_state=1).fit(X, Y)
    before = clf.coef_.copy()
    clf.set_params(epochs=100000, n_jobs=2)
    interrupted_after_half_a_second(lambda: clf.fit(X, Y))
    # The classifier is the one fitted before, untouched.
    assert np.array_equal(clf.coef_, before)
    assert clf.score(X, Y) > 0.5
