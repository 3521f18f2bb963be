"""Input arrays checked for kind and shape and converted to what asgd._core takes (contiguous int64 ids,
float32 ratings); the values themselves (negative ids, NaN ratings) are checked by the library."""

import numpy as np
import scipy.sparse


def ids(values, what):
    """`values` (an integer or an array of integers) as a 1-D int64 array; TypeError for any other kind."""
    a = np.asarray(values)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{what}: expected integer ids, got an array of {a.dtype}")
    if a.ndim > 1:
        raise ValueError(f"{what}: expected a 1-D array of ids, got shape {a.shape}")
    return np.ascontiguousarray(a.reshape(-1), dtype=np.int64)


def ratings(values, what="ratings"):
    """`values` as a 1-D float32 array; TypeError unless they are numbers."""
    a = np.asarray(values)
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"{what}: expected numbers, got an array of {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"{what}: expected a 1-D array, got shape {a.shape}")
    return np.ascontiguousarray(a, dtype=np.float32)


def count(a):
    """How many rows ids `a` need: one past the largest (0 for none)."""
    return int(a.max()) + 1 if a.size else 0


def triples(X):
    """(users, items, ratings, user_count, item_count) of a scipy.sparse user x item matrix (every stored
    entry a rating; its shape gives the counts) or of a (users, items, ratings) tuple (counts: one past the
    largest ids)."""
    if scipy.sparse.issparse(X):
        coo = X.tocoo()
        return (ids(coo.row, "X rows"), ids(coo.col, "X columns"), ratings(coo.data, "X values"),
                X.shape[0], X.shape[1])
    if isinstance(X, tuple) and len(X) == 3:
        users, items = ids(X[0], "users"), ids(X[1], "items")
        values = ratings(X[2])
        # Negative ids get the library's message; the counts only need to cover the others.
        return users, items, values, max(count(users), 1), max(count(items), 1)
    raise TypeError("X: expected a scipy.sparse user x item matrix or a (users, items, ratings) tuple, got "
                    f"{type(X).__name__}")


def seen_pairs(user_items, users, model_users):
    """(users, items) of the items to leave out of each list: `user_items` holds one row per user asked (row j
    is users[j]'s) or one per user of the model (row u is user u's)."""
    if not scipy.sparse.issparse(user_items):
        raise TypeError(f"user_items: expected a scipy.sparse matrix, got {type(user_items).__name__}")
    m = scipy.sparse.csr_matrix(user_items)
    if m.shape[0] != len(users):
        if m.shape[0] != model_users:
            raise ValueError(f"user_items: {m.shape[0]} rows, expected one per user asked ({len(users)}) or per "
                             f"user of the model ({model_users})")
        if users.size and (users.min() < 0 or users.max() >= model_users):
            raise ValueError(f"userid: expected ids in 0..{model_users - 1}")
        m = m[users]
    coo = m.tocoo()
    return ids(users[coo.row], "user_items rows"), ids(coo.col, "user_items columns")


def user_rows(user_items, users, model_users):
    """(indptr, items, values) of the rows of `user_items` for `users`, as a CSR matrix holds them: one row per
    user asked (row j is users[j]'s) or one per user of the model (row u is user u's)."""
    if not scipy.sparse.issparse(user_items):
        raise TypeError(f"user_items: expected a scipy.sparse matrix, got {type(user_items).__name__}")
    m = scipy.sparse.csr_matrix(user_items)
    if m.shape[0] != len(users):
        if m.shape[0] != model_users:
            raise ValueError(f"user_items: {m.shape[0]} rows, expected one per user asked ({len(users)}) or per "
                             f"user of the model ({model_users})")
        if users.size and (users.min() < 0 or users.max() >= model_users):
            raise ValueError(f"userid: expected ids in 0..{model_users - 1}")
        m = m[users]
    return ids(m.indptr, "user_items"), ids(m.indices, "user_items columns"), ratings(m.data, "user_items values")


def positive_threshold(positive, values):
    """The rating at or above which an entry is a positive: `positive` (a finite number), or for None the
    smallest of `values` (every entry a positive; NaN left to the library's check of the ratings)."""
    if positive is None:
        finite = values[np.isfinite(values)]
        return float(finite.min()) if finite.size else 0.0
    if isinstance(positive, bool) or not isinstance(positive, (int, float, np.integer, np.floating)):
        raise TypeError(f"positive: expected None or a number, got {positive!r}")
    return float(positive)
