// Synthetic sparse binary classification data with a planted logistic model:
// the reference problem for testing and benchmarking the engine at any size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "asgd/sparse/libsvm.hpp"

namespace asgd::sparse {

struct GeneratorOptions {
  std::size_t examples = 100000;
  std::uint32_t features = 100000;      // 1..2^31
  std::uint32_t nnz_per_example = 20;   // 1..features
  std::uint64_t seed = 1;
  float label_noise = 0.0f;             // probability of flipping a label, in [0, 1]

  // InputError naming the option that is out of its range, or the options whose data would need more memory
  // than there is (asgd::available_memory).
  void validate() const;
};

struct GeneratedData {
  SparseDataset data;                 // num_features == options.features
  std::vector<float> planted_weights;  // w*, options.features entries
};

// w* ~ N(0, 1) per feature. Each example has exactly nnz_per_example distinct
// features drawn uniformly (ids sorted) with values N(0, 1) / sqrt(nnz), so
// the margin w*.x is about N(0, 1). Its label is +1 with probability
// sigmoid(w*.x), so the classes overlap (the data is not separable and the
// unregularised optimum is finite), then flipped with probability
// label_noise. The same options give the same data: the generator uses
// std::mt19937_64 (specified by the standard) with its own uniform and normal
// transforms, not the library's distributions, whose output differs between
// standard libraries. (Results still go through std::log/cos/exp, which may
// differ in the last bit between C libraries.)
// Throws InputError for options outside the ranges above. Memory: the
// planted weights and a scratch array, 8 bytes x features.
GeneratedData generate_sparse(const GeneratorOptions& options);

// generate_sparse's examples written as libsvm files (ids from `first_id`: 1 for LIBSVM and LIBLINEAR): the first
// options.examples to `out`, and `test_examples` more from the same planted model to `test_out` (none: 0). The
// generator's InputError, write_libsvm's.
void write_generated(const GeneratorOptions& options, const std::filesystem::path& out, std::size_t test_examples = 0,
                     const std::filesystem::path& test_out = {}, std::uint32_t first_id = 0);

}  // namespace asgd::sparse
