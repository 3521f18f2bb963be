// BPR-MF and top-k ranking metrics: exact metric values on hand-made
// rankings, and BPR trained by the engine beating the most-popular baseline
// on generated implicit data.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>
#include <vector>

#include "../common/message_of.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/sparse/mf/bpr.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "asgd/sparse/mf/metrics.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/mf/ratings.hpp"
#include "asgd/sparse/mf/recommend.hpp"

using namespace asgd::sparse::mf;

namespace {

using asgd::testing::message_of;

// Dense ids as given; the id maps hold "u<k>" / "i<k>" up to the largest id.
Ratings make_ratings(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs, std::size_t users,
                     std::size_t items) {
  Ratings r;
  for (std::size_t u = 0; u < users; ++u) r.users.intern("u" + std::to_string(u));
  for (std::size_t i = 0; i < items; ++i) r.items.intern("i" + std::to_string(i));
  for (const auto& [u, i] : pairs) {
    r.user.push_back(u);
    r.item.push_back(i);
    r.rating.push_back(1.0f);
  }
  return r;
}

// One factor, no biases: score(u, i) = p_u * q_i.
asgd::ParamStore one_factor_store(const std::vector<float>& p, const std::vector<float>& q) {
  auto store = asgd::ParamStore::on_heap(FactorLayout::make(p.size(), q.size(), 1, false));
  const FactorLayout f = FactorLayout::of(store.layout());
  for (std::size_t u = 0; u < p.size(); ++u) store.store(f.p + u * f.stride, p[u]);
  for (std::size_t i = 0; i < q.size(); ++i) store.store(f.q + i * f.stride, q[i]);
  return store;
}

void expect_in_unit_interval(const RankingMetrics& m) {
  for (const double v : {m.precision, m.recall, m.ndcg, m.map, m.hit_rate}) {
    EXPECT_GE(v, 0.0);
    EXPECT_LE(v, 1.0);
  }
}

}  // namespace

