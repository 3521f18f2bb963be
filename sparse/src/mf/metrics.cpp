#include "asgd/sparse/mf/metrics.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/parallel_reduce.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "asgd/engine/errors.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/engine/random.hpp"

namespace asgd::sparse::mf {

namespace {

void check_k(std::size_t k) {
  if (k == 0) throw InputError("ranking metrics: k must be at least 1");
}

RankingMetrics add(RankingMetrics a, const RankingMetrics& b) {
  a.precision += b.precision;
  a.recall += b.recall;
  a.ndcg += b.ndcg;
  a.map += b.map;
  a.hit_rate += b.hit_rate;
  a.auc += b.auc;
  a.users += b.users;
  a.hits += b.hits;
  a.capped_relevant += b.capped_relevant;
  a.short_lists += b.short_lists;
  a.no_negatives += b.no_negatives;
  return a;
}

RankingMetrics mean_of(RankingMetrics sum) {
  if (sum.users == 0) return sum;
  const double n = static_cast<double>(sum.users);
  sum.precision /= n;
  sum.recall /= n;
  sum.ndcg /= n;
  sum.map /= n;
  sum.hit_rate /= n;
  sum.auc /= n;
  return sum;
}

// Per user with at least one rankable test positive: its sorted, distinct
// test items that are below `items` and not among its training items.
struct TestGroups {
  std::vector<std::uint32_t> users;
  std::vector<std::vector<std::uint32_t>> relevant;
};

TestGroups group_test(const Ratings& test, std::size_t users, std::size_t items, const SeenItems& train_seen) {
  std::size_t max_user = 0;
  for (const std::uint32_t u : test.user) max_user = std::max<std::size_t>(max_user, u + 1);
  const std::size_t n = std::min(users, max_user);
  std::vector<std::vector<std::uint32_t>> by_user(n);
  for (std::size_t r = 0; r < test.size(); ++r) {
    const std::uint32_t u = test.user[r], i = test.item[r];
    if (u >= n || i >= items || train_seen.contains(u, i)) continue;
    by_user[u].push_back(i);
  }
  TestGroups g;
  for (std::uint32_t u = 0; u < n; ++u) {
    auto& v = by_user[u];
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    g.users.push_back(u);
    g.relevant.push_back(std::move(v));
  }
  return g;
}

template <class PerUser>
RankingMetrics reduce_users(std::size_t count, PerUser&& per_user) {
  return mean_of(tbb::parallel_reduce(
      tbb::blocked_range<std::size_t>(0, count, 16), RankingMetrics{},
      [&](const tbb::blocked_range<std::size_t>& range, RankingMetrics acc) {
        for (std::size_t j = range.begin(); j < range.end(); ++j) acc = add(acc, per_user(j));
        return acc;
      },
      [](RankingMetrics a, const RankingMetrics& b) { return add(a, b); }));
}

// `want` distinct items in [0, items) that `user` never interacted with and
// that are not `positive`, into `out` (fewer when fewer exist).
void sample_negatives(const SeenItems& all_seen, std::uint32_t user, std::uint32_t positive, std::size_t items,
                      std::size_t want, FastRng& rng, std::vector<std::uint32_t>& out) {
  out.clear();
  const auto seen = all_seen.of(user);
  auto excluded = [&](std::uint32_t j) { return j == positive || std::binary_search(seen.begin(), seen.end(), j); };
  const std::size_t seen_below = static_cast<std::size_t>(
      std::lower_bound(seen.begin(), seen.end(), static_cast<std::uint32_t>(std::min<std::size_t>(items, UINT32_MAX))) -
      seen.begin());
  const bool positive_seen = std::binary_search(seen.begin(), seen.end(), positive);
  const std::size_t excluded_count = seen_below + (positive_seen || positive >= items ? 0 : 1);
  const std::size_t unseen = items - std::min(items, excluded_count);
  if (unseen <= 2 * want) {
    // Dense case: list every candidate and take a random prefix.
    for (std::uint32_t j = 0; j < items; ++j)
      if (!excluded(j)) out.push_back(j);
    const std::size_t take = std::min(want, out.size());
    for (std::size_t a = 0; a < take; ++a) {
      const std::size_t b = a + rng.below(static_cast<std::uint32_t>(out.size() - a));
      std::swap(out[a], out[b]);
    }
    out.resize(take);
    return;
  }
  // Sparse case: rejection sampling; at least half the catalogue qualifies.
  while (out.size() < want) {
    const std::uint32_t j = rng.below(static_cast<std::uint32_t>(items));
    if (excluded(j) || std::find(out.begin(), out.end(), j) != out.end()) continue;
    out.push_back(j);
  }
}

ItemScorer store_scorer(const ParamStore& store) {
  const FactorLayout f = FactorLayout::of(store.layout());
  return [&store, f](std::uint32_t u, std::uint32_t i) { return predict(store, f, RatingScale(0.0f), u, i); };
}

}  // namespace

RankingMetrics score_ranking(std::span<const std::uint32_t> ranked, std::span<const std::uint32_t> relevant,
                             std::size_t k, std::size_t items) {
  check_k(k);
  RankingMetrics m;
  if (relevant.empty()) return m;
  m.users = 1;
  std::vector<std::uint32_t> rel(relevant.begin(), relevant.end());
  std::sort(rel.begin(), rel.end());
  rel.erase(std::unique(rel.begin(), rel.end()), rel.end());
  const std::size_t n = std::min(k, ranked.size());
  const std::size_t ideal = std::min(k, rel.size());
  std::size_t hits = 0;
  double dcg = 0, ap = 0, idcg = 0, auc = 0;
  for (std::size_t r = 0; r < k; ++r) {
    // Past the list (fewer than k items to rank): misses, as implicit's -1 ids are.
    if (r >= n || !std::binary_search(rel.begin(), rel.end(), ranked[r])) {
      auc += static_cast<double>(hits);
      continue;
    }
    ++hits;
    dcg += 1.0 / std::log2(static_cast<double>(r) + 2.0);
    ap += static_cast<double>(hits) / static_cast<double>(r + 1);
  }
  for (std::size_t r = 0; r < ideal; ++r) idcg += 1.0 / std::log2(static_cast<double>(r) + 2.0);
  m.precision = static_cast<double>(hits) / static_cast<double>(k);
  m.recall = static_cast<double>(hits) / static_cast<double>(rel.size());
  m.ndcg = dcg / idcg;
  m.map = ap / static_cast<double>(ideal);
  m.hit_rate = hits > 0 ? 1.0 : 0.0;
  m.hits = hits;
  m.capped_relevant = ideal;
  const double positives = static_cast<double>(rel.size());
  if (items > rel.size()) {
    const double negatives = static_cast<double>(items) - positives;
    const double misses = static_cast<double>(k - hits);
    auc += (static_cast<double>(hits) + positives) / 2.0 * (negatives - misses);
    m.auc = auc / (positives * negatives);
  }
  return m;
}

RankingMetrics evaluate_ranking(const ParamStore& store, float mean, const SeenItems& train_seen,
                                const Ratings& test_positives, std::size_t k, std::span<const std::uint32_t> never) {
  check_k(k);
  const FactorLayout f = FactorLayout::of(store.layout());
  check_model_ids(store.layout(), test_positives, "ranking metrics");
  const TestGroups g = group_test(test_positives, f.users, f.items, train_seen);
  const auto lists = recommend(store, RatingScale(mean), &train_seen, g.users, k, 128, never);
  return reduce_users(g.users.size(), [&](std::size_t j) {
    std::vector<std::uint32_t> ranked(lists[j].size());
    for (std::size_t r = 0; r < ranked.size(); ++r) ranked[r] = lists[j][r].item;
    return score_ranking(ranked, g.relevant[j], k, f.items);
  });
}

RankingMetrics evaluate_ranking_with(const ItemScorer& scorer, std::size_t items, const SeenItems& train_seen,
                                     const Ratings& test_positives, std::size_t k,
                                     std::span<const std::uint32_t> never) {
  check_k(k);
  if (!scorer) throw InputError("ranking metrics: no scorer");
  if (!std::is_sorted(never.begin(), never.end())) throw InputError("ranking metrics: `never` must be sorted");
  // (evaluate_ranking leaves the check to recommend().)
  const TestGroups g = group_test(test_positives, std::numeric_limits<std::size_t>::max(), items, train_seen);
  // Per thread, reused across users: the scores and the candidate list.
  struct Scratch {
    std::vector<float> score;
    std::vector<std::uint32_t> order;
  };
  tbb::enumerable_thread_specific<Scratch> scratch;
  return reduce_users(g.users.size(), [&](std::size_t j) {
    const std::uint32_t u = g.users[j];
    Scratch& local = scratch.local();
    std::vector<float>& score = local.score;  // not a structured binding: clang 14 cannot capture one
    std::vector<std::uint32_t>& order = local.order;
    score.resize(items);
    order.clear();
    const auto seen = train_seen.of(u);  // sorted: walked alongside the items, as `never` is
    auto next_seen = seen.begin();
    auto next_never = never.begin();
    for (std::uint32_t i = 0; i < items; ++i) {
      while (next_seen != seen.end() && *next_seen < i) ++next_seen;
      if (next_seen != seen.end() && *next_seen == i) continue;
      while (next_never != never.end() && *next_never < i) ++next_never;
      if (next_never != never.end() && *next_never == i) continue;
      score[i] = scorer(u, i);
      order.push_back(i);
    }
    const std::size_t take = std::min(k, order.size());
    const auto better = [&](std::uint32_t a, std::uint32_t b) {
      return score[a] > score[b] || (score[a] == score[b] && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take), order.end(), better);
    order.resize(take);
    return score_ranking(order, g.relevant[j], k, items);
  });
}

RankingMetrics evaluate_sampled_with(const ItemScorer& scorer, std::size_t items, const Ratings& test_one_per_user,
                                     const SeenItems& all_seen, std::size_t negatives, std::size_t k,
                                     std::uint64_t seed) {
  check_k(k);
  if (!scorer) throw InputError("sampled metrics: no scorer");
  if (negatives == 0) throw InputError("sampled metrics: negatives must be at least 1");
  const Ratings& t = test_one_per_user;
  RankingMetrics sum = tbb::parallel_reduce(
      tbb::blocked_range<std::size_t>(0, t.size(), 64), RankingMetrics{},
      [&](const tbb::blocked_range<std::size_t>& range, RankingMetrics acc) {
        std::vector<std::uint32_t> negs;
        negs.reserve(negatives);
        for (std::size_t r = range.begin(); r < range.end(); ++r) {
          const std::uint32_t u = t.user[r], i = t.item[r];
          if (i >= items) continue;
          FastRng rng(FastRng::mix(seed, r, 0x5a3b1e));
          sample_negatives(all_seen, u, i, items, negatives, rng, negs);
          if (negs.empty()) {  // every other item seen: no list to rank against, so neither hit nor miss
            ++acc.no_negatives;
            continue;
          }
          const float s = scorer(u, i);
          std::size_t rank = 0;
          for (const std::uint32_t j : negs) rank += scorer(u, j) >= s ? 1 : 0;
          ++acc.users;
          if (negs.size() < negatives) ++acc.short_lists;
          if (rank < k) {
            acc.hit_rate += 1.0;
            acc.ndcg += 1.0 / std::log2(static_cast<double>(rank) + 2.0);
          }
        }
        return acc;
      },
      [](RankingMetrics a, const RankingMetrics& b) { return add(a, b); });
  return mean_of(sum);
}

RankingMetrics evaluate_sampled(const ParamStore& store, const Ratings& test_one_per_user, const SeenItems& all_seen,
                                std::size_t negatives, std::size_t k, std::uint64_t seed) {
  const FactorLayout f = FactorLayout::of(store.layout());
  check_model_ids(store.layout(), test_one_per_user, "sampled ranking metrics");
  // Users the model does not know are dropped here; items by the _with form.
  std::vector<std::size_t> rows;
  for (std::size_t r = 0; r < test_one_per_user.size(); ++r)
    if (test_one_per_user.user[r] < f.users) rows.push_back(r);
  const ItemScorer scorer = store_scorer(store);
  if (rows.size() == test_one_per_user.size())
    return evaluate_sampled_with(scorer, f.items, test_one_per_user, all_seen, negatives, k, seed);
  return evaluate_sampled_with(scorer, f.items, test_one_per_user.subset(rows), all_seen, negatives, k, seed);
}

std::vector<float> popularity_scores(const Ratings& train, std::size_t items) {
  // Counted in integers, made floats once: adding 1.0f stopped at 2^24, where every more popular item tied.
  std::vector<std::uint64_t> counts(items, 0);
  for (const std::uint32_t i : train.item)
    if (i < items) ++counts[i];
  return {counts.begin(), counts.end()};
}

ItemScorer popularity_scorer(std::span<const float> scores) {
  return [scores](std::uint32_t, std::uint32_t item) { return item < scores.size() ? scores[item] : 0.0f; };
}

std::string RankingMetrics::text(std::size_t k) const {
  return fmt::format("precision@{} {:.4f} recall@{} {:.4f} NDCG@{} {:.4f} MAP@{} {:.4f} HR@{} {:.4f}", k, precision, k,
                     recall, k, ndcg, k, map, k, hit_rate);
}

}  // namespace asgd::sparse::mf
