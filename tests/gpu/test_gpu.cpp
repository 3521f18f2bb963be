// GPU against CPU: every layer's forward and backward, a full LeNet-5
// loss-and-gradient, evaluation, and training under each delay rule. On a
// machine without a usable CUDA device (or a build without CUDA) every test
// skips with the reason.
//
// "Equal within 1e-4 relative" is normwise: max |gpu - cpu| <= 1e-4 *
// max |cpu| over the tensor (element-wise relative error is meaningless for
// entries that cancel to near zero). The GEMMs run in FP32 (no TF32).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/random_vector.hpp"
#include "asgd/dense/network.hpp"
#include "asgd/dense/trainer.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/gpu/gpu.hpp"

namespace asgd {
namespace {

#define SKIP_WITHOUT_GPU()                                        \
  do {                                                            \
    const std::string why = gpu::unavailable();                   \
    if (!why.empty()) GTEST_SKIP() << "no GPU: " << why;          \
  } while (0)

using asgd::testing::random_vector;

double normwise_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, size = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    size = std::max(size, std::abs(static_cast<double>(want[i])));
  }
  return size > 0 ? diff / size : diff;
}

// gpu::train with CUDA graphs off (the default launches each full batch's
// step as a graph): the tests that compare a training path with the CPU run
// it both ways.
std::vector<dense::EpochReport> train_kernel_by_kernel(
    const dense::Network& net, ParamStore& params, std::vector<float>& momentum, const dense::Dataset& train,
    const dense::Dataset* test, const dense::TrainOptions& options,
    const std::function<void(const dense::EpochReport&)>& on_epoch = {}) {
  gpu::GpuTrainOptions o = options;
  o.cuda_graphs = false;
  return gpu::train(net, params, momentum, train, test, o, on_epoch);
}

// A network of one layer, and the same layer declared alone for the CPU
// calls (its tensors at the same offsets).
struct OneLayer {
  dense::Network net;
  std::unique_ptr<dense::Layer> cpu;
  Layout layout;
  OneLayer(dense::Shape in, std::unique_ptr<dense::Layer> a, std::unique_ptr<dense::Layer> b) : net(in), cpu(std::move(b)) {
    net.add(std::move(a));
    cpu->declare(layout, "layer0", in);
  }
};

// Each check also prints the largest error it saw (one line per layer), so
// that a run on a device reports the figures, not only a pass.
void check_layer(dense::Shape in, std::unique_ptr<dense::Layer> (*make)(), const char* name) {
  SCOPED_TRACE(name);
  OneLayer l(in, make(), make());
  const auto spec = l.net.specs()[0];
  double largest[3] = {};  // forward, input gradient, parameter gradient
  for (std::size_t n : {0u, 1u, 7u, 64u}) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    const std::size_t P = l.net.layout().size();
    const auto params = random_vector(std::max<std::size_t>(P, 1), 1, 0.2f);
    const auto x = random_vector(n * spec.in.size(), 2);
    const auto dout = random_vector(n * spec.out.size(), 3);
    dense::Scratch scratch;
    std::vector<float> cpu_out(n * spec.out.size()), gpu_out(cpu_out.size());
    l.cpu->forward(params.data(), x.data(), cpu_out.data(), n, scratch);
    gpu::layer_forward(l.net, 0, params.data(), x.data(), gpu_out.data(), n);
    const double forward = normwise_error(gpu_out, cpu_out);
    EXPECT_LE(forward, 1e-4) << "forward";
    std::vector<float> cpu_din(x.size()), gpu_din(x.size()), cpu_grad(P), gpu_grad(P);
    l.cpu->backward(params.data(), x.data(), cpu_out.data(), dout.data(), cpu_din.data(), cpu_grad.data(), n, scratch);
    gpu::layer_backward(l.net, 0, params.data(), x.data(), dout.data(), gpu_din.data(), gpu_grad.data(), n);
    const double input = normwise_error(gpu_din, cpu_din);
    EXPECT_LE(input, 1e-4) << "input gradient";
    largest[0] = std::max(largest[0], forward);
    largest[1] = std::max(largest[1], input);
    if (P > 0) {
      const double parameters = normwise_error(gpu_grad, cpu_grad);
      EXPECT_LE(parameters, 1e-4) << "parameter gradient";
      largest[2] = std::max(largest[2], parameters);
    }
  }
  std::cout << "parity " << name << ": largest normwise error over n = 0, 1, 7, 64: forward " << largest[0]
            << ", input gradient " << largest[1] << ", parameter gradient " << largest[2] << "\n";
}

TEST(GpuParity, EveryLayerForwardAndBackward) {
  SKIP_WITHOUT_GPU();
  check_layer({1, 28, 28}, [] { return dense::conv2d(1, 6, 5, 2); }, "conv 1->6 5x5 pad 2");
  check_layer({6, 14, 14}, [] { return dense::conv2d(6, 16, 5, 0); }, "conv 6->16 5x5");
  check_layer({6, 28, 28}, [] { return dense::max_pool2(); }, "max-pool");
  check_layer({6, 28, 28}, [] { return dense::relu(); }, "relu");
  check_layer({16, 5, 5}, [] { return dense::flatten(); }, "flatten");
  check_layer({400, 1, 1}, [] { return dense::linear(400, 120); }, "linear 400->120");
}

