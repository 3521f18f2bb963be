// The emulated backend's stream capture (gpu/emulator/cuda_host.cpp), through
// the Graph, Stream and DeviceBuffer wrappers the trainer uses: a graph
// replays what was queued on the capturing stream, and what a global-mode
// capture forbids fails, ends the capture with an error and leaves the
// stream usable. And how many operations a LeNet-5 step queues: at this
// size the step is bound by launches, and fusing layers is what cuts them.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../../gpu/emulator/emulator.hpp"
#include "../../gpu/src/cuda_util.hpp"
#include "../../gpu/src/network.hpp"
#include "asgd/dense/network.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::gpu::detail {
namespace {

TEST(EmulatedCapture, AGraphReplaysTheCapturedWorkInOrder) {
  Stream s;
  DeviceBuffer<float> x(4);
  std::vector<int> seen;
  const Graph graph(s.get(), [&] {
    emulator::launch(s.get(), [&] { seen.push_back(1); });
    x.zero(s.get());
    emulator::launch(s.get(), [&] { seen.push_back(2); });
  });
  s.synchronize();
  EXPECT_TRUE(seen.empty()) << "captured work ran at capture";
  graph.launch(s.get());
  graph.launch(s.get());
  s.synchronize();
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 1, 2}));
}

TEST(EmulatedCapture, WhatACaptureForbidsFailsAndEndsIt) {
  Stream s;
  DeviceBuffer<float> d(4);
  float host[4] = {1, 2, 3, 4};
  auto fails_in_capture = [&](const char* what, auto&& record) {
    SCOPED_TRACE(what);
    try {
      const Graph graph(s.get(), record);
      ADD_FAILURE() << "captured";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("cudaErrorStreamCapture"), std::string::npos) << e.what();
    }
    // The capture is over: the stream runs work again and allocation works.
    DeviceBuffer<float> after(4);
    ASGD_CUDA(cudaMemcpyAsync(after.get(), host, sizeof host, cudaMemcpyHostToDevice, s.get()));
    float back[4] = {};
    ASGD_CUDA(cudaMemcpyAsync(back, after.get(), sizeof back, cudaMemcpyDeviceToHost, s.get()));
    EXPECT_EQ(back[3], 4.0f);
  };
  fails_in_capture("allocation", [] { DeviceBuffer<float> tmp(4); });
  fails_in_capture("stream synchronisation", [&] { s.synchronize(); });
  fails_in_capture("device synchronisation", [] { ASGD_CUDA(cudaDeviceSynchronize()); });
  fails_in_capture("copy from pageable memory", [&] {
    ASGD_CUDA(cudaMemcpyAsync(d.get(), host, sizeof host, cudaMemcpyHostToDevice, s.get()));
  });
  fails_in_capture("event record", [&] {
    const Event e;
    e.record(s.get());
  });

  // The failed call invalidates the capture: ending it says so and gives no graph.
  ASSERT_EQ(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeGlobal), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s.get(), &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  cudaGetLastError();
}

// Event::done() asks without waiting: true for an event never recorded, false
// while its stream has not reached the record, and the not-ready answer does
// not stay behind as the thread's last error (which the next launch check
// reads). The emulator leaves it there, the stricter reading of CUDA's rules.
TEST(EmulatedEvents, DoneAsksWithoutWaitingAndLeavesNoError) {
  Stream s;
  Event e;
  EXPECT_TRUE(e.done());
  std::atomic<bool> release{false};
  emulator::launch(s.get(), [&] {
    while (!release.load()) std::this_thread::yield();
  });
  e.record(s.get());
  EXPECT_FALSE(e.done());
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  release = true;
  e.synchronize();
  EXPECT_TRUE(e.done());
}

// gpu/'s streams are non-blocking, which a GPU does not order against the
// legacy null stream: work there would be ordered here and race there.
TEST(EmulatedEvents, TheNullStreamIsRefused) {
  EXPECT_THROW(emulator::enqueue(nullptr, [] {}), std::logic_error);
  Event e;
  EXPECT_THROW(e.record(nullptr), std::logic_error);
  EXPECT_TRUE(e.done());  // the refused record is not waited for
}

// Forward: conv (im2col, GEMM, bias + ReLU) and pool twice, the second pool
// writing the flattened layout, then three linear layers (GEMM, bias [+ ReLU])
// = 14; the softmax cross-entropy 1; backward: three linear layers (weight
// GEMM, bias GEMV, input GEMM) with the two ReLUs between them = 11, the
// pools with their ReLUs and the flatten = 2, the second conv (weight GEMM,
// bias GEMV, input GEMM, col2im) 4 and the first without its input gradient
// 2 = 19. With only the bias + ReLU fusion, the same step was 38.
TEST(EmulatedLaunches, ALenetStepIs34Operations) {
  const dense::Network net = dense::lenet5();
  constexpr std::size_t kBatch = 16;
  const std::size_t P = net.layout().size();
  Stream s;
  const Cublas blas(s.get());
  GpuNetwork g(net, kBatch, s.get(), blas.get());
  DeviceBuffer<float> params(P), x(kBatch * net.input().size()), grad(P);
  DeviceBuffer<std::uint8_t> y(kBatch);
  for (auto* b : {&params, &x, &grad}) b->zero(s.get());
  y.zero(s.get());
  const std::size_t before = emulator::operations(s.get());
  g.loss_and_gradient(params.get(), x.get(), y.get(), kBatch, grad.get());
  EXPECT_EQ(emulator::operations(s.get()) - before, 34u);
  s.synchronize();
}

}  // namespace
}  // namespace asgd::gpu::detail
