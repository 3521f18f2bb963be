#include "asgd/gpu/device_choice.hpp"

#include "asgd/engine/errors.hpp"
#include "asgd/gpu/gpu.hpp"

namespace asgd::gpu {

std::string DeviceChoice::describe() const {
  if (gpu) return description;
  return device == "auto" ? "cpu (" + fallback + ")" : std::string();
}

DeviceChoice choose_device(const std::string& device) {
  DeviceChoice c;
  c.device = device;
  if (device == "cpu") return c;
  if (device != "gpu" && device != "auto")
    throw InputError("DeviceChoice::device: expected cpu, gpu or auto, got '" + device + "'");
  const std::string why = unavailable();
  if (!why.empty()) {
    if (device == "gpu")
      throw InputError("DeviceChoice::device gpu: " + why + "; use DeviceChoice::device cpu or auto");
    c.fallback = why;
    return c;
  }
  c.gpu = true;
  c.description = describe_device();
  return c;
}

void fit_on(const DeviceChoice& choice, dense::FitOptions& options, bool cuda_graphs) {
  options.device = choice.gpu ? "gpu" : "cpu";
  if (!choice.gpu) return;
  check_streams(options.train.workers, options.train.tau);
  options.trainer = trainer(cuda_graphs);
}

dense::TimedEval evaluate_timed_on(const DeviceChoice& choice, const dense::Network& net, const float* params,
                                   const dense::Dataset& data, const dense::TimedEvalOptions& options) {
  return choice.gpu ? gpu::evaluate_timed(net, params, data, options)
                    : dense::evaluate_timed(net, params, data, options);
}

dense::Floor measure_floor_on(const DeviceChoice& choice, const dense::Network& net,
                              const dense::FloorOptions& options) {
  return choice.gpu ? gpu::measure_floor(net, options) : dense::measure_floor(net, options);
}

}  // namespace asgd::gpu
