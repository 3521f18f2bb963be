"""Bad inputs to asgd.SGDClassifier get ValueError (TypeError for the wrong kind) naming the input or parameter."""

import numpy as np
import pytest
import scipy.sparse

import asgd

X = scipy.sparse.csr_matrix(np.array([[1, 0, 2], [0, 1, 0], [3, 0, 0], [0, 2, 1]], dtype=np.float32))
Y = np.array([0, 1, 0, 1])
WITH_NAN = X.copy()
WITH_NAN.data[2] = np.nan

FIT_CASES = [
    # (what, X, y, exception, the message names)
    ("1-D X", np.array([1.0, 2.0, 3.0, 4.0]), Y, ValueError, "X: expected a 2-D array"),
    ("NaN in sparse X", WITH_NAN, Y, ValueError, "X: row 1, feature 1: nan, expected finite"),
    ("NaN in dense X", np.where(X.toarray() == 3, np.nan, X.toarray()), Y, ValueError, "X: row 2, feature 0: nan"),
    ("inf in X", np.where(X.toarray() == 2, np.inf, X.toarray()), Y, ValueError, "X: row 0, feature 2: inf"),
    ("strings in X", np.array([["a", "b"]] * 4), Y, TypeError, "X: expected numbers"),
    ("more labels than rows", X, np.array([0, 1, 0, 1, 1]), ValueError, "X and y: 4 examples in X, 5 labels in y"),
    ("fewer labels than rows", X, np.array([0, 1, 0]), ValueError, "X and y: 4 examples in X, 3 labels in y"),
    ("3 classes", X, np.array([0, 1, 2, 1]), ValueError, "y: 3 classes [0, 1, 2]; asgd.SGDClassifier is binary"),
    ("1 class", X, np.array([1, 1, 1, 1]), ValueError, "y: 1 class [1]"),
    ("NaN in y", X, np.array([0.0, 1.0, np.nan, 1.0]), ValueError, "y: holds NaN"),
    ("2-D y", X, np.array([[0, 1], [1, 0], [0, 1], [1, 0]]), ValueError, "y: expected a 1-D array"),
    ("no examples", scipy.sparse.csr_matrix((0, 3), dtype=np.float32), np.array([], dtype=int), ValueError,
     "y: 0 classes"),
]


@pytest.mark.parametrize("what,data,labels,error,message", FIT_CASES, ids=[c[0] for c in FIT_CASES])
def test_bad_data_is_refused_naming_it(what, data, labels, error, message):
    with pytest.raises(error) as e:
        asgd.SGDClassifier(random_state=0).fit(data, labels)
    assert message in str(e.value)


PARAM_CASES = [
    ({"loss": "modified_huber"}, ValueError, "loss 'modified_huber': expected one of log_loss"),
    ({"penalty": "l1"}, ValueError, "penalty 'l1'"),
    ({"alpha": -1.0}, ValueError, "alpha -1: expected finite and >= 0"),
    ({"alpha": "big"}, TypeError, "alpha: expected a number"),
    ({"epochs": 0}, ValueError, "epochs 0: expected an integer >= 1"),
    ({"epochs": 3, "max_iter": 5}, ValueError, "max_iter 5 and epochs 3: give one"),
    ({"learning_rate": "optimal"}, ValueError, "learning_rate 'optimal'"),
    ({"eta0": -0.5}, ValueError, "eta0"),
    ({"n_jobs": 0}, ValueError, "n_jobs 0: expected an integer >= 1"),
    ({"policy": "bogus"}, ValueError, "bogus"),
    ({"tau": -1}, ValueError, "tau -1"),
    ({"random_state": -3}, ValueError, "random_state -3"),
    ({"intercept_scaling": 0}, ValueError, "intercept_scaling 0"),
]


@pytest.mark.parametrize("params,error,message", PARAM_CASES, ids=[str(c[0]) for c in PARAM_CASES])
def test_bad_parameters_are_refused_naming_them(params, error, message):
    with pytest.raises(error) as e:
        asgd.SGDClassifier(**params).fit(X, Y)
    assert message in str(e.value)


def test_scoring_refuses_another_width_and_an_unfitted_model():
    with pytest.raises(ValueError, match="not fitted yet"):
        asgd.SGDClassifier().predict(X)
    clf = asgd.SGDClassifier(random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match="X: 2 features, but this SGDClassifier was fitted on 3"):
        clf.predict(X[:, :2])
    with pytest.raises(ValueError, match="X: row 1, feature 1: nan"):
        clf.decision_function(WITH_NAN)
    # A failed fit leaves the model fitted before as it was.
    before = clf.coef_.copy()
    with pytest.raises(ValueError):
        clf.fit(X, np.array([0, 1, 2, 1]))
    assert np.array_equal(clf.coef_, before)
