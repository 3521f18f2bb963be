// gpu::choose_device: cpu, gpu or auto, what was taken and why; a word it
// does not know, or gpu where none can be used, names DeviceChoice::device.
// And the calls on the device chosen: gpu::fit_on (a dense run's device,
// trainer and stream check), evaluate_timed_on, measure_floor_on. Runs
// without a device (and under the emulated backend, where the GPU is taken).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../common/message_of.hpp"
#include "asgd/dense/fit.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/gpu/device_choice.hpp"
#include "asgd/gpu/gpu.hpp"

namespace asgd::gpu {
namespace {

using asgd::testing::message_of;

TEST(DeviceChoice, TheCpuAskedForIsTakenWithoutLookingForAGpu) {
  const DeviceChoice c = choose_device("cpu");
  EXPECT_EQ(c.device, "cpu");
  EXPECT_FALSE(c.gpu);
  EXPECT_FALSE(c.gpu_required());
  EXPECT_TRUE(c.description.empty());
  EXPECT_TRUE(c.fallback.empty());
  EXPECT_EQ(c.describe(), "");
}

TEST(DeviceChoice, AnotherWordNamesTheOption) {
  for (const char* word : {"GPU", "", "cuda"})
    EXPECT_EQ(message_of([&] { choose_device(word); }),
              "DeviceChoice::device: expected cpu, gpu or auto, got '" + std::string(word) + "'");
}

// Without a usable GPU: gpu is refused, saying why; auto takes the CPU and says why.
TEST(DeviceChoice, WithoutAGpuAutoFallsBackAndGpuIsRefused) {
  const std::string why = unavailable();
  if (why.empty()) GTEST_SKIP() << "a GPU can be used here";
  try {
    choose_device("gpu");
    FAIL() << "gpu was taken without a device";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "DeviceChoice::device gpu: " + why + "; use DeviceChoice::device cpu or auto");
  }
  const DeviceChoice c = choose_device("auto");
  EXPECT_FALSE(c.gpu);
  EXPECT_FALSE(c.gpu_required());
  EXPECT_EQ(c.fallback, why);
  EXPECT_EQ(c.describe(), "cpu (" + why + ")");
}

// With one: both take it, described; only gpu requires it.
TEST(DeviceChoice, WithAGpuBothTakeItDescribed) {
  if (!unavailable().empty()) GTEST_SKIP() << "no GPU: " << unavailable();
  const std::string device = describe_device();
  for (const char* word : {"gpu", "auto"}) {
    const DeviceChoice c = choose_device(word);
    EXPECT_TRUE(c.gpu) << word;
    EXPECT_EQ(c.description, device);
    EXPECT_EQ(c.describe(), device);
    EXPECT_TRUE(c.fallback.empty());
    EXPECT_EQ(c.gpu_required(), std::string(word) == "gpu");
  }
}

// fit_on needs no device: it sets the run's options for the choice made.
TEST(DeviceChoice, FitOnSetsTheDeviceTrainerAndChecksTheStreams) {
  dense::FitOptions cpu;
  fit_on(DeviceChoice{}, cpu);
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_FALSE(static_cast<bool>(cpu.trainer));

  DeviceChoice taken;
  taken.device = "auto";
  taken.gpu = true;
  dense::FitOptions on_gpu;
  on_gpu.train.workers = kMaxSynchronousStreams;
  fit_on(taken, on_gpu, false);
  EXPECT_EQ(on_gpu.device, "gpu");
  EXPECT_TRUE(static_cast<bool>(on_gpu.trainer));

  dense::FitOptions too_many;
  too_many.train.workers = kMaxSynchronousStreams + 1;
  too_many.train.tau = 0;
  EXPECT_EQ(message_of([&] { fit_on(taken, too_many); }),
            "TrainOptions::workers 17: at most 16 GPU streams with TrainOptions::tau 0");
  too_many.train.tau = 1;  // streams with views of their own: no such bound
  EXPECT_NO_THROW(fit_on(taken, too_many));
  // On the CPU the GPU's bound does not apply.
  too_many.train.tau = 0;
  EXPECT_NO_THROW(fit_on(DeviceChoice{}, too_many));
}

// LeNet-5 at its initial weights and 20 images alike: what the evaluations below run.
struct Lenet {
  dense::Network net = dense::lenet5();
  std::vector<float> params;
  dense::Dataset data;
  Lenet() : params(net.layout().size()) {
    net.initialize(params, 3);
    data.rows = data.cols = 28;
    data.pixels.assign(20 * 784, 0.25f);
    data.labels.assign(20, 7);
  }
};

// The timed evaluation and the floor go where the choice went: the CPU's here whatever this machine has.
TEST(DeviceChoice, EvaluationAndFloorOnTheCpuChosen) {
  const Lenet lenet;
  const dense::Network& net = lenet.net;
  const std::vector<float>& params = lenet.params;
  const dense::Dataset& data = lenet.data;
  dense::TimedEvalOptions o;
  o.batch = 8;
  o.repeats = 2;
  const dense::TimedEval t = evaluate_timed_on(DeviceChoice{}, net, params.data(), data, o);
  EXPECT_EQ(t.seconds.size(), 2u);
  EXPECT_EQ(t.result.confusion, dense::evaluate(net, params.data(), data, 8, 1).confusion);
  dense::FloorOptions floor;
  floor.size = 32;
  floor.repeats = 1;
  floor.workers = 3;
  const dense::Floor f = measure_floor_on(DeviceChoice{}, net, floor);
  EXPECT_EQ(f.workers, 3u);  // the CPU's workers count; the GPU's floor is one device's
  EXPECT_EQ(f.size, 32u);
  o.repeats = 0;
  EXPECT_THROW(evaluate_timed_on(DeviceChoice{}, net, params.data(), data, o), InputError);
}

// And the GPU's when it was taken (the emulated backend in CI).
TEST(DeviceChoice, EvaluationAndFloorOnTheGpuChosen) {
  if (!unavailable().empty()) GTEST_SKIP() << "no GPU: " << unavailable();
  const DeviceChoice gpu = choose_device("gpu");
  const Lenet lenet;
  const dense::Network& net = lenet.net;
  const std::vector<float>& params = lenet.params;
  const dense::Dataset& data = lenet.data;
  dense::TimedEvalOptions o;
  o.repeats = 2;
  const dense::TimedEval t = evaluate_timed_on(gpu, net, params.data(), data, o);
  EXPECT_EQ(t.seconds.size(), 2u);
  EXPECT_EQ(t.result.confusion, gpu::evaluate(net, params.data(), data).confusion);
  dense::FloorOptions floor;
  floor.size = 32;
  floor.repeats = 1;
  floor.workers = 3;
  EXPECT_EQ(measure_floor_on(gpu, net, floor).workers, 1u);
}

// The CPU's settings on the GPU: refused, naming them, when the GPU was asked for by name; a note when auto took
// it; nothing on the CPU or when none is set.
TEST(DeviceChoice, TheCpusSettingsAreRefusedOnTheGpuAskedForAndNotedUnderAuto) {
  DeviceChoice asked, chosen, cpu;
  asked.device = "gpu";
  chosen.device = "auto";
  asked.gpu = chosen.gpu = true;
  dense::TrainChoices choices;
  EXPECT_EQ(cpu_settings_unused(asked, choices), "");
  choices.threads = 4;
  EXPECT_EQ(cpu_settings_unused(cpu, choices), "");
  EXPECT_EQ(message_of([&] { cpu_settings_unused(asked, choices); }),
            "TrainChoices::threads: the CPU's GEMM threads; not with DeviceChoice::device gpu");
  EXPECT_EQ(cpu_settings_unused(chosen, choices), "TrainChoices::threads is for the CPU; the GPU run ignores it");
  dense::TimedEvalOptions eval;
  eval.threads = 2;
  EXPECT_NE(message_of([&] { cpu_settings_unused(asked, eval); }).find("TimedEvalOptions::threads: CPU threads"),
            std::string::npos);
  EXPECT_EQ(cpu_settings_unused(chosen, eval), "TimedEvalOptions::threads is for the CPU; the GPU evaluation ignores it");
  dense::FloorOptions floor;
  floor.threads = floor.workers = 1;
  EXPECT_EQ(cpu_settings_unused(asked, floor), "");
  floor.workers = 2;
  EXPECT_EQ(cpu_settings_unused(chosen, floor), "FloorOptions::workers: CPU only (ignored for the GPU's floor)");
  floor.threads = 2;
  EXPECT_EQ(message_of([&] { cpu_settings_unused(asked, floor); }),
            "FloorOptions::workers and FloorOptions::threads: CPU only (GPU streams share the device's floor)");
}

}  // namespace
}  // namespace asgd::gpu
