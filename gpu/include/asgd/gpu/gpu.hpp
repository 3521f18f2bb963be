// The dense models on an NVIDIA GPU: the layer set of dense/ as CUDA
// kernels and cuBLAS SGEMMs, and bounded-delay training whose workers are
// CUDA streams sharing one parameter vector in device memory.
//
// This header needs no CUDA: the apps and tests include it in every build.
// A build without nvcc and cuBLAS (ASGD_WITH_CUDA=OFF, or AUTO when they are
// missing) has the same functions; unavailable() then says why and the
// others throw RuntimeError with that reason. In a CUDA build on a machine
// without a usable device, unavailable() says that instead.
//
// Layouts match dense/ exactly: parameters in net.layout() order, the
// convolutional activations channel-major [C][n][H][W], the linear ones
// [n][features]; so a model trained here is a dense/ checkpoint and the
// other way round, and every layer can be compared with its CPU twin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "asgd/dense/floor.hpp"
#include "asgd/dense/mnist.hpp"
#include "asgd/dense/network.hpp"
#include "asgd/dense/trainer.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/param_store.hpp"

namespace asgd::gpu {

// Whether gpu/ was compiled with CUDA.
bool built_with_cuda() noexcept;
// Empty when a CUDA device can be used; otherwise why not (no CUDA in this
// build, no device, a driver too old for the runtime, ...).
std::string unavailable();
// "NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB" for device 0 (throws when unavailable).
std::string describe_device();

// A CUDA build keeps its CUDA code in a module (libasgd_gpu_cuda.so) that the
// first GPU call loads: from $ASGD_GPU_BACKEND when set (that file alone),
// else beside the executable, in the executable's ../lib/asgd, at each path
// added here (in order), and last, for a program that is in the build tree
// asgd was built in (its apps and tests), that tree's module. An installed
// library never looks in the tree it was built in.
// Effective before that first call. A program built against the installed
// package needs nothing: the package defines ASGD_GPU_INSTALLED_BACKEND for
// whatever links asgd::gpu, and this header adds it (below).
void add_backend_path(std::string path);

// Workers are CUDA streams (TrainOptions::workers of them), each driven by
// one host thread; tau as on the CPU (0: synchronous rounds whose update
// uses the mean of the workers' gradients; tau > 0: a stream computes on a
// device copy of the parameters at most tau updates old; inf: the copy is
// refreshed every step). Updates to the shared parameters are ordered by a
// chain of CUDA events, so each is atomic with respect to the others, as
// the CPU's block locks make them; no host synchronisation per step.
// At tau 0 one update sums the streams' gradients in one kernel: at most
// this many streams.
inline constexpr std::size_t kMaxSynchronousStreams = 16;
// InputError naming TrainOptions::workers when the device cannot run `workers` streams at
// `tau`: train() asks first, and a command may ask before it opens its outputs.
inline void check_streams(std::size_t workers, std::uint64_t tau) {
  if (tau == 0 && workers > kMaxSynchronousStreams)
    throw InputError("TrainOptions::workers " + std::to_string(workers) + ": at most " +
                     std::to_string(kMaxSynchronousStreams) + " GPU streams with TrainOptions::tau 0");
}

struct GpuTrainOptions : dense::TrainOptions {
  GpuTrainOptions() = default;
  // From the CPU's options (implicit: what trains on the CPU trains here).
  GpuTrainOptions(const dense::TrainOptions& o) : dense::TrainOptions(o) {}  // NOLINT(google-explicit-constructor)
  // Capture each stream's minibatch step (forward, backward, loss sum: 35
  // kernels and cuBLAS calls for LeNet-5) in a CUDA graph once, then launch
  // the graph per step: one launch instead of 35, the rest of the step (the gather of the
  // minibatch, the event waits and the update) as before. Full batches only;
  // an epoch's short last batch runs kernel by kernel. Same arithmetic
  // either way (the tests compare the two). On by default: faster at every
  // batch size measured on an H100 (bench/RESULTS.md, "LeNet-5 on the GPU").
  bool cuda_graphs = true;
};

// Trains `params` (net.layout(), initialised by the caller) on `train`, as
// dense::train does on the CPU: the same options, reports and momentum
// buffer, so checkpoints move between the two. The training set is copied
// to the device once (through pinned staging buffers, the copy of one chunk
// overlapping the conversion of the previous) and stays there across
// epochs; each step gathers its shuffled minibatch on the device.
std::vector<dense::EpochReport> train(const dense::Network& net, ParamStore& params,
                                      std::vector<float>& momentum_buffer, const dense::Dataset& train,
                                      const dense::Dataset* test, const GpuTrainOptions& options,
                                      const std::function<void(const dense::EpochReport&)>& on_epoch = {});

// gpu::train as a dense::TrainFunction (dense::FitOptions::trainer): a dense run on the GPU.
inline dense::TrainFunction trainer(bool cuda_graphs = true) {
  return [cuda_graphs](const dense::Network& net, ParamStore& params, std::vector<float>& momentum_buffer,
                       const dense::Dataset& data, const dense::Dataset* test, const dense::TrainOptions& options,
                       const std::function<void(const dense::EpochReport&)>& on_epoch) {
    GpuTrainOptions o(options);
    o.cuda_graphs = cuda_graphs;
    return train(net, params, momentum_buffer, data, test, o, on_epoch);
  };
}

// Accuracy, mean loss and confusion matrix on the device. With `seconds`
// not empty, seconds.size() passes run over one upload of the parameters and
// the data, and each pass's time (its first kernel to its result on the
// host) goes there: inference speed, without the setup and the copies.
dense::EvalResult evaluate(const dense::Network& net, const float* params, const dense::Dataset& data,
                           std::size_t batch = 1000, std::span<double> seconds = {});

// dense::evaluate_timed on the device: options.repeats passes over one upload of the parameters and the data
// (not timed), each pass's seconds kept; options.threads is the CPU's, not used here. InputError naming the option.
dense::TimedEval evaluate_timed(const dense::Network& net, const float* params, const dense::Dataset& data,
                                const dense::TimedEvalOptions& options);

// The rate of an n x n x n FP32 cuBLAS SGEMM (TF32 off, as training runs
// them) on this process's device, in GFLOP/s: the median of `repeats` timed runs after a
// warm-up. With dense::Network::flops_per_sample() it gives the floor.
double sgemm_gflops(std::size_t n, std::size_t repeats);

// dense::measure_floor on the device: options.size (0: kGpuFloorSize) and repeats; the floor is one device's, its
// streams sharing one rate (options.threads and options.workers are the CPU's, not used here).
inline constexpr std::size_t kGpuFloorSize = 4096;
dense::Floor measure_floor(const dense::Network& net, const dense::FloorOptions& options);

// For parity tests: one layer (index into net.specs()) on the device, with
// host buffers in and out, laid out as dense::Layer::forward/backward take
// them. backward writes `grad` (the layer's parameter gradients, at their
// layout offsets; other entries untouched) and `din`.
void layer_forward(const dense::Network& net, std::size_t layer, const float* params, const float* in, float* out,
                   std::size_t n);
void layer_backward(const dense::Network& net, std::size_t layer, const float* params, const float* in,
                    const float* dout, float* din, float* grad, std::size_t n);
// dense::Network::loss_and_gradient on the device.
double loss_and_gradient(const dense::Network& net, const float* params, const float* x,
                         const std::uint8_t* labels, std::size_t n, float* grad);

}  // namespace asgd::gpu

#if defined(ASGD_GPU_INSTALLED_BACKEND)
namespace asgd::gpu::detail {
// Once per program that includes this header: the module of the install it was built against.
inline const bool installed_backend_added = (add_backend_path(ASGD_GPU_INSTALLED_BACKEND), true);
}  // namespace asgd::gpu::detail
#endif
