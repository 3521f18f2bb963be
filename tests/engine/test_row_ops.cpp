#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "asgd/engine/consistency.hpp"
#include "asgd/engine/row_ops.hpp"
#include "asgd/engine/update_sink.hpp"

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
      double expect_aa = 0, expect_bb = 0;
      for (std::size_t k = 0; k < n; ++k) {
        expect_aa += static_cast<double>(a[off + k]) * a[off + k];
        expect_bb += static_cast<double>(b[off + k]) * b[off + k];
      }
      float gram[3] = {-1, -1, -1};
      asgd::rows::gram(a.data() + off, b.data() + off, n, gram);
      EXPECT_NEAR(gram[0], expect_aa, 1e-4) << n;
      EXPECT_NEAR(gram[1], expect_bb, 1e-4) << n;
      EXPECT_NEAR(gram[2], expect_dot, 1e-4) << n;

      std::vector<float> p(a), q(b);
      asgd::rows::bilinear_step(p.data() + off, q.data() + off, n, 0.125f, 0.75f, 0.25f, 0.5f);
      for (std::size_t k = 0; k < 80; ++k) {
        const bool in = k >= off && k < off + n;
        EXPECT_NEAR(p[k], in ? 0.75f * a[k] - 0.125f * b[k] : a[k], 1e-6) << n << " " << k;
        EXPECT_NEAR(q[k], in ? 0.5f * b[k] - 0.25f * a[k] : b[k], 1e-6) << n << " " << k;
      }

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

