"""Matrix factorization with implicit's call shapes, on the library's mf::fit: explicit ratings (squared loss,
MatrixFactorization) and implicit feedback (BPR, BayesianPersonalizedRanking)."""

import os

import numpy as np

from . import _arrays, _core
from ._report import ProgressLine, RunReport


class _FactorModel:
    """What both losses' models share: the engine's settings, predict, recommend, the factors, the model file."""

    _params = ()
    _loss = "squared"

    def get_params(self, deep=True):
        """The constructor's arguments as a dict (scikit-learn's get_params; deep is accepted and ignored)."""
        return {name: getattr(self, name) for name in self._params}

    def set_params(self, **params):
        """Sets constructor arguments by name (scikit-learn's set_params; the next fit uses them); ValueError for
        a name that is none. Returns self."""
        for name, value in params.items():
            if name not in self._params:
                raise ValueError(f"{name}: not a parameter of {type(self).__name__}")
            setattr(self, name, value)
        return self

    def _engine_settings(self):
        """The settings both losses take, checked: factors, epochs, threads, rate, L2, seed, policy, tau."""
        s = _core.MfSettings()
        s.loss = self._loss
        for name, value in (("factors", self.factors), ("iterations", self.iterations),
                            ("threads", self.threads)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{name}: expected an integer, got {value!r}")
            if value < 0:
                raise ValueError(f"{name} {value}: expected a non-negative integer")
        s.factors = int(self.factors)
        s.epochs = int(self.iterations)
        s.threads = int(self.threads) or (os.cpu_count() or 1)
        s.learning_rate = float(self.learning_rate)
        s.l2 = float(self.regularization)
        seed = self.random_state
        if seed is None:
            seed = int(np.random.randint(0, 2**31 - 1))
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"random_state {seed!r}: expected None or a non-negative integer")
        s.seed = int(seed)
        s.policy = str(self.policy)
        if self.tau is not None and (isinstance(self.tau, bool) or not isinstance(self.tau, (int, np.integer))):
            raise TypeError(f"tau: expected None (unbounded) or an integer number of steps, got {self.tau!r}")
        s.tau = "inf" if self.tau is None else str(self.tau)
        return s

    def _fit_triples(self, triples, settings, validation=None, callback=None, initial=None, shm=None,
                     model_file=None):
        """Trains on `triples` (_arrays.triples), from `initial`'s factors when given, validation (X's forms)
        scored after every epoch, in the shared segment `shm` when given; keeps the model and its epochs'
        records (history_)."""
        users, items, values, user_count, item_count = triples
        if shm is not None:
            if not isinstance(shm, str) or not shm:
                raise TypeError(f"shm: expected a segment's name, got {shm!r}")
            if model_file is None:
                raise ValueError("shm: give model_file too (asgd.attach reads the ids and the scale from it)")
            settings.shm = shm
        if model_file is not None:
            settings.model_file = os.fspath(model_file)
        if callback is not None and not callable(callback):
            raise TypeError(f"callback: expected a callable (epoch, loss), got {callback!r}")
        valid = (None, None, None)
        if validation is not None:
            if self._loss != "squared":
                raise ValueError("validation: for MatrixFactorization only (a bpr model is scored by ranking: "
                                 "asgd.ranking_metrics_at_k)")
            vu, vi, vr, vu_count, vi_count = _arrays.triples(validation)
            # Both sets' ids are rows of one model: as many rows as either needs.
            user_count, item_count = max(user_count, vu_count), max(item_count, vi_count)
            valid = (vu, vi, vr)
        if initial is not None:
            user_count = max(user_count, initial.user_factors.shape[0])
            item_count = max(item_count, initial.item_factors.shape[0])
        progress = ProgressLine("mf" if self._loss == "squared" else "bpr") if self.verbose else None
        try:
            model, records, report, interrupt = _core.fit_mf(users, items, values, user_count, item_count, settings,
                                                             *valid, callback=callback, initial=initial,
                                                             progress=progress)
        finally:
            if progress is not None:
                progress.end()
        # Ctrl-C: the model of the last finished epoch, if one finished (else the previous one stays), then
        # KeyboardInterrupt.
        self.report_ = RunReport(report)
        if model is not None:
            self._model = model
            self.history_ = [{"epoch": e, "loss": loss, "seconds": seconds, "validation_rmse": rmse}
                             for e, loss, seconds, rmse in records]
        if progress is not None:
            progress.end(self.report_.summary)
        if interrupt is not None:
            raise interrupt
        return self

    def partial_fit(self, X, epochs=1, callback=None):
        """Trains `epochs` more epochs on X (the forms fit takes) from the current factors (fit's first when the
        model has none): new users and items in X grow the model, their rows starting random. The rate starts
        afresh, and a squared model's global mean is X's (its biases stay relative to the old one). Returns
        self."""
        if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
            raise ValueError(f"epochs {epochs!r}: expected a positive integer")
        settings = self._settings()
        settings.epochs = int(epochs)
        triples = _arrays.triples(X)
        if self._loss == "bpr":
            settings.positive = (self._model.positive if self._model is not None
                                 else _arrays.positive_threshold(self.positive, triples[2]))
        if self._model is not None and self._model.user_factors.shape[1] != settings.factors:
            raise ValueError(f"factors {settings.factors}: the model has {self._model.user_factors.shape[1]}")
        return self._fit_triples(triples, settings, callback=callback, initial=self._model)

    def _fitted(self):
        if self._model is None:
            raise ValueError(f"this {type(self).__name__} is not fitted yet: call fit(X) or asgd.load(path)")
        return self._model

    def predict(self, users, items):
        """The model's scores of (users[i], items[i]) as `asgd mf predict` writes them (squared: the predicted
        ratings, clipped into the training ratings' range): a float32 array of users' shape."""
        model = self._fitted()
        shape = np.shape(users)
        u, i = _arrays.ids(users, "users"), _arrays.ids(items, "items")
        return model.predict(u, i).reshape(shape)

    def recommend(self, userid, user_items=None, N=10, filter_already_liked_items=True, filter_items=None,
                  recalculate_user=False):
        """The N best items for userid, best first, as (ids, scores) numpy arrays (int32, float32). With
        user_items (scipy.sparse: the users' rows, or one row per user of the model) and
        filter_already_liked_items, their items are left out; without user_items nothing is (as `asgd mf
        recommend` without --exclude). filter_items (item ids) are left out of every list. With
        recalculate_user, each user is folded in from their row of user_items (their items and ratings: a
        least-squares solve against the item factors with the model's regularization, no retraining), so that
        a user the model has never seen gets a list (userid then only labels the rows). For an array of
        userids: 2-D arrays, one row per user, scored in the library; a row short of N items ends in id -1,
        score -inf."""
        model = self._fitted()
        single = np.ndim(userid) == 0
        users = _arrays.ids(userid, "userid")
        if isinstance(N, bool) or not isinstance(N, (int, np.integer)):
            raise TypeError(f"N: expected an integer, got {N!r}")
        if N < 1:
            raise ValueError(f"N {N}: expected at least 1")
        no_ids = np.zeros(0, dtype=np.int64)
        filtered = no_ids if filter_items is None else _arrays.ids(filter_items, "filter_items")
        if recalculate_user:
            if user_items is None:
                raise ValueError("recalculate_user: needs user_items (the users' items to fold them in from)")
            indptr, items, values = _arrays.user_rows(user_items, users, model.user_factors.shape[0])
            ids, scores = model.recommend_folded(indptr, items, values, float(self.regularization), int(N),
                                                 bool(filter_already_liked_items), filtered)
        else:
            seen_users, seen_items = no_ids, no_ids
            if user_items is not None and filter_already_liked_items:
                seen_users, seen_items = _arrays.seen_pairs(user_items, users, model.user_factors.shape[0])
            ids, scores = model.recommend(users, int(N), seen_users, seen_items, filtered)
        if not single:
            return ids, scores
        kept = int(np.count_nonzero(ids[0] >= 0))
        return ids[0, :kept].copy(), scores[0, :kept].copy()

    def similar_items(self, itemid, N=10):
        """The N items whose factors are closest in cosine to itemid's, itself first (as implicit lists them),
        as (ids, scores); for an array of itemids 2-D arrays, scored in the library's batches."""
        return self._similar(False, itemid, N, "itemid")

    def similar_users(self, userid, N=10):
        """The N users closest in cosine to userid, itself first, as similar_items gives items."""
        return self._similar(True, userid, N, "userid")

    def _similar(self, users, rows, N, what):
        model = self._fitted()
        if isinstance(N, bool) or not isinstance(N, (int, np.integer)):
            raise TypeError(f"N: expected an integer, got {N!r}")
        if N < 1:
            raise ValueError(f"N {N}: expected at least 1")
        ids, scores = model.similar(users, _arrays.ids(rows, what), int(N))
        if np.ndim(rows) == 0:
            return ids[0].copy(), scores[0].copy()
        return ids, scores

    @property
    def user_factors(self):
        """users x factors float32, a view of the model's memory (no copy)."""
        return self._fitted().user_factors

    @property
    def item_factors(self):
        """items x factors float32, a view of the model's memory (no copy)."""
        return self._fitted().item_factors

    @property
    def user_biases(self):
        """The users' biases (float32, a view of the model's memory), or None for a model without them (bpr)."""
        return self._fitted().user_biases

    @property
    def item_biases(self):
        """The items' biases (float32, a view of the model's memory)."""
        return self._fitted().item_biases

    @property
    def user_names(self):
        """The users' ids as the model file names them, in row order."""
        return self._fitted().user_names

    @property
    def item_names(self):
        """The items' ids as the model file names them, in row order."""
        return self._fitted().item_names

    def remove_segment(self):
        """Removes the shared segment this model was trained in (fit(X, shm=...)) or reads (asgd.attach), this
        one only: attached processes keep their mapping, the name is free at once. False when there is none."""
        return self._fitted().remove_segment()

    def save(self, path):
        """Writes the model file `asgd mf train` writes (read by `asgd mf predict|eval|recommend` and
        asgd.load); OSError when the path cannot be written."""
        self._fitted().save(os.fspath(path))


