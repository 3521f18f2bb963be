#include "asgd/sparse/mf/similar.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <Eigen/Dense>
#include <algorithm>
#include <numeric>

#include "asgd/engine/errors.hpp"
#include "asgd/sparse/mf/model.hpp"

namespace asgd::sparse::mf {

std::vector<std::vector<Neighbour>> similar_rows(const ParamStore& store, FactorSide side,
                                                 std::span<const std::int64_t> rows, std::size_t k) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  if (k == 0) throw InputError("similar: k 0: expected at least 1 neighbour");
  const FactorLayout f = FactorLayout::of(store.layout());
  const bool users = side == FactorSide::users;
  const std::size_t count = users ? f.users : f.items, first = users ? f.p : f.q;
  const char* what = users ? "users" : "items";
  for (std::size_t j = 0; j < rows.size(); ++j) {
    if (rows[j] < 0 || static_cast<std::size_t>(rows[j]) >= count) {
      throw InputError(fmt::format("similar: {}[{}] = {}: the model has {} {}", what, j, rows[j], count, what));
    }
  }
  // Every row of the side normalised once (a zero row stays zero: cosine 0 against all).
  RowMajor unit(static_cast<Eigen::Index>(count), static_cast<Eigen::Index>(f.factors));
  for (std::size_t r = 0; r < count; ++r)
    for (std::size_t c = 0; c < f.factors; ++c)
      unit(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c)) = store.load(first + r * f.stride + c);
  for (Eigen::Index r = 0; r < unit.rows(); ++r) {
    const float norm = unit.row(r).norm();
    if (norm > 0) unit.row(r) /= norm;
  }
  constexpr std::size_t kBatch = 128;
  const std::size_t width = std::min(k, count), batches = (rows.size() + kBatch - 1) / kBatch;
  std::vector<std::vector<Neighbour>> out(rows.size());
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, batches), [&](const tbb::blocked_range<std::size_t>& range) {
    RowMajor queries, scores;
    std::vector<std::uint32_t> order(count);
    for (std::size_t b = range.begin(); b < range.end(); ++b) {
      const std::size_t from = b * kBatch, n = std::min(kBatch, rows.size() - from);
      queries.resize(static_cast<Eigen::Index>(n), unit.cols());
      for (std::size_t j = 0; j < n; ++j) queries.row(static_cast<Eigen::Index>(j)) = unit.row(rows[from + j]);
      scores.noalias() = queries * unit.transpose();  // n x count, one blocked product
      for (std::size_t j = 0; j < n; ++j) {
        const float* s = scores.row(static_cast<Eigen::Index>(j)).data();
        std::iota(order.begin(), order.end(), 0u);
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(width), order.end(),
                          [&](std::uint32_t x, std::uint32_t y) { return s[x] > s[y] || (s[x] == s[y] && x < y); });
        auto& list = out[from + j];
        list.reserve(width);
        for (std::size_t r = 0; r < width; ++r) list.push_back({order[r], s[order[r]]});
      }
    }
  });
  return out;
}

}  // namespace asgd::sparse::mf
