// `asgd bench staleness`: convergence vs staleness. Sweeps consistency policy
// x workers x tau on a problem with a known optimum, writes one CSV row per
// (setting, epoch) and plots loss vs epoch and vs seconds.
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "asgd/config.hpp"
#include "asgd/engine/errors.hpp"
#include "cli_common.hpp"
#include "linear_sweep.hpp"

extern char** environ;

namespace asgd::cli {

namespace {

struct StalenessFlags {
  std::string problem = "linear";
  std::string policies = "racy,atomic,locked";
  std::string workers = "1,2,4,8";
  std::string taus = "0,1,8,inf";
  std::uint64_t epochs = 10;
  std::size_t step_examples = 256;
  sparse::GeneratorOptions gen;
  double l2 = kDefaultLinearL2;
  std::string out = "staleness";
  bool no_plot = false;
};

std::vector<std::string> split_list(const std::string& s, const char* flag) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  if (out.empty()) throw InputError(fmt::format("{}: expected a comma-separated list", flag));
  return out;
}

std::filesystem::path plot_script() {
  if (std::filesystem::exists(ASGD_PLOT_SCRIPT_SOURCE)) return ASGD_PLOT_SCRIPT_SOURCE;
  return ASGD_PLOT_SCRIPT_INSTALLED;
}

// Debian's matplotlib lives under /usr/bin/python3, which may not be the
// python3 first on PATH. Spawned directly (no shell): any path is safe.
int run_plot(const std::filesystem::path& csv, const std::filesystem::path& png, const std::string& title) {
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  std::vector<std::string> args = {python, plot_script().string(), csv.string(), png.string(), title};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return 127;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int staleness(const StalenessFlags& f) {
  if (f.problem != "linear") {
    throw InputError(fmt::format("--problem '{}': expected linear (w2v, mf and cnn arrive with their apps)", f.problem));
  }
  std::vector<Consistency> policies;
  for (const auto& p : split_list(f.policies, "--policies")) policies.push_back(parse_consistency(p));
  std::vector<std::size_t> workers;
  for (const auto& w : split_list(f.workers, "--workers")) {
    std::size_t v = 0;
    try {
      v = std::stoul(w);
    } catch (const std::exception&) {
      throw InputError(fmt::format("--workers: '{}' is not a number", w));
    }
    workers.push_back(v);
  }
  std::vector<std::uint64_t> taus;
  for (const auto& t : split_list(f.taus, "--taus")) taus.push_back(parse_tau(t));

  std::error_code made;
  std::filesystem::create_directories(f.out, made);
  if (made || !std::filesystem::is_directory(f.out)) {
    throw InputError(fmt::format("--out {}: cannot create the folder{}", f.out, made ? ": " + made.message() : ""));
  }
  const auto csv_path = std::filesystem::path(f.out) / "staleness_linear.csv";
  const auto png_path = std::filesystem::path(f.out) / "staleness_linear.png";
  fmt::print("problem: logistic regression, {} examples x {} features, {} non-zeros each, l2 {}\n", f.gen.examples,
             f.gen.features, f.gen.nnz_per_example, f.l2);
  const LinearBenchProblem bench(f.gen, f.l2);
  fmt::print("optimum (L-BFGS): {:.8f} (|grad| {:.1e}, {:.1f} s)\n", bench.optimum.objective,
             bench.optimum.gradient_norm, bench.lbfgs_seconds);

  std::ofstream csv(csv_path);
  csv << "problem,policy,workers,tau,epoch,seconds,objective,relative_gap,mean_staleness,max_staleness,"
         "examples_per_second\n";
  fmt::print("{:<7} {:>7} {:>4} {:>10} {:>12} {:>10} {:>9} {:>6}\n", "policy", "workers", "tau", "seconds",
             "objective", "gap", "stale", "<=1e-3");
  int missed = 0;
  for (auto policy : policies) {
    for (auto w : workers) {
      for (auto tau : taus) {
        TrainerOptions o;
        o.workers = w;
        o.epochs = f.epochs;
        o.consistency = policy;
        o.tau = tau;
        o.step_examples = f.step_examples;
        o.schedule = default_linear_schedule();
        auto store = ParamStore::on_heap(bench.problem->layout());
        Trainer trainer(store, o);
        double seconds = 0;
        double gap = 0;
        StalenessHistogram all;
        for (std::uint64_t e = 1; e <= f.epochs; ++e) {
          const auto r = trainer.run(*bench.problem, e);
          seconds += r.seconds;  // evaluation between epochs is not counted
          all.merge(r.staleness);
          const auto weights = store.snapshot();
          const double objective = bench.problem->objective(weights);
          gap = (objective - bench.optimum.objective) / bench.optimum.objective;
          csv << fmt::format("linear,{},{},{},{},{:.6f},{:.10f},{:.6e},{:.4f},{},{:.1f}\n", to_string(policy), w,
                             tau_to_string(tau), e, seconds, objective, gap, r.staleness.mean(), r.staleness.max(),
                             r.examples_per_second);
        }
        const bool ok = gap <= 1e-3;
        missed += ok ? 0 : 1;
        fmt::print("{:<7} {:>7} {:>4} {:>10.3f} {:>12.8f} {:>10.2e} {:>9.2f} {:>6}\n", to_string(policy), w,
                   tau_to_string(tau), seconds, bench.optimum.objective * (1 + gap), gap, all.mean(),
                   ok ? "yes" : "NO");
      }
    }
  }
  csv.close();
  fmt::print("wrote {}\n", csv_path.string());
  if (!f.no_plot) {
    const auto title = fmt::format("logistic regression, {}k x {}k, nnz {}: loss vs staleness", f.gen.examples / 1000,
                                   f.gen.features / 1000, f.gen.nnz_per_example);
    if (run_plot(csv_path, png_path, title) == 0) {
      fmt::print("wrote {}\n", png_path.string());
    } else {
      fmt::print(stderr, "asgd: warning: plotting failed (needs Debian's python3-matplotlib); the CSV is complete\n");
    }
  }
  if (missed > 0) fmt::print("{} setting(s) did not reach 1e-3 of the optimum\n", missed);
  return missed > 0 ? kExitRuntime : 0;
}

}  // namespace

void add_bench_commands(CLI::App& app, int& exit_code) {
  auto* bench = app.add_subcommand("bench", "Experiments: convergence vs staleness");
  bench->require_subcommand(1);
  auto f = std::make_shared<StalenessFlags>();
  auto* cmd = bench->add_subcommand("staleness", "Sweep policy x workers x tau; write CSV and PNG");
  cmd->add_option("--problem", f->problem, "Problem to sweep: linear")->capture_default_str();
  cmd->add_option("--policies", f->policies, "Comma-separated consistency policies")->capture_default_str();
  cmd->add_option("--workers", f->workers, "Comma-separated worker counts")->capture_default_str();
  cmd->add_option("--taus", f->taus, "Comma-separated bounds (inf = async)")->capture_default_str();
  cmd->add_option("--epochs", f->epochs, "Epochs per setting")->capture_default_str();
  cmd->add_option("--step", f->step_examples, "Examples per step")->capture_default_str();
  cmd->add_option("--examples", f->gen.examples, "Generated examples")->capture_default_str();
  cmd->add_option("--features", f->gen.features, "Generated features")->capture_default_str();
  cmd->add_option("--nnz", f->gen.nnz_per_example, "Non-zeros per example")->capture_default_str();
  cmd->add_option("--l2", f->l2, "L2 strength")->capture_default_str();
  cmd->add_option("--out", f->out, "Output folder for the CSV and PNG")->capture_default_str();
  cmd->add_flag("--no-plot", f->no_plot, "Write the CSV only");
  cmd->callback([f, &exit_code] { exit_code = run_guarded([&] { return staleness(*f); }); });
}

}  // namespace asgd::cli
