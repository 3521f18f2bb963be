// Dense layers: shapes, forward values against direct loops, and every
// layer's gradient against central finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "../common/random_vector.hpp"
#include "asgd/dense/network.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::dense {
namespace {

using asgd::testing::random_vector;

std::vector<std::uint8_t> random_labels(std::size_t n, std::size_t k, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> y(n);
  for (auto& l : y) l = static_cast<std::uint8_t>(rng() % k);
  return y;
}

// A float64 reference of the same networks: plain loops, one sample at a
// time in [C][H][W] order, reading the parameters at the Network's layout
// offsets. Finite differences are taken on it in double (step 1e-6), and the
// layers' float gradients must match them. The reference's forward pass is
// checked against the layers' too, so both describe the same function.
struct Spec {
  enum Kind { conv, pool, relu_, flat, lin } kind;
  std::size_t a = 0, b = 0, k = 0, pad = 0;  // conv: in, out, k, pad; linear: in, out
};

Network build(Shape in, const std::vector<Spec>& spec) {
  Network net(in);
  for (const auto& l : spec) switch (l.kind) {
      case Spec::conv: net.add(conv2d(l.a, l.b, l.k, l.pad)); break;
      case Spec::pool: net.add(max_pool2()); break;
      case Spec::relu_: net.add(relu()); break;
      case Spec::flat: net.add(flatten()); break;
      case Spec::lin: net.add(linear(l.a, l.b)); break;
    }
  return net;
}

// Mean softmax cross-entropy of the reference network.
double reference_loss(const Network& net, const std::vector<Spec>& spec, const std::vector<double>& p,
                      const std::vector<float>& x, const std::vector<std::uint8_t>& y, std::size_t n) {
  const Layout& layout = net.layout();
  double total = 0;
  for (std::size_t s = 0; s < n; ++s) {
    Shape sh = net.input();
    std::vector<double> a(x.begin() + static_cast<std::ptrdiff_t>(s * sh.size()),
                          x.begin() + static_cast<std::ptrdiff_t>((s + 1) * sh.size()));
    for (std::size_t i = 0; i < spec.size(); ++i) {
      const Spec& l = spec[i];
      std::vector<double> out;
      const std::string name = "l" + std::to_string(i);
      if (l.kind == Spec::conv) {
        const std::size_t w = layout[name + ".weight"].offset, b = layout[name + ".bias"].offset;
        const std::size_t oh = sh.h + 2 * l.pad - l.k + 1, ow = sh.w + 2 * l.pad - l.k + 1;
        out.assign(l.b * oh * ow, 0.0);
        for (std::size_t o = 0; o < l.b; ++o)
          for (std::size_t yy = 0; yy < oh; ++yy)
            for (std::size_t xx = 0; xx < ow; ++xx) {
              double acc = p[b + o];
              for (std::size_t c = 0; c < l.a; ++c)
                for (std::size_t ky = 0; ky < l.k; ++ky)
                  for (std::size_t kx = 0; kx < l.k; ++kx) {
                    const long iy = static_cast<long>(yy + ky) - static_cast<long>(l.pad);
                    const long ix = static_cast<long>(xx + kx) - static_cast<long>(l.pad);
                    if (iy < 0 || ix < 0 || iy >= static_cast<long>(sh.h) || ix >= static_cast<long>(sh.w)) continue;
                    acc += p[w + o * l.a * l.k * l.k + (c * l.k + ky) * l.k + kx] *
                           a[(c * sh.h + static_cast<std::size_t>(iy)) * sh.w + static_cast<std::size_t>(ix)];
                  }
              out[(o * oh + yy) * ow + xx] = acc;
            }
        sh = {l.b, oh, ow};
      } else if (l.kind == Spec::pool) {
        const std::size_t oh = sh.h / 2, ow = sh.w / 2;
        out.assign(sh.c * oh * ow, 0.0);
        for (std::size_t c = 0; c < sh.c; ++c)
          for (std::size_t yy = 0; yy < oh; ++yy)
            for (std::size_t xx = 0; xx < ow; ++xx) {
              const double* base = a.data() + (c * sh.h + 2 * yy) * sh.w + 2 * xx;
              out[(c * oh + yy) * ow + xx] = std::max({base[0], base[1], base[sh.w], base[sh.w + 1]});
            }
        sh = {sh.c, oh, ow};
      } else if (l.kind == Spec::relu_) {
        out = a;
        for (auto& v : out) v = std::max(v, 0.0);
      } else if (l.kind == Spec::flat) {
        out = a;  // [C][H][W] of one sample is already the flattened order
        sh = {sh.size(), 1, 1};
      } else {
        const std::size_t w = layout[name + ".weight"].offset, b = layout[name + ".bias"].offset;
        out.assign(l.b, 0.0);
        for (std::size_t o = 0; o < l.b; ++o) {
          double acc = p[b + o];
          for (std::size_t j = 0; j < l.a; ++j) acc += p[w + o * l.a + j] * a[j];
          out[o] = acc;
        }
        sh = {l.b, 1, 1};
      }
      a = std::move(out);
    }
    const double m = *std::max_element(a.begin(), a.end());
    double sum = 0;
    for (double v : a) sum += std::exp(v - m);
    total += std::log(sum) + m - a[y[s]];
  }
  return total / static_cast<double>(n);
}

// Checks up to `max_checked` parameters (all when 0), spread over every
// tensor; `allowed_kinks` differences may straddle a ReLU or max-pool kink.
void expect_gradient_matches(Shape in, const std::vector<Spec>& spec, std::size_t n, std::uint64_t seed,
                             std::size_t max_checked = 0, std::size_t allowed_kinks = 0) {
  const Network net = build(in, spec);
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
  const double loss = net.loss_and_gradient(params.data(), x.data(), y.data(), n, grad.data(), ws);

  std::vector<double> p(params.begin(), params.end());
  EXPECT_NEAR(loss, reference_loss(net, spec, p, x, y, n), 1e-4 * std::max(1.0, loss));
  const double h = 1e-6;
  std::size_t checked = 0, bad = 0, total = 0;
  for (const auto& t : net.layout().tensors()) total += t.elements();
  const std::size_t stride = max_checked == 0 ? 1 : std::max<std::size_t>(1, total / max_checked);
  std::string first_bad;
  std::size_t index = 0;
  for (const auto& t : net.layout().tensors())
    for (std::size_t i = 0; i < t.elements(); ++i, ++index) {
      // Every tensor's first element, then every stride-th parameter.
      if (i != 0 && index % stride != 0) continue;
      const std::size_t at = t.offset + i;
      const double keep = p[at];
      p[at] = keep + h;
      const double up = reference_loss(net, spec, p, x, y, n);
      p[at] = keep - h;
      const double down = reference_loss(net, spec, p, x, y, n);
      p[at] = keep;
      const double numeric = (up - down) / (2.0 * h);
      const double analytic = grad[at];
      ++checked;
      if (std::abs(numeric - analytic) > 1e-4 + 1e-3 * std::max(std::abs(numeric), std::abs(analytic))) {
        ++bad;
        if (bad <= 3)
          first_bad += t.name + "[" + std::to_string(i) + "]: analytic " + std::to_string(analytic) + " numeric " +
                       std::to_string(numeric) + "\n";
      }
    }
  EXPECT_GT(checked, 0u);
  EXPECT_LE(bad, allowed_kinks) << "of " << checked << " parameters; first:\n" << first_bad;
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

// The GEMM work the floor divides by, counted by hand: LeNet-5's multiply-
// adds are conv1 6*25*28*28, conv2 16*150*10*10, fc 400*120 + 120*84 + 84*10.
// Training repeats each GEMM for the parameter gradient and, past the first
// layer, for the input gradient (the issue's "about 2.3 MFLOP per image").
TEST(DenseLayers, FlopsPerSampleCountTheGemms) {
  const double conv1 = 6.0 * 25 * 784, rest = 16.0 * 150 * 100 + 400 * 120 + 120 * 84 + 84 * 10;
  const auto f = lenet5().flops_per_sample();
  EXPECT_DOUBLE_EQ(f.forward, 2 * (conv1 + rest));
  EXPECT_DOUBLE_EQ(f.training, 2 * (2 * conv1 + 3 * rest));
  EXPECT_NEAR(f.training / 1e6, 2.264, 0.001);
  Network mlp(Shape{5, 1, 1});
  mlp.add(linear(5, 3)).add(relu()).add(linear(3, 2));
  EXPECT_DOUBLE_EQ(mlp.flops_per_sample().forward, 2.0 * (15 + 6));
  EXPECT_DOUBLE_EQ(mlp.flops_per_sample().training, 2.0 * (2 * 15 + 3 * 6));
}

TEST(DenseLayers, SgemmRateIsMeasured) {
  const double gflops = sgemm_gflops(96, 3, 1);
  EXPECT_GT(gflops, 0.01);  // a real timing, not a placeholder
  EXPECT_LT(gflops, 1e5);
  EXPECT_THROW(sgemm_gflops(0, 3, 1), InputError);
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

// The convolution against plain loops, on each of its three paths: direct
// with rows as vectors (in_c * k * k <= 32, kernels up to 5 x 5: rows
// shorter than, equal to and longer than one vector of 16, channel counts
// with and without a remainder of its groups of 6), direct with output
// channels as vectors (K > 32, a multiple of 16 output channels: one and
// two groups of 16, rows of 4 to 28 in one to three pixel blocks, every
// kernel width, input channels in groups of 6 with a remainder, tiles of
// more than 16 images for the input gradient's image lanes; only in builds
// with 16-lane vectors, elsewhere these cases must run as GEMM), and im2col
// + GEMM (everything else). Each case checks the path it took.
struct ConvCase {
  std::size_t n, ci, co, H, Wd, k, pad;
  const char* path;  // the layer's describe() names it
  friend void PrintTo(const ConvCase& c, std::ostream* os) {
    *os << c.n << " x " << c.ci << "@" << c.H << "x" << c.Wd << " -> " << c.co << ", " << c.k << "x" << c.k
        << " pad " << c.pad << " (" << c.path << ")";
  }
};
constexpr const char* kRows = "direct, rows";
constexpr const char* kChannels = "direct, channels";
constexpr const char* kGemm = "im2col + GEMM";

// The path a case must take in this build: the channel cases need 16 lanes.
std::string expected_path(const ConvCase& c) {
  return std::string(c.path) == kChannels && conv2d_vector_lanes() != 16 ? kGemm : c.path;
}

// The plain loops: f(o, s, oy, ox, c, iy, ix, t) for every output (o, s,
// oy, ox) and every tap t = (c, ky, kx) of it whose input pixel (iy, ix) =
// (oy + ky - pad, ox + kx - pad) lies inside the image (padding adds 0).
template <class F>
void for_each_tap(const ConvCase& cc, F&& f) {
  const std::size_t OH = cc.H + 2 * cc.pad - cc.k + 1, OW = cc.Wd + 2 * cc.pad - cc.k + 1, k = cc.k;
  for (std::size_t s = 0; s < cc.n; ++s)
    for (std::size_t o = 0; o < cc.co; ++o)
      for (std::size_t oy = 0; oy < OH; ++oy)
        for (std::size_t ox = 0; ox < OW; ++ox)
          for (std::size_t c = 0; c < cc.ci; ++c)
            for (std::size_t ky = 0; ky < k; ++ky)
              for (std::size_t kx = 0; kx < k; ++kx) {
                const long iy = static_cast<long>(oy + ky) - static_cast<long>(cc.pad);
                const long ix = static_cast<long>(ox + kx) - static_cast<long>(cc.pad);
                if (iy < 0 || ix < 0 || iy >= static_cast<long>(cc.H) || ix >= static_cast<long>(cc.Wd)) continue;
                f(o, s, oy, ox, c, static_cast<std::size_t>(iy), static_cast<std::size_t>(ix), (c * k + ky) * k + kx);
              }
}
class ConvolutionForward : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvolutionForward, MatchesDirectLoops) {
  // Named copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const ConvCase& conv_case = GetParam();
  const std::size_t n = conv_case.n, ci = conv_case.ci, co = conv_case.co, H = conv_case.H, Wd = conv_case.Wd,
                    k = conv_case.k, pad = conv_case.pad;
  Network net(Shape{ci, H, Wd});
  net.add(conv2d(ci, co, k, pad));
  EXPECT_NE(net.describe().find("(" + expected_path(GetParam()) + ")"), std::string::npos) << net.describe();
  std::vector<float> params = random_vector(net.layout().size(), 7);
  const auto x = random_vector(n * ci * H * Wd, 8);  // [n][ci][H][W]
  Workspace ws = net.workspace(n);
  const float* y = net.forward(params.data(), x.data(), n, ws);  // [co][n][OH][OW]
  const std::size_t OH = H + 2 * pad - k + 1, OW = Wd + 2 * pad - k + 1;
  const std::size_t w0 = net.layout()["l0.weight"].offset, b0 = net.layout()["l0.bias"].offset;
  std::vector<double> yr(co * n * OH * OW);
  for (std::size_t s = 0; s < n; ++s)
    for (std::size_t o = 0; o < co; ++o)
      for (std::size_t p = 0; p < OH * OW; ++p) yr[(o * n + s) * OH * OW + p] = params[b0 + o];
  for_each_tap(GetParam(), [&](std::size_t o, std::size_t s, std::size_t oy, std::size_t ox, std::size_t c,
                               std::size_t iy, std::size_t ix, std::size_t t) {
    yr[((o * n + s) * OH + oy) * OW + ox] +=
        static_cast<double>(params[w0 + o * ci * k * k + t]) * x[((s * ci + c) * H + iy) * Wd + ix];
  });
  for (std::size_t i = 0; i < yr.size(); ++i) ASSERT_NEAR(y[i], yr[i], 1e-4) << "output " << i;
}

const auto kConvCases = ::testing::Values(ConvCase{3, 2, 3, 6, 5, 3, 1, kRows},     // rows, K = 18
                                          ConvCase{2, 1, 7, 9, 37, 5, 2, kRows},    // rows, 37 wide, 6 + 1 channels
                                          ConvCase{2, 1, 6, 28, 28, 5, 2, kRows},   // rows, LeNet-5's first layer
                                          ConvCase{2, 3, 2, 7, 16, 3, 0, kRows},    // rows, 14 wide
                                          ConvCase{2, 1, 7, 8, 16, 3, 1, kRows},    // rows, 16 wide: one vector
                                          ConvCase{2, 2, 13, 5, 32, 3, 1, kRows},   // rows, 32 wide, 2 x 6 + 1
                                          ConvCase{2, 32, 17, 3, 16, 1, 0, kRows},  // rows, 1 x 1, K = 32
                                          ConvCase{2, 8, 9, 5, 17, 2, 0, kRows},    // rows, 2 x 2
                                          ConvCase{2, 2, 5, 6, 19, 4, 0, kRows},    // rows, 4 x 4
                                          ConvCase{2, 6, 16, 14, 14, 5, 0, kChannels},  // channels, LeNet-5's second
                                          ConvCase{19, 6, 16, 14, 14, 5, 0, kChannels}, // channels, 16 + 3 images
                                          ConvCase{3, 4, 32, 9, 28, 3, 1, kChannels},   // channels, 2 groups, 28 wide
                                          ConvCase{2, 3, 16, 7, 5, 5, 2, kChannels},    // channels, pad 2, 5 wide
                                          ConvCase{2, 9, 16, 6, 8, 2, 1, kChannels},    // channels, 2 x 2, 6 + 3 inputs
                                          ConvCase{2, 40, 16, 3, 4, 1, 0, kChannels},   // channels, 1 x 1, K = 40
                                          ConvCase{17, 3, 16, 7, 9, 4, 0, kChannels},   // channels, 4 x 4, 16 + 1 images
                                          ConvCase{2, 1, 2, 5, 21, 7, 3, kGemm},    // GEMM, 7 x 7: K = 49
                                          ConvCase{3, 4, 3, 6, 5, 3, 1, kGemm},     // GEMM, K = 36
                                          ConvCase{2, 6, 20, 14, 14, 5, 0, kGemm}); // GEMM, 20 outputs: not 16s
INSTANTIATE_TEST_SUITE_P(DenseLayers, ConvolutionForward, kConvCases);

// The parameter and input gradients of one layer (backward after forward,
// as the Network calls them) against the same loops in double: dW[o][c][ky][kx]
// = sum dY[o][s][oy][ox] x[c][s][iy][ix], db[o] = sum dY[o], and
// dx[c][s][iy][ix] = sum dY[o][s][oy][ox] W[o][c][ky][kx], with
// (iy, ix) = (oy + ky - pad, ox + kx - pad) inside the image.
class ConvolutionBackward : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvolutionBackward, MatchesDirectLoops) {
  // Named copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const ConvCase& conv_case = GetParam();
  const std::size_t n = conv_case.n, ci = conv_case.ci, co = conv_case.co, H = conv_case.H, Wd = conv_case.Wd,
                    k = conv_case.k, pad = conv_case.pad;
  const auto conv = conv2d(ci, co, k, pad);
  EXPECT_NE(conv->describe().find("(" + expected_path(GetParam()) + ")"), std::string::npos) << conv->describe();
  Layout layout;
  conv->declare(layout, "conv", Shape{ci, H, Wd});
  const std::size_t OH = H + 2 * pad - k + 1, OW = Wd + 2 * pad - k + 1;
  const std::vector<float> params = random_vector(layout.size(), 17);
  const auto x = random_vector(ci * n * H * Wd, 18);    // [ci][n][H][W]
  const auto dy = random_vector(co * n * OH * OW, 19);  // [co][n][OH][OW]
  std::vector<float> y(dy.size()), dx(x.size(), 7.0f), grad(layout.size(), 7.0f);
  // Scratch as a previous, larger tile would leave it: NaN wherever the
  // layer reads what it did not write this time (padding, stale lanes).
  Scratch scratch;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  scratch.a.assign(4 * (x.size() + dy.size()) + 4096, nan);
  scratch.b.assign(20 * (x.size() + dy.size()) + 4096, nan);
  conv->forward(params.data(), x.data(), y.data(), n, scratch);
  conv->backward(params.data(), x.data(), y.data(), dy.data(), dx.data(), grad.data(), n, scratch);
  const std::size_t w0 = layout["conv.weight"].offset, b0 = layout["conv.bias"].offset, K = ci * k * k;
  std::vector<double> yr(y.size(), 0.0), dw(co * K, 0.0), db(co, 0.0), dxr(x.size(), 0.0);
  for (std::size_t o = 0; o < co; ++o)
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t p = 0; p < OH * OW; ++p) {
        yr[(o * n + s) * OH * OW + p] = params[b0 + o];
        db[o] += dy[(o * n + s) * OH * OW + p];
      }
  for_each_tap(GetParam(), [&](std::size_t o, std::size_t s, std::size_t oy, std::size_t ox, std::size_t c,
                               std::size_t iy, std::size_t ix, std::size_t tap) {
    const std::size_t out = ((o * n + s) * OH + oy) * OW + ox, at = ((c * n + s) * H + iy) * Wd + ix;
    const std::size_t t = o * K + tap;
    const double d = dy[out];
    yr[out] += static_cast<double>(params[w0 + t]) * x[at];
    dw[t] += d * x[at];
    dxr[at] += d * params[w0 + t];
  });
  const auto near = [](float got, double want) { return std::abs(got - want) <= 1e-4 * std::max(1.0, std::abs(want)); };
  for (std::size_t i = 0; i < y.size(); ++i) ASSERT_PRED2(near, y[i], yr[i]) << "output " << i;
  for (std::size_t t = 0; t < co * K; ++t) ASSERT_PRED2(near, grad[w0 + t], dw[t]) << "weight " << t;
  for (std::size_t o = 0; o < co; ++o) ASSERT_PRED2(near, grad[b0 + o], db[o]) << "bias " << o;
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_PRED2(near, dx[i], dxr[i]) << "input " << i;
}

