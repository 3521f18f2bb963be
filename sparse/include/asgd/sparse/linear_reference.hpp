// The engine's reference problem: a generated L2-regularised logistic
// regression with its L-BFGS optimum, and the schedule that reaches it. The
// demo, `asgd bench staleness --problem linear` and bench_consistency all
// train and measure against this one definition.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "asgd/engine/schedule.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/sparse/generator.hpp"
#include "asgd/sparse/linear.hpp"

namespace asgd::sparse {

// Strong enough that the optimum is unique and well defined, weak enough that
// it is far from w = 0.
inline constexpr double kReferenceL2 = 1e-5;

// Linear decay from 0.5 to 0: within 1e-3 of the optimum in 10 epochs for
// kReferenceL2 on the generator's data (bench/RESULTS.md).
Schedule reference_schedule();

// An epoch of LinearReference::train: the weights' objective and relative gap to the optimum, the seconds of
// training so far, the epoch's rate.
struct ReferenceEpoch {
  std::uint64_t epoch = 0;
  double objective = 0, gap = 0, seconds = 0, examples_per_second = 0;
};
// Where a LinearReference::train run ended: the final weights' gap, and their accuracy beside the optimum's.
struct ReferenceRun {
  double gap = 0, accuracy = 0, optimum_accuracy = 0;
};

struct LinearReference {
  GeneratedData generated;
  LinearProblem problem;  // refers to generated.data
  LbfgsResult optimum;
  double lbfgs_seconds = 0;

  explicit LinearReference(const GeneratorOptions& gen = {}, double l2 = kReferenceL2);
  LinearReference(const LinearReference&) = delete;  // `problem` points into `generated`
  LinearReference& operator=(const LinearReference&) = delete;

  // (f(w) - f*) / f*
  double relative_gap(std::span<const float> w) const {
    return (problem.objective(w) - optimum.objective) / optimum.objective;
  }
  // Trains the problem from zero weights on the heap as `options` say (workers, epochs, schedule, ...), telling
  // each epoch to `on_epoch` (the demo's report), and measures the end against the optimum.
  ReferenceRun train(const TrainerOptions& options, const std::function<void(const ReferenceEpoch&)>& on_epoch = {})
      const;
};

}  // namespace asgd::sparse
