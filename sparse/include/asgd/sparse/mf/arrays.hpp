// mf's data and queries as arrays of dense ids (a user x item matrix's row and column indices), as a program that
// holds its ratings in memory has them (the Python module): ratings and seen items built from arrays, predictions
// and top-k lists for arrays of model rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "asgd/sparse/mf/metrics.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/mf/model_file.hpp"
#include "asgd/sparse/mf/ratings.hpp"
#include "asgd/sparse/mf/recommend.hpp"

namespace asgd::sparse::mf {

// Ratings (users[i], items[i], ratings[i]) whose ids are kept as the model's rows: the id maps hold every id of
// 0..user_count-1 and 0..item_count-1, named "0".."n-1" in order, so that a model file trained on them answers
// `asgd mf recommend --user 5` for row 5 (ids without a rating become cold rows). InputError when the arrays'
// lengths differ, an id is negative or not below its count, a rating is not finite, or a count passes 2^32 - 1.
Ratings ratings_from_arrays(std::span<const std::int64_t> users, std::span<const std::int64_t> items,
                            std::span<const float> ratings, std::size_t user_count, std::size_t item_count);

// The items each user has seen, from pairs (users[i], items[i]) of rows below user_count and item_count: what a
// top-k list leaves out. InputError as ratings_from_arrays' for the ids.
SeenItems seen_items_from_arrays(std::span<const std::int64_t> users, std::span<const std::int64_t> items,
                                 std::size_t user_count, std::size_t item_count);

// The predictions for (users[i], items[i]) into out[i], as `asgd mf predict` writes them: clipped into the
// training ratings' range, a cold side predicted from the mean and the other side's bias. InputError when the
// lengths differ or an id is not a row of the model.
void predict_rows(const LoadedModel& model, std::span<const std::int64_t> users, std::span<const std::int64_t> items,
                  std::span<float> out);

// The k best items for each of `users` (rows of the model), as recommend_for gives them one at a time (the items
// of `seen` and the cold items left out, scores clipped), scored together in the library's blocked batches.
// `filter_items` (rows of the model, any order) are left out for every user too (implicit's filter_items).
// InputError when k is 0, a user or a filtered item is not a row of the model; `seen`, when given, covers the
// model's users.
std::vector<std::vector<Recommendation>> recommend_rows(const LoadedModel& model, const SeenItems* seen,
                                                        std::span<const std::int64_t> users, std::size_t k,
                                                        std::span<const std::int64_t> filter_items = {});

// The RMSE and MAE of the model's predictions (predict_rows') of ratings (users[i], items[i], ratings[i]) of its
// rows, as `asgd mf eval` scores a test file. InputError as ratings_from_arrays' for the arrays, or for a bpr
// model (scored by ranking).
ErrorMetrics error_metrics_rows(const LoadedModel& model, std::span<const std::int64_t> users,
                                std::span<const std::int64_t> items, std::span<const float> ratings);

// Ranking metrics at k of the model's full ranking (evaluate_ranking: each test user's list of the items not
// among their training pairs, the model's cold items never ranked) against the test pairs, for every user with
// a test item that is not a training one; pairs are rows of the model. InputError as seen_items_from_arrays'.
RankingMetrics ranking_metrics_rows(const LoadedModel& model, std::span<const std::int64_t> train_users,
                                    std::span<const std::int64_t> train_items, std::span<const std::int64_t> test_users,
                                    std::span<const std::int64_t> test_items, std::size_t k);

}  // namespace asgd::sparse::mf
