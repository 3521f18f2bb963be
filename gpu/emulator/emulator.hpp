// The emulated backend's streams (cuda_host.cpp): each stream is a host
// thread running its queue in order, events order work across streams as
// cudaStreamWaitEvent does, and nothing else does, so work that the code
// forgot to order really runs concurrently (and ThreadSanitizer sees it).
#pragma once

#include <cstddef>
#include <cuda_runtime_api.h>
#include <functional>

namespace asgd::gpu::emulator {

// Queues `work` on stream s (it runs after everything queued on s before
// it); std::logic_error for the null stream, which gpu/ never uses.
void enqueue(cudaStream_t s, std::function<void()> work);
// A kernel launch: enqueue, after checking that s belongs to the calling
// thread's current device (std::logic_error otherwise, as CUDA refuses it).
void launch(cudaStream_t s, std::function<void()> work);
// A kernel's pointer operand, before its launch: `bytes` from p must lie
// inside one live device allocation (std::logic_error naming `what`
// otherwise). Stricter than a GPU, which would read or write out of bounds,
// or fault on a host pointer, only when the kernel runs.
void require_operand(const void* p, std::size_t bytes, const char* what);
// How many operations (kernels, cuBLAS calls, copies, fills, event records
// and waits) were ever queued on stream s, captured ones included: what a
// GPU would launch one by one.
std::size_t operations(cudaStream_t s);

}  // namespace asgd::gpu::emulator