class MatrixFactorization(_FactorModel):
    """Biased matrix factorization of explicit ratings, trained by lock-free asynchronous SGD.

    Parameters (implicit's names; the defaults are `asgd mf train`'s):
      factors: factors per user and item (-k).
      iterations: epochs (-t).
      learning_rate: SGD step, constant (-r).
      regularization: L2 on the factors (--l2); bias_regularization: L2 on the biases (--bias-l2).
      random_state: seed of the initial factors and the shuffles (--seed); None draws one from numpy.
      threads: workers (-s); 0 = all cores. One worker and a seed give the CLI's model byte for byte.
      policy: "racy" (Hogwild!), "atomic" or "locked"; tau: bounded delay in steps (None: unbounded).
      schedule: "auto" (LIBMF's grid of blocks on over 262,144 ratings without tau: 3-6x the updates per
      second there; hogwild otherwise), "hogwild" or "blocks"; adagrad: per-parameter AdaGrad steps.
      verbose: fit prints a progress line (rate, ETA) and the run's summary on stderr.

    After fit: history_ (one dict per epoch: epoch, loss, seconds, validation_rmse) and report_ (RunReport: the
    losses per epoch, updates/s, the staleness histogram as numpy arrays).

    Ids are rows: fit(X) on a user x item matrix keeps row u as user u and column i as item i, and a saved
    model names them "u" and "i" for `asgd mf recommend --user u`. A model loaded from a file the CLI trained
    on other ids has rows in the order of its user_names and item_names.
    """

    def __init__(self, factors=32, iterations=20, learning_rate=0.02, regularization=0.05,
                 bias_regularization=0.05, random_state=None, threads=0, policy="racy", tau=None,
                 schedule="auto", adagrad=False, verbose=False):
        self.factors = factors
        self.iterations = iterations
        self.learning_rate = learning_rate
        self.regularization = regularization
        self.bias_regularization = bias_regularization
        self.random_state = random_state
        self.threads = threads
        self.policy = policy
        self.tau = tau
        self.schedule = schedule
        self.adagrad = adagrad
        self.verbose = verbose
        self._model = None
        self.history_ = []
        self.report_ = None

    _params = ("factors", "iterations", "learning_rate", "regularization", "bias_regularization",
               "random_state", "threads", "policy", "tau", "schedule", "adagrad", "verbose")

    def _settings(self):
        s = self._engine_settings()
        s.bias_l2 = float(self.bias_regularization)
        s.schedule = str(self.schedule)
        s.adagrad = bool(self.adagrad)
        return s

    def fit(self, X, validation=None, callback=None, shm=None, model_file=None):
        """Trains on X: a scipy.sparse user x item matrix (CSR or COO; every stored entry a rating) or a
        (users, items, ratings) tuple of arrays. validation (the same forms, the same ids) is scored after every
        epoch: history_[e]["validation_rmse"]. callback(epoch, loss) is called after every epoch (loss: the
        epoch's mean of half the squared errors), from the training thread with the GIL taken for it; an
        exception it raises stops the run and is raised here (the model keeps its previous fit, if any). The GIL is
        released meanwhile; Ctrl-C stops the run at its next step and raises KeyboardInterrupt, the model left at
        its last finished epoch (history_ lists those epochs; none finished: the previous fit stays). With
        verbose, a progress line on stderr (done, epoch, updates/s, loss, rate, ETA) and the run's summary;
        either way report_ holds the run's report (RunReport: losses, updates/s, staleness histogram). With
        shm="name" the factors train in that shared segment and model_file (required then) is written as
        training begins: another process's asgd.attach("name", model_file) serves them live meanwhile (remove
        the segment with remove_segment() when done). model_file alone: the model file written at the end.
        Returns self."""
        settings = self._settings()
        return self._fit_triples(_arrays.triples(X), settings, validation, callback, shm=shm, model_file=model_file)


