// Nearest neighbours in a factor model: the users or items whose factor rows are closest in cosine to given ones
// (implicit's similar_items and similar_users), scored in batches.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "asgd/engine/param_store.hpp"

namespace asgd::sparse::mf {

enum class FactorSide { users, items };

struct Neighbour {
  std::uint32_t row;
  float cosine;  // in [-1, 1]; 0 against a zero row (a cold id)
};

// For each of `rows` (of `side`), the k rows of that side with the highest cosine of their factors, best first,
// the row itself included (cosine 1 unless it is zero), as implicit lists them; ties by lower row. The rows are
// normalised once and scored as one matrix product per batch of queries, batches in parallel. InputError when k
// is 0 or a row is not one of the model's.
std::vector<std::vector<Neighbour>> similar_rows(const ParamStore& store, FactorSide side,
                                                 std::span<const std::int64_t> rows, std::size_t k);

}  // namespace asgd::sparse::mf
