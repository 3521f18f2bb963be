// Which device a run takes: the CPU, the GPU (refused when none can be
// used), or auto (the GPU when one can be used, else the CPU), with what it
// got and why, for the caller to say; and the dense calls on the device chosen.
#pragma once

#include <string>

#include "asgd/dense/fit.hpp"
#include "asgd/dense/floor.hpp"
#include "asgd/dense/train_choices.hpp"
#include "asgd/dense/trainer.hpp"
// The GPU's calls, and for a program built against the installed package, the backend it loads (see gpu.hpp).
#include "asgd/gpu/gpu.hpp"

namespace asgd::gpu {

struct DeviceChoice {
  std::string device = "cpu";  // as asked: cpu, gpu or auto
  bool gpu = false;            // the run takes the GPU
  std::string description;     // describe_device(), when it does
  std::string fallback;        // auto on the CPU: why no GPU could be used (unavailable())
  // The GPU was asked for by name: settings for the CPU alone are refused, where under auto they are ignored.
  bool gpu_required() const noexcept { return device == "gpu"; }
  // What the run uses, in words: the GPU's description, or "cpu (why)" when auto fell back; empty when the
  // CPU was asked for.
  std::string describe() const;
};

// The choice for `device`: InputError naming DeviceChoice::device for another word, or for gpu when no GPU can be
// used (saying why). A GPU taken is described here, so a device that cannot be used ($ASGD_GPU_DEVICE past the
// devices: describe_device's InputError) is refused before a caller writes anything.
DeviceChoice choose_device(const std::string& device);

// A dense run on the device `choice` took: options.device says which (the files record it); on the GPU,
// options.trainer is gpu::trainer(cuda_graphs), and the streams are checked first (check_streams: InputError
// naming TrainOptions::workers), so a caller learns before it opens any output.
void fit_on(const DeviceChoice& choice, dense::FitOptions& options, bool cuda_graphs = true);
// The CPU's settings that a run on the GPU `choice` took would ignore (cnn train's threads, evaluation's threads,
// the floor's workers and threads): InputError naming them when the GPU was asked for by name, else a note that
// says they are ignored, for the caller to print; empty when none is set or the run is on the CPU.
std::string cpu_settings_unused(const DeviceChoice& choice, const dense::TrainChoices& choices);
std::string cpu_settings_unused(const DeviceChoice& choice, const dense::TimedEvalOptions& options);
std::string cpu_settings_unused(const DeviceChoice& choice, const dense::FloorOptions& options);

// On the device `choice` took: gpu::evaluate_timed or dense::evaluate_timed, gpu::measure_floor or
// dense::measure_floor (see those).
dense::TimedEval evaluate_timed_on(const DeviceChoice& choice, const dense::Network& net, const float* params,
                                   const dense::Dataset& data, const dense::TimedEvalOptions& options);
dense::Floor measure_floor_on(const DeviceChoice& choice, const dense::Network& net,
                              const dense::FloorOptions& options);

}  // namespace asgd::gpu