class BayesianPersonalizedRanking(_FactorModel):
    """Matrix factorization of implicit feedback by BPR (pairs of a user's positive and a sampled negative
    item), trained by lock-free asynchronous SGD: `asgd mf train --loss bpr`.

    Parameters (implicit's names; the defaults are `asgd mf train --loss bpr`'s):
      factors (-k), iterations (-t), learning_rate (-r; decays linearly to 0 over the run, as the CLI's),
      regularization (--l2), random_state (--seed; None draws one), threads (-s; 0 = all cores), policy, tau.
      positive: the entries of X at or above it are the positives (--positive); None (the default): every
      stored entry of X is one, whatever its value (a binary user x item matrix).
      verbose: fit prints a progress line (rate, ETA) and the run's summary on stderr.

    The scores recommend and predict give only rank items (p_u . q_i plus the item's bias); they are no
    ratings. One worker and a seed give `asgd mf train --loss bpr --positive P`'s model byte for byte.
    """

    _loss = "bpr"
    _params = ("factors", "iterations", "learning_rate", "regularization", "random_state", "threads", "policy",
               "tau", "positive", "verbose")

    def __init__(self, factors=32, iterations=20, learning_rate=0.02, regularization=0.05, random_state=None,
                 threads=0, policy="racy", tau=None, positive=None, verbose=False):
        self.factors = factors
        self.iterations = iterations
        self.learning_rate = learning_rate
        self.regularization = regularization
        self.random_state = random_state
        self.threads = threads
        self.policy = policy
        self.tau = tau
        self.positive = positive
        self.verbose = verbose
        self._model = None
        self.history_ = []
        self.report_ = None

    def fit(self, X, validation=None, callback=None, shm=None, model_file=None):
        """Trains on X: a scipy.sparse user x item matrix (CSR or COO) or a (users, items, values) tuple of
        arrays, whose entries are positives (all of them, or those >= positive). callback(epoch, loss) is called
        after every epoch (loss: the epoch's mean -ln sigma(x_ui - x_uj)), as MatrixFactorization.fit calls it;
        validation is refused (score a bpr model with asgd.ranking_metrics_at_k). shm and model_file as
        MatrixFactorization.fit takes them (live serving). The GIL is released meanwhile; Ctrl-C stops the run
        and raises KeyboardInterrupt, the model left at its last finished epoch; verbose and report_ as
        MatrixFactorization.fit has them. Returns self."""
        settings = self._settings()
        triples = _arrays.triples(X)
        settings.positive = _arrays.positive_threshold(self.positive, triples[2])
        return self._fit_triples(triples, settings, validation, callback, shm=shm, model_file=model_file)

    def _settings(self):
        return self._engine_settings()


def _of_loss(model):
    """The Python model of the loss a core model (loaded or attached) was trained with."""
    factors = model.user_factors.shape[1]
    if model.loss == "bpr":
        wrapped = BayesianPersonalizedRanking(factors=factors, iterations=model.epochs, positive=model.positive)
    else:
        wrapped = MatrixFactorization(factors=factors, iterations=model.epochs)
    wrapped._model = model
    return wrapped


def load(path):
    """The model of a file written by model.save or `asgd mf train`: a MatrixFactorization (squared loss) or a
    BayesianPersonalizedRanking (bpr). OSError when the file cannot be read, ValueError when it is not an mf
    model."""
    return _of_loss(_core.load(os.fspath(path)))


def attach(shm, model_file):
    """A read-only model on the shared segment `shm` that a fit(X, shm=shm, model_file=model_file) in another
    process trains: its recommend, predict, similar_* and factor views answer from the live factors (Hogwild!
    serving: each read sees the factors as they are at that moment), its ids and scale are model_file's.
    ValueError when the segment is missing or does not match the file, OSError when the file cannot be read."""
    return _of_loss(_core.attach(str(shm), os.fspath(model_file)))
