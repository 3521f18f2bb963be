#include "network.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "asgd/engine/errors.hpp"
#include "kernels.hpp"

namespace asgd::gpu::detail {

using dense::LayerSpec;
using Kind = LayerSpec::Kind;

namespace {

kernels::ConvGeometry geometry(const LayerSpec& s, std::size_t n) {
  return {static_cast<int>(s.in.c), static_cast<int>(s.in.h), static_cast<int>(s.in.w), static_cast<int>(s.kernel),
          static_cast<int>(s.pad),  static_cast<int>(s.out.h), static_cast<int>(s.out.w), static_cast<int>(n)};
}

}  // namespace

GpuNetwork::GpuNetwork(const dense::Network& net, std::size_t capacity, cudaStream_t stream, cublasHandle_t cublas,
                       Pass pass)
    : specs_(net.specs()), capacity_(capacity), backward_(pass == Pass::forward_and_backward), stream_(stream),
      cublas_(cublas) {
  if (specs_.empty()) throw InputError("gpu: the network has no layers");
  if (capacity == 0) throw InputError("gpu: a batch of at least one sample");
  const std::size_t L = specs_.size();
  act_.resize(L + 1);
  delta_.resize(L + 1);
  col_.resize(L);
  dcol_.resize(L);
  choice_.resize(L);
  fused_.assign(L, false);
  std::size_t ones = capacity;
  for (std::size_t i = 0; i < L; ++i) {
    const LayerSpec& s = specs_[i];
    act_[i].resize(capacity * s.in.size());
    if (backward_) delta_[i].resize(capacity * s.in.size());
    if (s.kind == Kind::conv2d) {
      const std::size_t K = s.in.c * s.kernel * s.kernel, M = capacity * s.out.h * s.out.w;
      col_[i].resize(K * M);
      if (backward_) dcol_[i].resize(K * M);
      ones = std::max(ones, M);
    }
    if (s.kind == Kind::max_pool2) choice_[i].resize(capacity * s.out.size());
    if (i > 0) {
      const Kind before = specs_[i - 1].kind;
      fused_[i] = (s.kind == Kind::relu && (before == Kind::conv2d || before == Kind::linear)) ||
                  (s.kind == Kind::flatten && before == Kind::max_pool2);
    }
  }
  // Layer 0 needs no input gradient, so a ReLU there has no backward to fold.
  relu_in_pool_.assign(L, false);
  for (std::size_t i = 1; i + 1 < L; ++i)
    relu_in_pool_[i] = specs_[i].kind == Kind::relu && specs_[i + 1].kind == Kind::max_pool2;
  act_[L].resize(capacity * specs_.back().out.size());
  if (backward_) delta_[L].resize(capacity * specs_.back().out.size());
  act_ptr_.resize(L + 1);
  delta_ptr_.resize(L + 1);
  for (std::size_t i = 0; i <= L; ++i) {
    act_ptr_[i] = act_[i].get();
    delta_ptr_[i] = delta_[i].get();
  }
  // A layer fused into layer i - 1 has its output written by that layer: its
  // input buffer then holds the same values (bias + ReLU), or is skipped
  // (pool + flatten: the pool writes the flattened layout and reads the
  // flattened gradient).
  backward_by_neighbour_.assign(L, false);
  for (std::size_t i = L; i-- > 0;)
    if (fused_[i]) {
      act_ptr_[i] = act_ptr_[i + 1];
      if (specs_[i].kind == Kind::flatten) {
        delta_ptr_[i] = delta_ptr_[i + 1];
        backward_by_neighbour_[i] = true;
      }
    }
  // A pool that does its ReLU's backward writes the ReLU's input gradient.
  for (std::size_t i = 0; i < L; ++i)
    if (relu_in_pool_[i]) {
      delta_ptr_[i + 1] = delta_ptr_[i];
      backward_by_neighbour_[i] = true;
    }
  ones_.resize(ones);
  kernels::fill(ones_.get(), 1.0f, ones, stream_);
  loss_.resize(capacity);
}

// Row-major C[m x n] = op(A) op(B), op(A) m x k, op(B) k x n. cuBLAS is
// column-major, where a row-major matrix reads as its transpose: so it
// computes C^T = op(B)^T op(A)^T.
void GpuNetwork::gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, const float* a,
                      const float* b, float* c) const {
  const float one = 1.0f, zero = 0.0f;
  ASGD_CUBLAS(cublasSgemm(cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                          static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &one, b,
                          static_cast<int>(trans_b ? k : n), a, static_cast<int>(trans_a ? m : k), &zero, c,
                          static_cast<int>(n)));
}

