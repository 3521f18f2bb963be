"""asgd.SGDClassifier as a scikit-learn estimator: it learns a separable set as well as scikit-learn's
SGDClassifier with the same loss and alpha, drops into a Pipeline, cross_val_score and clone, and its coef_ and
intercept_ are views of the library's weights. scikit-learn is imported here only: the module does not need it."""

import numpy as np
import pytest
import scipy.sparse

import asgd

sklearn = pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.linear_model import SGDClassifier as SklearnSGD  # noqa: E402
from sklearn.model_selection import cross_val_score  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import MaxAbsScaler  # noqa: E402


def separable(examples=6000, features=300, density=0.05, seed=0):
    """Sparse examples labelled "spam"/"ham" by a planted hyperplane with an offset, those within 0.05 of it
    dropped (a margin): a set a linear model separates."""
    rng = np.random.default_rng(seed)
    X = scipy.sparse.random(examples, features, density=density, format="csr", random_state=seed,
                            dtype=np.float32)
    w = rng.normal(size=features)
    score = X @ w - 0.2
    keep = np.abs(score) > 0.05
    return X[keep], np.where(score[keep] > 0, "spam", "ham")


X, Y = separable()
TRAIN, TEST = slice(0, 4000), slice(4000, None)


@pytest.mark.parametrize("loss", ["log_loss", "hinge", "squared_hinge"])
def test_accuracy_on_a_separable_set_matches_sklearn(loss):
    ours = asgd.SGDClassifier(loss=loss, alpha=1e-4, epochs=20, random_state=0).fit(X[TRAIN], Y[TRAIN])
    theirs = SklearnSGD(loss=loss, alpha=1e-4, max_iter=20, tol=None, random_state=0).fit(X[TRAIN], Y[TRAIN])
    a, b = ours.score(X[TEST], Y[TEST]), theirs.score(X[TEST], Y[TEST])
    print(f"{loss}: test accuracy asgd {a:.4f}, sklearn {b:.4f}")
    assert a > 0.95
    assert a >= b - 0.02
    assert list(ours.classes_) == ["ham", "spam"]
    assert set(ours.predict(X[TEST])) <= {"ham", "spam"}


def test_decision_function_is_coef_dot_x_plus_intercept_and_predict_follows_its_sign():
    clf = asgd.SGDClassifier(random_state=0).fit(X[TRAIN], Y[TRAIN])
    d = clf.decision_function(X[TEST])
    assert d.dtype == np.float64 and d.shape == (X[TEST].shape[0],)
    expected = X[TEST] @ clf.coef_[0].astype(np.float64) + clf.intercept_[0]
    np.testing.assert_allclose(d, expected, rtol=1e-5, atol=1e-5)
    assert np.array_equal(clf.predict(X[TEST]), np.where(d >= 0, "spam", "ham"))
    # A dense X is the same examples.
    np.testing.assert_allclose(clf.decision_function(X[TEST].toarray()), d, rtol=1e-6, atol=1e-6)


def test_predict_proba_is_the_sigmoid_of_the_decision_function_for_log_loss_only():
    clf = asgd.SGDClassifier(loss="log_loss", random_state=0).fit(X[TRAIN], Y[TRAIN])
    p = clf.predict_proba(X[TEST])
    d = clf.decision_function(X[TEST])
    np.testing.assert_allclose(p[:, 1], 1 / (1 + np.exp(-d)), rtol=1e-9)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    np.testing.assert_allclose(clf.predict_log_proba(X[TEST]), np.log(p))
    hinge = asgd.SGDClassifier(loss="hinge", random_state=0).fit(X[TRAIN], Y[TRAIN])
    assert not hasattr(hinge, "predict_proba")  # as scikit-learn's: the attribute is missing
    with pytest.raises(AttributeError, match="loss='hinge'"):
        hinge.predict_proba(X[TEST])


def test_coef_and_intercept_are_views_of_the_library_weights():
    clf = asgd.SGDClassifier(random_state=0).fit(X[TRAIN], Y[TRAIN])
    assert clf.coef_.shape == (1, X.shape[1]) and clf.intercept_.shape == (1,)
    assert clf.coef_.dtype == np.float32
    assert np.shares_memory(clf.coef_, clf._weights) and np.shares_memory(clf.intercept_, clf._weights)
    # Changed in place, the weights the library scores with change: no copy in between.
    before = clf.decision_function(X[TEST])
    clf.intercept_ += 1.0
    np.testing.assert_allclose(clf.decision_function(X[TEST]), before + 1.0, rtol=1e-5)
    clf.coef_[:] = 0
    np.testing.assert_allclose(clf.decision_function(X[TEST]), clf.intercept_[0], rtol=1e-6)
    no_intercept = asgd.SGDClassifier(fit_intercept=False, random_state=0).fit(X[TRAIN], Y[TRAIN])
    assert np.array_equal(no_intercept.intercept_, [0.0])


