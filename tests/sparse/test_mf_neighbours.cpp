// fold_in_user recovers a user from their ratings against fixed item factors (the ridge solution, shrunk by l2),
// recommend_folded ranks as the model scores, and similar_rows lists rows by cosine, the row itself first.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../common/message_of.hpp"
#include "asgd/sparse/mf/fold_in.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/mf/similar.hpp"

using namespace asgd::sparse::mf;
using asgd::testing::message_of;

namespace {

// A squared model of 2 users and 5 items, 2 factors, offset 3: item i's factors and bias as given.
LoadedModel small_model(const std::vector<std::vector<float>>& q, const std::vector<float>& item_bias) {
  LoadedModel m;
  m.loss = "squared";
  m.scale = RatingScale(3.0f);
  m.store.emplace(asgd::ParamStore::on_heap(FactorLayout::make(2, q.size(), 2, true)));
  const FactorLayout f = FactorLayout::of(m.store->layout());
  float* d = m.store->data();
  for (std::size_t i = 0; i < q.size(); ++i) {
    d[f.q + i * f.stride] = q[i][0];
    d[f.q + i * f.stride + 1] = q[i][1];
    d[f.item_bias + i] = item_bias[i];
  }
  return m;
}

const std::vector<std::vector<float>> kQ = {{1, 0}, {0, 1}, {1, 1}, {-1, 0.5f}, {0.3f, -2}};
const std::vector<float> kItemBias = {0.1f, -0.2f, 0, 0.3f, 0};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(MfFoldIn, RecoversAUserFromExactRatingsAndShrinksWithL2) {
  const LoadedModel m = small_model(kQ, kItemBias);
  const float p0 = 0.5f, p1 = -1.0f, bu = 0.2f;
  const std::vector<std::uint32_t> items = {0, 1, 2, 3, 4};
  std::vector<float> ratings;
  for (const std::uint32_t i : items) ratings.push_back(3.0f + p0 * kQ[i][0] + p1 * kQ[i][1] + kItemBias[i] + bu);
  const FoldedUser exact = fold_in_user(m, items, ratings, 0.0f);
  EXPECT_NEAR(exact.factors[0], p0, 1e-5);
  EXPECT_NEAR(exact.factors[1], p1, 1e-5);
  EXPECT_NEAR(exact.bias, bu, 1e-5);
  const FoldedUser shrunk = fold_in_user(m, items, ratings, 0.5f);
  EXPECT_LT(std::hypot(shrunk.factors[0], shrunk.factors[1]), std::hypot(p0, p1) * 0.9);
  // Nobody: the zero user.
  const FoldedUser nobody = fold_in_user(m, {}, {}, 0.1f);
  EXPECT_EQ(nobody.factors, std::vector<float>(2, 0.0f));
}

TEST(MfFoldIn, RecommendsByTheModelsScoreLeavingOutTheUsersItems) {
  LoadedModel m = small_model(kQ, kItemBias);
  m.cold.items = {4};
  const FoldedUser u{{1.0f, 0.0f}, 0.0f};
  // Scores 3 + q_i0 + b_i: item 0 4.1, 1 2.8, 2 4.0, 3 2.3; item 4 cold, item 2 excluded.
  const std::vector<std::uint32_t> exclude = {2};
  const auto list = recommend_folded(m, u, exclude, 10);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].item, 0u);
  EXPECT_FLOAT_EQ(list[0].score, 4.1f);
  EXPECT_EQ(list[1].item, 1u);
  EXPECT_EQ(list[2].item, 3u);
  EXPECT_EQ(recommend_folded(m, u, exclude, 1).size(), 1u);
}

TEST(MfFoldIn, BadInputNamesWhatIsWrong) {
  const LoadedModel m = small_model(kQ, kItemBias);
  const std::vector<std::uint32_t> past = {9};
  const std::vector<float> one = {4.0f};
  EXPECT_TRUE(contains(message_of([&] { fold_in_user(m, past, one, 0.1f); }), "items[0] = 9: the model has 5"));
  const std::vector<std::uint32_t> two = {0, 1};
  EXPECT_TRUE(contains(message_of([&] { fold_in_user(m, two, one, 0.1f); }), "2 items and 1 ratings"));
  const std::vector<std::uint32_t> first = {0};
  const std::vector<float> nan = {NAN};
  EXPECT_TRUE(contains(message_of([&] { fold_in_user(m, first, nan, 0.1f); }), "ratings[0] = nan"));
  EXPECT_TRUE(contains(message_of([&] { fold_in_user(m, first, one, -1.0f); }), "l2 -1"));
  EXPECT_TRUE(contains(message_of([&] { recommend_folded(m, FoldedUser{{1.0f}, 0}, {}, 3); }), "1 factors"));
}

TEST(MfSimilar, ListsRowsByCosineTheRowItselfFirst) {
  // Items (1,0), (2,0), (0,1), (1,1), (0,0).
  const LoadedModel m = small_model({{1, 0}, {2, 0}, {0, 1}, {1, 1}, {0, 0}}, {0, 0, 0, 0, 0});
  const std::vector<std::int64_t> query = {0, 4};
  const auto lists = similar_rows(*m.store, FactorSide::items, query, 5);
  ASSERT_EQ(lists[0].size(), 5u);
  const std::vector<std::uint32_t> expected = {0, 1, 3, 2, 4};
  for (std::size_t r = 0; r < 5; ++r) EXPECT_EQ(lists[0][r].row, expected[r]);
  EXPECT_FLOAT_EQ(lists[0][0].cosine, 1.0f);
  EXPECT_FLOAT_EQ(lists[0][1].cosine, 1.0f);
  EXPECT_NEAR(lists[0][2].cosine, std::sqrt(0.5), 1e-6);
  EXPECT_EQ(lists[1][0].cosine, 0.0f);  // a zero row is like nothing
  EXPECT_TRUE(contains(message_of([&] { similar_rows(*m.store, FactorSide::users, query, 1); }),
                       "users[1] = 4: the model has 2 users"));
}

TEST(MfSimilar, BatchesGiveWhatOneByOneScoringGives) {
  // 300 random users (three batches of queries) against brute-force cosines.
  auto store = asgd::ParamStore::on_heap(FactorLayout::make(300, 2, 5, true));
  const FactorLayout f = FactorLayout::of(store.layout());
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  for (std::size_t u = 0; u < 300; ++u)
    for (std::size_t c = 0; c < 5; ++c) store.data()[f.p + u * f.stride + c] = normal(rng);
  std::vector<std::int64_t> all(300);
  for (std::size_t u = 0; u < 300; ++u) all[u] = static_cast<std::int64_t>(u);
  const auto lists = similar_rows(store, FactorSide::users, all, 3);
  const auto cosine = [&](std::size_t a, std::size_t b) {
    double dot = 0, na = 0, nb = 0;
    for (std::size_t c = 0; c < 5; ++c) {
      const double x = store.load(f.p + a * f.stride + c), y = store.load(f.p + b * f.stride + c);
      dot += x * y, na += x * x, nb += y * y;
    }
    return dot / std::sqrt(na * nb);
  };
  for (std::size_t u = 0; u < 300; u += 37) {
    std::size_t best = u == 0 ? 1 : 0;
    for (std::size_t v = 0; v < 300; ++v)
      if (v != u && cosine(u, v) > cosine(u, best)) best = v;
    EXPECT_EQ(lists[u][0].row, u);
    EXPECT_EQ(lists[u][1].row, best);
    EXPECT_NEAR(lists[u][1].cosine, cosine(u, best), 1e-5);
  }
}

}  // namespace