kernels::PoolGeometry GpuNetwork::pool_geometry(std::size_t i, std::size_t n, bool fused) const {
  const LayerSpec& s = specs_[i];
  const bool flatten = fused && next_fused(i);
  return {static_cast<int>(s.in.c), static_cast<int>(s.in.h), static_cast<int>(s.in.w), n, flatten};
}

void GpuNetwork::forward_layer(std::size_t i, const float* params, const float* in, float* out, std::size_t n,
                               bool fused) {
  const LayerSpec& s = specs_[i];
  // With `fused`, a conv or linear layer also applies the ReLU after it.
  const bool relu = fused && next_fused(i);
  switch (s.kind) {
    case Kind::conv2d: {
      const auto g = geometry(s, n);
      const std::size_t K = s.in.c * s.kernel * s.kernel, M = n * s.out.h * s.out.w;
      kernels::im2col(in, col_[i].get(), g, stream_);
      gemm(false, false, s.out.c, M, K, params + s.weight, col_[i].get(), out);
      kernels::add_row_bias(out, params + s.bias, s.out.c, M, relu, stream_);
      break;
    }
    case Kind::linear:
      gemm(false, true, n, s.out.size(), s.in.size(), in, params + s.weight, out);
      kernels::add_col_bias(out, params + s.bias, n, s.out.size(), relu, stream_);
      break;
    case Kind::relu: kernels::relu_forward(in, out, n * s.in.size(), stream_); break;
    case Kind::max_pool2:
      kernels::max_pool_forward(in, out, choice_[i].get(), pool_geometry(i, n, fused), stream_);
      break;
    case Kind::flatten:
      kernels::flatten_forward(in, out, static_cast<int>(s.in.c), n, static_cast<int>(s.in.h * s.in.w), stream_);
      break;
  }
}

void GpuNetwork::layer_forward(std::size_t i, const float* params, const float* in, float* out, std::size_t n) {
  if (i >= specs_.size() || n > capacity_) throw InputError("gpu: layer or batch out of range");
  forward_layer(i, params, in, out, n, false);
}

void GpuNetwork::require_backward() const {
  if (!backward_) throw RuntimeError("gpu: a backward pass on a network made for forward passes only");
}

void GpuNetwork::layer_backward(std::size_t i, const float* params, const float* in, const float* out,
                                const float* dout, float* din, float* grad, std::size_t n) {
  if (i >= specs_.size() || n > capacity_) throw InputError("gpu: layer or batch out of range");
  require_backward();
  backward_layer(i, params, in, out, dout, din, grad, n, false);
}

