// The engine's randomness: FastRng, a small generator, splitmix64 (Steele,
// Lea & Flood 2014), one add and two multiply-xorshifts per draw, fast
// enough for the hot loops of the sparse models (negative sampling, BPR's
// item draws) and seeded per sentence, example or worker, so runs are
// reproducible; and shuffle_in_place, the one Fisher-Yates shuffle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

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

// Fisher-Yates over `v`, drawing from a 64-bit generator (std::mt19937_64):
// the one shuffle of the engine and the models (shards each epoch, ratings
// at construction, splits, minibatch orders). It draws its own indices
// rather than use std::shuffle or uniform_int_distribution, whose use of the
// generator differs between standard libraries, so a seed gives the same
// order everywhere. Rejecting the lowest 2^64 mod k draws leaves a multiple
// of k values, so draw % k is uniform (a rejection is a 1 in 2^64/k event).
template <class T, class Rng>
void shuffle_in_place(std::span<T> v, Rng& rng) noexcept(noexcept(rng())) {
  static_assert(Rng::min() == 0 && Rng::max() == ~std::uint64_t{0},
                "shuffle_in_place needs a generator of full 64-bit draws (std::mt19937_64)");
  for (std::size_t k = v.size(); k > 1; --k) {
    const std::uint64_t bound = k;
    std::uint64_t x = rng();
    if (x < bound) {  // 2^64 mod bound < bound: only such draws can be rejected
      const std::uint64_t reject_below = (std::uint64_t{0} - bound) % bound;
      while (x < reject_below) x = rng();
    }
    std::swap(v[k - 1], v[static_cast<std::size_t>(x % bound)]);
  }
}

}  // namespace asgd
