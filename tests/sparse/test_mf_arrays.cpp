// Ratings, seen items, predictions and top-k lists from arrays of dense ids: ids kept as the model's rows (named
// "0".."n-1", unrated ones cold), the answers those of the file-based calls, and bad arrays refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/sparse/mf/arrays.hpp"
#include "asgd/sparse/mf/fit.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/mf/top_k_lists.hpp"

using namespace asgd::sparse::mf;
using asgd::testing::message_of;

namespace {

bool says(const std::string& message, const std::string& part) { return message.find(part) != std::string::npos; }

TEST(MfArrays, IdsAreKeptAsRowsNamedByTheirNumber) {
  const std::vector<std::int64_t> users = {2, 0, 2}, items = {1, 3, 0};
  const std::vector<float> values = {4.0f, 2.5f, 1.0f};
  const Ratings r = ratings_from_arrays(users, items, values, 4, 5);
  EXPECT_EQ(r.user, (std::vector<std::uint32_t>{2, 0, 2}));
  EXPECT_EQ(r.item, (std::vector<std::uint32_t>{1, 3, 0}));
  EXPECT_EQ(r.rating, values);
  ASSERT_EQ(r.users.size(), 4u);
  ASSERT_EQ(r.items.size(), 5u);
  for (std::uint32_t i = 0; i < 5; ++i) EXPECT_EQ(r.items.name(i), std::to_string(i));
  EXPECT_EQ(r.users.find("3"), 3u);
  EXPECT_NO_THROW(r.check("arrays"));
  // Users 1 and 3 and items 2 and 4 have no rating: cold rows of a model trained on them.
  const ColdIds cold = cold_ids(4, 5, r);
  EXPECT_EQ(cold.users, (std::vector<std::uint32_t>{1, 3}));
  EXPECT_EQ(cold.items, (std::vector<std::uint32_t>{2, 4}));
}

TEST(MfArrays, BadArraysAreRefusedByName) {
  const std::vector<std::int64_t> two = {0, 1}, one = {0}, negative = {0, -1}, past = {0, 3};
  const std::vector<float> ok = {1, 2}, nan = {1, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_TRUE(says(message_of([&] { ratings_from_arrays(two, one, ok, 2, 2); }), "2 user ids and 1 item ids"));
  EXPECT_TRUE(says(message_of([&] { ratings_from_arrays(two, two, {ok.data(), 1}, 2, 2); }), "1 ratings for 2"));
  EXPECT_TRUE(says(message_of([&] { ratings_from_arrays(negative, two, ok, 2, 2); }), "users[1] = -1: expected an id in 0..1"));
  EXPECT_TRUE(says(message_of([&] { ratings_from_arrays(two, past, ok, 2, 3); }), "items[1] = 3: expected an id in 0..2"));
  EXPECT_TRUE(says(message_of([&] { ratings_from_arrays(two, two, nan, 2, 2); }), "ratings[1] = nan: expected a finite"));
  EXPECT_TRUE(says(message_of([&] { seen_items_from_arrays(two, past, 2, 3); }), "seen items[1] = 3"));
}

// A model fitted on generated ratings given as arrays (ids 0..n-1 by construction).
struct Fitted {
  Ratings ratings;
  LoadedModel model;
};
Fitted fitted() {
  RatingsGeneratorOptions g;
  g.users = 120;
  g.items = 50;
  g.ratings = 2500;
  const Ratings generated = generate_ratings(g);
  std::vector<std::int64_t> users(generated.user.begin(), generated.user.end());
  std::vector<std::int64_t> items(generated.item.begin(), generated.item.end());
  // Two ids past the generated ones: a cold user and a cold item.
  Ratings r = ratings_from_arrays(users, items, generated.rating, g.users + 1, g.items + 1);
  FitOptions o;
  o.model.factors = 4;
  o.trainer.epochs = 3;
  FitReport report = fit(r, o);
  return {std::move(r), std::move(*report.model)};
}

TEST(MfArrays, PredictionsAndListsAreTheFileCallsOnes) {
  const Fitted f = fitted();
  const LoadedModel& m = f.model;
  ASSERT_EQ(m.cold.users, (std::vector<std::uint32_t>{120}));
  ASSERT_EQ(m.cold.items, (std::vector<std::uint32_t>{50}));
  const std::vector<std::int64_t> users = {0, 5, 120, 7}, items = {3, 50, 2, 49};
  std::vector<float> out(users.size());
  predict_rows(m, users, items, out);
  const FactorLayout layout = FactorLayout::of(m.store->layout());
  const RatingScale scale = with_bias_means(m.scale, *m.store, &m.cold);
  for (std::size_t i = 0; i < users.size(); ++i) {
    const auto u = static_cast<std::uint32_t>(users[i]), it = static_cast<std::uint32_t>(items[i]);
    EXPECT_EQ(out[i], m.range.clip(predict_or_fallback(*m.store, layout, scale, u, it, &m.cold))) << i;
    EXPECT_GE(out[i], m.range.lo);
    EXPECT_LE(out[i], m.range.hi);
  }
  const std::vector<std::int64_t> past = {121};
  EXPECT_TRUE(says(message_of([&] { predict_rows(m, past, {items.data(), 1}, {out.data(), 1}); }),
                   "users[0] = 121: expected an id in 0..120"));

  std::vector<std::int64_t> seen_users(f.ratings.user.begin(), f.ratings.user.end());
  std::vector<std::int64_t> seen_items(f.ratings.item.begin(), f.ratings.item.end());
  const SeenItems seen = seen_items_from_arrays(seen_users, seen_items, 121, 51);
  const SeenItems seen_from_ratings(f.ratings, 121);
  std::vector<std::int64_t> all(121);
  for (std::size_t u = 0; u < all.size(); ++u) all[u] = static_cast<std::int64_t>(u);
  const auto lists = recommend_rows(m, &seen, all, 7);
  ASSERT_EQ(lists.size(), all.size());
  for (std::uint32_t u = 0; u < all.size(); ++u) {
    const auto one = recommend_for(m, &seen_from_ratings, u, 7);
    ASSERT_EQ(lists[u].size(), one.size()) << u;
    for (std::size_t j = 0; j < one.size(); ++j) {
      EXPECT_EQ(lists[u][j].item, one[j].item);
      EXPECT_EQ(lists[u][j].score, one[j].score);
      EXPECT_NE(lists[u][j].item, 50u);  // the cold item
    }
  }
  EXPECT_TRUE(says(message_of([&] { recommend_rows(m, nullptr, all, 0); }), "k 0"));
  EXPECT_TRUE(says(message_of([&] { recommend_rows(m, nullptr, past, 3); }), "users[0] = 121"));
  // Filtered items leave every list; the rest keep their order.
  const std::vector<std::int64_t> filter = {lists[0][0].item, lists[0][3].item};
  const auto filtered = recommend_rows(m, &seen, all, 7, filter);
  EXPECT_EQ(filtered[0][0].item, lists[0][1].item);
  EXPECT_EQ(filtered[0][2].item, lists[0][4].item);
  for (const auto& list : filtered)
    for (const auto& r : list) EXPECT_TRUE(r.item != filter[0] && r.item != filter[1]);
  const std::vector<std::int64_t> bad_filter = {-1};
  EXPECT_TRUE(says(message_of([&] { recommend_rows(m, nullptr, all, 3, bad_filter); }), "filter_items[0] = -1"));
}

TEST(MfArrays, ErrorsAndRankingMetricsAreTheModelCallsOnes) {
  Fitted f = fitted();
  LoadedModel& m = f.model;
  const std::vector<std::int64_t> users(f.ratings.user.begin(), f.ratings.user.begin() + 500);
  const std::vector<std::int64_t> items(f.ratings.item.begin(), f.ratings.item.begin() + 500);
  const std::vector<float> ratings(f.ratings.rating.begin(), f.ratings.rating.begin() + 500);
  std::vector<float> predicted(500);
  predict_rows(m, users, items, predicted);
  double squares = 0, absolute = 0;
  for (std::size_t i = 0; i < 500; ++i) {
    squares += (predicted[i] - ratings[i]) * (predicted[i] - ratings[i]);
    absolute += std::abs(predicted[i] - ratings[i]);
  }
  const ErrorMetrics e = error_metrics_rows(m, users, items, ratings);
  EXPECT_NEAR(e.rmse, std::sqrt(squares / 500), 1e-5);
  EXPECT_NEAR(e.mae, absolute / 500, 1e-5);
  m.loss = "bpr";
  EXPECT_TRUE(says(message_of([&] { error_metrics_rows(m, users, items, ratings); }), "ranking metrics"));
  m.loss = "squared";

  // Ranking: the first 2000 pairs as training, the rest as test, as evaluate_ranking scores them.
  const std::vector<std::int64_t> all_users(f.ratings.user.begin(), f.ratings.user.end());
  const std::vector<std::int64_t> all_items(f.ratings.item.begin(), f.ratings.item.end());
  const std::span<const std::int64_t> train_u(all_users.data(), 2000), train_i(all_items.data(), 2000);
  const std::span<const std::int64_t> test_u(all_users.data() + 2000, 500), test_i(all_items.data() + 2000, 500);
  const RankingMetrics r = ranking_metrics_rows(m, train_u, train_i, test_u, test_i, 10);
  Ratings test = f.ratings.subset([] {
    std::vector<std::size_t> rows(500);
    for (std::size_t i = 0; i < 500; ++i) rows[i] = 2000 + i;
    return rows;
  }());
  const RankingMetrics direct = evaluate_ranking(*m.store, 0.0f, seen_items_from_arrays(train_u, train_i, 121, 51),
                                                 test, 10, m.cold.items);
  EXPECT_GT(r.users, 50u);
  EXPECT_EQ(r.users, direct.users);
  EXPECT_NEAR(r.ndcg, direct.ndcg, 1e-12);  // a parallel sum: its order varies
  EXPECT_EQ(r.hits, direct.hits);
  EXPECT_GT(r.auc, 0.0);
  EXPECT_LE(r.auc, 1.0);
}

}  // namespace
