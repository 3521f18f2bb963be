// Examples handed over in memory as compressed sparse row arrays (scipy.sparse.csr_matrix's indptr, indices and
// data, with a label per row) made into the SparseDataset a linear model trains on or scores, checked as a libsvm
// file is, with an optional constant bias feature (LIBLINEAR's -B) through which the model learns an intercept.
#pragma once

#include <cstdint>
#include <span>

#include "asgd/sparse/libsvm.hpp"

namespace asgd::sparse {

struct CsrArrays {
  std::span<const std::int64_t> indptr;   // rows + 1 row starts into indices/values, from 0, not decreasing
  std::span<const std::int64_t> indices;  // feature ids in 0..features-1, strictly increasing within a row
  std::span<const float> values;          // finite
  std::span<const float> labels;          // +1 or -1, one a row; empty: every row +1 (data to score, not train)
  std::uint64_t features = 0;             // the width: a weight per feature (X.shape[1])
  // > 0: every row also holds feature `features` with this value, so the data is features + 1 wide and that
  // feature's weight times `bias` is the intercept, regularised as every weight is (LIBLINEAR's -B). 0: none.
  float bias = 0;
};

// The examples as a SparseDataset (a copy: ids narrowed to 32 bits, row starts widened to 64). InputError naming
// the array (CsrArrays::indptr, ::indices, ::values, ::labels, ::features, ::bias) and the row that is wrong.
SparseDataset dataset_from_csr(const CsrArrays& csr);

}  // namespace asgd::sparse
