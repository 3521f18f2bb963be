// Random numbers for word2vec's hot loop: the engine's FastRng, and the
// negative sampler over unigram^0.75 as an alias table (Walker/Vose: O(1) per
// draw, 8 bytes per word instead of word2vec.c's 400 MB table).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "asgd/engine/random.hpp"

namespace asgd::sparse::w2v {

class AliasSampler {
 public:
  AliasSampler() = default;
  // Draws index i with probability weights[i] / sum. Throws InputError when
  // the weights are empty, negative or all zero.
  explicit AliasSampler(std::span<const double> weights);
  // For word2vec: weights count^power.
  static AliasSampler unigram(std::span<const std::uint64_t> counts, double power = 0.75);

  std::uint32_t sample(std::uint64_t random) const noexcept {
    const auto i = static_cast<std::uint32_t>(((random >> 32) * size_) >> 32);
    const Bucket& b = buckets_[i];
    return static_cast<std::uint32_t>(random) < b.threshold ? i : b.alias;
  }
  std::size_t size() const noexcept { return size_; }
  // Exact probability of drawing i (for tests).
  double probability(std::uint32_t i) const;

 private:
  struct Bucket {
    std::uint32_t threshold;  // keep i when the low 32 random bits are below this
    std::uint32_t alias;
  };
  std::vector<Bucket> buckets_;
  std::uint64_t size_ = 0;
};

}  // namespace asgd::sparse::w2v
