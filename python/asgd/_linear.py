"""Linear classifiers as scikit-learn estimators, on the library's sparse::fit_linear (what `asgd linear train`
runs): SGDClassifier, with scikit-learn's estimator protocol implemented here (get_params from the __init__
signature, set_params, fit returning self), so that it drops into a Pipeline, cross_val_score and clone without
scikit-learn being a dependency."""

import inspect
import os

import numpy as np
import scipy.sparse

from . import _core

# scikit-learn's loss names -> the library's; the library has no other loss (modified_huber, perceptron, the
# regression losses).
_LOSSES = {"log_loss": "logistic", "log": "logistic", "hinge": "hinge", "squared_hinge": "squared-hinge"}
# scikit-learn's learning_rate names the library has: "constant" (eta0 throughout), and the library's own
# "linear" (eta0 decaying linearly to 1e-4 eta0 over the run, as word2vec and `asgd linear train`) and
# "inverse-sqrt" (eta0 / sqrt(1 + epochs elapsed)). scikit-learn's "optimal", "invscaling" and "adaptive" have no
# counterpart in the library.
_SCHEDULES = {"constant": "constant", "linear": "linear", "inverse-sqrt": "inverse-sqrt"}


def _csr_arrays(X, what="X"):
    """X (scipy.sparse or a 2-D array of numbers) as (indptr, indices, values, rows, columns): int32 or int64
    ids and float32 values of its canonical CSR form (ids sorted, duplicates summed), copied only where X
    differs."""
    if scipy.sparse.issparse(X):
        m = X.tocsr()
    else:
        a = np.asarray(X)
        if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
            raise TypeError(f"{what}: expected numbers, got an array of {a.dtype}")
        if a.ndim != 2:
            raise ValueError(f"{what}: expected a 2-D array (examples x features), got shape {a.shape}")
        m = scipy.sparse.csr_matrix(a)
    if not np.issubdtype(m.dtype, np.number) and m.dtype != np.bool_:
        raise TypeError(f"{what}: expected numbers, got a matrix of {m.dtype}")
    if not m.has_canonical_format:
        m = m.copy()
        m.sum_duplicates()
    # scipy's ids as they are (int32 below 2^31 non-zeros): the library takes int32 or int64.
    index = np.int32 if m.indices.dtype == np.int32 and m.indptr.dtype == np.int32 else np.int64
    return (np.ascontiguousarray(m.indptr, dtype=index), np.ascontiguousarray(m.indices, dtype=index),
            np.ascontiguousarray(m.data, dtype=np.float32), m.shape[0], m.shape[1])


