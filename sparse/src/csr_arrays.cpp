#include "asgd/sparse/csr_arrays.hpp"

#include <fmt/format.h>

#include <cmath>

#include "asgd/engine/errors.hpp"

namespace asgd::sparse {

namespace {

// The arrays' sizes and the width, before anything is copied.
template <class Index>
void check_shape(const CsrArraysOf<Index>& csr) {
  if (csr.indptr.empty()) throw InputError("CsrArrays::indptr: empty, expected rows + 1 entries (a 0 first)");
  const std::size_t rows = csr.indptr.size() - 1;
  if (csr.indptr.front() != 0)
    throw InputError(fmt::format("CsrArrays::indptr: starts at {}, expected 0", csr.indptr.front()));
  if (csr.indices.size() != csr.values.size()) {
    throw InputError(fmt::format("CsrArrays::values: {} values for {} CsrArrays::indices", csr.values.size(),
                                 csr.indices.size()));
  }
  if (static_cast<std::uint64_t>(csr.indptr.back()) != csr.indices.size()) {
    throw InputError(fmt::format("CsrArrays::indptr: ends at {}, expected the {} CsrArrays::indices",
                                 csr.indptr.back(), csr.indices.size()));
  }
  if (!csr.labels.empty() && csr.labels.size() != rows)
    throw InputError(fmt::format("CsrArrays::labels: {} labels for {} rows", csr.labels.size(), rows));
  if (!(csr.bias >= 0) || !std::isfinite(csr.bias))
    throw InputError(fmt::format("CsrArrays::bias {}: expected finite and >= 0", csr.bias));
  const std::uint64_t width = csr.features + (csr.bias > 0 ? 1 : 0);
  if (width > std::uint64_t{kMaxFeatureId} + 1) {
    throw InputError(fmt::format("CsrArrays::features {}: wider than the 2^31 a model takes{}", csr.features,
                                 csr.bias > 0 ? " (with the bias feature)" : ""));
  }
}

template <class Index>
void check_label(const CsrArraysOf<Index>& csr, std::size_t r) {
  if (csr.labels.empty()) return;
  const float y = csr.labels[r];
  if (y != 1.0f && y != -1.0f) throw InputError(fmt::format("CsrArrays::labels: row {}: {}, expected +1 or -1", r, y));
}

}  // namespace

template <class Index>
SparseDataset dataset_from_csr(const CsrArraysOf<Index>& csr) {
  check_shape(csr);
  const std::size_t rows = csr.indptr.size() - 1;
  const bool bias = csr.bias > 0;
  SparseDataset d;
  d.num_features = static_cast<std::uint32_t>(csr.features + (bias ? 1 : 0));
  d.row_ptr.reserve(rows + 1);
  d.index.reserve(csr.indices.size() + (bias ? rows : 0));
  d.value.reserve(d.index.capacity());
  d.label.reserve(rows);
  d.row_ptr.push_back(0);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::int64_t begin = csr.indptr[r], end = csr.indptr[r + 1];  // widened: no overflow in k + 1
    if (end < begin || static_cast<std::uint64_t>(end) > csr.indices.size())
      throw InputError(fmt::format("CsrArrays::indptr: row {} runs from {} to {}", r, begin, end));
    for (std::int64_t k = begin; k < end; ++k) {
      const std::int64_t id = csr.indices[k];
      if (id < 0 || static_cast<std::uint64_t>(id) >= csr.features) {
        throw InputError(fmt::format("CsrArrays::indices: row {}: feature id {}, expected 0 to {}", r, id,
                                     static_cast<std::int64_t>(csr.features) - 1));
      }
      if (k > begin && id <= csr.indices[k - 1]) {
        throw InputError(fmt::format("CsrArrays::indices: row {}: feature ids not strictly increasing ({} after {})",
                                     r, id, csr.indices[k - 1]));
      }
      if (!std::isfinite(csr.values[k])) {
        throw InputError(
            fmt::format("CsrArrays::values: row {}, feature {}: {}, expected finite", r, id, csr.values[k]));
      }
      d.index.push_back(static_cast<std::uint32_t>(id));
      d.value.push_back(csr.values[k]);
    }
    if (bias) {
      d.index.push_back(static_cast<std::uint32_t>(csr.features));
      d.value.push_back(csr.bias);
    }
    d.row_ptr.push_back(d.index.size());
    check_label(csr, r);
    d.label.push_back(csr.labels.empty() ? 1.0f : csr.labels[r]);
  }
  return d;
}

template SparseDataset dataset_from_csr(const CsrArraysOf<std::int32_t>& csr);
template SparseDataset dataset_from_csr(const CsrArraysOf<std::int64_t>& csr);

}  // namespace asgd::sparse