TEST(RankingMetrics, OneUserKnownRanking) {
  const std::vector<std::uint32_t> ranked = {5, 3, 7, 1, 9};
  const std::vector<std::uint32_t> relevant = {42, 9, 3};
  const auto m = score_ranking(ranked, relevant, 5);
  EXPECT_EQ(m.users, 1u);
  EXPECT_DOUBLE_EQ(m.precision, 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(m.recall, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.hit_rate, 1.0);
  const double dcg = 1.0 / std::log2(3.0) + 1.0 / std::log2(6.0);
  const double idcg = 1.0 + 1.0 / std::log2(3.0) + 1.0 / std::log2(4.0);
  EXPECT_NEAR(m.ndcg, dcg / idcg, 1e-12);
  EXPECT_NEAR(m.map, (1.0 / 2.0 + 2.0 / 5.0) / 3.0, 1e-12);

  // Only the first k count.
  const auto top1 = score_ranking(ranked, relevant, 1);
  EXPECT_EQ(top1.users, 1u);
  EXPECT_EQ(top1.precision + top1.recall + top1.ndcg + top1.map + top1.hit_rate, 0.0);
  // A perfect list: everything 1, precision limited by k.
  const auto perfect = score_ranking(std::vector<std::uint32_t>{3, 9}, std::vector<std::uint32_t>{9, 3}, 4);
  EXPECT_DOUBLE_EQ(perfect.ndcg, 1.0);
  EXPECT_DOUBLE_EQ(perfect.map, 1.0);
  EXPECT_DOUBLE_EQ(perfect.recall, 1.0);
  EXPECT_DOUBLE_EQ(perfect.precision, 0.5);
  // No relevant items: not a user.
  EXPECT_EQ(score_ranking(ranked, {}, 5).users, 0u);
  EXPECT_NE(message_of([&] { score_ranking(ranked, relevant, 0); }).find("k must be at least 1"), std::string::npos);
}

TEST(RankingMetrics, ImplicitsAucAndMicroPrecision) {
  const std::vector<std::uint32_t> ranked = {5, 3, 7, 1, 9};
  const std::vector<std::uint32_t> relevant = {42, 9, 3};
  // Of 50 items: misses at ranks 0, 2, 3 count 0, 1, 1 hits above them; the 45 items past the list count
  // (2 + 3) / 2 each for the 47 - 3 negatives not listed; over 3 x 47 pairs.
  const auto m = score_ranking(ranked, relevant, 5, 50);
  EXPECT_NEAR(m.auc, (0 + 1 + 1 + 2.5 * 44) / (3.0 * 47), 1e-12);
  EXPECT_EQ(m.hits, 2u);
  EXPECT_EQ(m.capped_relevant, 3u);
  EXPECT_EQ(score_ranking(ranked, relevant, 5).auc, 0.0);  // no catalogue size: no AUC
  // A short list that holds the one positive first: a perfect AUC, the places past it misses.
  EXPECT_DOUBLE_EQ(score_ranking(std::vector<std::uint32_t>{3}, std::vector<std::uint32_t>{3}, 3, 10).auc, 1.0);
}

TEST(RankingMetrics, FullRankingExcludesTrainingItems) {
  // User 0 scores items 0 > 1 > 2 > 3 and saw item 0 in training; test item 2.
  // User 1 has no test positive and is not counted.
  auto store = one_factor_store({1.0f, 1.0f}, {0.4f, 0.3f, 0.2f, 0.1f});
  const auto train = make_ratings({{0, 0}, {1, 3}}, 2, 4);
  const auto test = make_ratings({{0, 2}}, 2, 4);
  const SeenItems seen(train, 2);
  const auto m = evaluate_ranking(store, 0.0f, seen, test, 2);  // top 2 = {1, 2}
  EXPECT_EQ(m.users, 1u);
  EXPECT_DOUBLE_EQ(m.precision, 0.5);
  EXPECT_DOUBLE_EQ(m.recall, 1.0);
  EXPECT_NEAR(m.ndcg, 1.0 / std::log2(3.0), 1e-12);
  EXPECT_DOUBLE_EQ(m.map, 0.5);
  EXPECT_DOUBLE_EQ(m.hit_rate, 1.0);

  // The same through a scorer, and popularity: item 3 (seen twice) first.
  const auto same = evaluate_ranking_with(
      [&](std::uint32_t u, std::uint32_t i) { return predict(store, FactorLayout::of(store.layout()), RatingScale(0.0f), u, i); }, 4,
      seen, test, 2);
  EXPECT_DOUBLE_EQ(same.ndcg, m.ndcg);
  const auto pop = popularity_scores(make_ratings({{0, 3}, {1, 3}, {1, 2}}, 2, 4), 4);
  EXPECT_EQ(pop, (std::vector<float>{0, 0, 1, 2}));
  const auto by_pop = evaluate_ranking_with(popularity_scorer(pop), 4, seen, test, 1);  // top 1 = {3}
  EXPECT_EQ(by_pop.users, 1u);
  EXPECT_EQ(by_pop.hit_rate, 0.0);
}

TEST(RankingMetrics, NeverRankedItemsAreMisses) {
  // Item 1 scores highest for user 0 and is its only test positive: ranked, it is a hit at the top; never ranked
  // (a cold item), the top 2 is {2, 3}, a miss, and the user still counts. Both evaluations agree.
  auto store = one_factor_store({1.0f}, {0.1f, 0.4f, 0.3f, 0.2f});
  const auto train = make_ratings({}, 1, 4);
  const auto test = make_ratings({{0, 1}}, 1, 4);
  const SeenItems seen(train, 1);
  const auto ranked = evaluate_ranking(store, 0.0f, seen, test, 2);
  EXPECT_DOUBLE_EQ(ranked.ndcg, 1.0);
  const std::vector<std::uint32_t> never = {1};
  const auto m = evaluate_ranking(store, 0.0f, seen, test, 2, never);
  EXPECT_EQ(m.users, 1u);
  EXPECT_EQ(m.precision + m.recall + m.ndcg + m.map + m.hit_rate, 0.0);
  const auto scorer = [&](std::uint32_t u, std::uint32_t i) {
    return predict(store, FactorLayout::of(store.layout()), RatingScale(0.0f), u, i);
  };
  EXPECT_DOUBLE_EQ(evaluate_ranking_with(scorer, 4, seen, test, 2).ndcg, 1.0);
  const auto by_scorer = evaluate_ranking_with(scorer, 4, seen, test, 2, never);
  EXPECT_EQ(by_scorer.users, 1u);
  EXPECT_EQ(by_scorer.hit_rate, 0.0);
  const std::vector<std::uint32_t> unsorted = {2, 1};
  EXPECT_NE(message_of([&] { evaluate_ranking_with(scorer, 4, seen, test, 2, unsorted); }).find("sorted"),
            std::string::npos);
}

TEST(RankingMetrics, SampledRanksThePositiveAmongNegatives) {
  // Items 0..5, scores descending; user 0 interacted with 0 (the test item) and 1.
  auto store = one_factor_store({1.0f}, {0.3f, 0.9f, 0.8f, 0.7f, 0.1f, 0.05f});
  const auto all = make_ratings({{0, 0}, {0, 1}}, 1, 6);
  const SeenItems seen(all, 1);
  const auto test = make_ratings({{0, 0}}, 1, 6);
  // Negatives can only be 2..5 (4 of them): items 2, 3 beat item 0, so rank 2.
  const auto m = evaluate_sampled(store, test, seen, 99, 10, 7);
  EXPECT_EQ(m.users, 1u);
  EXPECT_EQ(m.short_lists, 1u);  // 4 unseen items, not 99
  EXPECT_DOUBLE_EQ(m.hit_rate, 1.0);
  EXPECT_NEAR(m.ndcg, 1.0 / std::log2(4.0), 1e-12);
  EXPECT_EQ(evaluate_sampled(store, test, seen, 4, 10, 7).short_lists, 0u);
  EXPECT_EQ(evaluate_sampled(store, test, seen, 99, 2, 7).hit_rate, 0.0);
  // With one negative drawn, the rank is 0 or 1 depending on which.
  const auto one = evaluate_sampled(store, test, seen, 1, 1, 3);
  EXPECT_TRUE(one.hit_rate == 0.0 || one.hit_rate == 1.0);
  EXPECT_THROW(evaluate_sampled(store, test, seen, 0, 10, 1), asgd::InputError);
}

TEST(RankingMetrics, SampledLeavesOutAUserWhoHasSeenEveryItem) {
  // User 0 has seen all three items: nothing to rank the test item against, so it is neither a hit nor a miss.
  // User 1 has seen only item 0, and item 2 scores below it: a hit at rank 1 of 2 negatives.
  auto store = one_factor_store({1.0f, 1.0f}, {0.5f, 0.9f, 0.1f});
  const auto all = make_ratings({{0, 0}, {0, 1}, {0, 2}, {1, 0}}, 2, 3);
  const SeenItems seen(all, 2);
  const auto test = make_ratings({{0, 0}, {1, 0}}, 2, 3);
  const auto m = evaluate_sampled(store, test, seen, 99, 1, 7);
  EXPECT_EQ(m.users, 1u);
  EXPECT_EQ(m.no_negatives, 1u);
  EXPECT_EQ(m.short_lists, 1u);
  EXPECT_DOUBLE_EQ(m.hit_rate, 0.0);  // item 1 beats item 0 for user 1: rank 1, not under k = 1
  EXPECT_DOUBLE_EQ(evaluate_sampled(store, test, seen, 99, 2, 7).hit_rate, 1.0);
}

TEST(BprMf, RejectsEmptyInputAndUsesTheImplicitLayout) {
  EXPECT_NE(message_of([] { BprMf(make_ratings({}, 1, 1), MfOptions{}); }).find("no positive"), std::string::npos);
  MfOptions o;
  o.factors = 0;
  EXPECT_THROW(BprMf(make_ratings({{0, 0}}, 1, 1), o), asgd::InputError);
  const BprMf bpr(make_ratings({{0, 0}, {1, 2}}, 2, 3), MfOptions{});
  EXPECT_EQ(bpr.num_examples(), 2u);
  EXPECT_TRUE(bpr.layout().contains("item_bias"));
  EXPECT_FALSE(bpr.layout().contains("user_bias"));
}

TEST(BprMf, TrainsAShardButDrawsNegativesAgainstAllPositives) {
  // A rank's shard (rows 0 and 2): it trains those, and what counts as seen,
  // the items a negative may not be, is every positive, the shard's or not.
  const Ratings all = make_ratings({{0, 0}, {0, 1}, {1, 2}, {1, 0}}, 2, 4);
  const std::vector<std::size_t> shard = {0, 2};
  const BprMf bpr(all, MfOptions{}, 1, &shard);
  EXPECT_EQ(bpr.num_examples(), 2u);
  EXPECT_TRUE(bpr.seen().contains(0, 1));  // row 1, another rank's
  EXPECT_TRUE(bpr.seen().contains(1, 0));  // row 3
  EXPECT_FALSE(bpr.seen().contains(0, 3));
  EXPECT_EQ(bpr.layout(), BprMf(all, MfOptions{}).layout());  // every rank has the whole model
  // Which positives it trains: the rows of P (users) and the positive item's
  // bias (the one with a gradient below 0) that each example touches.
  struct Recorder {
    FactorLayout f;
    std::set<std::pair<std::uint32_t, std::uint32_t>> pairs;
    std::uint32_t user = 0;
    float read(std::size_t) const noexcept { return 0.0f; }
    void read(std::size_t, float* out, std::size_t n) const noexcept { std::fill_n(out, n, 0.0f); }
    void add_gradient(std::size_t i, float g) {
      if (i >= f.item_bias && i < f.item_bias + f.items && g < 0)
        pairs.insert({user, static_cast<std::uint32_t>(i - f.item_bias)});
    }
    void add_gradient(std::size_t offset, const float*, std::size_t, float = 1.0f) {
      if (offset >= f.p && offset < f.p + f.users * f.stride) user = static_cast<std::uint32_t>((offset - f.p) / f.stride);
    }
    float learning_rate() const noexcept { return 0.1f; }
    std::size_t size() const noexcept { return 0; }
    void prefetch(std::size_t) const noexcept {}
    std::uint64_t seed() const noexcept { return 1; }
    std::uint64_t epoch() const noexcept { return 0; }
  } sink{FactorLayout::of(bpr.layout()), {}};
  for (std::size_t i = 0; i < bpr.num_examples(); ++i) bpr.gradient(i, sink);
  EXPECT_EQ(sink.pairs, (std::set<std::pair<std::uint32_t, std::uint32_t>>{{0, 0}, {1, 2}}));
  const std::vector<std::size_t> outside = {4}, none;
  EXPECT_NE(message_of([&] { BprMf(all, MfOptions{}, 1, &outside); }).find("row 4 of 4"), std::string::npos);
  EXPECT_NE(message_of([&] { BprMf(all, MfOptions{}, 1, &none); }).find("no positives to train"), std::string::npos);
}

TEST(BprMf, BeatsMostPopularOnGeneratedImplicitData) {
  const auto start = std::chrono::steady_clock::now();
  RatingsGeneratorOptions g;
  // Half of all pairs rated, positives = rating >= 4: which items a user
  // likes is then mostly the planted preference, not which were observed,
  // so there is something beyond popularity to learn.
  g.users = 500;
  g.items = 300;
  g.ratings = 75000;
  g.rank = 4;
  g.noise = 0.3;
  g.zipf = 0.5;
  const auto all = generate_ratings(g);
  std::vector<std::size_t> keep;
  for (std::size_t r = 0; r < all.size(); ++r)
    if (all.rating[r] >= 4.0f) keep.push_back(r);
  const auto positives = all.subset(keep);
  const auto split = random_split(positives, 0.2, 42);

  MfOptions mo;
  mo.factors = 8;
  mo.l2 = 0.02f;
  mo.bias_l2 = 0.005f;
  const BprMf problem(split.train, mo);
  auto store = asgd::ParamStore::on_heap(problem.layout());
  initialize_factors(store, 1, mo.init_scale);
  asgd::TrainerOptions o;
  o.workers = 2;
  o.epochs = 20;
  o.step_examples = 4096;
  o.schedule.lr = 0.05f;
  const auto report = asgd::Trainer(store, o).run(problem);
  ASSERT_FALSE(report.epochs.empty());
  EXPECT_LT(report.epochs.back().loss, report.epochs.front().loss);

  const SeenItems train_seen(split.train, g.users);
  const auto bpr = evaluate_ranking(store, 0.0f, train_seen, split.test, 10);
  const auto pop_scores = popularity_scores(split.train, g.items);
  const auto pop = evaluate_ranking_with(popularity_scorer(pop_scores), g.items, train_seen, split.test, 10);
  std::printf("%zu positives; full ranking @10 over %zu users: BPR ndcg %.4f prec %.4f recall %.4f map %.4f hr %.4f | "
              "popular ndcg %.4f prec %.4f recall %.4f\n",
              positives.size(), bpr.users, bpr.ndcg, bpr.precision, bpr.recall, bpr.map, bpr.hit_rate, pop.ndcg,
              pop.precision, pop.recall);
  EXPECT_GT(bpr.users, g.users / 2);
  EXPECT_EQ(bpr.users, pop.users);
  expect_in_unit_interval(bpr);
  expect_in_unit_interval(pop);
  EXPECT_GT(bpr.ndcg, 1.3 * pop.ndcg) << "BPR must clearly beat most-popular";

  // Sampled (NCF-style) on a leave-one-out split of the same positives.
  const auto loo = leave_k_out(positives, 1);
  const SeenItems all_seen(positives, g.users);
  const auto sampled_bpr = evaluate_sampled(store, loo.test, all_seen, 99, 10, 5);
  const auto sampled_pop = evaluate_sampled_with(popularity_scorer(pop_scores), g.items, loo.test, all_seen, 99, 10, 5);
  std::printf("sampled @10 (99 negatives): BPR hr %.4f ndcg %.4f | popular hr %.4f ndcg %.4f\n", sampled_bpr.hit_rate,
              sampled_bpr.ndcg, sampled_pop.hit_rate, sampled_pop.ndcg);
  expect_in_unit_interval(sampled_bpr);
  EXPECT_EQ(sampled_bpr.users, loo.test.size());
  EXPECT_GT(sampled_bpr.hit_rate, sampled_pop.hit_rate);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%.2f s\n", seconds);
}
