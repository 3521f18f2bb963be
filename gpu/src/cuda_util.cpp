// The errors of the checked CUDA and cuBLAS calls (cuda_util.hpp), shared by
// the CUDA backend, the emulated one and the emulator's tests.
#include "cuda_util.hpp"

#include <fmt/format.h>

#include "asgd/engine/errors.hpp"

namespace asgd::gpu::detail {

void throw_cuda(cudaError_t rc, const char* call, const char* file, int line) {
  // The failed call left rc as this thread's last error too: cleared, or the next ASGD_CUDA_LAUNCHED() reports it
  // again against a kernel that did nothing wrong. (A sticky error stays: every later call returns it anyway.)
  (void)cudaGetLastError();
  throw RuntimeError(fmt::format("{}:{}: {}: {} ({})", file, line, call, cudaGetErrorString(rc), cudaGetErrorName(rc)));
}

void throw_cublas(cublasStatus_t rc, const char* call, const char* file, int line) {
  throw RuntimeError(fmt::format("{}:{}: {}: {}", file, line, call, cublasGetStatusString(rc)));
}

}  // namespace asgd::gpu::detail
