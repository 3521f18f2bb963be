// A generated logistic-regression problem with its L-BFGS optimum: what the
// demo and `asgd bench staleness --problem linear` train and measure against.
#pragma once

#include <cstdint>
#include <memory>

#include "asgd/engine/trainer.hpp"
#include "asgd/sparse/generator.hpp"
#include "asgd/sparse/linear.hpp"

namespace asgd::cli {

struct LinearBenchProblem {
  sparse::GeneratedData generated;
  std::unique_ptr<sparse::LogisticProblem> problem;
  sparse::LbfgsResult optimum;
  double lbfgs_seconds = 0;

  LinearBenchProblem(const sparse::GeneratorOptions& gen, double l2);
  // `problem` points into `generated`: never copy or move one.
  LinearBenchProblem(const LinearBenchProblem&) = delete;
  LinearBenchProblem& operator=(const LinearBenchProblem&) = delete;
  double relative_gap(std::span<const float> w) const {
    return (problem->objective(w) - optimum.objective) / optimum.objective;
  }
};

// Regularisation of the built-in problem: strong enough that the optimum is
// unique and well defined, weak enough that it is far from w = 0.
inline constexpr double kDefaultLinearL2 = 1e-5;

// The learning-rate schedule that reaches the optimum within 1e-3 for
// l2 = kDefaultLinearL2 on the generator's data (measured: bench/RESULTS.md).
Schedule default_linear_schedule();

}  // namespace asgd::cli
