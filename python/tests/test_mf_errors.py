"""Bad input gets the exception a Python user expects, with the library's message: TypeError for the wrong
kind of value, ValueError for a wrong value, OSError for a file that cannot be read or written. Nothing
crashes the interpreter."""

import numpy as np
import pytest
import scipy.sparse

import asgd

U = np.array([0, 1, 2, 1])
I = np.array([0, 1, 0, 2])
R = np.array([4.0, 3.0, 5.0, 1.0])


@pytest.fixture(scope="module")
def model():
    return asgd.MatrixFactorization(factors=2, iterations=2, random_state=1, threads=1).fit((U, I, R))


def fit(X, **settings):
    return lambda model: asgd.MatrixFactorization(**{"iterations": 1, "random_state": 1, **settings}).fit(X)


CASES = [
    # (what, call, exception, words of the message)
    ("float user ids", fit((U.astype(float), I, R)), TypeError, "users: expected integer ids"),
    ("string ratings", fit((U, I, R.astype(str))), TypeError, "ratings: expected numbers"),
    ("a list of lists", fit([[0, 1, 4.0]]), TypeError, "X: expected a scipy.sparse"),
    ("lengths that differ", fit((U, I[:3], R)), ValueError, "4 user ids and 3 item ids"),
    ("fewer ratings", fit((U, I, R[:2])), ValueError, "2 ratings for 4"),
    ("a negative user id", fit((np.array([0, -1, 2, 1]), I, R)), ValueError, "users[1] = -1"),
    ("a NaN rating", fit((U, I, np.array([4.0, np.nan, 5.0, 1.0]))), ValueError, "ratings[1] = nan"),
    ("an infinite rating", fit((U, I, np.array([4.0, 3.0, np.inf, 1.0]))), ValueError, "ratings[2] = inf"),
    ("a NaN in a matrix", fit(scipy.sparse.csr_matrix(np.array([[np.nan, 1.0]]))), ValueError, "= nan"),
    ("zero factors", fit((U, I, R), factors=0), ValueError, "factors 0"),
    ("float factors", fit((U, I, R), factors=2.5), TypeError, "factors: expected an integer"),
    ("a negative learning rate", fit((U, I, R), learning_rate=-1), ValueError, "learning_rate"),
    ("an unknown policy", fit((U, I, R), policy="wild"), ValueError, "wild"),
    ("an unknown schedule", fit((U, I, R), schedule="grid"), ValueError, "schedule 'grid'"),
    ("a float tau", fit((U, I, R), tau=1.5), TypeError, "tau: expected None"),
    ("a negative tau", fit((U, I, R), tau=-1), ValueError, "tau '-1'"),
    ("tau with blocks", fit((U, I, R), schedule="blocks", tau=2), ValueError, "tau: only with"),
    ("predict past the users", lambda m: m.predict([3], [0]), ValueError, "users[0] = 3: expected an id in 0..2"),
    ("predict a negative item", lambda m: m.predict([0], [-2]), ValueError, "items[0] = -2"),
    ("predict float ids", lambda m: m.predict([0.5], [0]), TypeError, "users: expected integer ids"),
    ("predict shapes that differ", lambda m: m.predict([0, 1], [0]), ValueError, "2 user ids and 1 item ids"),
    ("recommend past the users", lambda m: m.recommend(7), ValueError, "users[0] = 7"),
    ("recommend N 0", lambda m: m.recommend(0, N=0), ValueError, "N 0"),
    ("recommend with a dense user_items", lambda m: m.recommend(0, np.ones((1, 3))), TypeError, "user_items"),
    ("recommend with user_items of other rows",
     lambda m: m.recommend([0, 1], scipy.sparse.csr_matrix((5, 3))), ValueError, "user_items: 5 rows"),
    ("recommend with user_items past the items",
     lambda m: m.recommend(0, scipy.sparse.csr_matrix(([1.0], ([0], [4])), shape=(1, 5))), ValueError,
     "seen items[0] = 4"),
    ("an unfitted model", lambda m: asgd.MatrixFactorization().predict([0], [0]), ValueError, "not fitted"),
    ("load a missing file", lambda m: asgd.load("/nonexistent/model"), FileNotFoundError, "cannot open"),
    ("load a folder", lambda m: asgd.load("/"), IsADirectoryError, "not a regular file"),
    ("save into a missing folder", lambda m: m.save("/nonexistent/folder/model"), FileNotFoundError,
     "cannot write"),
    ("save onto a folder", lambda m: m.save("/tmp"), IsADirectoryError, "is a directory"),
]


@pytest.mark.parametrize("what, call, error, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_its_exception(model, what, call, error, words):
    with pytest.raises(error) as raised:
        call(model)
    assert words in str(raised.value)
    if issubclass(error, OSError):
        assert raised.value.errno is not None


def test_a_file_that_is_not_a_model_is_a_value_error(tmp_path):
    path = tmp_path / "ratings.txt"
    path.write_text("0 0 4\n")
    with pytest.raises(ValueError, match="not an asgd checkpoint"):
        asgd.load(path)
