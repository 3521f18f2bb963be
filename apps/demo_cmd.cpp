// `asgd demo`: the README's main job on built-in (generated) data.
#include <fmt/format.h>

#include <memory>

#include "cli_common.hpp"
#include "asgd/sparse/linear_reference.hpp"

namespace asgd::cli {

namespace {

struct DemoFlags {
  sparse::GeneratorOptions gen;
  EngineFlags engine;
  double l2 = sparse::kReferenceL2;
  DemoFlags() {
    const Schedule s = sparse::reference_schedule();
    engine.lr = s.lr;
    engine.lr_floor = s.floor;
    engine.schedule = std::string(to_string(s.kind));
  }
};

int demo(const DemoFlags& f) {
  check_generator_flags(f.gen);
  TrainerOptions o = to_trainer_options(f.engine);
  o.on_progress = progress_printer("demo", false);
  fmt::print("asgd demo: L2-regularised logistic regression, {} examples x {} features ({} non-zeros each)\n",
             f.gen.examples, f.gen.features, f.gen.nnz_per_example);
  const sparse::LinearReference bench(f.gen, f.l2);
  fmt::print("reference optimum (L-BFGS, {} iterations, {:.1f} s): objective {:.6f}\n", bench.optimum.iterations,
             bench.lbfgs_seconds, bench.optimum.objective);
  const sparse::ReferenceRun run = bench.train(o, [](const sparse::ReferenceEpoch& e) {
    fmt::print("epoch {:2}: objective {:.6f}  gap to optimum {:.2e}  ({:.2f} s, {:.3g} examples/s)\n", e.epoch,
               e.objective, e.gap, e.seconds, e.examples_per_second);
  });
  fmt::print("{} {} workers ({}, tau {}): objective within {:.1e} of the optimum{}; accuracy {:.4f} (optimum {:.4f})\n",
             o.consistency == Consistency::racy ? "Hogwild!" : "asgd", o.workers, to_string(o.consistency),
             tau_to_string(o.tau), run.gap, run.gap <= 1e-3 ? " (target 1e-3: met)" : " (target 1e-3: NOT met)",
             run.accuracy, run.optimum_accuracy);
  return run.gap <= 1e-3 ? 0 : kExitRuntime;
}

}  // namespace

void add_demo_command(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<DemoFlags>();
  auto* cmd = app.add_subcommand("demo", "Train the built-in demo: logistic regression on generated data");
  cmd->add_option("--examples", f->gen.examples, "Examples")->capture_default_str();
  cmd->add_option("--features", f->gen.features, "Features")->capture_default_str();
  cmd->add_option("--nnz", f->gen.nnz_per_example, "Non-zeros per example")->capture_default_str();
  cmd->add_option("--l2", f->l2, "L2 strength")->capture_default_str();
  add_engine_flags(*cmd, f->engine);
  cmd->callback([f, &exit_code] { exit_code = run_guarded([&] { return demo(*f); }); });
}

}  // namespace asgd::cli