dense::Dataset bars(std::size_t n, std::uint64_t seed) {
  // Each class a bright bar at its own place over noise (the CLI tests' digits).
  dense::Dataset d;
  d.rows = d.cols = 28;
  d.pixels.resize(n * 784);
  d.labels.resize(n);
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<std::uint8_t>(rng() % 10);
    d.labels[i] = c;
    for (std::size_t p = 0; p < 784; ++p) d.pixels[i * 784 + p] = static_cast<float>(rng() % 60) / 255.0f;
    const std::size_t y = 3 + (c / 5) * 12, x = 2 + (c % 5) * 5;
    for (std::size_t dy = 0; dy < 6; ++dy)
      for (std::size_t dx = 0; dx < 4; ++dx) d.pixels[i * 784 + (y + dy) * 28 + x + dx] = 250.0f / 255.0f;
  }
  dense::normalize(d);
  return d;
}

TEST(GpuParity, LenetLossAndGradient) {
  SKIP_WITHOUT_GPU();
  const dense::Network net = dense::lenet5();
  std::vector<float> params(net.layout().size());
  net.initialize(params, 3);
  const dense::Dataset d = bars(33, 4);
  auto ws = net.workspace(d.size());
  std::vector<float> cpu_grad(params.size()), gpu_grad(params.size());
  const double cpu = net.loss_and_gradient(params.data(), d.pixels.data(), d.labels.data(), d.size(), cpu_grad.data(), ws);
  const double got = gpu::loss_and_gradient(net, params.data(), d.pixels.data(), d.labels.data(), d.size(), gpu_grad.data());
  EXPECT_NEAR(got, cpu, 1e-4 * std::abs(cpu));
  double largest = 0;
  for (const auto& b : net.blocks()) {
    const std::vector<float> c(cpu_grad.begin() + static_cast<std::ptrdiff_t>(b.offset),
                               cpu_grad.begin() + static_cast<std::ptrdiff_t>(b.offset + b.size));
    const std::vector<float> g(gpu_grad.begin() + static_cast<std::ptrdiff_t>(b.offset),
                               gpu_grad.begin() + static_cast<std::ptrdiff_t>(b.offset + b.size));
    const double error = normwise_error(g, c);
    EXPECT_LE(error, 1e-4) << b.name;
    largest = std::max(largest, error);
  }
  std::cout << "parity LeNet-5 loss and gradient: loss relative error " << std::abs(got - cpu) / std::abs(cpu)
            << ", largest normwise error of a tensor's gradient " << largest << "\n";
}

// The device network fuses neighbouring layers (a pool with the flatten
// after it and the ReLU before it, a conv or linear layer with its ReLU):
// stacks where only some of those neighbours meet, inputs of several
// channels (transposed on the device) and flat ones.
struct Stack {
  const char* name;
  dense::Network net;
};

std::vector<Stack> partly_fused_stacks() {
  using namespace dense;
  std::vector<Stack> stacks;
  auto stack = [&](const char* name, Shape in, auto&&... layers) {
    Network n(in);
    (n.add(std::move(layers)), ...);
    stacks.push_back({name, std::move(n)});
  };
  stack("conv, pool, relu, flatten, linear: the ReLU after its pool stands alone", Shape{1, 8, 8}, conv2d(1, 4, 3, 1),
        max_pool2(), relu(), flatten(), linear(64, 10));
  stack("relu, pool, conv, relu, pool, flatten, linear: a ReLU as layer 0 has no backward to fold",
        Shape{1, 12, 12}, relu(), max_pool2(), conv2d(1, 3, 3, 0), relu(), max_pool2(), flatten(), linear(12, 10));
  stack("conv, relu, pool, conv, relu, flatten, linear: 2 channels in, a pool before a conv", Shape{2, 10, 10},
        conv2d(2, 4, 3, 1), relu(), max_pool2(), conv2d(4, 6, 3, 0), relu(), flatten(), linear(54, 10));
  stack("linear, relu, linear: a flat input", Shape{20, 1, 1}, linear(20, 16), relu(), linear(16, 10));
  stack("conv, relu, conv, pool, flatten, linear: a conv, not a ReLU, before the pool", Shape{1, 8, 8},
        conv2d(1, 3, 3, 1), relu(), conv2d(3, 4, 3, 1), max_pool2(), flatten(), linear(64, 10));
  stack("conv, pool, pool, flatten, relu, linear: 2 channels in", Shape{2, 8, 8}, conv2d(2, 10, 3, 1), max_pool2(),
        max_pool2(), flatten(), relu(), linear(40, 10));
  stack("pool, flatten, linear: 3 channels in, the pool as layer 0", Shape{3, 8, 8}, max_pool2(), flatten(),
        linear(48, 10));
  stack("conv, pool, relu, pool, relu, relu, pool, flatten, linear", Shape{1, 8, 8}, conv2d(1, 4, 3, 1), max_pool2(),
        relu(), max_pool2(), relu(), relu(), max_pool2(), flatten(), linear(4, 10));
  stack("flatten, linear: 2 channels in, flattened as layer 0", Shape{2, 4, 4}, flatten(), linear(32, 10));
  stack("relu, conv, relu, pool, flatten: the logits from the pool", Shape{10, 2, 2}, relu(), conv2d(10, 10, 1, 0),
        relu(), max_pool2(), flatten());
  return stacks;
}

// Random pixels in a Dataset shaped for `in`: its rows and columns for one channel, else one row per input value.
dense::Dataset random_images(std::size_t n, dense::Shape in, std::uint64_t seed) {
  dense::Dataset d;
  d.rows = in.c == 1 ? in.h : in.size();
  d.cols = in.c == 1 ? in.w : 1;
  const std::size_t dim = in.size();
  d.pixels = random_vector(n * dim, seed);
  d.labels.resize(n);
  for (std::size_t i = 0; i < n; ++i) d.labels[i] = static_cast<std::uint8_t>((i * 7 + seed) % 10);
  return d;
}

