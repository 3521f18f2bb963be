// The engine's shuffle and small generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "asgd/engine/random.hpp"

namespace asgd {
namespace {

// Replays a fixed list of draws.
struct ScriptedRng {
  static constexpr std::uint64_t min() { return 0; }
  static constexpr std::uint64_t max() { return ~std::uint64_t{0}; }
  std::vector<std::uint64_t> draws;
  std::size_t next = 0;
  std::uint64_t operator()() { return draws.at(next++); }
};

TEST(ShuffleInPlace, RejectsTheDrawsThatWouldBiasTheModulo) {
  // 2^64 mod 3 = 1: a draw of 0 is rejected for k = 3 and redrawn; for k = 2
  // (2^64 mod 2 = 0) nothing is. Draws 0, 4, 6: 4 % 3 = 1, then 6 % 2 = 0.
  std::vector<int> v = {0, 1, 2};
  ScriptedRng rng{{0, 4, 6}};
  shuffle_in_place(std::span<int>(v), rng);
  EXPECT_EQ(rng.next, 3u);
  EXPECT_EQ(v, (std::vector<int>{2, 0, 1}));  // taking 0 % 3 would give {1, 2, 0}
}

TEST(ShuffleInPlace, IsAReproduciblePermutation) {
  std::vector<std::uint32_t> a(1000), b;
  std::iota(a.begin(), a.end(), 0u);
  b = a;
  std::mt19937_64 r1(7), r2(7);
  shuffle_in_place(std::span<std::uint32_t>(a), r1);
  shuffle_in_place(std::span<std::uint32_t>(b), r2);
  EXPECT_EQ(a, b);
  std::vector<std::uint32_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  std::size_t fixed = 0;
  for (std::uint32_t i = 0; i < 1000; ++i) fixed += a[i] == i;
  EXPECT_LT(fixed, 10u);  // about 1 expected
  std::vector<int> empty, one = {5};
  shuffle_in_place(std::span<int>(empty), r1);
  shuffle_in_place(std::span<int>(one), r1);
  EXPECT_EQ(one, std::vector<int>{5});
}

TEST(FastRng, DrawsStayInRange) {
  FastRng rng(3);
  for (int i = 0; i < 10000; ++i) {
    const float u = rng.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_LT(rng.below(7), 7u);
  }
  EXPECT_NE(FastRng::mix(1, 2, 3), FastRng::mix(1, 3, 2));
}

}  // namespace
}  // namespace asgd
