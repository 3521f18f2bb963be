// Dense layers and a Sequential network whose parameters live in one flat
// buffer described by an engine Layout (a ParamStore, a worker's view of it,
// or a gradient buffer of the same layout). Layers hold no parameters: they
// read them through Eigen::Map over that buffer, so a network can run over
// the live shared store, a stale view or a checkpoint without copies.
//
// Activation layout. The convolutional part keeps a minibatch of n samples
// as [C][n][H][W] (channel-major): a convolution is then ONE GEMM over the
// whole batch (im2col gives K x (n*H*W), weights are C_out x K) instead of n
// small ones. Flatten turns [C][n][H*W] into [n][C*H*W] for the Linear part,
// which works on [n][features]. A one-channel input [n][1][H][W] is already
// [1][n][H][W]. An input of shape C x 1 x 1 is a feature vector ([n][C]) and
// goes straight to Linear layers; Conv2d and max-pool need a spatial input,
// Linear a flat one (Network::add says so).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "asgd/engine/layout.hpp"

namespace asgd::dense {

struct Shape {
  std::size_t c = 1, h = 1, w = 1;
  std::size_t size() const noexcept { return c * h * w; }
  friend bool operator==(const Shape&, const Shape&) = default;
};

// Memory a layer keeps between its forward and backward pass (im2col
// buffers, max-pool choices); one per layer in the caller's Workspace, so
// that layers stay stateless and thread-safe.
struct Scratch {
  std::vector<float> a, b;
  std::vector<std::uint8_t> choice;
  float* get(std::vector<float>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
  }
};

// What a layer is, for backends that run the same network elsewhere (gpu/):
// its kind, shapes, and where its tensors lie in the parameter layout.
struct LayerSpec {
  enum class Kind { conv2d, max_pool2, relu, flatten, linear } kind = Kind::relu;
  Shape in{}, out{};
  std::size_t kernel = 0, pad = 0;     // conv2d
  std::size_t weight = 0, bias = 0;    // offsets of the tensors (conv2d, linear)
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string describe() const = 0;
  // As gpu/ runs it (a convolution: im2col + SGEMM, whatever this CPU's kernel).
  virtual std::string describe_on_gpu() const { return describe(); }
  // Output shape for `in`; throws InputError when the layer cannot take it.
  virtual Shape output(Shape in) const = 0;
  // Adds this layer's parameter tensors to `layout` ("<prefix>.weight", ...)
  // and remembers where they are.
  virtual void declare(Layout& layout, const std::string& prefix, Shape in) { (void)layout, (void)prefix, (void)in; }
  // Initial values (He for layers followed by ReLU, Xavier for the last).
  virtual void initialize(float* params, std::mt19937_64& rng, bool last) const { (void)params, (void)rng, (void)last; }
  // out = f(in) for n samples. backward() is called with the same Scratch
  // right after the forward pass over the same input.
  virtual void forward(const float* params, const float* in, float* out, std::size_t n, Scratch& s) const = 0;
  // From dout (gradient w.r.t. out): writes this layer's parameter gradients
  // into `grad` (same layout as params; overwritten, not added) and, when
  // din is not null, the gradient w.r.t. in.
  virtual void backward(const float* params, const float* in, const float* out, const float* dout, float* din,
                        float* grad, std::size_t n, Scratch& s) const = 0;
  virtual bool has_params() const noexcept { return false; }
  // Valid after declare().
  virtual LayerSpec spec() const = 0;
  // What the layer needs and makes: flat ([n][features]) or spatial.
  enum class Takes { spatial, flat, any };
  virtual Takes takes() const noexcept { return Takes::any; }
  virtual bool makes_flat(bool input_flat) const noexcept { return input_flat; }

 protected:
  Shape in_{};
};

// y = W * im2col(x) + b; W [out x in*k*k], stride 1, zero padding `pad`.
// Computed direct for kernels up to 5 x 5: with output rows as vectors when
// in*k*k <= 32, with output channels as vectors for a multiple of 16 of them
// when conv2d_vector_lanes() is 16; else as im2col + GEMM. describe() names
// the layer's path.
std::unique_ptr<Layer> conv2d(std::size_t in_channels, std::size_t out_channels, std::size_t kernel, std::size_t pad);
// The float lanes of the direct kernels in this build: 16 with AVX-512, 8
// with AVX, else 4 (dense/ builds with -march=native unless told not to).
std::size_t conv2d_vector_lanes() noexcept;
// 2x2 max pooling, stride 2 (H and W must be even).
std::unique_ptr<Layer> max_pool2();
std::unique_ptr<Layer> relu();
// [C][n][H*W] -> [n][C*H*W].
std::unique_ptr<Layer> flatten();
// y = x W^T + b; W [out x in].
std::unique_ptr<Layer> linear(std::size_t in, std::size_t out);

// Buffers for one forward/backward of up to `capacity` samples.
struct Workspace {
  std::vector<std::vector<float>> act;    // act[0] = input, act[i+1] = output of layer i
  std::vector<std::vector<float>> delta;  // gradients w.r.t. act
  std::vector<Scratch> scratch;  // one per layer
  std::vector<float> grad_tile;  // a tile's gradient, when a batch runs in tiles
  std::size_t capacity = 0;
};

class Network {
 public:
  explicit Network(Shape input) : input_(input) {}
  Network& add(std::unique_ptr<Layer> layer);  // throws InputError on a shape mismatch