TEST(GpuParity, PartlyFusedStacksLossAndGradient) {
  SKIP_WITHOUT_GPU();
  for (const Stack& st : partly_fused_stacks()) {
    SCOPED_TRACE(st.name);
    const dense::Network& net = st.net;
    std::vector<float> params(net.layout().size());
    net.initialize(params, 11);
    const dense::Dataset d = random_images(9, net.input(), 12);
    auto ws = net.workspace(d.size());
    std::vector<float> cpu_grad(params.size()), gpu_grad(params.size());
    const double cpu =
        net.loss_and_gradient(params.data(), d.pixels.data(), d.labels.data(), d.size(), cpu_grad.data(), ws);
    const double got =
        gpu::loss_and_gradient(net, params.data(), d.pixels.data(), d.labels.data(), d.size(), gpu_grad.data());
    EXPECT_NEAR(got, cpu, 1e-4 * std::abs(cpu));
    EXPECT_LE(normwise_error(gpu_grad, cpu_grad), 1e-4);
  }
}

// The same stacks through evaluation (forward only) and a training epoch,
// both with a last batch smaller than the device network's capacity.
TEST(GpuParity, PartlyFusedStacksEvaluateAndTrainWithShortBatches) {
  SKIP_WITHOUT_GPU();
  for (const Stack& st : partly_fused_stacks()) {
    SCOPED_TRACE(st.name);
    const dense::Network& net = st.net;
    std::vector<float> init(net.layout().size());
    net.initialize(init, 5);
    const dense::Dataset d = random_images(23, net.input(), 3);
    const auto cpu_eval = dense::evaluate(net, init.data(), d, 10, 1);
    const auto gpu_eval = gpu::evaluate(net, init.data(), d, 10);
    EXPECT_NEAR(gpu_eval.loss, cpu_eval.loss, 1e-4 * cpu_eval.loss);
    // Every image in its label's row; at most one predicted otherwise (a near-tie of two logits may flip
    // under another summation order, as in EvaluateAgreesWithTheCpu).
    ASSERT_EQ(gpu_eval.confusion.size(), cpu_eval.confusion.size());
    const auto k =
        static_cast<std::size_t>(std::lround(std::sqrt(static_cast<double>(cpu_eval.confusion.size()))));
    std::size_t moved = 0;
    for (std::size_t label = 0; label < k; ++label) {
      std::int64_t gpu_row = 0, cpu_row = 0;
      for (std::size_t c = 0; c < k; ++c) {
        const std::size_t at = label * k + c;
        gpu_row += static_cast<std::int64_t>(gpu_eval.confusion[at]);
        cpu_row += static_cast<std::int64_t>(cpu_eval.confusion[at]);
        moved += static_cast<std::size_t>(std::abs(static_cast<std::int64_t>(gpu_eval.confusion[at]) -
                                                   static_cast<std::int64_t>(cpu_eval.confusion[at])));
      }
      EXPECT_EQ(gpu_row, cpu_row) << "label " << label;
    }
    EXPECT_LE(moved, 2u) << "more than one image predicted otherwise";
    for (const bool graphs : {false, true}) {
      SCOPED_TRACE(graphs ? "cuda graphs" : "kernel by kernel");
      gpu::GpuTrainOptions o;
      o.epochs = 1;
      o.batch = 16;
      o.lr = 0.05f;
      o.cuda_graphs = graphs;
      ParamStore cpu = ParamStore::on_heap(net.layout()), dev = ParamStore::on_heap(net.layout());
      cpu.assign(init);
      dev.assign(init);
      std::vector<float> cpu_m, dev_m;
      dense::train(net, cpu, cpu_m, d, nullptr, o);
      gpu::train(net, dev, dev_m, d, nullptr, o);
      EXPECT_LE(normwise_error(dev.snapshot(), cpu.snapshot()), 1e-4);
      EXPECT_GT(normwise_error(dev.snapshot(), init), 1e-4) << "nothing trained";
    }
  }
}

// gpu::layer_forward/layer_backward run one layer of a whole network alone:
// LeNet-5's pools (after a ReLU, before a flatten) as the CPU's max-pool.
TEST(GpuParity, OneLayerOfAFusedNetworkRunsUnfused) {
  SKIP_WITHOUT_GPU();
  const dense::Network net = dense::lenet5();
  const auto specs = net.specs();
  std::vector<float> params(net.layout().size());
  net.initialize(params, 1);
  for (const std::size_t layer : {2u, 5u}) {
    SCOPED_TRACE(::testing::Message() << "layer " << layer);
    const auto s = specs[layer];
    const std::size_t n = 5;
    auto x = random_vector(n * s.in.size(), 2);
    for (auto& v : x) v = std::max(v, 0.0f) - 0.1f;  // windows whose maximum is not above 0 too
    const auto dout = random_vector(n * s.out.size(), 3);
    const auto pool = dense::max_pool2();
    Layout layout;
    pool->declare(layout, "pool", s.in);
    dense::Scratch scratch;
    std::vector<float> cpu_out(n * s.out.size()), gpu_out(cpu_out.size()), cpu_din(x.size()), gpu_din(x.size());
    pool->forward(params.data(), x.data(), cpu_out.data(), n, scratch);
    pool->backward(params.data(), x.data(), cpu_out.data(), dout.data(), cpu_din.data(), nullptr, n, scratch);
    gpu::layer_forward(net, layer, params.data(), x.data(), gpu_out.data(), n);
    gpu::layer_backward(net, layer, params.data(), x.data(), dout.data(), gpu_din.data(), nullptr, n);
    EXPECT_EQ(gpu_out, cpu_out);
    EXPECT_EQ(gpu_din, cpu_din);
  }
}

