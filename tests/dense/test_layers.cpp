// Dense layers: shapes, forward values against direct loops, and every
// layer's gradient against central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "asgd/dense/network.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::dense {
namespace {

std::vector<float> random_vector(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

std::vector<std::uint8_t> random_labels(std::size_t n, std::size_t k, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> y(n);
  for (auto& l : y) l = static_cast<std::uint8_t>(rng() % k);
  return y;
}

// Compares the analytic gradient of the mean loss with central differences
// for every parameter. The layers compute in float, so the difference step
// is 1e-2 and the loss is summed in double; with these sizes the truncation
// and rounding errors stay well below the tolerance, while a wrong index or
// a missing term (errors of order 1) does not.
void expect_gradient_matches(const Network& net, std::size_t n, std::uint64_t seed, float h = 1e-2f,
                             std::size_t allowed_kinks = 0) {
  std::vector<float> params(net.layout().size());
  net.initialize(params, seed);
  // Non-zero biases, so that their gradients are exercised off the origin.
  for (const auto& t : net.layout().tensors())
    if (t.name.ends_with(".bias"))
      for (std::size_t i = 0; i < t.elements(); ++i) params[t.offset + i] = 0.05f * static_cast<float>(i % 5) - 0.1f;
  const auto x = random_vector(n * net.input().size(), seed + 1);
  const auto y = random_labels(n, net.classes(), seed + 2);
  Workspace ws = net.workspace(n);
  std::vector<float> grad(params.size(), 0.0f);
  net.loss_and_gradient(params.data(), x.data(), y.data(), n, grad.data(), ws);

  std::size_t checked = 0, bad = 0;
  std::string first_bad;
  for (const auto& t : net.layout().tensors())
    for (std::size_t i = 0; i < t.elements(); ++i) {
      const std::size_t at = t.offset + i;
      const float keep = params[at];
      params[at] = keep + h;
      const double up = net.loss(params.data(), x.data(), y.data(), n, ws);
      params[at] = keep - h;
      const double down = net.loss(params.data(), x.data(), y.data(), n, ws);
      params[at] = keep;
      const double numeric = (up - down) / (2.0 * h);
      const double analytic = grad[at];
      ++checked;
      if (std::abs(numeric - analytic) > 2e-3 + 2e-2 * std::max(std::abs(numeric), std::abs(analytic))) {
        // A ReLU or max-pool kink inside [x - h, x + h] makes the difference
        // quotient meaningless: `allowed_kinks` of them are tolerated.
        ++bad;
        if (bad <= 3) first_bad += t.name + "[" + std::to_string(i) + "]: analytic " + std::to_string(analytic) +
                                   " numeric " + std::to_string(numeric) + "\n";
      }
    }
  EXPECT_GT(checked, 0u);
  EXPECT_LE(bad, allowed_kinks) << "of " << checked << " parameters; first:\n" << first_bad;
  if (bad > 0 && bad <= allowed_kinks) std::printf("%zu of %zu parameters near a kink\n", bad, checked);
}

TEST(DenseLayers, LenetHasTheClassicShapes) {
  const Network net = lenet5();
  EXPECT_EQ(net.num_params(), 61706u);
  EXPECT_EQ(net.classes(), 10u);
  EXPECT_EQ(net.layout()["l0.weight"].rows, 6u);
  EXPECT_EQ(net.layout()["l0.weight"].cols, 25u);
  EXPECT_EQ(net.layout()["l3.weight"].cols, 150u);
  EXPECT_EQ(net.layout()["l7.weight"].cols, 400u);
  EXPECT_EQ(net.layout()["l11.weight"].rows, 10u);
  EXPECT_NE(net.describe().find("61706 parameters"), std::string::npos);
}

TEST(DenseLayers, ShapeMismatchesAreInputErrors) {
  Network net(Shape{1, 7, 7});
  EXPECT_THROW(net.add(max_pool2()), InputError);  // 7 is odd
  EXPECT_THROW(net.add(conv2d(3, 4, 3, 0)), InputError);  // 1 channel, not 3
  EXPECT_THROW(net.add(linear(49, 10)), InputError);  // not flattened
  net.add(flatten());
  EXPECT_THROW(net.add(linear(50, 10)), InputError);
  EXPECT_NO_THROW(net.add(linear(49, 10)));
}

TEST(DenseLayers, SoftmaxCrossEntropyKnownValues) {
  const std::vector<float> logits(10, 0.5f);
  const std::vector<std::uint8_t> label{3};
  std::vector<float> d(10);
  const double loss = softmax_cross_entropy(logits.data(), label.data(), 1, 10, d.data(), 1.0f);
  EXPECT_NEAR(loss, std::log(10.0), 1e-6);
  for (std::size_t j = 0; j < 10; ++j) EXPECT_NEAR(d[j], j == 3 ? 0.1f - 1.0f : 0.1f, 1e-6);
  // Large logits stay finite (the max is subtracted first).
  const std::vector<float> big{1000.0f, 0.0f};
  const std::vector<std::uint8_t> one{1};
  EXPECT_NEAR(softmax_cross_entropy(big.data(), one.data(), 1, 2, nullptr, 0.0f), 1000.0, 1e-3);
}

// The convolution (im2col + GEMM over the channel-major batch) against a
// direct six-loop convolution, with padding and several channels.
TEST(DenseLayers, ConvolutionMatchesDirectLoops) {
  const std::size_t n = 3, ci = 2, co = 3, H = 6, Wd = 5, k = 3, pad = 1;
  Network net(Shape{ci, H, Wd});
  net.add(conv2d(ci, co, k, pad));
  std::vector<float> params = random_vector(net.layout().size(), 7);
  const auto x = random_vector(n * ci * H * Wd, 8);  // [n][ci][H][W]
  Workspace ws = net.workspace(n);
  const float* y = net.forward(params.data(), x.data(), n, ws);  // [co][n][H][W] (same size with pad 1)
  const auto& wt = net.layout()["l0.weight"];
  const auto& bt = net.layout()["l0.bias"];
  for (std::size_t s = 0; s < n; ++s)
    for (std::size_t o = 0; o < co; ++o)
      for (std::size_t oy = 0; oy < H; ++oy)
        for (std::size_t ox = 0; ox < Wd; ++ox) {
          double acc = params[bt.offset + o];
          for (std::size_t c = 0; c < ci; ++c)
            for (std::size_t ky = 0; ky < k; ++ky)
              for (std::size_t kx = 0; kx < k; ++kx) {
                const long iy = static_cast<long>(oy + ky) - static_cast<long>(pad);
                const long ix = static_cast<long>(ox + kx) - static_cast<long>(pad);
                if (iy < 0 || ix < 0 || iy >= static_cast<long>(H) || ix >= static_cast<long>(Wd)) continue;
                acc += params[wt.offset + o * ci * k * k + (c * k + ky) * k + kx] *
                       x[((s * ci + c) * H + static_cast<std::size_t>(iy)) * Wd + static_cast<std::size_t>(ix)];
              }
          EXPECT_NEAR(y[((o * n + s) * H + oy) * Wd + ox], acc, 1e-4);
        }
}

TEST(DenseLayers, MaxPoolAndFlattenForward) {
  Network net(Shape{2, 2, 4});
  net.add(max_pool2()).add(flatten());
  // Two samples, two channels, 2x4 planes.
  std::vector<float> x(2 * 2 * 2 * 4);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11);
  Workspace ws = net.workspace(2);
  const float* y = net.forward(nullptr, x.data(), 2, ws);  // [n][c * 1 * 2]
  for (std::size_t s = 0; s < 2; ++s)
    for (std::size_t c = 0; c < 2; ++c)
      for (std::size_t px = 0; px < 2; ++px) {
        const float* plane = x.data() + (s * 2 + c) * 8;
        const float expect = std::max({plane[2 * px], plane[2 * px + 1], plane[4 + 2 * px], plane[4 + 2 * px + 1]});
        EXPECT_EQ(y[s * 4 + c * 2 + px], expect);
      }
}

TEST(DenseGradients, LinearReluStack) {
  Network net(Shape{6, 1, 1});
  net.add(linear(6, 5)).add(relu()).add(linear(5, 4));
  expect_gradient_matches(net, 5, 11);
}

TEST(DenseGradients, ConvolutionWithPaddingAndChannels) {
  Network net(Shape{2, 6, 6});
  net.add(conv2d(2, 3, 3, 1)).add(flatten()).add(linear(3 * 36, 4));
  expect_gradient_matches(net, 3, 21);
}

TEST(DenseGradients, ConvolutionInputGradientThroughTwoConvolutions) {
  // The first convolution's weight gradients depend on the second's input
  // gradient (col2im), so this checks that path too.
  Network net(Shape{1, 8, 8});
  net.add(conv2d(1, 2, 3, 2)).add(conv2d(2, 3, 5, 0)).add(flatten()).add(linear(3 * 6 * 6, 3));
  expect_gradient_matches(net, 2, 31);
}

TEST(DenseGradients, MaxPoolAndRelu) {
  Network net(Shape{1, 6, 6});
  net.add(conv2d(1, 2, 3, 1)).add(relu()).add(max_pool2()).add(flatten()).add(linear(2 * 9, 3));
  expect_gradient_matches(net, 3, 41);
}

TEST(DenseGradients, LenetOnTwoImages) {
  // 61,706 parameters through two ReLU+max-pool stages: with float and a
  // step of 1e-3 a few differences straddle a kink.
  const Network net = lenet5();
  expect_gradient_matches(net, 2, 51, 1e-3f, 61706 / 1000);
}

TEST(DenseGradients, GradientIsTheMeanOverTheBatch) {
  // The gradient of a batch equals the mean of its samples' gradients.
  Network net(Shape{1, 6, 6});
  net.add(conv2d(1, 2, 3, 1)).add(relu()).add(max_pool2()).add(flatten()).add(linear(18, 3));
  std::vector<float> params(net.layout().size());
  net.initialize(params, 3);
  const auto x = random_vector(4 * 36, 4);
  const auto y = random_labels(4, 3, 5);
  Workspace ws = net.workspace(4);
  std::vector<float> batch(params.size()), one(params.size()), mean(params.size(), 0.0f);
  net.loss_and_gradient(params.data(), x.data(), y.data(), 4, batch.data(), ws);
  for (std::size_t s = 0; s < 4; ++s) {
    net.loss_and_gradient(params.data(), x.data() + s * 36, y.data() + s, 1, one.data(), ws);
    for (std::size_t i = 0; i < one.size(); ++i) mean[i] += one[i] / 4.0f;
  }
  for (std::size_t i = 0; i < mean.size(); ++i) EXPECT_NEAR(batch[i], mean[i], 1e-5) << i;
}

}  // namespace
}  // namespace asgd::dense
