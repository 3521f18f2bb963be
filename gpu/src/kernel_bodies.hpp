// What one thread of each elementwise kernel does, for element i: the CUDA
// kernels (kernels.cu) run these in grid-stride loops, and the host
// emulation (emulator/kernels_host.cpp) runs them in plain loops, so the
// index arithmetic the GPU uses is the one the CPU-side tests execute.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels.hpp"

#if defined(__CUDACC__)
#define ASGD_HD __host__ __device__ __forceinline__
#else
#define ASGD_HD inline
#endif

namespace asgd::gpu::kernels::body {

ASGD_HD std::size_t im2col_size(const ConvGeometry& g) {
  return static_cast<std::size_t>(g.c) * g.k * g.k * g.n * g.oh * g.ow;
}
ASGD_HD std::size_t image_size(const ConvGeometry& g) { return static_cast<std::size_t>(g.c) * g.n * g.h * g.w; }

// col[(ci, ky, kx)][(s, oy, ox)] for i < im2col_size(g).
ASGD_HD void im2col(std::size_t i, const float* __restrict__ in, float* __restrict__ col, const ConvGeometry& g) {
  const std::size_t plane = static_cast<std::size_t>(g.oh) * g.ow;
  const std::size_t per_row = static_cast<std::size_t>(g.n) * plane;
  const std::size_t row = i / per_row, rest = i % per_row;
  const int kx = static_cast<int>(row % g.k), ky = static_cast<int>((row / g.k) % g.k);
  const int ci = static_cast<int>(row / (static_cast<std::size_t>(g.k) * g.k));
  const std::size_t s = rest / plane;
  const int oy = static_cast<int>((rest % plane) / g.ow), ox = static_cast<int>(rest % g.ow);
  const int iy = oy + ky - g.pad, ix = ox + kx - g.pad;
  float v = 0.0f;
  if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) v = in[((static_cast<std::size_t>(ci) * g.n + s) * g.h + iy) * g.w + ix];
  col[i] = v;
}

// din[ci][s][iy][ix] for i < image_size(g): the sum of the col entries it fed.
ASGD_HD void col2im(std::size_t i, const float* __restrict__ col, float* __restrict__ din, const ConvGeometry& g) {
  const std::size_t plane = static_cast<std::size_t>(g.oh) * g.ow;
  const std::size_t per_row = static_cast<std::size_t>(g.n) * plane;
  const int ix = static_cast<int>(i % g.w), iy = static_cast<int>((i / g.w) % g.h);
  const std::size_t s = (i / (static_cast<std::size_t>(g.w) * g.h)) % g.n;
  const int ci = static_cast<int>(i / (static_cast<std::size_t>(g.w) * g.h * g.n));
  float sum = 0.0f;
  for (int ky = 0; ky < g.k; ++ky) {
    const int oy = iy - ky + g.pad;
    if (oy < 0 || oy >= g.oh) continue;
    for (int kx = 0; kx < g.k; ++kx) {
      const int ox = ix - kx + g.pad;
      if (ox < 0 || ox >= g.ow) continue;
      const std::size_t row = (static_cast<std::size_t>(ci) * g.k + ky) * g.k + kx;
      sum += col[row * per_row + s * plane + static_cast<std::size_t>(oy) * g.ow + ox];
    }
  }
  din[i] = sum;
}

// std::max's rule, as dense/ computes: a < b ? b : a. A NaN in `a` passes on, so a NaN activation reaches the
// loss and stops training as on the CPU; fmaxf would turn it into the other operand (IEEE maxNum), and a run
// with NaN weights would go on looking healthy.
ASGD_HD float max_as_cpu(float a, float b) { return a < b ? b : a; }

// y[i] += b[i / cols] (row bias) or b[i % cols] (column bias), then ReLU when asked.
ASGD_HD void add_bias(std::size_t i, float* y, const float* __restrict__ b, std::size_t cols, bool per_row,
                      bool relu) {
  const float v = y[i] + b[per_row ? i / cols : i % cols];
  y[i] = relu ? max_as_cpu(v, 0.0f) : v;
}

ASGD_HD void relu_forward(std::size_t i, const float* __restrict__ in, float* __restrict__ out) {
  out[i] = max_as_cpu(in[i], 0.0f);
}

// As dense/: the gradient passes unless the output is at or below 0 (a NaN passes it, as in PyTorch).
ASGD_HD void relu_backward(std::size_t i, const float* out, const float* dout, float* din) {
  din[i] = out[i] <= 0.0f ? 0.0f : dout[i];
}

ASGD_HD std::size_t pooled_size(const PoolGeometry& g) {
  return static_cast<std::size_t>(g.c) * g.n * (g.h / 2) * (g.w / 2);
}

// Where pooled output i (counted over the planes [c][n]) is stored: at i,
// or flattened, at its place in [n][c * plane].
ASGD_HD std::size_t pooled_at(std::size_t i, const PoolGeometry& g) {
  if (!g.flatten) return i;
  const std::size_t plane = static_cast<std::size_t>(g.h / 2) * (g.w / 2);
  const std::size_t p = i / plane, channel = p / g.n, sample = p % g.n;
  return (sample * g.c + channel) * plane + i % plane;
}