def test_one_worker_and_a_seed_repeat_the_weights_and_another_seed_does_not():
    fit = lambda seed: asgd.SGDClassifier(n_jobs=1, random_state=seed).fit(X[TRAIN], Y[TRAIN]).coef_.copy()
    assert np.array_equal(fit(3), fit(3))
    assert not np.array_equal(fit(3), fit(4))


def test_int64_ids_train_as_int32_ones():
    """scipy holds ids as int32 below 2^31 non-zeros and int64 above: the library takes both as they are."""

    def with_int64_ids(m):
        m = m.copy()
        m.indices, m.indptr = m.indices.astype(np.int64), m.indptr.astype(np.int64)
        return m

    assert X.indices.dtype == np.int32 and with_int64_ids(X).indices.dtype == np.int64
    fit = lambda data: asgd.SGDClassifier(n_jobs=1, random_state=2).fit(data, Y[TRAIN])
    a, b = fit(X[TRAIN]), fit(with_int64_ids(X[TRAIN]))
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
    assert np.array_equal(a.decision_function(X[TEST]), a.decision_function(with_int64_ids(X[TEST])))


def test_threads_policies_and_schedules_train_the_set():
    for params in ({"n_jobs": 4, "policy": "atomic"}, {"n_jobs": 2, "tau": 0}, {"learning_rate": "constant",
                   "eta0": 0.1}, {"learning_rate": "inverse-sqrt"}, {"max_iter": 3}):
        clf = asgd.SGDClassifier(random_state=0, **params).fit(X[TRAIN], Y[TRAIN])
        assert clf.score(X[TEST], Y[TEST]) > 0.9, params
    assert asgd.SGDClassifier(max_iter=3, random_state=0).fit(X[TRAIN], Y[TRAIN]).n_iter_ == 3
    report = asgd.SGDClassifier(epochs=4, random_state=0).fit(X[TRAIN], Y[TRAIN]).report_
    assert len(report["losses"]) == 4 and report["losses"][-1] < report["losses"][0]
    assert report["updates"] == 4 * 4000


def test_get_params_set_params_and_clone():
    clf = asgd.SGDClassifier(loss="hinge", alpha=1e-3, n_jobs=2, random_state=5)
    params = clf.get_params()
    assert params["loss"] == "hinge" and params["alpha"] == 1e-3 and params["n_jobs"] == 2
    assert set(params) == {"loss", "penalty", "alpha", "fit_intercept", "intercept_scaling", "epochs", "max_iter",
                           "learning_rate", "eta0", "n_jobs", "policy", "tau", "random_state"}
    assert clf.set_params(alpha=1e-2, epochs=3) is clf and clf.alpha == 1e-2 and clf.epochs == 3
    with pytest.raises(ValueError, match="nonsense: not a parameter"):
        clf.set_params(nonsense=1)
    clf.fit(X[TRAIN], Y[TRAIN])
    twin = clone(clf)
    assert twin.get_params() == clf.get_params()
    assert not hasattr(twin, "coef_")  # a clone is unfitted
    # The same seed and one worker: the clone fits the same weights.
    twin.set_params(n_jobs=1).fit(X[TRAIN], Y[TRAIN])
    assert np.array_equal(twin.coef_, clone(twin).fit(X[TRAIN], Y[TRAIN]).coef_)
    assert "alpha=0.01" in repr(clf)


def test_drops_into_a_pipeline_and_cross_val_score():
    pipe = Pipeline([("scale", MaxAbsScaler()), ("clf", asgd.SGDClassifier(epochs=20, random_state=0))])
    pipe.fit(X[TRAIN], Y[TRAIN])
    assert pipe.score(X[TEST], Y[TEST]) > 0.95
    assert pipe.predict_proba(X[TEST]).shape == (X[TEST].shape[0], 2)
    scores = cross_val_score(pipe, X, Y, cv=3)
    assert scores.shape == (3,) and scores.min() > 0.95, scores
    # scikit-learn takes it for a classifier (stratified folds, accuracy).
    assert sklearn.base.is_classifier(asgd.SGDClassifier())