INSTANTIATE_TEST_SUITE_P(DenseLayers, ConvolutionBackward, kConvCases);

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

// Max-pool sends each window's gradient to its first maximum (top-left,
// top-right, bottom-left, bottom-right order), as the GPU kernel does: ties
// are common after a ReLU (zeros). Hand-made windows with every kind of
// tie, then ReLU'd random planes as wide as LeNet-5's (28 and 10) over
// several samples and channels, against a direct loop.
TEST(DenseLayers, MaxPoolRoutesTheGradientToTheFirstMaximum) {
  auto check = [](Shape shape, std::size_t n, const std::vector<float>& x) {
    SCOPED_TRACE(::testing::Message() << shape.c << "x" << shape.h << "x" << shape.w << " n " << n);
    const auto pool = max_pool2();
    Layout layout;
    pool->declare(layout, "pool", shape);
    const std::size_t OH = shape.h / 2, OW = shape.w / 2, outputs = shape.c * n * OH * OW;
    std::vector<float> out(outputs), dout(outputs), din(x.size(), -7.0f);
    for (std::size_t i = 0; i < outputs; ++i) dout[i] = 1.0f + static_cast<float>(i);
    Scratch scratch;
    pool->forward(nullptr, x.data(), out.data(), n, scratch);
    pool->backward(nullptr, x.data(), out.data(), dout.data(), din.data(), nullptr, n, scratch);
    std::vector<float> want(x.size(), 0.0f);
    for (std::size_t p = 0; p < shape.c * n; ++p)
      for (std::size_t oy = 0; oy < OH; ++oy)
        for (std::size_t ox = 0; ox < OW; ++ox) {
          const std::size_t i = (p * OH + oy) * OW + ox, top = (p * shape.h + 2 * oy) * shape.w + 2 * ox;
          const std::size_t at[4] = {top, top + 1, top + shape.w, top + shape.w + 1};
          const float m = std::max({x[at[0]], x[at[1]], x[at[2]], x[at[3]]});
          ASSERT_EQ(out[i], m) << i;
          std::size_t first = 0;
          while (x[at[first]] != m) ++first;
          want[at[first]] = dout[i];
        }
    EXPECT_EQ(din, want);
  };
  // Windows [a b; c d] of one 2x14 plane: all equal; b = c; c = d; b = d;
  // a = c < 0; a = b; no tie.
  check(Shape{1, 2, 14}, 1,
        {1, 1, 0, 2, 0, 0, 0, 1, -1, -2, 2, 2, 4, 1,  //
         1, 1, 2, 0, 3, 3, 0, 1, -1, -3, 0, 0, 3, 2});
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  for (const Shape shape : {Shape{6, 28, 28}, Shape{16, 10, 10}}) {
    const std::size_t n = 3;
    std::vector<float> x(shape.size() * n);
    for (float& v : x) v = std::max(normal(rng), 0.0f);
    check(shape, n, x);
  }
}