void GpuNetwork::backward_layer(std::size_t i, const float* params, const float* in, const float* out,
                                const float* dout, float* din, float* grad, std::size_t n, bool fused) {
  const LayerSpec& s = specs_[i];
  const float one = 1.0f, zero = 0.0f;
  switch (s.kind) {
    case Kind::conv2d: {
      const std::size_t K = s.in.c * s.kernel * s.kernel, M = n * s.out.h * s.out.w;
      const float* col = col_[i].get();  // im2col(in) of the forward pass
      gemm(false, true, s.out.c, K, M, dout, col, grad + s.weight);
      // db = dY 1: dY row-major out_c x M is column-major M x out_c.
      ASGD_CUBLAS(cublasSgemv(cublas_, CUBLAS_OP_T, static_cast<int>(M), static_cast<int>(s.out.c), &one, dout,
                              static_cast<int>(M), ones_.get(), 1, &zero, grad + s.bias, 1));
      if (din == nullptr) return;
      gemm(true, false, K, M, s.out.c, params + s.weight, dout, dcol_[i].get());
      kernels::col2im(dcol_[i].get(), din, geometry(s, n), stream_);
      break;
    }
    case Kind::linear: {
      const std::size_t in_f = s.in.size(), out_f = s.out.size();
      gemm(true, false, out_f, in_f, n, dout, in, grad + s.weight);
      // db = dY^T 1: dY row-major n x out is column-major out x n.
      ASGD_CUBLAS(cublasSgemv(cublas_, CUBLAS_OP_N, static_cast<int>(out_f), static_cast<int>(n), &one, dout,
                              static_cast<int>(out_f), ones_.get(), 1, &zero, grad + s.bias, 1));
      if (din == nullptr) return;
      gemm(false, false, n, in_f, out_f, dout, params + s.weight, din);
      break;
    }
    case Kind::relu:
      if (din != nullptr) kernels::relu_backward(out, dout, din, n * s.in.size(), stream_);
      break;
    case Kind::max_pool2:
      if (din != nullptr) {
        // `out` is the pooled output, in the layout of dout.
        const float* mask = fused && i > 0 && relu_in_pool_[i - 1] ? out : nullptr;
        kernels::max_pool_backward(dout, choice_[i].get(), mask, din, pool_geometry(i, n, fused), stream_);
      }
      break;
    case Kind::flatten:
      if (din != nullptr)
        kernels::flatten_backward(dout, din, static_cast<int>(s.in.c), n, static_cast<int>(s.in.h * s.in.w),
                                  stream_);
      break;
  }
}

const float* GpuNetwork::first_input(const float* x, std::size_t n) {
  if (n > capacity_) throw InputError(fmt::format("gpu: batch {} above the capacity {}", n, capacity_));
  // Samples come one after another, [n][C][H][W]; the convolutional layers
  // take [C][n][H][W] (as dense::Network::forward arranges). With one
  // channel, or a flat input, the two are the same memory.
  const dense::Shape in = specs_.front().in;
  if (in.c == 1 || (in.h == 1 && in.w == 1)) return x;
  // [n][C * hw] -> [C][n][hw] is the flatten's backward.
  kernels::flatten_backward(x, act_[0].get(), static_cast<int>(in.c), n, static_cast<int>(in.h * in.w), stream_);
  return act_[0].get();
}

const float* GpuNetwork::forward(const float* params, const float* x, std::size_t n) {
  return forward_layers(params, first_input(x, n), n);
}

const float* GpuNetwork::forward_layers(const float* params, const float* x, std::size_t n) {
  const std::size_t L = specs_.size();
  const float* in = x;
  for (std::size_t i = 0; i < L; ++i) {
    if (fused_[i]) continue;  // done by layer i - 1
    // A fused next layer's output: act_ptr_[i + 1] already points there.
    forward_layer(i, params, in, act_ptr_[i + 1], n, true);
    in = act_ptr_[i + 1];
  }
  return act_ptr_[L];
}

void GpuNetwork::loss_and_gradient(const float* params, const float* x, const std::uint8_t* labels, std::size_t n,
                                   float* grad) {
  require_backward();
  const std::size_t L = specs_.size();
  x = first_input(x, n);
  forward_layers(params, x, n);
  const int k = static_cast<int>(classes());
  kernels::softmax_xent(act_ptr_[L], labels, n, k, loss_.get(), delta_ptr_[L], 1.0f / static_cast<float>(n),
                        stream_);
  for (std::size_t i = L; i-- > 0;) {
    if (backward_by_neighbour_[i]) continue;
    const float* in = i == 0 ? x : act_ptr_[i];
    // The first layer needs no input gradient.
    float* din = i == 0 ? nullptr : delta_ptr_[i];
    backward_layer(i, params, in, act_ptr_[i + 1], delta_ptr_[i + 1], din, grad, n, true);
  }
}

}  // namespace asgd::gpu::detail