// A NaN passes through ReLU and max-pool as on the CPU (std::max's rule; fmaxf dropped it), so a NaN input or
// activation makes the loss NaN on both devices and training stops instead of going on with NaN weights.
TEST(GpuParity, NanPassesThroughReluAndPoolAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto make : {+[] { return dense::relu(); }, +[] { return dense::max_pool2(); }}) {
    OneLayer l({2, 4, 4}, make(), make());
    const auto spec = l.net.specs()[0];
    SCOPED_TRACE(l.cpu->describe());
    const std::size_t n = 3;
    auto x = random_vector(n * spec.in.size(), 4);
    for (std::size_t i = 0; i < x.size(); i += 5) x[i] = nan;
    dense::Scratch scratch;
    std::vector<float> cpu_out(n * spec.out.size()), gpu_out(cpu_out.size());
    l.cpu->forward(nullptr, x.data(), cpu_out.data(), n, scratch);
    gpu::layer_forward(l.net, 0, nullptr, x.data(), gpu_out.data(), n);
    std::size_t nans = 0;
    for (std::size_t i = 0; i < cpu_out.size(); ++i) {
      nans += std::isnan(cpu_out[i]) ? 1 : 0;
      if (std::isnan(cpu_out[i]))
        EXPECT_TRUE(std::isnan(gpu_out[i])) << i;
      else
        EXPECT_EQ(gpu_out[i], cpu_out[i]) << i;
    }
    EXPECT_GT(nans, 0u);
  }
  // Through LeNet-5 (its ReLUs fused into the layers before them on the GPU): the loss is NaN on both.
  const dense::Network net = dense::lenet5();
  std::vector<float> params(net.layout().size()), grad(params.size());
  net.initialize(params, 1);
  const dense::Dataset d = bars(4, 9);
  std::vector<float> x = d.pixels;
  x[300] = nan;
  auto ws = net.workspace(d.size());
  EXPECT_TRUE(std::isnan(net.loss_and_gradient(params.data(), x.data(), d.labels.data(), 4, grad.data(), ws)));
  EXPECT_TRUE(std::isnan(gpu::loss_and_gradient(net, params.data(), x.data(), d.labels.data(), 4, grad.data())));
}

// A label past the network's outputs is refused on both devices (it would index past the logits: on the GPU an
// out-of-bounds write).
TEST(GpuParity, LabelsPastTheClassesAreRefused) {
  SKIP_WITHOUT_GPU();
  dense::Network net({1, 4, 4});
  net.add(dense::flatten()).add(dense::linear(16, 3));
  std::vector<float> params(net.layout().size()), grad(params.size());
  net.initialize(params, 1);
  dense::Dataset d;
  d.rows = d.cols = 4;
  d.pixels = random_vector(2 * 16, 5);
  d.labels = {1, 3};
  auto ws = net.workspace(2);
  const auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message([&] { net.loss_and_gradient(params.data(), d.pixels.data(), d.labels.data(), 2, grad.data(), ws); })
                .find("sample 1 has label 3, but the network has 3 classes"),
            std::string::npos);
  EXPECT_NE(message([&] { gpu::loss_and_gradient(net, params.data(), d.pixels.data(), d.labels.data(), 2, grad.data()); })
                .find("sample 1 has label 3"),
            std::string::npos);
  EXPECT_NE(message([&] { gpu::evaluate(net, params.data(), d); }).find("sample 1 has label 3"), std::string::npos);
  EXPECT_NE(message([&] { dense::evaluate(net, params.data(), d, 2, 1); }).find("sample 1 has label 3"),
            std::string::npos);
}

TEST(GpuParity, EvaluateAgreesWithTheCpu) {
  SKIP_WITHOUT_GPU();
  const dense::Network net = dense::lenet5();
  std::vector<float> params(net.layout().size());
  net.initialize(params, 5);
  const dense::Dataset d = bars(1500, 6);
  const auto cpu = dense::evaluate(net, params.data(), d, 1000, 1);
  const auto got = gpu::evaluate(net, params.data(), d, 1000);
  EXPECT_NEAR(got.accuracy, cpu.accuracy, 2.0 / 1500);  // a near-tie may flip
  EXPECT_NEAR(got.loss, cpu.loss, 1e-4 * cpu.loss);
}

// What `asgd cnn eval --device gpu` times: passes over one upload, each pass's seconds kept, the same result as
// one untimed evaluation; a count of 0 refused with the option's name (threads are the CPU's, not used).
TEST(GpuApi, TimedEvaluationKeepsEachPass) {
  SKIP_WITHOUT_GPU();
  const dense::Network net = dense::lenet5();
  std::vector<float> params(net.layout().size());
  net.initialize(params, 5);
  const dense::Dataset d = bars(300, 6);
  dense::TimedEvalOptions o;
  o.batch = 128;
  o.threads = 8;
  o.repeats = 3;
  const dense::TimedEval t = gpu::evaluate_timed(net, params.data(), d, o);
  ASSERT_EQ(t.seconds.size(), 3u);
  for (const double s : t.seconds) EXPECT_GT(s, 0.0);
  const dense::EvalResult once = gpu::evaluate(net, params.data(), d, 128);
  EXPECT_EQ(t.result.confusion, once.confusion);
  EXPECT_DOUBLE_EQ(t.result.loss, once.loss);
  o.repeats = 0;
  EXPECT_EQ(asgd::testing::message_of([&] { gpu::evaluate_timed(net, params.data(), d, o); }),
            "TimedEvalOptions::repeats 0: expected at least 1");
}