  const Layout& layout() const noexcept { return layout_; }
  Shape input() const noexcept { return input_; }
  std::size_t classes() const noexcept { return shapes_.back().size(); }
  std::size_t num_params() const noexcept;
  // The layers and shapes, each convolution with the kernel it runs as here; `gpu`: as gpu/ runs them (every
  // convolution as im2col + SGEMM), not this CPU's choice.
  std::string describe(bool gpu = false) const;
  // Parameter blocks for block updates: one per tensor, [offset, offset+size).
  struct Block {
    std::string name;
    std::size_t offset, size;
  };
  std::vector<Block> blocks() const;
  std::vector<LayerSpec> specs() const;  // layer by layer, in order
  // GEMM work per sample in FLOPs (2 per multiply-add of the conv and linear
  // layers): the forward pass, and a training step (forward, parameter
  // gradients, and input gradients for every layer but the first, which
  // needs none). Bias, ReLU, pooling and the loss are left out: they are a
  // few element operations per activation, bound by memory, not arithmetic.
  struct Flops {
    double forward = 0, training = 0;
  };
  Flops flops_per_sample() const;

  void initialize(std::span<float> params, std::uint64_t seed) const;
  Workspace workspace(std::size_t capacity) const;
  // The samples training and evaluation run at once (the workspace capacity
  // they ask for; loss_and_gradient's tile). At 16 LeNet-5's largest buffer,
  // the second convolution's im2col where it runs as GEMM (without AVX-512;
  // the first always runs direct), is 0.96 MB and stays in cache; at batch
  // 256 it would be 15 MB. 16 is also the input-gradient lanes of the direct
  // second convolution (one image per lane). Measured on MNIST, 2
  // workers, when both convolutions ran im2col: 16 trained 1.3x (batch 64)
  // to 1.6x (batch 256) faster than untiled batches and inferred 1.5x faster
  // than tiles of 128 (bench/RESULTS.md).
  static constexpr std::size_t kTile = 16;

  // Forward pass over n samples (x: n * input().size() floats, one sample
  // after another); returns the logits [n][classes] (inside ws).
  const float* forward(const float* params, const float* x, std::size_t n, Workspace& ws) const;
  // Softmax cross-entropy averaged over the n samples: writes the gradient of
  // that mean loss into grad (layout().size() floats, zeros in the padding
  // between tensors) and returns the mean
  // loss. labels: n values < classes(). A batch larger than ws.capacity runs
  // in tiles of ws.capacity samples whose gradients are summed, so that a
  // tile's activations and im2col buffers stay in cache (kTile); an empty
  // workspace (capacity 0) is made for min(n, kTile). forward() and loss()
  // return all n samples' logits, so they grow the workspace to n instead.
  double loss_and_gradient(const float* params, const float* x, const std::uint8_t* labels, std::size_t n,
                           float* grad, Workspace& ws) const;
  // Mean softmax cross-entropy only (no gradient).
  double loss(const float* params, const float* x, const std::uint8_t* labels, std::size_t n, Workspace& ws) const;

 private:
  Shape input_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> shapes_{};  // shapes_[0] = input, shapes_[i+1] = output of layer i
  std::vector<bool> flat_{};     // whether that activation is [n][features] (else [C][n][H][W])
  Layout layout_;
};

// LeNet-5 for 28x28 digits: conv 6@5x5 pad 2 -> ReLU -> max-pool 2 -> conv
// 16@5x5 -> ReLU -> max-pool 2 -> fc 120 -> ReLU -> fc 84 -> ReLU -> fc 10.
Network lenet5();

// The rate of an n x n x n single-precision GEMM (Eigen, as the layers run
// them) on `threads` threads, in GFLOP/s: the median of `repeats` timed
// runs after one warm-up. With the FLOPs per training image it gives the floor
// (the fastest a step could be if it ran at GEMM speed).
double sgemm_gflops(std::size_t n, std::size_t repeats, std::size_t threads);
// The rate in GFLOP/s of `gemm`, one n x n x n GEMM that returns when it is
// done: the median of `repeats` timed runs after one untimed warm-up (what
// both devices' sgemm_gflops measure with).
double gemm_gflops(std::size_t n, std::size_t repeats, const std::function<void()>& gemm);

// InputError naming `what`, the sample and the label unless every label is
// below `classes` (a label past the network's outputs would index past the
// logits on either device).
void check_labels(std::span<const std::uint8_t> labels, std::size_t classes, std::string_view what);

// Softmax cross-entropy of logits [n][k] against labels (each < k, checked):
// returns the summed loss; when dlogits is not null writes
// (softmax - onehot) * scale into it.
double softmax_cross_entropy(const float* logits, const std::uint8_t* labels, std::size_t n, std::size_t k,
                             float* dlogits, float scale);

}  // namespace asgd::dense
