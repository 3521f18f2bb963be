"""asgd.MatrixFactorization trains what the library trains: a test RMSE near the noise floor, the same model
from a scipy matrix as from its arrays, and factors that are views of the model's memory."""

import numpy as np
import scipy.sparse

import asgd


def rmse(model, triples):
    u, i, r = triples
    return float(np.sqrt(np.mean((model.predict(u, i) - r) ** 2)))


def test_test_rmse_reaches_the_noise_floor(ratings):
    train, test = ratings.split()
    model = asgd.MatrixFactorization(factors=8, iterations=40, learning_rate=0.02, regularization=0.02,
                                     random_state=3, threads=2).fit(train)
    # The noise is 0.3: a model that learnt nothing (the mean) is about 1.4 off.
    baseline = float(np.sqrt(np.mean((np.mean(train[2]) - test[2]) ** 2)))
    assert baseline > 1.0
    assert rmse(model, test) < 1.25 * ratings.noise
    assert model.user_factors.shape == (ratings.user_count, 8)
    assert model.item_factors.shape == (ratings.item_count, 8)


def test_a_sparse_matrix_trains_as_its_entries_do(ratings):
    coo = scipy.sparse.coo_matrix((ratings.values, (ratings.users, ratings.items)),
                                  shape=(ratings.user_count, ratings.item_count))
    settings = dict(factors=4, iterations=3, random_state=5, threads=1)
    from_coo = asgd.MatrixFactorization(**settings).fit(coo)
    from_arrays = asgd.MatrixFactorization(**settings).fit((coo.row, coo.col, coo.data))
    assert np.array_equal(from_coo.user_factors, from_arrays.user_factors)
    assert np.array_equal(from_coo.item_factors, from_arrays.item_factors)
    # CSR: the same ratings in row order; another shuffle, the same quality.
    from_csr = asgd.MatrixFactorization(**settings).fit(coo.tocsr())
    assert from_csr.user_factors.shape == from_coo.user_factors.shape
    triples = (ratings.users, ratings.items, ratings.values)
    assert abs(rmse(from_csr, triples) - rmse(from_coo, triples)) < 0.05


def test_rows_without_ratings_are_cold(ratings):
    # A matrix wider than its ratings: the extra user and item are rows of zeros, predicted from the biases.
    model = asgd.MatrixFactorization(factors=4, iterations=2, random_state=1, threads=1)
    model.fit(scipy.sparse.csr_matrix((ratings.values, (ratings.users, ratings.items)),
                                      shape=(ratings.user_count + 1, ratings.item_count + 1)))
    assert not model.user_factors[-1].any()
    assert not model.item_factors[-1].any()
    ids, _ = model.recommend(0, N=ratings.item_count + 1)
    assert ratings.item_count not in ids  # a cold item is never recommended
    assert ids.size == ratings.item_count


def test_factors_are_views_of_the_model(ratings):
    model = asgd.MatrixFactorization(factors=5, iterations=1, random_state=1, threads=1).fit(
        (ratings.users, ratings.items, ratings.values))
    p, q = model.user_factors, model.item_factors
    assert np.shares_memory(p, model.user_factors)
    assert np.shares_memory(q, model.item_factors)
    assert p.dtype == np.float32 and p.base is not None
    # A change through the view is the model's: predictions move with it.
    before = model.predict([0], [0])[0]
    p[0] *= 0
    q[0] *= 0
    unbiased = model.predict([0], [0])[0]
    assert unbiased != before
    # A refit makes a new model; the old views keep the old one alive and unchanged.
    old = q.copy()
    model.fit((ratings.users, ratings.items, ratings.values))
    assert not np.shares_memory(q, model.item_factors)
    assert np.array_equal(q, old)


def test_recommend_for_many_users_is_each_users_list(ratings):
    model = asgd.MatrixFactorization(factors=6, iterations=5, random_state=2, threads=2).fit(
        (ratings.users, ratings.items, ratings.values))
    user_items = scipy.sparse.csr_matrix((ratings.values, (ratings.users, ratings.items)),
                                         shape=(ratings.user_count, ratings.item_count))
    users = np.array([3, 0, 17, 3])
    ids, scores = model.recommend(users, user_items[users], N=12)
    assert ids.shape == scores.shape == (4, 12)
    for row, user in enumerate(users):
        one_ids, one_scores = model.recommend(user, user_items[user], N=12)
        # A batch of users is one matrix product, one user a matrix-vector product: sums in another order, so
        # scores agree to float rounding and ids up to the order of items that tie within it.
        np.testing.assert_allclose(scores[row], one_scores, rtol=1e-5)
        assert set(ids[row]) == set(one_ids) or abs(one_scores[-1] - scores[row][-1]) <= 1e-5 * abs(one_scores[-1])
        assert not set(one_ids) & set(user_items[user].indices)  # seen items left out
        assert np.all(np.diff(one_scores) <= 0)  # best first
    # The whole matrix is taken as one row per user of the model.
    whole_ids, _ = model.recommend(users, user_items, N=12)
    assert np.array_equal(whole_ids, ids)
    # Without filtering, a user's best items may be seen ones: the unfiltered list scores at least as high.
    free_ids, free_scores = model.recommend(3, user_items[3], N=12, filter_already_liked_items=False)
    assert np.all(free_scores >= scores[0])
