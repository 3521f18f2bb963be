"""Scores of a fitted model on held-out data, computed by the library: RMSE and MAE of a squared model's
predictions, and implicit's ranking_metrics_at_k (precision, MAP, NDCG and AUC at K of its full ranking)."""

from . import _arrays


def _errors(model, X):
    users, items, values, _, _ = _arrays.triples(X)
    return model._fitted().error_metrics(users, items, values)


def rmse(model, X):
    """The root mean squared error of model.predict on X (a scipy.sparse user x item matrix or a (users, items,
    ratings) tuple of ids the model has), as `asgd mf eval` scores a test file."""
    return _errors(model, X)[0]


def mae(model, X):
    """The mean absolute error of model.predict on X (as rmse takes it)."""
    return _errors(model, X)[1]


def ranking_metrics_at_k(model, train_user_items, test_user_items, K=10):
    """implicit's ranking_metrics_at_k: each user with a test item (not among their training items) gets the
    model's top K of the items they did not see in training (the model's cold items never ranked), scored
    against their test items. Returns a dict with implicit's precision (hits / min(K, test items), summed over
    the users before dividing), map, ndcg and auc (implicit's AUC at K), and beside them precision_at_k (the
    mean of hits / K), recall, hit_rate and users (how many were scored). Both matrices are scipy.sparse user
    x item (every stored entry a pair) or (users, items, values) tuples."""
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ValueError(f"K {K!r}: expected a positive integer")
    train_users, train_items, _, _, _ = _arrays.triples(train_user_items)
    test_users, test_items, _, _, _ = _arrays.triples(test_user_items)
    return model._fitted().ranking_metrics(train_users, train_items, test_users, test_items, K)
