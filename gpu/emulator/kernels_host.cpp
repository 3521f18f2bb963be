// kernels.hpp on the host, for the emulated backend: every launch queues,
// on its stream, a loop running the kernel's body (kernel_bodies.hpp, the
// code each GPU thread runs) for every element.
#include <cstdint>
#include <functional>
#include <utility>

#include "emulator.hpp"
#include "../src/cuda_util.hpp"

#include "../src/kernel_bodies.hpp"
#include "../src/kernels.hpp"

// Operand p of `elements` elements of its type must lie in one device allocation (emulator::require_operand).
#define ASGD_OPERAND(p, elements) ::asgd::gpu::emulator::require_operand((p), (elements) * sizeof(*(p)), #p)

namespace asgd::gpu::kernels {
namespace {

// A launch and its check, as kernels.cu writes each: the check reads the thread's last error, so an error a failed
// call left there shows here as it would on a GPU.
void launch(cudaStream_t s, std::function<void()> body) {
  emulator::launch(s, std::move(body));
  ASGD_CUDA_LAUNCHED();
}

}  // namespace

void im2col(const float* in, float* col, const ConvGeometry& g, cudaStream_t s) {
  ASGD_OPERAND(in, body::image_size(g));
  ASGD_OPERAND(col, body::im2col_size(g));
  launch(s, [=] {
    for (std::size_t i = 0, m = body::im2col_size(g); i < m; ++i) body::im2col(i, in, col, g);
  });
}

void col2im(const float* col, float* din, const ConvGeometry& g, cudaStream_t s) {
  ASGD_OPERAND(col, body::im2col_size(g));
  ASGD_OPERAND(din, body::image_size(g));
  launch(s, [=] {
    for (std::size_t i = 0, m = body::image_size(g); i < m; ++i) body::col2im(i, col, din, g);
  });
}

void add_row_bias(float* y, const float* b, std::size_t rows, std::size_t cols, bool relu, cudaStream_t s) {
  ASGD_OPERAND(y, rows * cols);
  ASGD_OPERAND(b, rows);
  launch(s, [=] {
    for (std::size_t i = 0; i < rows * cols; ++i) body::add_bias(i, y, b, cols, true, relu);
  });
}

void add_col_bias(float* y, const float* b, std::size_t n, std::size_t cols, bool relu, cudaStream_t s) {
  ASGD_OPERAND(y, n * cols);
  ASGD_OPERAND(b, cols);
  launch(s, [=] {
    for (std::size_t i = 0; i < n * cols; ++i) body::add_bias(i, y, b, cols, false, relu);
  });
}

void relu_forward(const float* in, float* out, std::size_t m, cudaStream_t s) {
  ASGD_OPERAND(in, m);
  ASGD_OPERAND(out, m);
  launch(s, [=] {
    for (std::size_t i = 0; i < m; ++i) body::relu_forward(i, in, out);
  });
}

void relu_backward(const float* out, const float* dout, float* din, std::size_t m, cudaStream_t s) {
  ASGD_OPERAND(out, m);
  ASGD_OPERAND(dout, m);
  ASGD_OPERAND(din, m);
  launch(s, [=] {
    for (std::size_t i = 0; i < m; ++i) body::relu_backward(i, out, dout, din);
  });
}

void max_pool_forward(const float* in, float* out, std::uint8_t* choice, const PoolGeometry& g, cudaStream_t s) {
  ASGD_OPERAND(in, static_cast<std::size_t>(g.c) * g.n * g.h * g.w);
  ASGD_OPERAND(out, body::pooled_size(g));
  ASGD_OPERAND(choice, body::pooled_size(g));
  launch(s, [=] {
    for (std::size_t i = 0, m = body::pooled_size(g); i < m; ++i) body::max_pool_forward(i, in, out, choice, g);
  });
}

void max_pool_backward(const float* dout, const std::uint8_t* choice, const float* pooled, float* din,
                       const PoolGeometry& g, cudaStream_t s) {
  ASGD_OPERAND(dout, body::pooled_size(g));
  ASGD_OPERAND(choice, body::pooled_size(g));
  if (pooled != nullptr) ASGD_OPERAND(pooled, body::pooled_size(g));
  ASGD_OPERAND(din, static_cast<std::size_t>(g.c) * g.n * g.h * g.w);
  launch(s, [=] {
    for (std::size_t i = 0, m = body::pooled_size(g); i < m; ++i)
      body::max_pool_backward(i, dout, choice, pooled, din, g);
  });
}

void flatten_forward(const float* in, float* out, int c, std::size_t n, int hw, cudaStream_t s) {
  ASGD_OPERAND(in, n * c * hw);
  ASGD_OPERAND(out, n * c * hw);
  launch(s, [=] {
    for (std::size_t i = 0, m = n * c * hw; i < m; ++i) body::flatten(i, in, out, c, n, hw, true);
  });
}

void flatten_backward(const float* dout, float* din, int c, std::size_t n, int hw, cudaStream_t s) {
  ASGD_OPERAND(dout, n * c * hw);
  ASGD_OPERAND(din, n * c * hw);
  launch(s, [=] {
    for (std::size_t i = 0, m = n * c * hw; i < m; ++i) body::flatten(i, dout, din, c, n, hw, false);
  });
}

void softmax_xent(const float* logits, const std::uint8_t* labels, std::size_t n, int k, float* loss, float* dlogits,
                  float scale, cudaStream_t s) {
  ASGD_OPERAND(logits, n * k);
  ASGD_OPERAND(labels, n);
  ASGD_OPERAND(loss, n);
  if (dlogits != nullptr) ASGD_OPERAND(dlogits, n * k);
  launch(s, [=] {
    for (std::size_t i = 0; i < n; ++i) body::softmax_xent(i, logits, labels, k, loss, dlogits, scale);
  });
}

void accumulate_sum(const float* x, std::size_t n, double scale, double* acc, cudaStream_t s) {
  ASGD_OPERAND(x, n);
  ASGD_OPERAND(acc, 1);
  launch(s, [=] {
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += x[i];
    *acc += scale * sum;
  });
}

void confusion(const float* logits, const std::uint8_t* labels, std::size_t n, int k, unsigned* counts,
               cudaStream_t s) {
  ASGD_OPERAND(logits, n * k);
  ASGD_OPERAND(labels, n);
  ASGD_OPERAND(counts, static_cast<std::size_t>(k) * k);
  launch(s, [=] {
    for (std::size_t i = 0; i < n; ++i) ++counts[labels[i] * k + body::argmax(i, logits, k)];
  });
}

void gather(const float* images, const std::uint8_t* labels, const std::uint32_t* index, std::size_t first,
            std::size_t n, std::size_t dim, float* x, std::uint8_t* y, cudaStream_t s) {
  // Which images are read depends on the index's values: only their first row is checked here.
  ASGD_OPERAND(index, first + n);
  ASGD_OPERAND(x, n * dim);
  ASGD_OPERAND(y, n);
  ASGD_OPERAND(images, dim);
  ASGD_OPERAND(labels, 1);
  launch(s, [=] {
    for (std::size_t i = 0; i < n * dim; ++i) body::gather(i, images, labels, index, first, dim, x, y);
  });
}

void fill(float* x, float value, std::size_t n, cudaStream_t s) {
  ASGD_OPERAND(x, n);
  launch(s, [=] {
    for (std::size_t i = 0; i < n; ++i) x[i] = value;
  });
}

void sgd_momentum(float* w, float* v, const GradSum& g, std::size_t n, float lr, float mu, float wd, cudaStream_t s) {
  ASGD_OPERAND(w, n);
  ASGD_OPERAND(v, n);
  for (int j = 0; j < g.count; ++j) ASGD_OPERAND(g.grads[j], n);
  launch(s, [=] {
    for (std::size_t i = 0; i < n; ++i) body::sgd_momentum(i, w, v, g, lr, mu, wd);
  });
}

}  // namespace asgd::gpu::kernels
