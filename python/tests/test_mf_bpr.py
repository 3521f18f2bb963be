"""asgd.BayesianPersonalizedRanking: implicit feedback trained as `asgd mf train --loss bpr` trains it (byte for
byte with one worker and a seed), ranking held-out positives far above chance; asgd.load reads bpr files."""

import numpy as np
import pytest
import scipy.sparse

import asgd


def binary(ratings):
    """The planted ratings' top third as a binary user x item CSR matrix (every stored entry a positive)."""
    keep = ratings.values >= np.quantile(ratings.values, 2 / 3)
    u, i = ratings.users[keep], ratings.items[keep]
    return scipy.sparse.csr_matrix((np.ones(u.size, dtype=np.float32), (u, i)),
                                   shape=(ratings.user_count, ratings.item_count))


def test_bpr_ranks_held_out_positives_above_chance(ratings):
    X = binary(ratings).tocoo()
    rng = np.random.default_rng(3)
    test = rng.random(X.nnz) < 0.2
    shape = X.shape
    train = scipy.sparse.csr_matrix((X.data[~test], (X.row[~test], X.col[~test])), shape=shape)
    model = asgd.BayesianPersonalizedRanking(factors=8, iterations=60, learning_rate=0.05, regularization=0.01,
                                             random_state=2, threads=2).fit(train)
    users = np.arange(shape[0])
    ids, _ = model.recommend(users, train, N=10)
    held = scipy.sparse.csr_matrix((X.data[test], (X.row[test], X.col[test])), shape=shape)
    hits = sum(held[u, ids[u][ids[u] >= 0]].sum() for u in users)
    # Chance: each held-out positive of u lands in a random top 10 of its unseen items with 10 / unseen.
    chance = sum(held[u].nnz * 10 / (shape[1] - train[u].nnz) for u in users)
    assert hits > 2.5 * chance, (hits, chance)  # measured: 3.5 x chance


def test_a_threshold_keeps_only_the_entries_at_or_above_it(ratings):
    X = (ratings.users, ratings.items, ratings.values)
    threshold = float(np.quantile(ratings.values, 2 / 3))
    by_threshold = asgd.BayesianPersonalizedRanking(factors=4, iterations=3, random_state=5, threads=1,
                                                    positive=threshold).fit(X)
    keep = ratings.values >= threshold
    by_selection = asgd.BayesianPersonalizedRanking(factors=4, iterations=3, random_state=5, threads=1).fit(
        (ratings.users[keep], ratings.items[keep], np.ones(int(keep.sum()), dtype=np.float32)))
    assert np.array_equal(by_threshold.item_factors, by_selection.item_factors)
    everything = asgd.BayesianPersonalizedRanking(factors=4, iterations=3, random_state=5, threads=1).fit(X)
    assert not np.array_equal(everything.item_factors, by_threshold.item_factors)


def test_one_worker_and_a_seed_give_the_clis_bpr_model_byte_for_byte(ratings, cli, tmp_path):
    train_file, cli_model, python_model = tmp_path / "train.txt", tmp_path / "cli.model", tmp_path / "py.model"
    ratings.write(train_file)
    cli("mf", "train", train_file, cli_model, "--loss", "bpr", "--positive", 4, "-k", 6, "-t", 4, "-s", 1,
        "--seed", 9, "-r", 0.03, "--l2", 0.02, "-q")
    model = asgd.BayesianPersonalizedRanking(factors=6, iterations=4, learning_rate=0.03, regularization=0.02,
                                             random_state=9, threads=1, positive=4)
    model.fit((ratings.users, ratings.items, ratings.values)).save(python_model)
    assert python_model.read_bytes() == cli_model.read_bytes()
    loaded = asgd.load(cli_model)
    assert isinstance(loaded, asgd.BayesianPersonalizedRanking)
    assert loaded.positive == 4
    assert np.array_equal(loaded.item_factors, model.item_factors)
    lines = cli("mf", "recommend", cli_model, "--user", 7, "-k", 5).split("\n")
    ids, _ = loaded.recommend(7, N=5)
    assert [int(line.split("\t")[0]) for line in lines if line] == ids.tolist()


@pytest.mark.parametrize("settings, error, words", [
    ({"positive": "high"}, TypeError, "positive: expected None or a number"),
    ({"positive": float("nan")}, ValueError, "positive nan"),
    ({"positive": 100.0}, ValueError, "no rating >= 100"),
    ({"factors": 0}, ValueError, "factors 0"),
])
def test_bad_settings_get_the_librarys_message(settings, error, words):
    X = (np.array([0, 1, 1]), np.array([1, 0, 2]), np.ones(3))
    with pytest.raises(error, match=words):
        asgd.BayesianPersonalizedRanking(iterations=1, random_state=1, **settings).fit(X)
