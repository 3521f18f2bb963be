"""asgd.rmse / asgd.mae and asgd.ranking_metrics_at_k: the library's scores, equal to what the definitions
give from predict and recommend (implicit's for the ranking metrics)."""

import numpy as np
import pytest
import scipy.sparse

import asgd


def implicit_metrics(model, train, test, K):
    """implicit's evaluation.pyx ranking_metrics_at_k, written out over model.recommend."""
    items = test.shape[1]
    relevant = pr_div = total = mean_ap = ndcg = mean_auc = 0.0
    cg = 1.0 / np.log2(np.arange(2, K + 2))
    for u in range(test.shape[0]):
        likes = set(test[u].indices) - set(train[u].indices)
        if not likes:
            continue
        ids, _ = model.recommend(u, train, N=K)
        ids = list(ids) + [-1] * (K - len(ids))
        pr_div += min(K, len(likes))
        ap = hit = miss = auc = 0.0
        idcg = np.sum(cg[: min(K, len(likes))])
        for i in range(K):
            if ids[i] in likes:
                relevant += 1
                hit += 1
                ap += hit / (i + 1)
                ndcg += cg[i] / idcg
            else:
                miss += 1
                auc += hit
        negatives = items - len(likes)
        auc += ((hit + len(likes)) / 2.0) * (negatives - miss)
        mean_ap += ap / min(K, len(likes))
        mean_auc += auc / (len(likes) * negatives)
        total += 1
    return {"precision": relevant / pr_div, "map": mean_ap / total, "ndcg": ndcg / total, "auc": mean_auc / total}


def test_ranking_metrics_are_implicits(ratings):
    # Positives: the planted ratings' top third (which pairs are rated is random; which rate high is not).
    keep = ratings.values >= np.quantile(ratings.values, 2 / 3)
    users, items = ratings.users[keep], ratings.items[keep]
    test = np.random.default_rng(3).random(users.size) < 0.2
    shape = (ratings.user_count, ratings.item_count)
    as_matrix = lambda rows: scipy.sparse.csr_matrix((np.ones(int(rows.sum())), (users[rows], items[rows])),
                                                     shape=shape)
    train_m, test_m = as_matrix(~test), as_matrix(test)
    model = asgd.BayesianPersonalizedRanking(factors=8, iterations=30, learning_rate=0.05, regularization=0.01,
                                             random_state=1, threads=2).fit(train_m)
    got = asgd.ranking_metrics_at_k(model, train_m, test_m, K=10)
    expected = implicit_metrics(model, train_m, test_m, 10)
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-9), name
    assert got["users"] == sum(1 for u in range(shape[0]) if test_m[u].nnz)
    # A model learnt from the data ranks far better than one that learnt nothing. (implicit's AUC at K stays
    # near 0.5 with K = 10 of 250 items: the items past the list count half.)
    untrained = asgd.BayesianPersonalizedRanking(factors=8, iterations=1, learning_rate=1e-6, random_state=1,
                                                 threads=1).fit(train_m)
    chance = asgd.ranking_metrics_at_k(untrained, train_m, test_m)
    assert got["ndcg"] > 2 * chance["ndcg"] and got["auc"] > chance["auc"], (got, chance)


def test_rmse_and_mae_are_those_of_predict(ratings):
    train, test = ratings.split()
    model = asgd.MatrixFactorization(factors=6, iterations=20, regularization=0.02, random_state=2,
                                     threads=2).fit(train)
    errors = model.predict(test[0], test[1]) - test[2]
    assert asgd.rmse(model, test) == pytest.approx(float(np.sqrt(np.mean(errors ** 2))), rel=1e-5)
    assert asgd.mae(model, test) == pytest.approx(float(np.mean(np.abs(errors))), rel=1e-5)
    assert asgd.rmse(model, test) < 1.3 * ratings.noise
    bpr = asgd.BayesianPersonalizedRanking(iterations=1, random_state=1, threads=1).fit(train)
    with pytest.raises(ValueError, match="ranking metrics"):
        asgd.rmse(bpr, test)
    with pytest.raises(ValueError, match="K 0"):
        asgd.ranking_metrics_at_k(model, train, test, K=0)
