#include "asgd/sparse/generator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

#include "asgd/engine/available_memory.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::sparse {
namespace {

// Portable transforms over mt19937_64, whose raw output the standard fixes.
class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  // Uniform in [0, bound], unbiased (rejects the short last bucket).
  std::uint64_t below_or_equal(std::uint64_t bound) {
    if (bound == UINT64_MAX) return engine_();
    const std::uint64_t range = bound + 1;
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    std::uint64_t r = engine_();
    while (r >= limit) r = engine_();
    return r % range;
  }

  // N(0, 1) by Box-Muller; the second value of each pair is kept for the next call.
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// What generate_sparse holds at once: per feature a planted weight and a drawn-mark, per non-zero an id and a
// value, per example a row offset and a label.
std::uint64_t generated_bytes(const GeneratorOptions& o) {
  const auto add = [](std::uint64_t a, std::uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; };
  const std::uint64_t features = saturating_product(o.features, sizeof(float) + sizeof(std::uint64_t));
  const std::uint64_t nonzeros = saturating_product(saturating_product(o.examples, o.nnz_per_example),
                                                    sizeof(std::uint32_t) + sizeof(float));
  const std::uint64_t examples = saturating_product(o.examples, sizeof(std::uint64_t) + sizeof(float));
  return add(add(features, nonzeros), examples);
}

}  // namespace

void GeneratorOptions::validate() const {
  if (examples == 0) throw InputError("GeneratorOptions::examples 0: give at least 1");
  if (features == 0 || features - 1 > kMaxFeatureId) {
    throw InputError(fmt::format("GeneratorOptions::features {}: expected 1 to {}", features,
                                 std::uint64_t{kMaxFeatureId} + 1));
  }
  if (nnz_per_example == 0 || nnz_per_example > features) {
    throw InputError(fmt::format("GeneratorOptions::nnz_per_example {}: expected 1 to GeneratorOptions::features ({})",
                                 nnz_per_example, features));
  }
  if (!(label_noise >= 0.0f && label_noise <= 1.0f)) {
    throw InputError(fmt::format("GeneratorOptions::label_noise {}: expected a probability in [0, 1]", label_noise));
  }
  require_memory(generated_bytes(*this),
                 fmt::format("GeneratorOptions::features {} with GeneratorOptions::examples {} of "
                             "GeneratorOptions::nnz_per_example {}",
                             features, examples, nnz_per_example));
}

GeneratedData generate_sparse(const GeneratorOptions& options) {
  options.validate();
  const std::size_t n = options.examples;
  const std::uint32_t d = options.features;
  const std::uint32_t k = options.nnz_per_example;

  Random random(options.seed);
  GeneratedData out;
  out.planted_weights.resize(d);
  for (auto& w : out.planted_weights) w = static_cast<float>(random.normal());

  SparseDataset& data = out.data;
  data.num_features = d;
  data.row_ptr.reserve(n + 1);
  data.row_ptr.push_back(0);
  data.index.reserve(n * k);
  data.value.reserve(n * k);
  data.label.reserve(n);

  // chosen_in[u] == row + 1 marks feature u as already drawn for this row:
  // no clearing between rows, and O(1) membership for any nnz.
  std::vector<std::uint64_t> chosen_in(d, 0);
  const double value_scale = 1.0 / std::sqrt(static_cast<double>(k));
  for (std::size_t row = 0; row < n; ++row) {
    const std::uint64_t stamp = row + 1;
    const std::size_t begin = data.index.size();
    // Floyd's algorithm: exactly k distinct ids, each k-subset equally likely.
    for (std::uint32_t j = d - k; j < d; ++j) {
      auto t = static_cast<std::uint32_t>(random.below_or_equal(j));
      if (chosen_in[t] == stamp) t = j;
      chosen_in[t] = stamp;
      data.index.push_back(t);
    }
    std::sort(data.index.begin() + static_cast<std::ptrdiff_t>(begin), data.index.end());
    double margin = 0.0;
    for (std::size_t e = begin; e < data.index.size(); ++e) {
      const auto x = static_cast<float>(random.normal() * value_scale);
      data.value.push_back(x);
      margin += static_cast<double>(out.planted_weights[data.index[e]]) * x;
    }
    const double p_positive = 1.0 / (1.0 + std::exp(-margin));
    float label = random.uniform() < p_positive ? 1.0f : -1.0f;
    // Drawn even without noise, so that noise only flips labels and never
    // shifts the rest of the stream.
    if (random.uniform() < options.label_noise) label = -label;
    data.label.push_back(label);
    data.row_ptr.push_back(data.index.size());
  }
  return out;
}

void write_generated(const GeneratorOptions& options, const std::filesystem::path& out, std::size_t test_examples,
                     const std::filesystem::path& test_out, std::uint32_t first_id) {
  GeneratorOptions all = options;
  all.examples += test_examples;
  const GeneratedData g = generate_sparse(all);
  const std::size_t n = options.examples;
  write_libsvm(out, slice_rows(g.data, 0, n), first_id);
  if (test_examples > 0) write_libsvm(test_out, slice_rows(g.data, n, n + test_examples), first_id);
}

}  // namespace asgd::sparse
