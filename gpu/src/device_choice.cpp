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

namespace {

// `refusal` when `set` on the GPU asked for by name, `note` when auto took it.
std::string unused(const DeviceChoice& choice, bool set, const std::string& refusal, const std::string& note) {
  if (!choice.gpu || !set) return {};
  if (choice.gpu_required()) throw InputError(refusal);
  return note;
}

}  // namespace

std::string cpu_settings_unused(const DeviceChoice& choice, const dense::TrainChoices& choices) {
  // The CPU's GEMM threads mean nothing to the GPU (its streams are the workers).
  return unused(choice, choices.threads > 0,
                "TrainChoices::threads: the CPU's GEMM threads; not with DeviceChoice::device gpu",
                "TrainChoices::threads is for the CPU; the GPU run ignores it");
}

std::string cpu_settings_unused(const DeviceChoice& choice, const dense::TimedEvalOptions& options) {
  return unused(choice, options.threads > 1,
                "TimedEvalOptions::threads: CPU threads; not with DeviceChoice::device gpu (one stream evaluates)",
                "TimedEvalOptions::threads is for the CPU; the GPU evaluation ignores it");
}

std::string cpu_settings_unused(const DeviceChoice& choice, const dense::FloorOptions& options) {
  const bool workers = options.workers > 1, threads = options.threads > 1;
  const std::string names = workers && threads ? "FloorOptions::workers and FloorOptions::threads"
                            : workers          ? "FloorOptions::workers"
                                               : "FloorOptions::threads";
  return unused(choice, workers || threads,
                names + ": CPU only (GPU streams share the device's floor)",
                names + ": CPU only (ignored for the GPU's floor)");
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
