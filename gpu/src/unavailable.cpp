// gpu/ in a build without CUDA (ASGD_WITH_CUDA=OFF, or AUTO where nvcc or
// cuBLAS was not found): the same functions, which say so.
#include <string>

#include "asgd/engine/errors.hpp"
#include "asgd/gpu/gpu.hpp"

namespace asgd::gpu {
namespace {
[[noreturn]] void no_cuda() { throw RuntimeError("--device gpu: " + unavailable()); }
}  // namespace

bool built_with_cuda() noexcept { return false; }

std::string unavailable() {
  return "this asgd was built without CUDA (nvcc and cuBLAS were not found when it was configured; "
         "see ASGD_WITH_CUDA in the README)";
}

std::string describe_device() { no_cuda(); }

std::vector<dense::EpochReport> train(const dense::Network&, ParamStore&, std::vector<float>&, const dense::Dataset&,
                                      const dense::Dataset*, const GpuTrainOptions&,
                                      const std::function<void(const dense::EpochReport&)>&) {
  no_cuda();
}

dense::EvalResult evaluate(const dense::Network&, const float*, const dense::Dataset&, std::size_t) { no_cuda(); }

void layer_forward(const dense::Network&, std::size_t, const float*, const float*, float*, std::size_t) { no_cuda(); }

void layer_backward(const dense::Network&, std::size_t, const float*, const float*, const float*, float*, float*,
                    std::size_t) {
  no_cuda();
}

double loss_and_gradient(const dense::Network&, const float*, const float*, const std::uint8_t*, std::size_t,
                         float*) {
  no_cuda();
}

}  // namespace asgd::gpu
