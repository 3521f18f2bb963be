// The table through which asgd::gpu (api.cpp, in every build) reaches the
// CUDA backend (gpu.cpp and the kernels, built as the module
// libasgd_gpu_cuda.so). The module is loaded with dlopen on first use, so
// commands that never touch the GPU do not pay for loading cuBLAS and the
// CUDA runtime (about 60 ms per process start when linked directly).
//
// Both sides are built together by the same compiler from the same headers,
// so the table holds C++ function pointers; kBackendAbi guards against a
// module left over from another build.
#pragma once

#include <cstdint>
#include <string>

#include "asgd/gpu/gpu.hpp"

#if defined(__GNUC__)
#define ASGD_GPU_BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define ASGD_GPU_BACKEND_EXPORT
#endif

namespace asgd::gpu::detail {

inline constexpr std::uint32_t kBackendAbi = 6;  // 4: BlockTrainOptions::every_updates, after_updates; 5: stop; 6: timed evaluate

struct Backend {
  std::uint32_t abi;
  std::string (*unavailable)();
  std::string (*describe_device)();
  decltype(&asgd::gpu::train) train;
  decltype(&asgd::gpu::evaluate) evaluate;
  decltype(&asgd::gpu::sgemm_gflops) sgemm_gflops;
  decltype(&asgd::gpu::layer_forward) layer_forward;
  decltype(&asgd::gpu::layer_backward) layer_backward;
  decltype(&asgd::gpu::loss_and_gradient) loss_and_gradient;
};

}  // namespace asgd::gpu::detail

// The module's one exported symbol.
extern "C" const asgd::gpu::detail::Backend* asgd_gpu_cuda_backend();
inline constexpr const char* kAsgdGpuBackendSymbol = "asgd_gpu_cuda_backend";
