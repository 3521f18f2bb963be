// Top-k recommendation from a factor model: users scored in batches against
// all items with one blocked matrix product per batch (Eigen GEMM), items the
// user has seen excluded, the k best kept by partial sort.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "asgd/engine/param_store.hpp"
#include "asgd/sparse/mf/ratings.hpp"

namespace asgd::sparse::mf {

// Items each user has interacted with, sorted (CSR), for exclusion.
class SeenItems {
 public:
  SeenItems() = default;
  // The items of `ratings` each of users 0..users-1 has rated (ratings of users past them are left out).
  SeenItems(const Ratings& ratings, std::size_t users);
  std::span<const std::uint32_t> of(std::uint32_t user) const noexcept;  // empty past users()
  std::size_t users() const noexcept { return begin_.empty() ? 0 : begin_.size() - 1; }
  bool contains(std::uint32_t user, std::uint32_t item) const noexcept;

 private:
  std::vector<std::uint64_t> begin_;
  std::vector<std::uint32_t> items_;
};

struct Recommendation {
  std::uint32_t item;
  float score;  // the predicted rating: RatingScale::rating(biases + p . q)
};

// The k best unseen items for each of `users` (InputError for one outside
// the model), best first. `seen` may be null (nothing excluded); otherwise it
// covers the model's users. Reads the store with plain loads, in Eigen's
// products, not load_param's atomic ones: to serve while a trainer writes
// (Hogwild! serving, scores a snapshot as good as the reads), the trainer is
// another process on a shared segment (asgd mf recommend --shm); one in this
// process would race with these reads. Batches run in parallel (oneTBB). Items in `never`
// (sorted; e.g. those the model was never trained on) are left out for every
// user. Users in `cold_users` (sorted: no training rating, a zero row) score
// each item as predict_or_fallback does, from the item's bias.
std::vector<std::vector<Recommendation>> recommend(const ParamStore& store, const RatingScale& rs, const SeenItems* seen,
                                                   std::span<const std::uint32_t> users, std::size_t k,
                                                   std::size_t batch = 128, std::span<const std::uint32_t> never = {},
                                                   std::span<const std::uint32_t> cold_users = {});

}  // namespace asgd::sparse::mf
