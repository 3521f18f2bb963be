// Top-k ranking metrics for implicit-feedback recommenders: precision,
// recall, NDCG, MAP and hit rate at k, by full ranking over all unseen items
// (what Krichene & Rendle 2020 recommend) or NCF-style against sampled
// negatives, for a factor model or any (user, item) -> score function such
// as the most-popular baseline.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "asgd/engine/param_store.hpp"
#include "asgd/sparse/mf/ratings.hpp"
#include "asgd/sparse/mf/recommend.hpp"

namespace asgd::sparse::mf {

// Means over the users evaluated (each in [0, 1]).
struct RankingMetrics {
  double precision = 0, recall = 0, ndcg = 0, map = 0, hit_rate = 0;
  // implicit's AUC at k (evaluation.pyx), full ranking only, given the catalogue's size: of a user's list of k,
  // each miss at rank r counts the hits above it, the items past the list count half of (hits + positives) each,
  // over positives x (items - positives); the mean over the users.
  double auc = 0;
  std::size_t users = 0;
  // Sums over the users, not means: hits in the top k, and min(k, relevant) (implicit's precision is
  // hits / capped_relevant, a micro average, where `precision` above is the mean of hits / k).
  std::size_t hits = 0, capped_relevant = 0;
  // Sampled metrics only: users with fewer unseen items than the negatives
  // asked for, ranked against all of those instead (an easier list).
  std::size_t short_lists = 0;
  // Sampled metrics only: test rows left out because the user has seen every
  // other item (no negative to rank against); not counted in `users`.
  std::size_t no_negatives = 0;
  // "precision@K p recall@K r NDCG@K n MAP@K m HR@K h", as `asgd mf` prints them.
  std::string text(std::size_t k) const;
};

// A score for (user, item); higher ranks first. Called from several threads.
using ItemScorer = std::function<float(std::uint32_t user, std::uint32_t item)>;

// The metrics of one user's ranked list (best first; only the first k
// count) against that user's relevant items (binary relevance):
//   precision = hits / k, recall = hits / |relevant|, HR = [hits > 0],
//   NDCG = sum_{hit at rank r (0-based)} 1/log2(r + 2) / IDCG, IDCG over min(k, |relevant|) hits,
//   MAP (AP@k) = sum_{hit at rank r} precision@(r+1) / min(k, |relevant|).
// `relevant` need not be sorted; users = 1 (0 when `relevant` is empty:
// all zeros); auc with `items` (the catalogue's size; 0 leaves it 0). InputError when k is 0.
RankingMetrics score_ranking(std::span<const std::uint32_t> ranked, std::span<const std::uint32_t> relevant,
                             std::size_t k, std::size_t items = 0);

// Full ranking from a factor model (recommend(): every item the user has
// not seen in training, the top k), for each user with at least one test
// positive that is not a training item and that the model knows. `mean` only
// shifts scores (pass 0 for BPR). Parallel over users. Items in `never`
// (sorted; the cold items, which have no training positive and so no learnt
// factors) are not ranked, but stay relevant: a test positive on one is a
// miss. Ranking them would leak the split (their zero rows mark exactly the
// items that only the test set has).
RankingMetrics evaluate_ranking(const ParamStore& store, float mean, const SeenItems& train_seen,
                                const Ratings& test_positives, std::size_t k,
                                std::span<const std::uint32_t> never = {});

// The same, with scores from `scorer` over items 0..items-1.
RankingMetrics evaluate_ranking_with(const ItemScorer& scorer, std::size_t items, const SeenItems& train_seen,
                                     const Ratings& test_positives, std::size_t k,
                                     std::span<const std::uint32_t> never = {});

// NCF-style sampled evaluation (He et al. 2017): for each test (u, i), i is
// ranked among `negatives` distinct items u never interacted with (drawn
// from `all_seen`, seeded by (seed, test index)); rank = the number of
// negatives scoring at least as high as i (ties count against i);
// HR@k = [rank < k], NDCG@k = 1/log2(rank + 2) if rank < k. A user with
// fewer unseen items than `negatives` is ranked against all of them and
// counted in short_lists; one with none is left out and counted in no_negatives.
// Only hit_rate, ndcg, users, short_lists and no_negatives are filled. Test rows with ids outside the model are skipped.
RankingMetrics evaluate_sampled(const ParamStore& store, const Ratings& test_one_per_user, const SeenItems& all_seen,
                                std::size_t negatives, std::size_t k, std::uint64_t seed);
RankingMetrics evaluate_sampled_with(const ItemScorer& scorer, std::size_t items, const Ratings& test_one_per_user,
                                     const SeenItems& all_seen, std::size_t negatives, std::size_t k,
                                     std::uint64_t seed);

// Most-popular baseline: each item's number of entries in `train` (items
// beyond `items` ignored). Use with evaluate_*_with and popularity_scorer.
std::vector<float> popularity_scores(const Ratings& train, std::size_t items);
// A scorer returning scores[item] for every user (`scores` must outlive it).
ItemScorer popularity_scorer(std::span<const float> scores);

}  // namespace asgd::sparse::mf
