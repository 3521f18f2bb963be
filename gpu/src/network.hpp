// A dense::Network run on the device: the same layers (from its specs), the
// same parameter layout and activation layouts, cuBLAS SGEMMs for the
// convolutions (im2col) and linear layers. One GpuNetwork per stream: it owns
// that stream's activations and scratch; the parameters are the caller's.
//
// In a full pass, neighbouring layers share kernels where one pass over the
// data does both:
// - a conv or linear layer followed by a ReLU adds its bias and applies the
//   ReLU in one kernel, writing straight into the ReLU's output;
// - a max-pool followed by a flatten writes the flattened layout itself, and
//   its backward reads the flattened gradient;
// - a max-pool after a ReLU does the ReLU's backward in its own: the ReLU's
//   output at a window's winner is the pooled value.
// LeNet-5's loss and gradient is then 34 launches, against 38 with only the
// bias + ReLU fusion (tests/gpu/test_emulator.cpp counts them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "asgd/dense/network.hpp"
#include "cuda_util.hpp"
#include "kernels.hpp"

namespace asgd::gpu::detail {

class GpuNetwork {
 public:
  // `Pass::forward` allocates no gradient buffers (for evaluation: at
  // capacity 1000, conv1's column gradient alone is 80 MB); the backward
  // calls then throw.
  enum class Pass { forward, forward_and_backward };
  GpuNetwork(const dense::Network& net, std::size_t capacity, cudaStream_t stream, cublasHandle_t cublas,
             Pass pass = Pass::forward_and_backward);

  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t input_size() const noexcept { return specs_.front().in.size(); }
  std::size_t classes() const noexcept { return specs_.back().out.size(); }

  // Everything below is queued on the stream, nothing waits. Pointers are
  // device memory; x holds n <= capacity() samples one after another.
  // Returns the logits [n][classes] (this network's buffer).
  const float* forward(const float* params, const float* x, std::size_t n);
  // Forward, softmax cross-entropy averaged over n, backward: writes the
  // gradient of the mean loss into grad's tensors (the layout's padding
  // between them is left as it is: callers zero it once) and each sample's
  // loss into sample_losses().
  void loss_and_gradient(const float* params, const float* x, const std::uint8_t* labels, std::size_t n,
                         float* grad);
  const float* sample_losses() const noexcept { return loss_.get(); }

  // One layer alone (no fusion), for parity tests; in/out/dout/din in the
  // layer's layouts, n <= capacity().
  void layer_forward(std::size_t i, const float* params, const float* in, float* out, std::size_t n);
  void layer_backward(std::size_t i, const float* params, const float* in, const float* out, const float* dout,
                      float* din, float* grad, std::size_t n);

 private:
  // x in the first layer's layout (a transposed copy in act_[0] when it differs).
  const float* first_input(const float* x, std::size_t n);
  const float* forward_layers(const float* params, const float* x, std::size_t n);
  // With `fused`, what the layer does for its neighbours (above) too.
  void forward_layer(std::size_t i, const float* params, const float* in, float* out, std::size_t n, bool fused);
  void backward_layer(std::size_t i, const float* params, const float* in, const float* out, const float* dout,
                      float* din, float* grad, std::size_t n, bool fused);
  bool next_fused(std::size_t i) const noexcept { return i + 1 < specs_.size() && fused_[i + 1]; }
  kernels::PoolGeometry pool_geometry(std::size_t i, std::size_t n, bool fused) const;
  // Row-major C[m x n] = op(A) op(B) with cuBLAS.
  void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, const float* a, const float* b,
            float* c) const;

  std::vector<dense::LayerSpec> specs_;
  std::size_t capacity_;
  bool backward_;  // gradient buffers allocated (Pass::forward_and_backward)
  void require_backward() const;
  cudaStream_t stream_;
  cublasHandle_t cublas_;
  std::vector<DeviceBuffer<float>> act_, delta_;   // act_[i]: input of layer i (act_[L]: logits)
  std::vector<float*> act_ptr_, delta_ptr_;        // act_[i], delta_[i] or, fused, the buffer written instead
  std::vector<bool> fused_;                        // layer i's forward (a flatten's backward too) is layer i - 1's
  std::vector<bool> relu_in_pool_;                 // layer i is a ReLU whose backward the pool after it does
  std::vector<bool> backward_by_neighbour_;        // that, or a flatten whose backward its pool does
  std::vector<DeviceBuffer<float>> col_, dcol_;    // conv scratch
  std::vector<DeviceBuffer<std::uint8_t>> choice_; // max-pool winners
  DeviceBuffer<float> ones_, loss_;
};

}  // namespace asgd::gpu::detail