// A NaN anywhere in a window wins it, and its gradient goes there (PyTorch's max-pool): the NaN used to vanish
// unless it was the window's first value, so a diverged activation could leave the loss finite. ReLU passes the
// gradient at a NaN output, as PyTorch's threshold_backward does.
TEST(DenseLayers, MaxPoolAndReluPassANanOn) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto pool = max_pool2();
  Layout layout;
  pool->declare(layout, "pool", Shape{1, 2, 2});
  Scratch scratch;
  for (std::size_t at = 0; at < 4; ++at) {
    std::vector<float> x = {1.0f, 3.0f, 2.0f, 0.5f}, out(1), dout = {5.0f}, din(4, -1.0f);
    x[at] = nan;
    pool->forward(nullptr, x.data(), out.data(), 1, scratch);
    EXPECT_TRUE(std::isnan(out[0])) << "NaN at " << at;
    pool->backward(nullptr, x.data(), out.data(), dout.data(), din.data(), nullptr, 1, scratch);
    for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(din[k], k == at ? 5.0f : 0.0f) << "NaN at " << at << ", " << k;
  }
  // NaNs in both rows: one of them wins (the last, as PyTorch's scan), and it alone gets the gradient.
  {
    std::vector<float> x = {nan, 1.0f, 2.0f, nan}, out(1), dout = {5.0f}, din(4, -1.0f);
    pool->forward(nullptr, x.data(), out.data(), 1, scratch);
    EXPECT_TRUE(std::isnan(out[0]));
    pool->backward(nullptr, x.data(), out.data(), dout.data(), din.data(), nullptr, 1, scratch);
    EXPECT_EQ(din, (std::vector<float>{0.0f, 0.0f, 0.0f, 5.0f}));
  }
  const auto relu_layer = relu();
  Layout relu_layout;
  relu_layer->declare(relu_layout, "relu", Shape{1, 1, 3});
  const std::vector<float> x = {nan, -1.0f, 2.0f}, dout = {7.0f, 7.0f, 7.0f};
  std::vector<float> out(3), din(3);
  relu_layer->forward(nullptr, x.data(), out.data(), 1, scratch);
  EXPECT_TRUE(std::isnan(out[0]));
  relu_layer->backward(nullptr, x.data(), out.data(), dout.data(), din.data(), nullptr, 1, scratch);
  EXPECT_EQ(din, (std::vector<float>{7.0f, 0.0f, 7.0f}));
}