// The fused output-row update is the two calls it replaces, bit for bit (word2vec's vectors stay the same), for
// every length and offset, and the sink's call does the same under the Racy fast path and the Atomic fallback.
TEST(RowOps, AxpyThenAddScaledIsTheTwoCallsBitForBit) {
  std::vector<float> x0(80), y0(80), d(80);
  for (std::size_t i = 0; i < x0.size(); ++i) {
    x0[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
    y0[i] = 0.05f * static_cast<float>(i % 5) - 0.1f;
    d[i] = 0.37f * static_cast<float>(i % 3) - 0.4f;
  }
  for (std::size_t off = 0; off < 4; ++off) {
    for (std::size_t n = 0; n <= 70; ++n) {
      std::vector<float> x1(x0), y1(y0), x2(x0), y2(y0);
      asgd::rows::axpy(0.3f, x1.data() + off, y1.data() + off, n);
      asgd::rows::add_scaled(x1.data() + off, d.data() + off, -0.07f, n);
      asgd::rows::axpy_then_add_scaled(0.3f, x2.data() + off, y2.data() + off, d.data() + off, -0.07f, n);
      EXPECT_EQ(x1, x2) << n;
      EXPECT_EQ(y1, y2) << n;
    }
  }
  const auto through_sink = [&](const auto& policy) {
    std::vector<float> params(x0), out(y0);
    asgd::UpdateSink<std::decay_t<decltype(policy)>> sink(params.data(), params.size(), policy);
    sink.set_learning_rate(0.5f);
    sink.add_row_to_then_gradient(0.3f, 3, out.data(), d.data(), 70, 2.0f);
    return std::pair{params, out};
  };
  const auto [racy_params, racy_out] = through_sink(asgd::Racy{});
  const auto [atomic_params, atomic_out] = through_sink(asgd::Atomic{});
  for (std::size_t k = 0; k < 80; ++k) {  // out[k] takes params[3 + k] before the step; params[3 + k] -= d[k]
    EXPECT_FLOAT_EQ(racy_out[k], atomic_out[k]);
    EXPECT_NEAR(racy_out[k], k < 70 ? y0[k] + 0.3f * x0[k + 3] : y0[k], 1e-6) << k;
    EXPECT_NEAR(racy_params[k], k >= 3 && k < 73 ? x0[k] - d[k - 3] : x0[k], 1e-6) << k;
    EXPECT_NEAR(atomic_params[k], racy_params[k], 1e-6) << k;
  }
}

// The sink's bilinear step is the same SGD step under every policy and step
// rule: the Racy fast path (one fused kernel) against the generic chunked
// path (Atomic, Locked, AdaGrad's first step), on rows longer than a chunk.
// Row AdaGrad's first step has rate lr / sqrt(1 + 0): the same step, and the
// rows' accumulators then hold their mean squared gradients.
template <asgd::StepRule kRule = asgd::StepRule::sgd, class Policy>
std::vector<float> bilinear_through_sink(const Policy& policy) {
  const std::size_t n = 150;
  std::vector<float> params(2 * n + 3), sums(params.size(), 0.0f);
  for (std::size_t i = 0; i < params.size(); ++i) params[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
  const std::vector<float> start(params);
  asgd::UpdateSink<Policy, kRule> sink(params.data(), params.size(), policy, sums.data());
  sink.set_learning_rate(0.1f);
  EXPECT_NEAR(sink.dot(1, n + 2, n), asgd::rows::dot(params.data() + 1, params.data() + n + 2, n), 1e-6);
  sink.add_bilinear_gradient(1, n + 2, n, 0.5f, 0.2f);
  if constexpr (kRule == asgd::StepRule::row_adagrad) {
    double ga = 0, gb = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const double a = start[1 + k], b = start[n + 2 + k];
      ga += (0.5 * b + 0.2 * a) * (0.5 * b + 0.2 * a) / n;
      gb += (0.5 * a + 0.2 * b) * (0.5 * a + 0.2 * b) / n;
    }
    EXPECT_NEAR(sums[1], ga, 1e-7);
    EXPECT_NEAR(sums[n + 2], gb, 1e-7);
  }
  return params;
}

TEST(RowOps, BilinearGradientIsOneSgdStepUnderEveryPolicy) {
  const std::size_t n = 150;
  std::vector<float> start(2 * n + 3);
  for (std::size_t i = 0; i < start.size(); ++i) start[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
  std::vector<float> expect(start);
  for (std::size_t k = 0; k < n; ++k) {
    const float a = start[1 + k], b = start[n + 2 + k];
    expect[1 + k] = a - 0.1f * (0.5f * b + 0.2f * a);
    expect[n + 2 + k] = b - 0.1f * (0.5f * a + 0.2f * b);
  }
  const asgd::Racy racy;
  const asgd::Atomic atomic;
  const asgd::Locked locked(64);
  using asgd::StepRule;
  for (const auto& got : {bilinear_through_sink(racy), bilinear_through_sink(atomic), bilinear_through_sink(locked),
                          bilinear_through_sink<StepRule::row_adagrad>(racy),
                          bilinear_through_sink<StepRule::row_adagrad>(atomic),
                          bilinear_through_sink<StepRule::row_adagrad>(locked)}) {
    for (std::size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(got[i], expect[i], 1e-7) << i;
  }
}

// Row AdaGrad with a row head (LIBMF 2's 8 factors): the head and the rest of
// each row keep their own sums, in the slots of their first parameters, and
// step at their own rates; a step on the head alone leaves the rest and its
// sum as they were. Without a head, one sum per row (the test above).
TEST(RowOps, RowAdagradWithAHeadKeepsTwoSumsPerRow) {
  const std::size_t n = 20, head = 8;
  std::vector<float> params(2 * n), sums(params.size(), 0.0f);
  for (std::size_t i = 0; i < params.size(); ++i) params[i] = 0.02f * static_cast<float>(i % 7) - 0.05f;
  const std::vector<float> start(params);
  const asgd::Racy racy;
  asgd::UpdateSink<asgd::Racy, asgd::StepRule::row_adagrad> sink(params.data(), params.size(), racy, sums.data(),
                                                                  1e-8f, head);
  sink.set_learning_rate(0.1f);
  const float g = 0.5f, l2 = 0.2f;
  // Mean squared gradient of row a (against b) over [from, to), at `x`.
  auto mean_square = [&](const std::vector<float>& x, std::size_t a, std::size_t b, std::size_t from, std::size_t to) {
    double s = 0;
    for (std::size_t k = from; k < to; ++k) s += std::pow(g * x[b + k] + l2 * x[a + k], 2) / double(to - from);
    return s;
  };
  sink.add_bilinear_gradient(0, n, head, g, l2);  // the head alone (LIBMF's first epoch)
  EXPECT_NEAR(sums[0], mean_square(start, 0, n, 0, head), 1e-7);
  EXPECT_NEAR(sums[n], mean_square(start, n, 0, 0, head), 1e-7);
  for (std::size_t k = head; k < n; ++k) {
    EXPECT_EQ(params[k], start[k]) << k;
    EXPECT_EQ(params[n + k], start[n + k]) << k;
    EXPECT_EQ(sums[k], 0.0f);
  }
  const std::vector<float> before(params);
  const float head_sum = sums[0];
  sink.add_bilinear_gradient(0, n, n, g, l2);  // the whole rows: the tail's first step is at the full rate
  EXPECT_NEAR(sums[head], mean_square(before, 0, n, head, n), 1e-7);
  EXPECT_NEAR(sums[0], head_sum + mean_square(before, 0, n, 0, head), 1e-7);
  for (std::size_t k = 0; k < n; ++k) {
    const float rate = k < head ? 0.1f / std::sqrt(1.0f + head_sum) : 0.1f;
    EXPECT_NEAR(params[k], before[k] - rate * (g * before[n + k] + l2 * before[k]), 1e-7) << k;
  }
  // A row step splits the same way.
  std::vector<float> grad(n, 1.0f);
  const float tail_sum = sums[head];
  sink.add_gradient(0, grad.data(), n);
  EXPECT_NEAR(sums[head], tail_sum + 1.0f, 1e-6);
  EXPECT_NEAR(sums[0], head_sum + mean_square(before, 0, n, 0, head) + 1.0f, 1e-6);
}
