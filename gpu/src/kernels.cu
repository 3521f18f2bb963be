// The dense layer set as CUDA kernels (the GEMMs are cuBLAS, in network.cpp).
// The elementwise kernels are grid-stride loops over kernel_bodies.hpp, which
// the host emulation runs too; none uses atomics on floats, so results do
// not depend on scheduling.
#include <cstdint>

#include "cuda_util.hpp"
#include "kernel_bodies.hpp"
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
  ASGD_GRID_LOOP(i, body::im2col_size(g)) body::im2col(i, in, col, g);
}

__global__ void col2im_kernel(const float* __restrict__ col, float* __restrict__ din, ConvGeometry g) {
  ASGD_GRID_LOOP(i, body::image_size(g)) body::col2im(i, col, din, g);
}

__global__ void bias_kernel(float* y, const float* __restrict__ b, std::size_t m, std::size_t cols, bool per_row,
                            bool relu) {
  ASGD_GRID_LOOP(i, m) body::add_bias(i, y, b, cols, per_row, relu);
}

__global__ void relu_forward_kernel(const float* __restrict__ in, float* __restrict__ out, std::size_t m) {
  ASGD_GRID_LOOP(i, m) body::relu_forward(i, in, out);
}

__global__ void relu_backward_kernel(const float* out, const float* dout, float* din, std::size_t m) {
  ASGD_GRID_LOOP(i, m) body::relu_backward(i, out, dout, din);
}

__global__ void max_pool_forward_kernel(const float* __restrict__ in, float* __restrict__ out,
                                        std::uint8_t* __restrict__ choice, PoolGeometry g) {
  ASGD_GRID_LOOP(i, body::pooled_size(g)) body::max_pool_forward(i, in, out, choice, g);
}

__global__ void max_pool_backward_kernel(const float* __restrict__ dout, const std::uint8_t* __restrict__ choice,
                                         const float* __restrict__ pooled, float* __restrict__ din, PoolGeometry g) {
  ASGD_GRID_LOOP(i, body::pooled_size(g)) body::max_pool_backward(i, dout, choice, pooled, din, g);
}

__global__ void flatten_kernel(const float* __restrict__ in, float* __restrict__ out, int c, std::size_t n, int hw,
                               bool forward) {
  ASGD_GRID_LOOP(i, n * c * hw) body::flatten(i, in, out, c, n, hw, forward);
}

__global__ void softmax_xent_kernel(const float* __restrict__ logits, const std::uint8_t* __restrict__ labels,
                                    std::size_t n, int k, float* __restrict__ loss, float* __restrict__ dlogits,
                                    float scale) {
  ASGD_GRID_LOOP(i, n) body::softmax_xent(i, logits, labels, k, loss, dlogits, scale);
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
  ASGD_GRID_LOOP(i, n) atomicAdd(counts + labels[i] * k + body::argmax(i, logits, k), 1u);
}

__global__ void gather_kernel(const float* __restrict__ images, const std::uint8_t* __restrict__ labels,
                              const std::uint32_t* __restrict__ index, std::size_t first, std::size_t n,
                              std::size_t dim, float* __restrict__ x, std::uint8_t* __restrict__ y) {
  ASGD_GRID_LOOP(i, n * dim) body::gather(i, images, labels, index, first, dim, x, y);
}

__global__ void fill_kernel(float* x, float value, std::size_t n) {
  ASGD_GRID_LOOP(i, n) x[i] = value;
}

__global__ void sgd_kernel(float* __restrict__ w, float* __restrict__ v, GradSum g, std::size_t n, float lr,
                           float mu, float wd) {
  ASGD_GRID_LOOP(i, n) body::sgd_momentum(i, w, v, g, lr, mu, wd);
}

}  // namespace

void im2col(const float* in, float* col, const ConvGeometry& g, cudaStream_t s) {
  im2col_kernel<<<blocks_for(body::im2col_size(g)), kThreads, 0, s>>>(in, col, g);
  ASGD_CUDA_LAUNCHED();
}

void col2im(const float* col, float* din, const ConvGeometry& g, cudaStream_t s) {
  col2im_kernel<<<blocks_for(body::image_size(g)), kThreads, 0, s>>>(col, din, g);
  ASGD_CUDA_LAUNCHED();
}

void add_row_bias(float* y, const float* b, std::size_t rows, std::size_t cols, bool relu, cudaStream_t s) {
  bias_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(y, b, rows * cols, cols, true, relu);
  ASGD_CUDA_LAUNCHED();
}

void add_col_bias(float* y, const float* b, std::size_t n, std::size_t cols, bool relu, cudaStream_t s) {
  bias_kernel<<<blocks_for(n * cols), kThreads, 0, s>>>(y, b, n * cols, cols, false, relu);
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

void max_pool_forward(const float* in, float* out, std::uint8_t* choice, const PoolGeometry& g, cudaStream_t s) {
  max_pool_forward_kernel<<<blocks_for(body::pooled_size(g)), kThreads, 0, s>>>(in, out, choice, g);
  ASGD_CUDA_LAUNCHED();
}

void max_pool_backward(const float* dout, const std::uint8_t* choice, const float* pooled, float* din,
                       const PoolGeometry& g, cudaStream_t s) {
  max_pool_backward_kernel<<<blocks_for(body::pooled_size(g)), kThreads, 0, s>>>(dout, choice, pooled, din, g);
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
