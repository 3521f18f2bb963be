// The dense layer set as CUDA kernels (the GEMMs are cuBLAS, in network.cpp).
// Each kernel is a grid-stride loop over its outputs; none uses atomics on
// floats, so results do not depend on scheduling.
#include <cfloat>
#include <cstdint>

#include "cuda_util.hpp"
#include "kernels.hpp"

namespace asgd::gpu::kernels {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

#define ASGD_GRID_LOOP(i, n) \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

__global__ void im2col_kernel(const float* __restrict__ in, float* __restrict__ col, ConvGeometry g) {
  const std::size_t plane = static_cast<std::size_t>(g.oh) * g.ow;
  const std::size_t per_row = static_cast<std::size_t>(g.n) * plane;
  const std::size_t total = static_cast<std::size_t>(g.c) * g.k * g.k * per_row;
  ASGD_GRID_LOOP(i, total) {
    const std::size_t row = i / per_row, rest = i % per_row;
    const int kx = static_cast<int>(row % g.k), ky = static_cast<int>((row / g.k) % g.k);
    const int ci = static_cast<int>(row / (static_cast<std::size_t>(g.k) * g.k));
    const std::size_t s = rest / plane;
    const int oy = static_cast<int>((rest % plane) / g.ow), ox = static_cast<int>(rest % g.ow);
    const int iy = oy + ky - g.pad, ix = ox + kx - g.pad;
    float v = 0.0f;
    if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
      v = in[((static_cast<std::size_t>(ci) * g.n + s) * g.h + iy) * g.w + ix];
    col[i] = v;
  }
}

__global__ void col2im_kernel(const float* __restrict__ col, float* __restrict__ din, ConvGeometry g) {
  const std::size_t plane = static_cast<std::size_t>(g.oh) * g.ow;
  const std::size_t per_row = static_cast<std::size_t>(g.n) * plane;
  const std::size_t total = static_cast<std::size_t>(g.c) * g.n * g.h * g.w;
  ASGD_GRID_LOOP(i, total) {
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
}

__global__ void row_bias_kernel(float* y, const float* __restrict__ b, std::size_t rows, std::size_t cols,
                                bool relu) {
  ASGD_GRID_LOOP(i, rows * cols) {
    const float v = y[i] + b[i / cols];
    y[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

__global__ void col_bias_kernel(float* y, const float* __restrict__ b, std::size_t n, std::size_t cols, bool relu) {
  ASGD_GRID_LOOP(i, n * cols) {
    const float v = y[i] + b[i % cols];
    y[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

__global__ void relu_forward_kernel(const float* __restrict__ in, float* __restrict__ out, std::size_t m) {
  ASGD_GRID_LOOP(i, m) out[i] = fmaxf(in[i], 0.0f);
}

__global__ void relu_backward_kernel(const float* out, const float* dout, float* din, std::size_t m) {
  ASGD_GRID_LOOP(i, m) din[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

__global__ void max_pool_forward_kernel(const float* __restrict__ in, float* __restrict__ out,
                                        std::uint8_t* __restrict__ choice, std::size_t planes, int h, int w) {
  const int oh = h / 2, ow = w / 2;
  ASGD_GRID_LOOP(i, planes * oh * ow) {
    const std::size_t p = i / (static_cast<std::size_t>(oh) * ow);
    const int y = static_cast<int>((i / ow) % oh), x = static_cast<int>(i % ow);
    const float* r0 = in + (p * h + 2 * y) * w + 2 * x;
    const float* r1 = r0 + w;
    const float a = r0[0], b = r0[1], c = r1[0], d = r1[1];
    const float top = fmaxf(a, b), bottom = fmaxf(c, d);
    const std::uint8_t t = b > a ? 1 : 0, u = d > c ? 3 : 2;
    out[i] = fmaxf(top, bottom);
    choice[i] = bottom > top ? u : t;
  }
}

__global__ void max_pool_backward_kernel(const float* __restrict__ dout, const std::uint8_t* __restrict__ choice,
                                         float* __restrict__ din, std::size_t planes, int h, int w) {
  const int oh = h / 2, ow = w / 2;
  ASGD_GRID_LOOP(i, planes * oh * ow) {
    const std::size_t p = i / (static_cast<std::size_t>(oh) * ow);
    const int y = static_cast<int>((i / ow) % oh), x = static_cast<int>(i % ow);
    float* r0 = din + (p * h + 2 * y) * w + 2 * x;
    float* r1 = r0 + w;
    const float g = dout[i];
    const std::uint8_t c = choice[i];
    r0[0] = c == 0 ? g : 0.0f;
    r0[1] = c == 1 ? g : 0.0f;
    r1[0] = c == 2 ? g : 0.0f;
    r1[1] = c == 3 ? g : 0.0f;
  }
}

// out[s][c * hw + j] = in[c][s][j]
__global__ void flatten_kernel(const float* __restrict__ in, float* __restrict__ out, int c, std::size_t n, int hw,
                               bool forward) {
  const std::size_t f = static_cast<std::size_t>(c) * hw;
  ASGD_GRID_LOOP(i, n * f) {
    const std::size_t s = i / f, ch = (i % f) / hw, j = i % hw;
    const std::size_t src = (ch * n + s) * hw + j;
    if (forward)
      out[i] = in[src];
    else
      out[src] = in[i];
  }
}

__global__ void softmax_xent_kernel(const float* __restrict__ logits, const std::uint8_t* __restrict__ labels,
                                    std::size_t n, int k, float* __restrict__ loss, float* __restrict__ dlogits,
                                    float scale) {
  ASGD_GRID_LOOP(i, n) {
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
}

// One block: sums x into *acc (kThreads partial sums, then a tree in shared memory).
__global__ void sum_kernel(const float* __restrict__ x, std::size_t n, double scale, double* acc) {
  __shared__ double part[kThreads];
  double v = 0;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) v += x[i];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) part[threadIdx.x] += part[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) *acc += scale * part[0];
}

__global__ void confusion_kernel(const float* __restrict__ logits, const std::uint8_t* __restrict__ labels,
                                 std::size_t n, int k, unsigned* counts) {
  ASGD_GRID_LOOP(i, n) {
    const float* z = logits + i * k;
    int best = 0;
    for (int j = 1; j < k; ++j)
      if (z[j] > z[best]) best = j;
    atomicAdd(counts + labels[i] * k + best, 1u);
  }
}

__global__ void gather_kernel(const float* __restrict__ images, const std::uint8_t* __restrict__ labels,
                              const std::uint32_t* __restrict__ index, std::size_t first, std::size_t n,
                              std::size_t dim, float* __restrict__ x, std::uint8_t* __restrict__ y) {
  ASGD_GRID_LOOP(i, n * dim) {
    const std::size_t s = i / dim, j = i % dim;
    const std::size_t src = index[first + s];
    x[i] = images[src * dim + j];
    if (j == 0) y[s] = labels[src];
  }
}

__global__ void fill_kernel(float* x, float value, std::size_t n) {
  ASGD_GRID_LOOP(i, n) x[i] = value;
}

__global__ void sgd_kernel(float* __restrict__ w, float* __restrict__ v, GradSum g, std::size_t n, float lr,
                           float mu, float wd) {
  ASGD_GRID_LOOP(i, n) {
    float grad = 0.0f;
    for (int j = 0; j < g.count; ++j) grad += g.weights[j] * g.grads[j][i];
    const float vi = mu * v[i] + (grad + wd * w[i]);
    v[i] = vi;
    w[i] -= lr * vi;
  }
}

}  // namespace

void im2col(const float* in, float* col, const ConvGeometry& g, cudaStream_t s) {
  const std::size_t total = static_cast<std::size_t>(g.c) * g.k * g.k * g.n * g.oh * g.ow;
  im2col_kernel<<<blocks_for(total), kThreads, 0, s>>>(in, col, g);
  ASGD_CUDA_LAUNCHED();
}

void col2im(const float* col, float* din, const ConvGeometry& g, cudaStream_t s) {
  const std::size_t total = static_cast<std::size_t>(g.c) * g.n * g.h * g.w;
  col2im_kernel<<<blocks_for(total), kThreads, 0, s>>>(col, din, g);
  ASGD_CUDA_LAUNCHED();
}

void add_row_bias(float* y, const float* b, std::size_t rows, std::size_t cols, bool relu, cudaStream_t s) {
  row_bias_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(y, b, rows, cols, relu);
  ASGD_CUDA_LAUNCHED();
}

void add_col_bias(float* y, const float* b, std::size_t n, std::size_t cols, bool relu, cudaStream_t s) {
  col_bias_kernel<<<blocks_for(n * cols), kThreads, 0, s>>>(y, b, n, cols, relu);
  ASGD_CUDA_LAUNCHED();
}

void relu_forward(const float* in, float* out, std::size_t m, cudaStream_t s) {
  relu_forward_kernel<<<blocks_for(m), kThreads, 0, s>>>(in, out, m);
  ASGD_CUDA_LAUNCHED();
}

void relu_backward(const float* out, const float* dout, float* din, std::size_t m, cudaStream_t s) {
  relu_backward_kernel<<<blocks_for(m), kThreads, 0, s>>>(out, dout, din, m);
  ASGD_CUDA_LAUNCHED();
}

void max_pool_forward(const float* in, float* out, std::uint8_t* choice, std::size_t planes, int h, int w,
                      cudaStream_t s) {
  max_pool_forward_kernel<<<blocks_for(planes * (h / 2) * (w / 2)), kThreads, 0, s>>>(in, out, choice, planes, h, w);
  ASGD_CUDA_LAUNCHED();
}

void max_pool_backward(const float* dout, const std::uint8_t* choice, float* din, std::size_t planes, int h, int w,
                       cudaStream_t s) {
  max_pool_backward_kernel<<<blocks_for(planes * (h / 2) * (w / 2)), kThreads, 0, s>>>(dout, choice, din, planes, h,
                                                                                      w);
  ASGD_CUDA_LAUNCHED();
}

void flatten_forward(const float* in, float* out, int c, std::size_t n, int hw, cudaStream_t s) {
  flatten_kernel<<<blocks_for(n * c * hw), kThreads, 0, s>>>(in, out, c, n, hw, true);
  ASGD_CUDA_LAUNCHED();
}

void flatten_backward(const float* dout, float* din, int c, std::size_t n, int hw, cudaStream_t s) {
  flatten_kernel<<<blocks_for(n * c * hw), kThreads, 0, s>>>(dout, din, c, n, hw, false);
  ASGD_CUDA_LAUNCHED();
}

void softmax_xent(const float* logits, const std::uint8_t* labels, std::size_t n, int k, float* loss, float* dlogits,
                  float scale, cudaStream_t s) {
  softmax_xent_kernel<<<blocks_for(n), kThreads, 0, s>>>(logits, labels, n, k, loss, dlogits, scale);
  ASGD_CUDA_LAUNCHED();
}

void accumulate_sum(const float* x, std::size_t n, double scale, double* acc, cudaStream_t s) {
  sum_kernel<<<1, kThreads, 0, s>>>(x, n, scale, acc);
  ASGD_CUDA_LAUNCHED();
}

void confusion(const float* logits, const std::uint8_t* labels, std::size_t n, int k, unsigned* counts,
               cudaStream_t s) {
  confusion_kernel<<<blocks_for(n), kThreads, 0, s>>>(logits, labels, n, k, counts);
  ASGD_CUDA_LAUNCHED();
}

void gather(const float* images, const std::uint8_t* labels, const std::uint32_t* index, std::size_t first,
            std::size_t n, std::size_t dim, float* x, std::uint8_t* y, cudaStream_t s) {
  gather_kernel<<<blocks_for(n * dim), kThreads, 0, s>>>(images, labels, index, first, n, dim, x, y);
  ASGD_CUDA_LAUNCHED();
}

void fill(float* x, float value, std::size_t n, cudaStream_t s) {
  fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, value, n);
  ASGD_CUDA_LAUNCHED();
}

void sgd_momentum(float* w, float* v, const GradSum& g, std::size_t n, float lr, float mu, float wd, cudaStream_t s) {
  sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(w, v, g, n, lr, mu, wd);
  ASGD_CUDA_LAUNCHED();
}

}  // namespace asgd::gpu::kernels
