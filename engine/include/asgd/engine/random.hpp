// The engine's small random generator: splitmix64 (Steele, Lea & Flood
// 2014), one add and two multiply-xorshifts per draw. Fast enough for the
// hot loops of the sparse models (negative sampling, BPR's item draws) and
// seeded per sentence, example or worker, so runs are reproducible.
#pragma once

#include <cstdint>

namespace asgd {

class FastRng {
 public:
  explicit FastRng(std::uint64_t seed) noexcept : state_(seed) {}
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
  // A seed from three numbers (a run's seed, an epoch, an example...):
  // distinct, well-mixed streams for distinct inputs.
  static std::uint64_t mix(std::uint64_t a, std::uint64_t b, std::uint64_t c) noexcept {
    FastRng r(a);
    FastRng s(r.next() ^ b);
    FastRng t(s.next() ^ c);
    return t.next();
  }

 private:
  std::uint64_t state_;
};

}  // namespace asgd
