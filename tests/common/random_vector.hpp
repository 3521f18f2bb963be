// n draws of N(0, scale^2) from a seeded generator: fresh random inputs and
// parameters for the layer and parity tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace asgd::testing {

inline std::vector<float> random_vector(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

}  // namespace asgd::testing