TEST(DenseGradients, LinearReluStack) {
  expect_gradient_matches(Shape{6, 1, 1}, {{Spec::lin, 6, 5}, {Spec::relu_}, {Spec::lin, 5, 4}}, 5, 11);
}

TEST(DenseGradients, ConvolutionWithPaddingAndChannels) {
  expect_gradient_matches(Shape{2, 6, 6}, {{Spec::conv, 2, 3, 3, 1}, {Spec::flat}, {Spec::lin, 3 * 36, 4}}, 3, 21);
}

TEST(DenseGradients, ConvolutionInputGradientThroughTwoConvolutions) {
  // The first convolution's weight gradients depend on the second's input
  // gradient (col2im), so this checks that path too.
  expect_gradient_matches(Shape{1, 8, 8},
                          {{Spec::conv, 1, 2, 3, 2}, {Spec::conv, 2, 3, 5, 0}, {Spec::flat}, {Spec::lin, 3 * 36, 3}},
                          2, 31);
}

TEST(DenseGradients, DirectConvolutionsWithInputGradientsAndLongRows) {
  // Both convolutions take the direct path (K = 9 and 18); the second one's
  // input gradient feeds the first's weight gradient; rows of 20 and 18
  // outputs span two vectors; 7 channels leave a remainder of every group.
  expect_gradient_matches(Shape{1, 4, 20},
                          {{Spec::conv, 1, 2, 3, 1}, {Spec::conv, 2, 7, 3, 0}, {Spec::flat}, {Spec::lin, 7 * 36, 3}},
                          2, 61);
}