// `asgd cnn floor --device gpu`: the default size is the GPU's, the floor one device's (its streams share the
// rate, whatever the CPU's workers say), and the size's limit is dense/'s.
TEST(GpuApi, FloorIsOneDevicesRate) {
  SKIP_WITHOUT_GPU();
  const dense::Network net = dense::lenet5();
  dense::FloorOptions o;
  o.size = 128;
  o.repeats = 2;
  o.workers = 4;
  const dense::Floor f = gpu::measure_floor(net, o);
  EXPECT_EQ(f.size, 128u);
  EXPECT_EQ(f.workers, 1u);
  EXPECT_GT(f.gflops, 0.01);
  EXPECT_NEAR(f.images_per_second, f.gflops * 1e9 / f.flops.training, 1e-6 * f.images_per_second);
  EXPECT_EQ(dense::floor_size(dense::FloorOptions(), gpu::kGpuFloorSize), 4096u);
  o.size = dense::kMaxFloorSize + 1;
  EXPECT_THROW(gpu::measure_floor(net, o), InputError);
  o.size = 128;
  o.repeats = 0;
  EXPECT_THROW(gpu::measure_floor(net, o), InputError);
}

TEST(GpuParity, OneSynchronousStepEqualsTheCpuStep) {
  SKIP_WITHOUT_GPU();
  // One epoch of one minibatch: the same update on both.
  const dense::Network net = dense::lenet5();
  std::vector<float> init(net.layout().size());
  net.initialize(init, 7);
  const dense::Dataset d = bars(64, 8);
  dense::TrainOptions o;
  o.epochs = 1;
  o.batch = 64;
  o.lr = 0.05f;
  ParamStore cpu_store = ParamStore::on_heap(net.layout()), gpu_store = ParamStore::on_heap(net.layout());
  cpu_store.assign(init);
  gpu_store.assign(init);
  std::vector<float> cpu_m, gpu_m;
  dense::train(net, cpu_store, cpu_m, d, nullptr, o);
  gpu::train(net, gpu_store, gpu_m, d, nullptr, o);
  const std::vector<float> c(cpu_store.data(), cpu_store.data() + cpu_store.size());
  const std::vector<float> g(gpu_store.data(), gpu_store.data() + gpu_store.size());
  EXPECT_LE(normwise_error(g, c), 1e-4);
  EXPECT_LE(normwise_error(gpu_m, cpu_m), 1e-4);
  // The momentum after one step is the step's gradient: the telling figure (the parameters move little).
  std::cout << "parity LeNet-5 training step (batch 64): normwise error of the parameters " << normwise_error(g, c)
            << ", of the momentum (the step's gradient) " << normwise_error(gpu_m, cpu_m) << "\n";
}

// Staleness compensation reads the CPU's estimate (a running mean for 100
// updates, then about the last 100): one stream at tau 2 sees staleness 0, 1,
// 2, 0, ... as a CPU worker does, so 300 compensated updates agree. The GPU
// kept one mean over the whole run, and its momentum drifted from the CPU's.
TEST(GpuParity, StalenessCompensationAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const dense::Network net = dense::lenet5();
  std::vector<float> init(net.layout().size());
  net.initialize(init, 17);
  const dense::Dataset d = bars(2400, 18);
  dense::TrainOptions o;
  o.epochs = 1;
  o.batch = 8;  // 300 updates
  o.lr = 0.01f;
  o.momentum = 0.9f;
  o.tau = 2;
  o.compensate = true;
  ParamStore cpu_store = ParamStore::on_heap(net.layout()), gpu_store = ParamStore::on_heap(net.layout());
  cpu_store.assign(init);
  std::vector<float> cpu_m;
  const auto c = dense::train(net, cpu_store, cpu_m, d, nullptr, o);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].max_staleness, 2u);
  for (const bool graphs : {true, false}) {
    SCOPED_TRACE(graphs ? "cuda graphs" : "kernel by kernel");
    gpu_store.assign(init);
    std::vector<float> gpu_m;
    const auto g = graphs ? gpu::train(net, gpu_store, gpu_m, d, nullptr, o)
                          : train_kernel_by_kernel(net, gpu_store, gpu_m, d, nullptr, o);
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0].graph_steps, graphs ? 300u : 0u);
    EXPECT_EQ(g[0].max_staleness, 2u);
    EXPECT_DOUBLE_EQ(g[0].mean_staleness, c[0].mean_staleness);
    EXPECT_FLOAT_EQ(g[0].momentum, c[0].momentum) << "the next update's momentum";
    EXPECT_LE(normwise_error(gpu_store.snapshot(), cpu_store.snapshot()), 1e-4);
    EXPECT_LE(normwise_error(gpu_m, cpu_m), 1e-4);
  }
}

// The after_epoch hook (averaging under mpirun) as on the CPU: the hook sees
// the epoch's parameters in the host store, what it writes there is what the
// device trains on next (the stream's view included, though tau would let it
// keep its old one), and the test accuracy is measured after it.
TEST(GpuTraining, AfterEpochHookAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const dense::Network net = dense::lenet5();
  const dense::Dataset d = bars(256, 12), test = bars(100, 13);
  std::vector<float> init(net.layout().size()), other(init.size());
  net.initialize(init, 14);
  net.initialize(other, 15);
  dense::TrainOptions o;
  o.epochs = 2;
  o.batch = 64;
  o.lr = 0.05f;
  o.tau = 1000000;
  auto run = [&](auto&& trainer, std::vector<float>& seen) {
    ParamStore store = ParamStore::on_heap(net.layout());
    store.assign(init);
    std::vector<float> momentum;
    dense::TrainOptions hooked = o;
    hooked.after_epoch = [&] {
      if (seen.empty()) {
        seen = store.snapshot();
        store.assign(other);
      }
    };
    const auto reports = trainer(net, store, momentum, d, &test, hooked, {});
    // A near-tie of two logits may flip under the GPU's summation order.
    EXPECT_NEAR(reports[0].test_accuracy, dense::evaluate(net, other.data(), test).accuracy,
                1.0 / static_cast<double>(test.size()));
    return store.snapshot();
  };
  std::vector<float> cpu_seen, gpu_seen, eager_seen;
  const auto c = run(dense::train, cpu_seen);
  const auto g = run(gpu::train, gpu_seen);
  EXPECT_LE(normwise_error(gpu_seen, cpu_seen), 1e-4) << "after epoch 1";
  EXPECT_LE(normwise_error(g, c), 1e-4) << "after epoch 2";
  const auto e = run(train_kernel_by_kernel, eager_seen);
  EXPECT_LE(normwise_error(eager_seen, cpu_seen), 1e-4) << "kernel by kernel, after epoch 1";
  EXPECT_LE(normwise_error(e, c), 1e-4) << "kernel by kernel, after epoch 2";
}

