#include "asgd/sparse/linear_reference.hpp"

#include <chrono>
#include <vector>

#include "asgd/engine/param_store.hpp"

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

ReferenceRun LinearReference::train(const TrainerOptions& options,
                                    const std::function<void(const ReferenceEpoch&)>& on_epoch) const {
  auto store = ParamStore::on_heap(problem.layout());
  Trainer trainer(store, options);
  double seconds = 0;
  for (std::uint64_t e = 1; e <= options.epochs; ++e) {
    const auto r = trainer.run(problem, e);
    seconds += r.seconds;
    const auto w = store.snapshot();
    if (on_epoch) on_epoch({e, problem.objective(w), relative_gap(w), seconds, r.examples_per_second});
  }
  const auto w = store.snapshot();
  return {relative_gap(w), problem.accuracy(w),
          problem.accuracy(std::vector<float>(optimum.weights.begin(), optimum.weights.end()))};
}

}  // namespace asgd::sparse