TEST(DenseGradients, DirectConvolutionsOfEveryKernelWidth) {
  // The direct weight gradient keeps 16 / k channels at a time: 1 x 1 (16 +
  // 1 channels), 2 x 2 (8 + 1) and 4 x 4 (4 + 1), rows of 16 to 36 outputs.
  expect_gradient_matches(Shape{4, 3, 16},
                          {{Spec::conv, 4, 4, 1, 0}, {Spec::conv, 4, 17, 1, 1}, {Spec::flat}, {Spec::lin, 17 * 90, 3}},
                          2, 71);
  expect_gradient_matches(Shape{2, 4, 17},
                          {{Spec::conv, 2, 8, 2, 0}, {Spec::conv, 8, 9, 2, 1}, {Spec::flat}, {Spec::lin, 9 * 68, 3}},
                          2, 72);
  expect_gradient_matches(Shape{2, 5, 35},
                          {{Spec::conv, 2, 2, 4, 2}, {Spec::conv, 2, 5, 4, 0}, {Spec::flat}, {Spec::lin, 5 * 99, 3}},
                          2, 73);
}

TEST(DenseGradients, MaxPoolAndRelu) {
  expect_gradient_matches(
      Shape{1, 6, 6},
      {{Spec::conv, 1, 2, 3, 1}, {Spec::relu_}, {Spec::pool}, {Spec::flat}, {Spec::lin, 2 * 9, 3}}, 3, 41);
}