// The hook after every K updates (under mpirun: the ranks' averaging) sees
// the device's parameters and what it leaves is what training continues
// from, as on the CPU; at tau > 0 it runs as often.
TEST(GpuTraining, AfterUpdatesHookAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const dense::Network net = dense::lenet5();
  const dense::Dataset d = bars(256, 12);
  std::vector<float> init(net.layout().size()), other(init.size());
  net.initialize(init, 14);
  net.initialize(other, 15);
  dense::TrainOptions o;
  o.epochs = 2;
  o.batch = 32;  // 8 updates an epoch: the hook after updates 3, 6, 9, 12, 15
  o.lr = 0.05f;
  o.every_updates = 3;
  auto run = [&](auto&& trainer, std::vector<float>& seen, int& calls) {
    ParamStore store = ParamStore::on_heap(net.layout());
    store.assign(init);
    std::vector<float> momentum;
    dense::TrainOptions hooked = o;
    hooked.after_updates = [&] {
      if (++calls == 2) {
        seen = store.snapshot();
        store.assign(other);
      }
    };
    trainer(net, store, momentum, d, nullptr, hooked, {});
    return store.snapshot();
  };
  std::vector<float> cpu_seen, gpu_seen, eager_seen;
  int cpu_calls = 0, gpu_calls = 0, eager_calls = 0;
  const auto c = run(dense::train, cpu_seen, cpu_calls);
  const auto g = run(gpu::train, gpu_seen, gpu_calls);
  const auto e = run(train_kernel_by_kernel, eager_seen, eager_calls);
  EXPECT_EQ(cpu_calls, 5);
  EXPECT_EQ(gpu_calls, 5);
  EXPECT_EQ(eager_calls, 5);
  EXPECT_LE(normwise_error(gpu_seen, cpu_seen), 1e-4) << "after update 6";
  EXPECT_LE(normwise_error(g, c), 1e-4) << "at the end";
  EXPECT_LE(normwise_error(eager_seen, cpu_seen), 1e-4) << "kernel by kernel, after update 6";
  EXPECT_LE(normwise_error(e, c), 1e-4) << "kernel by kernel, at the end";
  // The second epoch alone, resumed: the rhythm counts the first epoch's
  // updates, so the hook runs after updates 9, 12 and 15.
  dense::TrainOptions resumed = o;
  resumed.first_epoch = 1;
  resumed.epochs = 1;
  resumed.total_epochs = 2;
  std::swap(o, resumed);
  cpu_calls = gpu_calls = 0;
  run(dense::train, cpu_seen, cpu_calls);
  run(gpu::train, gpu_seen, gpu_calls);
  EXPECT_EQ(cpu_calls, 3) << "resumed";
  EXPECT_EQ(gpu_calls, 3) << "resumed";
  std::swap(o, resumed);
  o.workers = 2;
  o.tau = 2;
  gpu_calls = 0;
  gpu_seen.clear();
  run(gpu::train, gpu_seen, gpu_calls);
  EXPECT_EQ(gpu_calls, 5) << "tau 2, 2 streams";
  // One stream at tau inf computes on its own last update, as one CPU worker does: after the hook, on the
  // hook's parameters, not on the snapshot taken before it.
  o.workers = 1;
  o.tau = kUnbounded;
  cpu_calls = gpu_calls = 0;
  const auto c1 = run(dense::train, cpu_seen, cpu_calls);
  const auto g1 = run(gpu::train, gpu_seen, gpu_calls);
  EXPECT_EQ(gpu_calls, 5) << "tau inf, 1 stream";
  EXPECT_LE(normwise_error(g1, c1), 1e-4) << "tau inf, 1 stream, at the end";
}

