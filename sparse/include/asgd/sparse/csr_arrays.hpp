// Examples handed over in memory as compressed sparse row arrays (scipy.sparse.csr_matrix's indptr, indices and
// data, with a label per row) made into the SparseDataset a linear model trains on or scores, checked as a libsvm
// file is, with an optional constant bias feature (LIBLINEAR's -B) through which the model learns an intercept.
#pragma once

#include <cstdint>
#include <span>

#include "asgd/sparse/libsvm.hpp"

namespace asgd::sparse {

// Index: scipy's index type, std::int32_t (until 2^31 non-zeros) or std::int64_t, taken as it is (a conversion of
// 20M ids to int64 took 0.4 s, a tenth of a fit of 1M examples).
template <class Index>
struct CsrArraysOf {
  std::span<const Index> indptr;   // rows + 1 row starts into indices/values, from 0, not decreasing
  std::span<const Index> indices;  // feature ids in 0..features-1, strictly increasing within a row
  std::span<const float> values;          // finite
  std::span<const float> labels;          // +1 or -1, one a row; empty: every row +1 (data to score, not train)
  std::uint64_t features = 0;             // the width: a weight per feature (X.shape[1])
  // > 0: every row also holds feature `features` with this value, so the data is features + 1 wide and that
  // feature's weight times `bias` is the intercept, regularised as every weight is (LIBLINEAR's -B). 0: none.
  float bias = 0;
};

// The examples as a SparseDataset (a copy: ids narrowed to 32 bits, row starts widened to 64). InputError naming
// the array (CsrArrays::indptr, ::indices, ::values, ::labels, ::features, ::bias) and the row that is wrong.
template <class Index>
SparseDataset dataset_from_csr(const CsrArraysOf<Index>& csr);
extern template SparseDataset dataset_from_csr(const CsrArraysOf<std::int32_t>& csr);
extern template SparseDataset dataset_from_csr(const CsrArraysOf<std::int64_t>& csr);

using CsrArrays = CsrArraysOf<std::int64_t>;
using CsrArrays32 = CsrArraysOf<std::int32_t>;

}  // namespace asgd::sparse
