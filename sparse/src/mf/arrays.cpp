#include "asgd/sparse/mf/arrays.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "asgd/engine/errors.hpp"
#include "asgd/sparse/mf/model.hpp"

namespace asgd::sparse::mf {
namespace {

constexpr std::size_t kMostIds = std::numeric_limits<std::uint32_t>::max();

void check_lengths(std::size_t users, std::size_t items, const char* what) {
  if (users != items) {
    throw InputError(fmt::format("{}: {} user ids and {} item ids, expected one of each per entry", what, users, items));
  }
}

void check_count(std::size_t count, const char* what) {
  if (count > kMostIds) throw InputError(fmt::format("{}: {} ids, expected at most {}", what, count, kMostIds));
}

// ids[i] as a row below `count`; InputError naming the array and the entry otherwise.
std::uint32_t row_of(std::span<const std::int64_t> ids, std::size_t i, std::size_t count, const char* what) {
  const std::int64_t id = ids[i];
  if (id < 0 || static_cast<std::uint64_t>(id) >= count) {
    throw InputError(fmt::format("{}[{}] = {}: expected an id in 0..{}", what, i, id,
                                 count == 0 ? std::string("(none)") : std::to_string(count - 1)));
  }
  return static_cast<std::uint32_t>(id);
}

IdMap numbered(std::size_t count) {
  std::vector<std::string> names(count);
  for (std::size_t i = 0; i < count; ++i) names[i] = std::to_string(i);
  return IdMap::from_names(std::move(names));
}

}  // namespace

Ratings ratings_from_arrays(std::span<const std::int64_t> users, std::span<const std::int64_t> items,
                            std::span<const float> ratings, std::size_t user_count, std::size_t item_count) {
  check_lengths(users.size(), items.size(), "ratings");
  if (ratings.size() != users.size()) {
    throw InputError(fmt::format("ratings: {} ratings for {} (user, item) pairs, expected one each", ratings.size(),
                                 users.size()));
  }
  check_count(user_count, "users");
  check_count(item_count, "items");
  Ratings r;
  r.user.resize(users.size());
  r.item.resize(items.size());
  r.rating.assign(ratings.begin(), ratings.end());
  for (std::size_t i = 0; i < users.size(); ++i) {
    r.user[i] = row_of(users, i, user_count, "users");
    r.item[i] = row_of(items, i, item_count, "items");
    if (!std::isfinite(ratings[i])) {
      throw InputError(fmt::format("ratings[{}] = {}: expected a finite rating", i, ratings[i]));
    }
  }
  r.users = numbered(user_count);
  r.items = numbered(item_count);
  return r;
}

SeenItems seen_items_from_arrays(std::span<const std::int64_t> users, std::span<const std::int64_t> items,
                                 std::size_t user_count, std::size_t item_count) {
  check_lengths(users.size(), items.size(), "seen items");
  // SeenItems reads the pairs of a Ratings; names are not needed to leave items out.
  Ratings pairs;
  pairs.user.resize(users.size());
  pairs.item.resize(items.size());
  pairs.rating.assign(users.size(), 1.0f);
  for (std::size_t i = 0; i < users.size(); ++i) {
    pairs.user[i] = row_of(users, i, user_count, "seen users");
    pairs.item[i] = row_of(items, i, item_count, "seen items");
  }
  return SeenItems(pairs, user_count);
}

void predict_rows(const LoadedModel& model, std::span<const std::int64_t> users, std::span<const std::int64_t> items,
                  std::span<float> out) {
  check_lengths(users.size(), items.size(), "predict");
  const ParamStore& store = *model.store;
  const FactorLayout f = FactorLayout::of(store.layout());
  // As write_predictions: not centred, a cold side counts by its distance from the trained rows' mean bias.
  const RatingScale scale = with_bias_means(model.scale, store, &model.cold);
  for (std::size_t i = 0; i < users.size(); ++i) {
    const std::uint32_t u = row_of(users, i, f.users, "users"), item = row_of(items, i, f.items, "items");
    out[i] = model.range.clip(predict_or_fallback(store, f, scale, u, item, &model.cold));
  }
}

std::vector<std::vector<Recommendation>> recommend_rows(const LoadedModel& model, const SeenItems* seen,
                                                        std::span<const std::int64_t> users, std::size_t k,
                                                        std::span<const std::int64_t> filter_items) {
  if (k == 0) throw InputError("recommend: k 0: expected at least 1 item per user");
  const FactorLayout f = FactorLayout::of(model.store->layout());
  std::vector<std::uint32_t> rows(users.size());
  for (std::size_t i = 0; i < users.size(); ++i) rows[i] = row_of(users, i, f.users, "users");
  // As recommend_for: cold items never recommended, cold users scored by the item biases.
  constexpr std::size_t kBatch = 128;
  std::vector<std::uint32_t> never = model.cold.items;
  for (std::size_t i = 0; i < filter_items.size(); ++i) never.push_back(row_of(filter_items, i, f.items, "filter_items"));
  std::sort(never.begin(), never.end());
  auto lists = recommend(*model.store, model.scale, seen, rows, k, kBatch, never, model.cold.users);
  for (auto& list : lists)
    for (Recommendation& r : list) r.score = model.range.clip(r.score);
  return lists;
}

namespace {

// Ratings of rows of `model` with its id maps, so that the library's checks of a model's ids pass whatever names
// the model gives its rows.
Ratings model_rows(const LoadedModel& model, std::span<const std::int64_t> users, std::span<const std::int64_t> items,
                   std::span<const float> ratings) {
  Ratings r = ratings_from_arrays(users, items, ratings, model.users.size(), model.items.size());
  r.users = model.users;
  r.items = model.items;
  return r;
}

}  // namespace

ErrorMetrics error_metrics_rows(const LoadedModel& model, std::span<const std::int64_t> users,
                                std::span<const std::int64_t> items, std::span<const float> ratings) {
  if (model.loss == "bpr") throw InputError("a bpr model ranks items: score it by ranking metrics, not errors");
  const Ratings test = model_rows(model, users, items, ratings);
  return evaluate_errors(*model.store, model.scale, test, model.range.lo, model.range.hi, &model.cold);
}

RankingMetrics ranking_metrics_rows(const LoadedModel& model, std::span<const std::int64_t> train_users,
                                    std::span<const std::int64_t> train_items, std::span<const std::int64_t> test_users,
                                    std::span<const std::int64_t> test_items, std::size_t k) {
  const SeenItems seen = seen_items_from_arrays(train_users, train_items, model.users.size(), model.items.size());
  const std::vector<float> ones(test_users.size(), 1.0f);
  const Ratings test = model_rows(model, test_users, test_items, ones);
  return evaluate_ranking(*model.store, 0.0f, seen, test, k, model.cold.items);
}

}  // namespace asgd::sparse::mf