// A stop request (Ctrl-C) ends the epoch at the next step, as on the CPU: no report for the unfinished epoch, and
// the host's parameters and momentum hold the updates made before it.
TEST(GpuTraining, AStopRequestEndsTheEpochAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const dense::Network net = dense::lenet5();
  const dense::Dataset d = bars(256, 12);
  std::vector<float> init(net.layout().size());
  net.initialize(init, 14);
  for (const std::uint64_t tau : {std::uint64_t{0}, kUnbounded}) {
    SCOPED_TRACE(::testing::Message() << "tau " << tau);
    dense::TrainOptions o;
    o.epochs = 2;
    o.batch = 32;  // 8 updates an epoch; the request comes from the hook after update 3
    o.lr = 0.05f;
    o.tau = tau;
    o.every_updates = 3;
    auto run = [&](auto&& trainer, std::vector<float>& momentum, std::size_t& reports) {
      ParamStore store = ParamStore::on_heap(net.layout());
      store.assign(init);
      std::atomic<bool> stop{false};
      dense::TrainOptions stopped = o;
      stopped.stop = &stop;
      stopped.after_updates = [&] { stop.store(true); };
      reports = trainer(net, store, momentum, d, nullptr, stopped, {}).size();
      return store.snapshot();
    };
    std::vector<float> cpu_momentum, gpu_momentum;
    std::size_t cpu_reports = 9, gpu_reports = 9;
    const auto c = run(dense::train, cpu_momentum, cpu_reports);
    const auto g = run(gpu::train, gpu_momentum, gpu_reports);
    EXPECT_EQ(cpu_reports, 0u);
    EXPECT_EQ(gpu_reports, 0u);
    EXPECT_GT(normwise_error(c, init), 1e-3) << "3 updates made";
    EXPECT_LE(normwise_error(g, c), 1e-4) << "parameters";
    EXPECT_LE(normwise_error(gpu_momentum, cpu_momentum), 1e-4) << "momentum";
  }
  // Several streams: each host thread stops before its next step, and the epoch is unfinished.
  for (const std::uint64_t tau : {std::uint64_t{2}, kUnbounded}) {
    SCOPED_TRACE(::testing::Message() << "3 streams, tau " << tau);
    dense::TrainOptions o;
    o.epochs = 2;
    o.batch = 16;  // 16 updates an epoch
    o.lr = 0.05f;
    o.workers = 3;
    o.tau = tau;
    o.every_updates = 3;
    std::atomic<bool> stop{false};
    o.stop = &stop;
    o.after_updates = [&] { stop.store(true); };
    ParamStore store = ParamStore::on_heap(net.layout());
    store.assign(init);
    std::vector<float> momentum;
    EXPECT_TRUE(gpu::train(net, store, momentum, d, nullptr, o, {}).empty());
    EXPECT_GT(normwise_error(store.snapshot(), init), 1e-3) << "updates made before the stop";
  }
}

// A stop request from outside (a signal handler's flag) ends a synchronous
// run within a couple of rounds: the host queues at most kQueueDepth rounds
// ahead of the device. It queued every round of the epoch at once, so a
// stop waited for the device to finish the epoch (on the emulator, whose
// host runs far ahead of its streams as a GPU's does, the whole of it).
TEST(GpuTraining, AStopFromOutsideEndsASynchronousRunWithinRounds) {
  SKIP_WITHOUT_GPU();
  const dense::Network net = dense::lenet5();
  const dense::Dataset d = bars(2048, 31);
  std::vector<float> init(net.layout().size());
  net.initialize(init, 32);
  dense::TrainOptions o;
  o.epochs = 1;
  o.batch = 8;  // 256 rounds
  o.lr = 0.01f;
  o.tau = 0;
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  auto train = [&](std::atomic<bool>* stop) {
    ParamStore store = ParamStore::on_heap(net.layout());
    store.assign(init);
    std::vector<float> momentum;
    dense::TrainOptions run = o;
    run.stop = stop;
    return gpu::train(net, store, momentum, d, nullptr, run, {}).size();
  };
  const auto t0 = Clock::now();
  ASSERT_EQ(train(nullptr), 1u);
  const double epoch = seconds_since(t0);
  // What a run costs without its rounds (buffers, streams, handles, the upload): stopped before it starts. On a
  // GPU this is a fair part of a 256-round epoch, so the rounds' time is measured apart from it.
  std::atomic<bool> stop{true};
  const auto ts = Clock::now();
  EXPECT_EQ(train(&stop), 0u);
  const double setup = std::min(seconds_since(ts), epoch);
  const double rounds = epoch - setup;
  stop.store(false);
  const auto t1 = Clock::now();
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(setup + rounds / 10));
    stop.store(true);
  });
  const std::size_t reports = train(&stop);
  const double stopped_after = seconds_since(t1);
  stopper.join();
  EXPECT_EQ(reports, 0u) << "the epoch is unfinished";
  // Stopped a tenth into the rounds: well before their end (the rounds queued before the request finish first).
  EXPECT_LT(stopped_after, setup + rounds / 2) << "an epoch takes " << epoch << " s, " << setup << " s of it setup";
}

// A CUDA graph replays the step it captured: training with graphs gives the
// parameters, momentum and losses of kernel-by-kernel training. Synchronous
// rounds of 2 streams fix the order of the updates; 200 images in batches of
// 32 leave a short last batch, which runs kernel by kernel.
TEST(GpuTraining, CudaGraphsTrainAsKernelByKernel) {
  SKIP_WITHOUT_GPU();
  const dense::Network net = dense::lenet5();
  const dense::Dataset d = bars(200, 21), test = bars(100, 22);
  std::vector<float> init(net.layout().size());
  net.initialize(init, 23);
  gpu::GpuTrainOptions o;
  o.epochs = 2;
  o.batch = 32;
  o.workers = 2;
  o.lr = 0.05f;
  struct Run {
    std::vector<float> params, momentum;
    std::vector<dense::EpochReport> reports;
  };
  auto run = [&](bool graphs) {
    ParamStore store = ParamStore::on_heap(net.layout());
    store.assign(init);
    Run r;
    o.cuda_graphs = graphs;
    r.reports = gpu::train(net, store, r.momentum, d, &test, o);
    r.params = store.snapshot();
    return r;
  };
  const Run eager = run(false), graphs = run(true);
  EXPECT_LE(normwise_error(graphs.params, eager.params), 1e-4);
  EXPECT_LE(normwise_error(graphs.momentum, eager.momentum), 1e-4);
  ASSERT_EQ(graphs.reports.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(graphs.reports[e].graph_steps, 6u) << e;  // every full batch of 32
    EXPECT_EQ(eager.reports[e].graph_steps, 0u) << e;
    EXPECT_NEAR(graphs.reports[e].mean_loss, eager.reports[e].mean_loss, 1e-4 * eager.reports[e].mean_loss) << e;
    EXPECT_NEAR(graphs.reports[e].test_accuracy, eager.reports[e].test_accuracy, 2.0 / 100) << e;
  }
  // Training moved the parameters: the comparison is not of two copies of init.
  EXPECT_GT(normwise_error(graphs.params, init), 1e-3);
}

