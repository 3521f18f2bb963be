#include <gtest/gtest.h>

#include <vector>

#include "asgd/engine/row_ops.hpp"

// Every length and misalignment against the obvious scalar loop.
TEST(RowOps, MatchScalarLoopsForAllLengthsAndOffsets) {
  std::vector<float> a(80), b(80);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % 7) - 3.0f;
    b[i] = 0.5f * static_cast<float>(i % 5) - 1.0f;
  }
  for (std::size_t off = 0; off < 4; ++off) {
    for (std::size_t n = 0; n <= 70; ++n) {
      double expect_dot = 0;
      for (std::size_t k = 0; k < n; ++k) expect_dot += static_cast<double>(a[off + k]) * b[off + k];
      EXPECT_NEAR(asgd::rows::dot(a.data() + off, b.data() + off, n), expect_dot, 1e-4) << n;

      std::vector<float> y(b), z(b), out(80, -9.0f);
      asgd::rows::axpy(0.25f, a.data() + off, y.data() + off, n);
      asgd::rows::add_scaled(z.data() + off, a.data() + off, 0.25f, n);
      asgd::rows::load(a.data() + off, out.data() + off, n);
      for (std::size_t k = 0; k < 80; ++k) {
        const bool in = k >= off && k < off + n;
        EXPECT_FLOAT_EQ(y[k], in ? b[k] + 0.25f * a[k] : b[k]);
        EXPECT_FLOAT_EQ(z[k], y[k]);
        EXPECT_FLOAT_EQ(out[k], in ? a[k] : -9.0f);
      }
    }
  }
  EXPECT_NE(std::string(asgd::rows::simd_level()), "");
}
