// A user folded into a trained model without retraining (implicit's recalculate_user): their factors and bias
// solved by least squares against the item factors, and their top-k list from those.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "asgd/sparse/mf/model_file.hpp"
#include "asgd/sparse/mf/recommend.hpp"

namespace asgd::sparse::mf {

struct FoldedUser {
  std::vector<float> factors;
  float bias = 0;  // squared models with user biases; 0 otherwise
};

// The user whose ratings of items[j] are ratings[j] (rows of the model): p (and b_u where the model has user
// biases) minimising sum_j (t_j - p . q_j - b_u)^2 + l2 * n * (|p|^2 + b_u^2), the ridge solution of the model's
// per-rating L2 objective with q fixed; t_j is ratings[j] in the model's units ((r - offset) / scale minus the
// item's bias) for a squared model, 1 minus the item's bias for a bpr one (every item given is a positive).
// No items: the zero user (the cold user's prediction). InputError when the lengths differ, an item is not a
// row of the model, a rating is not finite or l2 is negative.
FoldedUser fold_in_user(const LoadedModel& model, std::span<const std::uint32_t> items,
                        std::span<const float> ratings, float l2);

// The k best items for `user`, best first, scored as the model scores its own users (predict's sum, unclipped
// for bpr, clipped into the ratings' range for squared as recommend does), `exclude` (their items) and the
// model's cold items left out. InputError when k is 0 or the factors are not the model's width.
std::vector<Recommendation> recommend_folded(const LoadedModel& model, const FoldedUser& user,
                                             std::span<const std::uint32_t> exclude, std::size_t k);

}  // namespace asgd::sparse::mf