// Output i of 2x2 max pooling; the winner 0..3 (the first on ties, a NaN
// anywhere, as dense/ and PyTorch) goes to choice[i].
ASGD_HD void max_pool_forward(std::size_t i, const float* __restrict__ in, float* __restrict__ out,
                              std::uint8_t* __restrict__ choice, const PoolGeometry& g) {
  const int oh = g.h / 2, ow = g.w / 2;
  const std::size_t p = i / (static_cast<std::size_t>(oh) * ow);
  const int y = static_cast<int>((i / ow) % oh), x = static_cast<int>(i % ow);
  const float* r0 = in + (p * g.h + 2 * y) * g.w + 2 * x;
  const float* r1 = r0 + g.w;
  const float a = r0[0], b = r0[1], c = r1[0], d = r1[1];
  const bool right_top = b > a || b != b, right_bottom = d > c || d != d;
  const float top = right_top ? b : a, bottom = right_bottom ? d : c;
  const bool lower = bottom > top || bottom != bottom;
  out[pooled_at(i, g)] = lower ? bottom : top;
  choice[i] = lower ? (right_bottom ? 3 : 2) : (right_top ? 1 : 0);
}

// The 2x2 window of output i: the gradient to the winner (0 when `pooled`
// is given, a ReLU's output pooled, and the window's maximum is at or below
// 0, as relu_backward), zeros elsewhere.
ASGD_HD void max_pool_backward(std::size_t i, const float* __restrict__ dout, const std::uint8_t* __restrict__ choice,
                               const float* __restrict__ pooled, float* __restrict__ din, const PoolGeometry& g) {
  const int oh = g.h / 2, ow = g.w / 2;
  const std::size_t p = i / (static_cast<std::size_t>(oh) * ow);
  const int y = static_cast<int>((i / ow) % oh), x = static_cast<int>(i % ow);
  float* r0 = din + (p * g.h + 2 * y) * g.w + 2 * x;
  float* r1 = r0 + g.w;
  const std::size_t at = pooled_at(i, g);
  const float grad = pooled != nullptr && pooled[at] <= 0.0f ? 0.0f : dout[at];
  const std::uint8_t c = choice[i];
  r0[0] = c == 0 ? grad : 0.0f;
  r0[1] = c == 1 ? grad : 0.0f;
  r1[0] = c == 2 ? grad : 0.0f;
  r1[1] = c == 3 ? grad : 0.0f;
}

// [C][n][hw] -> [n][C * hw] (forward) or back, for i < n * c * hw.
ASGD_HD void flatten(std::size_t i, const float* __restrict__ in, float* __restrict__ out, int c, std::size_t n,
                     int hw, bool forward) {
  const std::size_t f = static_cast<std::size_t>(c) * hw;
  const std::size_t s = i / f, ch = (i % f) / hw, j = i % hw;
  const std::size_t src = (ch * n + s) * hw + j;
  if (forward)
    out[i] = in[src];
  else
    out[src] = in[i];
}

// Sample i: its loss and, when dlogits is not null, (softmax - onehot) * scale.
ASGD_HD void softmax_xent(std::size_t i, const float* __restrict__ logits, const std::uint8_t* __restrict__ labels,
                          int k, float* __restrict__ loss, float* __restrict__ dlogits, float scale) {
  const float* z = logits + i * k;
  float m = -FLT_MAX;
  for (int j = 0; j < k; ++j) m = fmaxf(m, z[j]);
  double sum = 0;
  for (int j = 0; j < k; ++j) sum += exp(static_cast<double>(z[j] - m));
  const double log_sum = log(sum) + m;
  const int label = labels[i];
  loss[i] = static_cast<float>(log_sum - z[label]);
  if (dlogits != nullptr) {
    float* d = dlogits + i * k;
    for (int j = 0; j < k; ++j) d[j] = static_cast<float>(exp(static_cast<double>(z[j]) - log_sum)) * scale;
    d[label] -= scale;
  }
}

// The predicted class of sample i (the first maximum).
ASGD_HD int argmax(std::size_t i, const float* __restrict__ logits, int k) {
  const float* z = logits + i * k;
  int best = 0;
  for (int j = 1; j < k; ++j)
    if (z[j] > z[best]) best = j;
  return best;
}

// Element i of the minibatch x (n x dim) and, at its row's first element, its label.
ASGD_HD void gather(std::size_t i, const float* __restrict__ images, const std::uint8_t* __restrict__ labels,
                    const std::uint32_t* __restrict__ index, std::size_t first, std::size_t dim,
                    float* __restrict__ x, std::uint8_t* __restrict__ y) {
  const std::size_t s = i / dim, j = i % dim;
  const std::size_t src = index[first + s];
  x[i] = images[src * dim + j];
  if (j == 0) y[s] = labels[src];
}

// g = sum_j weight[j] grads[j][i];  v = mu v + (g + wd w);  w -= lr v.
ASGD_HD void sgd_momentum(std::size_t i, float* __restrict__ w, float* __restrict__ v, const GradSum& g, float lr,
                          float mu, float wd) {
  float grad = 0.0f;
  for (int j = 0; j < g.count; ++j) grad += g.weights[j] * g.grads[j][i];
  const float vi = mu * v[i] + (grad + wd * w[i]);
  v[i] = vi;
  w[i] -= lr * vi;
}

}  // namespace asgd::gpu::kernels::body