TEST(DenseGradients, LenetOnTwoImages) {
  // LeNet-5 itself: 1,500 of its 61,706 parameters, spread over all tensors.
  const std::vector<Spec> lenet{{Spec::conv, 1, 6, 5, 2}, {Spec::relu_},         {Spec::pool},
                                {Spec::conv, 6, 16, 5, 0}, {Spec::relu_},        {Spec::pool},
                                {Spec::flat},              {Spec::lin, 400, 120}, {Spec::relu_},
                                {Spec::lin, 120, 84},      {Spec::relu_},        {Spec::lin, 84, 10}};
  EXPECT_EQ(build(Shape{1, 28, 28}, lenet).layout(), lenet5().layout());
  expect_gradient_matches(Shape{1, 28, 28}, lenet, 2, 51, 1500);
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

TEST(DenseGradients, TiledBatchesGiveTheWholeBatchGradient) {
  // A batch larger than the workspace runs in tiles (3 + 3 + 1 samples, 1 x 7,
  // or Network::kTile with an empty workspace): same loss, same gradient.
  Network net(Shape{2, 6, 6});  // two channels: the input is reordered per tile
  net.add(conv2d(2, 3, 3, 1)).add(relu()).add(max_pool2()).add(flatten()).add(linear(27, 4));
  std::vector<float> params(net.layout().size());
  net.initialize(params, 5);
  const std::size_t n = 7;
  const auto x = random_vector(n * 72, 6);
  const auto y = random_labels(n, 4, 7);
  Workspace whole = net.workspace(n);
  std::vector<float> expected(params.size());
  const double loss = net.loss_and_gradient(params.data(), x.data(), y.data(), n, expected.data(), whole);
  for (std::size_t capacity : {3u, 1u, 0u}) {
    Workspace ws = capacity ? net.workspace(capacity) : Workspace{};
    std::vector<float> grad(params.size(), 123.0f);  // the tensors are overwritten, not added to
    EXPECT_NEAR(net.loss_and_gradient(params.data(), x.data(), y.data(), n, grad.data(), ws), loss, 1e-6);
    for (const auto& t : net.layout().tensors())
      for (std::size_t i = t.offset; i < t.offset + t.elements(); ++i)
        ASSERT_NEAR(grad[i], expected[i], 1e-6) << capacity << " " << t.name << " " << i;
    EXPECT_EQ(ws.capacity, capacity ? capacity : std::min(n, Network::kTile));  // tiles never grow it
  }
}

TEST(DenseGradients, TheGradientDoesNotDependOnWhereTheBuffersLie) {
  // Bit for bit the same gradient whatever the alignment of the parameters,
  // the gradient buffer and the workspace: runs of one seed then agree
  // across builds and heaps. The padding between tensors gets zeros.
  const Network net = lenet5();
  const std::size_t P = net.layout().size(), n = 40;  // tiles of 16, 16 and 8
  std::vector<float> params(P);
  net.initialize(params, 9);
  const auto x = random_vector(n * 784, 10);
  const auto y = random_labels(n, 10, 11);
  std::vector<float> expected;
  std::vector<float> p_buf(P + 16), g_buf(P + 16);
  for (std::size_t shift = 0; shift < 16; shift += 3) {
    std::copy(params.begin(), params.end(), p_buf.begin() + static_cast<std::ptrdiff_t>(shift));
    std::fill(g_buf.begin(), g_buf.end(), std::nanf(""));
    const std::size_t g_shift = (shift * 7) % 16;
    std::vector<Workspace> keep(shift);  // moves the next workspace's buffers elsewhere on the heap
    for (std::size_t i = 0; i < shift; ++i) keep[i] = net.workspace(1 + i);
    Workspace ws;
    net.loss_and_gradient(p_buf.data() + shift, x.data(), y.data(), n, g_buf.data() + g_shift, ws);
    const std::vector<float> grad(g_buf.begin() + static_cast<std::ptrdiff_t>(g_shift),
                                  g_buf.begin() + static_cast<std::ptrdiff_t>(g_shift + P));
    for (const float g : grad) ASSERT_TRUE(std::isfinite(g)) << "a padding value was left as it was";
    if (expected.empty()) {
      expected = grad;
      continue;
    }
    for (std::size_t i = 0; i < P; ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(grad[i]), std::bit_cast<std::uint32_t>(expected[i]))
          << "parameters +" << shift << " floats, gradient +" << g_shift << ": entry " << i;
  }
  std::size_t end = 0;
  for (const auto& t : net.layout().tensors()) {
    for (std::size_t i = end; i < t.offset; ++i) EXPECT_EQ(expected[i], 0.0f) << i;
    end = t.offset + t.span();
  }
}

}  // namespace
}  // namespace asgd::dense