def _labels(y, rows):
    """(classes, +1/-1 float32 labels) of y: 1-D, as long as X, exactly two classes (the larger is +1, as
    scikit-learn's classes_[1])."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y: expected a 1-D array of labels, got shape {y.shape}")
    if y.shape[0] != rows:
        raise ValueError(f"X and y: {rows} examples in X, {y.shape[0]} labels in y")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError("y: holds NaN or infinity, expected class labels")
    classes = np.unique(y)
    if classes.size != 2:
        kind = "class" if classes.size == 1 else "classes"
        raise ValueError(f"y: {classes.size} {kind} {classes.tolist()[:10]}; asgd.SGDClassifier is binary (the "
                         "library's linear models have no multiclass or one-vs-rest): give exactly 2")
    return classes, np.where(y == classes[1], 1.0, -1.0).astype(np.float32)


def _integer(name, value, low):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an integer, got {value!r}")
    if value < low:
        raise ValueError(f"{name} {value}: expected an integer >= {low}")
    return int(value)


def _number(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a number, got {value!r}")
    return float(value)


class NotFittedError(ValueError, AttributeError):
    """Scoring before fit (a ValueError and an AttributeError, as scikit-learn's NotFittedError)."""


class SGDClassifier:
    """A linear classifier trained by the library's lock-free asynchronous SGD, with scikit-learn's
    SGDClassifier's names: fit(X, y), predict, predict_proba (log_loss), decision_function, score, get_params /
    set_params, classes_, coef_, intercept_. Binary only (ValueError for more classes: the library has no
    multiclass).

      loss: "log_loss" (logistic regression), "hinge" (linear SVM, subgradient) or "squared_hinge" (L2-loss SVM).
      alpha: L2 strength (the objective is mean loss + alpha/2 ||w||^2); penalty: "l2" only.
      epochs (max_iter is an alias: give one): passes over the data; there is no tolerance-based stop.
      learning_rate: "linear" (eta0 decaying linearly over the run to 1e-4 eta0, the library's default),
        "constant" or "inverse-sqrt"; eta0: the initial rate, None for `asgd linear train`'s (0.5 for log_loss,
        0.1 for the hinges).
      fit_intercept: learn an intercept as the weight of one more feature of constant value intercept_scaling in
        every example (LIBLINEAR's bias), regularised as every weight is (scikit-learn's SGD leaves it
        unregularised).
      n_jobs: worker threads (None: 1, -1: all cores); policy: how their updates land ("racy": Hogwild!,
        "atomic", "locked"); tau: bounded delay in steps (None: unbounded); random_state: the shuffles' seed
        (None draws one from numpy).

    X is a scipy.sparse matrix (CSR is used as it is) or a dense 2-D array. One worker and a seed give the
    weights of `asgd linear train --workers 1 --seed N` byte for byte (fit_intercept=False, same eta0 and
    schedule). The GIL is released while training and scoring; Ctrl-C stops fit (KeyboardInterrupt). coef_
    (1 x features) and intercept_ are float32 views of the library's weight vector (intercept_ a copy unless
    intercept_scaling is 1); report_ holds the run's figures (losses per epoch, train_seconds,
    examples_per_second, updates, the training objective and accuracy)."""

    _estimator_type = "classifier"

    def __init__(self, loss="log_loss", penalty="l2", alpha=1e-4, fit_intercept=True, intercept_scaling=1.0,
                 epochs=10, max_iter=None, learning_rate="linear", eta0=None, n_jobs=None, policy="racy",
                 tau=None, random_state=None):
        self.loss, self.penalty, self.alpha = loss, penalty, alpha
        self.fit_intercept, self.intercept_scaling = fit_intercept, intercept_scaling
        self.epochs, self.max_iter = epochs, max_iter
        self.learning_rate, self.eta0 = learning_rate, eta0
        self.n_jobs, self.policy, self.tau, self.random_state = n_jobs, policy, tau, random_state

    @classmethod
    def _get_param_names(cls):
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep=True):
        """The constructor's arguments as a dict (scikit-learn's estimator protocol: clone, Pipeline, grid
        search)."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        """Sets constructor arguments by name (an unknown name is a ValueError); returns self."""
        names = self._get_param_names()
        for name, value in params.items():
            if name not in names:
                raise ValueError(f"{name}: not a parameter of SGDClassifier (it has {', '.join(names)})")
            setattr(self, name, value)
        return self

    def __repr__(self):
        defaults = inspect.signature(type(self).__init__).parameters
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if v is not defaults[k].default]
        return f"SGDClassifier({', '.join(changed)})"

    def _settings(self):
        """The library's settings from the parameters, checked, each error naming its parameter."""
        s = _core.LinearSettings()
        if self.loss not in _LOSSES:
            raise ValueError(f"loss {self.loss!r}: expected one of {', '.join(_LOSSES)} (the library has no other)")
        s.loss = _LOSSES[self.loss]
        if self.penalty != "l2":
            raise ValueError(f"penalty {self.penalty!r}: the library's linear models take 'l2' only")
        s.l2 = _number("alpha", self.alpha)
        epochs = _integer("epochs", self.epochs, 1)
        if self.max_iter is not None:
            max_iter = _integer("max_iter", self.max_iter, 1)
            if "epochs" in self._changed() and max_iter != epochs:
                raise ValueError(f"max_iter {max_iter} and epochs {epochs}: give one (max_iter is epochs' alias)")
            epochs = max_iter
        s.epochs = epochs
        if self.learning_rate not in _SCHEDULES:
            raise ValueError(f"learning_rate {self.learning_rate!r}: expected one of {', '.join(_SCHEDULES)} "
                             "(the library has no 'optimal', 'invscaling' or 'adaptive')")
        s.schedule = _SCHEDULES[self.learning_rate]
        s.learning_rate = (0.5 if s.loss == "logistic" else 0.1) if self.eta0 is None else _number("eta0", self.eta0)
        if self.n_jobs is None:
            s.threads = 1
        elif not isinstance(self.n_jobs, bool) and self.n_jobs == -1:
            s.threads = os.cpu_count() or 1
        else:
            s.threads = _integer("n_jobs", self.n_jobs, 1)
        s.seed = self._seed()
        s.policy = str(self.policy)
        s.tau = "inf" if self.tau is None else str(_integer("tau", self.tau, 0))
        s.bias = self._bias()
        return s

    def _changed(self):
        defaults = inspect.signature(type(self).__init__).parameters
        return {k for k, v in self.get_params().items() if v is not defaults[k].default}

    def _seed(self):
        seed = self.random_state
        if seed is None:
            return int(np.random.randint(0, 2**31 - 1))
        if isinstance(seed, np.random.RandomState):
            return int(seed.randint(0, 2**31 - 1))
        return _integer("random_state", seed, 0)

    def _bias(self):
        if not self.fit_intercept:
            return 0.0
        scaling = _number("intercept_scaling", self.intercept_scaling)
        if not scaling > 0:
            raise ValueError(f"intercept_scaling {self.intercept_scaling!r}: expected > 0 (or fit_intercept=False)")
        return scaling

    def fit(self, X, y):
        """Trains on X (examples x features) and y (two classes); returns self."""
        settings = self._settings()
        indptr, indices, values, rows, columns = _csr_arrays(X)
        classes, labels = _labels(y, rows)
        if rows == 0:
            raise ValueError("X: no examples to train")
        weights, report = _core.fit_linear(indptr, indices, values, labels, columns, settings)
        self._weights, self._bias_value = weights, settings.bias
        self.classes_ = classes
        self.n_features_in_ = columns
        self.coef_ = weights[:columns].reshape(1, columns)
        if settings.bias > 0:
            # The bias feature's weight times its value is the intercept: a view where the value is 1.
            self.intercept_ = weights[columns:] if settings.bias == 1.0 else weights[columns:] * settings.bias
        else:
            self.intercept_ = np.zeros(1, dtype=np.float32)
        self.n_iter_ = settings.epochs
        self.t_ = report["updates"]
        self.report_ = report
        return self

    def _fitted(self):
        if not hasattr(self, "_weights"):
            raise NotFittedError("this SGDClassifier is not fitted yet: call fit(X, y) first")

    def decision_function(self, X):
        """w.x + intercept of every example of X (float64, one per row): positive predicts classes_[1]."""
        self._fitted()
        indptr, indices, values, _, columns = _csr_arrays(X)
        if columns != self.n_features_in_:
            raise ValueError(f"X: {columns} features, but this SGDClassifier was fitted on {self.n_features_in_}")
        return _core.linear_margins(indptr, indices, values, columns, self._bias_value, self._weights)

    def predict(self, X):
        """The class of every example of X (classes_[1] where the decision function is >= 0, as the library
        scores accuracy)."""
        positive = self.decision_function(X) >= 0
        return self.classes_[positive.astype(np.intp)]

    @property
    def predict_proba(self):
        """The probabilities of classes_[0] and classes_[1] (n x 2): log_loss only; for the hinges the attribute
        is missing (AttributeError), as scikit-learn's."""
        if _LOSSES.get(self.loss) != "logistic":
            raise AttributeError(f"probability estimates are not available for loss={self.loss!r}")
        return self._predict_proba

    def _predict_proba(self, X):
        d = self.decision_function(X)
        positive = np.exp(-np.logaddexp(0.0, -d))  # sigmoid(d), without overflow
        return np.column_stack([1.0 - positive, positive])

    @property
    def predict_log_proba(self):
        """log of predict_proba (log_loss only)."""
        self.predict_proba  # the same AttributeError
        return lambda X: np.log(self._predict_proba(X))

    def score(self, X, y, sample_weight=None):
        """Accuracy of predict(X) against y (weighted by sample_weight when given)."""
        return float(np.average(self.predict(X) == np.asarray(y), weights=sample_weight))


def read_linear_model(path):
    """(weights, loss, l2) of a model file `asgd linear train --model` wrote: weights a float32 array, one a
    feature."""
    return _core.read_linear_model(os.fspath(path))
