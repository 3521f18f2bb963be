// Launchers of the dense layer kernels (kernels.cu). Every pointer is device
// memory; every launch goes on `s` and is checked. Layouts as in dense/:
// convolutional activations [C][n][H][W], linear ones [n][features].
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

namespace asgd::gpu::kernels {

struct ConvGeometry {
  int c, h, w;     // input channels and size
  int k, pad;      // square kernel, zero padding, stride 1
  int oh, ow;      // output size
  int n;           // samples
};
// col[(ci, ky, kx)][(s, oy, ox)] = in[ci][s][oy + ky - pad][ox + kx - pad] (0 outside).
void im2col(const float* in, float* col, const ConvGeometry& g, cudaStream_t s);
// The adjoint: din[ci][s][iy][ix] = sum of the col entries it fed (no atomics).
void col2im(const float* col, float* din, const ConvGeometry& g, cudaStream_t s);

// y[r][c] += b[r] for a rows x cols row-major y (conv: rows = channels);
// with relu, then y = max(y, 0) in the same pass.
void add_row_bias(float* y, const float* b, std::size_t rows, std::size_t cols, bool relu, cudaStream_t s);
// y[i][j] += b[j] for an n x cols row-major y (linear); relu as above.
void add_col_bias(float* y, const float* b, std::size_t n, std::size_t cols, bool relu, cudaStream_t s);

void relu_forward(const float* in, float* out, std::size_t m, cudaStream_t s);
// din = out > 0 ? dout : 0 (in place allowed: din == dout).
void relu_backward(const float* out, const float* dout, float* din, std::size_t m, cudaStream_t s);

// 2x2 max pooling, stride 2, over the planes [c][n] of h x w (c channels of
// n samples); choice keeps the winner (0..3, the first on ties) for
// backward, as dense/ does. With `flatten`, the pooled values go to
// [n][c * (h/2) * (w/2)]: the flatten layer after the pool, in the same pass.
struct PoolGeometry {
  int c, h, w;
  std::size_t n;
  bool flatten;
};
void max_pool_forward(const float* in, float* out, std::uint8_t* choice, const PoolGeometry& g, cudaStream_t s);
// dout in the forward output's layout. With `pooled` (the forward's output)
// not null, the backward of a ReLU before the pool is done in the same pass:
// the window's gradient passes only where its maximum is above 0 (what the
// ReLU's own backward would give, since the maximum is the ReLU's output at
// the winner).
void max_pool_backward(const float* dout, const std::uint8_t* choice, const float* pooled, float* din,
                       const PoolGeometry& g, cudaStream_t s);

// [C][n][hw] <-> [n][C * hw].
void flatten_forward(const float* in, float* out, int c, std::size_t n, int hw, cudaStream_t s);
void flatten_backward(const float* dout, float* din, int c, std::size_t n, int hw, cudaStream_t s);

// Per sample: loss[i] = logsumexp(z_i) - z_i[label]; when dlogits is not
// null, dlogits = (softmax(z) - onehot) * scale. Labels as bytes.
void softmax_xent(const float* logits, const std::uint8_t* labels, std::size_t n, int k, float* loss,
                  float* dlogits, float scale, cudaStream_t s);
// *acc += scale * (sum of x[0..n)) (a double accumulator).
void accumulate_sum(const float* x, std::size_t n, double scale, double* acc, cudaStream_t s);
// For evaluation: confusion[label * k + argmax] += 1 per sample.
void confusion(const float* logits, const std::uint8_t* labels, std::size_t n, int k, unsigned* counts,
               cudaStream_t s);

// x[i][:] = images[index[first + i]][:], y[i] = labels[index[first + i]],
// for i < n (the minibatch of a shuffled epoch, gathered on the device).
void gather(const float* images, const std::uint8_t* labels, const std::uint32_t* index, std::size_t first,
            std::size_t n, std::size_t dim, float* x, std::uint8_t* y, cudaStream_t s);

void fill(float* x, float value, std::size_t n, cudaStream_t s);

// The update of dense/ and the engine's BlockTrainer, with the gradient
// the weighted sum of up to kMaxGrads buffers:
//   g = sum_j weight[j] grads[j];  v = mu v + (g + wd w);  w -= lr v.
constexpr int kMaxGrads = 16;
struct GradSum {
  const float* grads[kMaxGrads];
  float weights[kMaxGrads];
  int count;
};
void sgd_momentum(float* w, float* v, const GradSum& g, std::size_t n, float lr, float mu, float wd,
                  cudaStream_t s);

}  // namespace asgd::gpu::kernels
