#include "linear_sweep.hpp"

#include <chrono>

namespace asgd::cli {

LinearBenchProblem::LinearBenchProblem(const sparse::GeneratorOptions& gen, double l2)
    : generated(sparse::generate_sparse(gen)),
      problem(std::make_unique<sparse::LogisticProblem>(generated.data, l2)) {
  const auto start = std::chrono::steady_clock::now();
  optimum = sparse::solve_lbfgs(*problem, 1e-9, 3000);
  lbfgs_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Schedule default_linear_schedule() {
  Schedule s;
  s.kind = ScheduleKind::linear;
  s.lr = 0.5f;
  s.floor = 0.0f;
  return s;
}

}  // namespace asgd::cli
