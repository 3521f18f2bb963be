// The GPU's timed evaluation and floor, over the API's calls (in every build: without a device they throw
// with the reason, as the calls they use do).
#include <vector>

#include "asgd/gpu/gpu.hpp"

namespace asgd::gpu {

dense::TimedEval evaluate_timed(const dense::Network& net, const float* params, const dense::Dataset& data,
                                const dense::TimedEvalOptions& options) {
  options.validate();
  dense::TimedEval timed;
  timed.seconds.resize(options.repeats);
  timed.result = evaluate(net, params, data, options.batch, timed.seconds);
  return timed;
}

dense::Floor measure_floor(const dense::Network& net, const dense::FloorOptions& options) {
  options.validate();
  const std::size_t n = dense::floor_size(options, kGpuFloorSize);
  return dense::floor_at(net, n, options.repeats, sgemm_gflops(n, options.repeats), 1);
}

}  // namespace asgd::gpu
