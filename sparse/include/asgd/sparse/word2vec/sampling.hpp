// Random numbers for word2vec's hot loop: a small fast generator, and the
// negative sampler over unigram^0.75 as an alias table (Walker/Vose: O(1) per
// draw, 8 bytes per word instead of word2vec.c's 400 MB table).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace asgd::sparse::w2v {

// splitmix64: one multiply-xorshift chain per draw, good enough for
// sampling, seeded per sentence so that runs are reproducible.
class FastRng {
 public:
  explicit FastRng(std::uint64_t seed) noexcept : state_(seed) {}
  static std::uint64_t mix(std::uint64_t a, std::uint64_t b, std::uint64_t c) noexcept;
  std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 bits.
  float uniform() noexcept { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  // Uniform integer in [0, n) (multiply-shift; bias below 2^-32).
  std::uint32_t below(std::uint32_t n) noexcept {
    return static_cast<std::uint32_t>(((next() >> 32) * static_cast<std::uint64_t>(n)) >> 32);
  }

 private:
  std::uint64_t state_;
};

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
