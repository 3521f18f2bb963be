#include "asgd/sparse/linear_reference.hpp"

#include <chrono>

namespace asgd::sparse {

Schedule reference_schedule() {
  Schedule s;
  s.kind = ScheduleKind::linear;
  s.lr = 0.5f;
  s.floor = 0.0f;
  return s;
}

namespace {
LbfgsResult timed_solve(const LinearProblem& problem, double& seconds) {
  const auto start = std::chrono::steady_clock::now();
  LbfgsResult r = solve_lbfgs(problem, 1e-9, 3000);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}
}  // namespace

LinearReference::LinearReference(const GeneratorOptions& gen, double l2)
    : generated(generate_sparse(gen)), problem(generated.data, l2), optimum(timed_solve(problem, lbfgs_seconds)) {}

}  // namespace asgd::sparse