// Every rule on 1 and 3 streams; stale streams with CUDA graphs too (each
// graph reads its own stream's view). One test per case, so that each has its
// own time limit (the emulator under ThreadSanitizer takes about a minute a
// case) and ctest can run them side by side.
struct DelayCase {
  std::uint64_t tau;
  std::size_t workers;
  bool graphs;
};

// What ctest's test list shows for a case (gtest would print its bytes).
void PrintTo(const DelayCase& c, std::ostream* os) {
  *os << "tau " << (c.tau == kUnbounded ? std::string("unbounded") : std::to_string(c.tau)) << ", " << c.workers
      << (c.workers == 1 ? " stream" : " streams") << (c.graphs ? ", graphs" : "");
}

class GpuDelayRule : public ::testing::TestWithParam<DelayCase> {};

TEST_P(GpuDelayRule, Learns) {
  SKIP_WITHOUT_GPU();
  const auto [tau, workers, graphs] = GetParam();
  const dense::Network net = dense::lenet5();
  const dense::Dataset train = bars(3000, 9), test = bars(500, 10);
  ParamStore store = ParamStore::on_heap(net.layout());
  std::vector<float> init(store.size()), momentum;
  net.initialize(init, 11);
  store.assign(init);
  gpu::GpuTrainOptions o;
  o.cuda_graphs = graphs;
  o.epochs = 2;
  o.batch = 32;
  o.workers = workers;
  o.tau = tau;
  o.lr = 0.02f;
  // Momentum 0.9 at a mean staleness of 2 is on the edge of divergence
  // here, on the CPU as well: compensation (the explicit momentum less
  // the implicit s / (s + 1)) is how stale runs are meant to be trained.
  o.compensate = tau != 0;
  const auto reports = gpu::train(net, store, momentum, train, &test, o);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports.back().graph_steps, graphs ? 3000u / 32 : 0u);  // the full batches
  EXPECT_LT(reports.back().mean_loss, reports.front().mean_loss);
  EXPECT_GT(reports.back().test_accuracy, 0.9);
  if (tau != kUnbounded) {
    EXPECT_LE(reports.back().max_view_age, tau);
  }
  if (tau == 0 || (workers == 1 && tau == kUnbounded)) {
    EXPECT_EQ(reports.back().max_staleness, 0u);
  }
  // The layout's padding between tensors is never touched.
  for (std::size_t i = 0; i < store.size(); ++i)
    ASSERT_TRUE(std::isfinite(store.data()[i]) && std::isfinite(momentum[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, GpuDelayRule,
    ::testing::Values(DelayCase{0, 1, false}, DelayCase{0, 3, false}, DelayCase{2, 1, false}, DelayCase{2, 3, false},
                      DelayCase{2, 3, true}, DelayCase{kUnbounded, 1, false}, DelayCase{kUnbounded, 3, false},
                      DelayCase{kUnbounded, 3, true}),
    [](const ::testing::TestParamInfo<DelayCase>& info) {
      const DelayCase& c = info.param;
      return (c.tau == kUnbounded ? std::string("TauUnbounded") : "Tau" + std::to_string(c.tau)) + "_" +
             std::to_string(c.workers) + (c.workers == 1 ? "Stream" : "Streams") + (c.graphs ? "_Graphs" : "");
    });

// What `asgd cnn floor --device gpu` divides by: a timed cuBLAS SGEMM.
TEST(GpuApi, SgemmRateIsMeasured) {
  SKIP_WITHOUT_GPU();
  const double gflops = gpu::sgemm_gflops(256, 3);
  EXPECT_GT(gflops, 0.01);
  EXPECT_LT(gflops, 1e7);
  EXPECT_THROW(gpu::sgemm_gflops(0, 3), InputError);
}

// A failed CUDA call is reported once, where it failed: its error was also left as the thread's last error, and
// the next kernel's launch check reported it again, against that kernel (on a GPU; the emulated launches now
// check as kernels.cu does). Not in GpuApi: compute-sanitizer would count the refused allocation as an error.
TEST(GpuErrors, AFailedCallIsNotBlamedOnTheNextKernel) {
  SKIP_WITHOUT_GPU();
  const dense::Network net = dense::lenet5();
  std::vector<float> params(net.layout().size());
  net.initialize(params, 1);
  // 2^36 samples: more device memory than any GPU has, so cudaMalloc fails.
  const std::string failed = asgd::testing::message_of(
      [&] { gpu::layer_forward(net, 0, params.data(), nullptr, nullptr, std::size_t{1} << 36); });
  EXPECT_NE(failed.find("cudaMalloc"), std::string::npos) << failed;
  std::vector<float> in(net.input().size(), 0.5f), out(6 * 28 * 28);  // LeNet-5's first layer: conv 1->6, pad 2
  EXPECT_NO_THROW(gpu::layer_forward(net, 0, params.data(), in.data(), out.data(), 1));
}

TEST(GpuApi, UnavailableSaysWhy) {
  // Runs everywhere: either a device is usable, or the reason is given and
  // every entry point throws with it.
  const std::string why = gpu::unavailable();
  if (why.empty()) {
    EXPECT_FALSE(gpu::describe_device().empty());
    return;
  }
  const dense::Network net = dense::lenet5();
  std::vector<float> params(net.layout().size());
  const dense::Dataset d = bars(4, 1);
  try {
    gpu::evaluate(net, params.data(), d);
    FAIL() << "evaluate ran without a device";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace asgd
