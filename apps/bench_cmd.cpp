// `asgd bench staleness`: convergence vs staleness. Sweeps consistency policy
// x workers x tau on a problem with a known optimum, writes one CSV row per
// (setting, epoch) and plots loss vs epoch and vs seconds (bench/staleness).
#include <fmt/format.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "asgd/dense/mnist.hpp"
#include "cli_common.hpp"
#include "staleness_experiment.hpp"
#include "staleness_plot.hpp"

namespace asgd::cli {

namespace {

using bench::SettingResult;
using bench::SweepRun;

// The sweep's options as the flags spell them (in the library's errors, and to tell which options were given).
constexpr std::pair<std::string_view, std::string_view> kOptionNames[] = {
    {"StalenessOptions::problem", "--problem"},         {"StalenessOptions::policies", "--policies"},
    {"StalenessOptions::workers", "--workers"},         {"StalenessOptions::taus", "--taus"},
    {"StalenessOptions::epochs", "--epochs"},           {"StalenessOptions::step_examples", "--step"},
    {"StalenessOptions::gen.examples", "--examples"},   {"StalenessOptions::gen.features", "--features"},
    {"StalenessOptions::gen.nnz_per_example", "--nnz"}, {"StalenessOptions::l2", "--l2"},
    {"StalenessOptions::corpus", "--corpus"},           {"StalenessOptions::analogies", "--analogies"},
    {"StalenessOptions::ratings", "--ratings"},         {"StalenessOptions::schedules", "--schedules"},
    {"StalenessOptions::data", "--data"},               {"StalenessOptions::compensation", "--compensation"},
    {"StalenessOptions::out", "--out"}};

struct StalenessFlags {
  std::string problem = "linear";
  bench::StalenessOptions options;  // the problem set from `problem`
  bool no_plot = false;
};

// The CSV written, then the plot unless --no-plot: the PNG written, or a warning (the CSV is whole all the same).
void report_files(const bench::StalenessExperiment& sweep, bool no_plot) {
  fmt::print("wrote {}\n", sweep.csv_path().string());
  if (no_plot) return;
  if (sweep.plot()) {
    fmt::print("wrote {}\n", sweep.png_path().string());
  } else {
    fmt::print(stderr,
               "asgd: warning: plotting failed (it runs {} with /usr/bin/python3 and Debian's python3-matplotlib); "
               "the CSV is complete\n",
               bench::plot_script().string());
  }
}

// The sweep of o.problem, reported as it goes: the problem, a row per setting, the files. Linear must end every
// setting within 1e-3 of its known optimum (exit 1 otherwise); w2v adds analogy accuracy with --analogies, mf the
// block schedule (no staleness to bound), cnn each tau with and without compensation.
int staleness(const StalenessFlags& f) {
  bench::StalenessOptions o = f.options;
  o.problem = bench::parse_problem(f.problem);
  bench::check_options(o);  // the problem is known: its options can be told from the others'
  if (o.problem == bench::StalenessProblem::linear) check_generator_flags(o.gen);  // named as flags, first
  const auto sweep = bench::make_experiment(o);  // the runs listed and the CSV checked: nothing read yet
  fmt::print("{}", sweep->about_options());
  if (auto* cnn = dynamic_cast<bench::CnnExperiment*>(sweep.get()))
    cnn->load(dense::load_mnist(resolve_mnist_dir(o.data)));  // builtin: where this build keeps the digits
  else
    sweep->load();
  fmt::print("{}", sweep->about_data());
  sweep->begin();  // the data is in: the previous CSV is replaced from here
  fmt::print("{}", sweep->table_header());
  const auto summary = sweep->run([&](const SweepRun& run, const SettingResult& r) {
    fmt::print("{}", sweep->table_row(run, r));
  });
  report_files(*sweep, f.no_plot);
  if (summary.missed_optimum > 0)
    fmt::print("{} setting(s) did not reach 1e-3 of the optimum\n", summary.missed_optimum);
  return summary.missed_optimum > 0 ? kExitRuntime : 0;
}

}  // namespace

void add_bench_commands(CLI::App& app, int& exit_code) {
  auto* bench = app.add_subcommand("bench", "Experiments: convergence vs staleness");
  bench->require_subcommand(1);
  auto f = std::make_shared<StalenessFlags>();
  auto& o = f->options;
  auto* cmd = bench->add_subcommand("staleness", "Sweep policy x workers x tau; write CSV and PNG");
  cmd->add_option("--problem", f->problem, "Problem to sweep: linear, w2v, mf or cnn")->capture_default_str();
  cmd->add_option("--policies", o.policies, "Comma-separated consistency policies (linear, w2v: racy,atomic,locked; mf: racy)");
  cmd->add_option("--workers", o.workers, "Comma-separated worker counts (linear 1,2,4,8; w2v, mf 1,2,4; cnn 2)");
  cmd->add_option("--taus", o.taus, "Comma-separated bounds, inf = async (linear, mf 0,1,8,inf; w2v inf; cnn 0,1,4,16,inf)");
  cmd->add_option("--epochs", o.epochs, "Epochs per setting (linear 10, w2v 5, mf 20, cnn 10)");
  cmd->add_option("--data", o.data, "cnn: MNIST folder (IDX files) or builtin")->capture_default_str();
  cmd->add_option("--compensation", o.compensation, "cnn: off, on, or off,on for both (bounded taus)")->capture_default_str();
  cmd->add_option("--step", o.step_examples, "Examples per step (linear 256, w2v ~10,000 words of sentences)");
  cmd->add_option("--corpus", o.corpus, "w2v: text corpus (one sentence per line)");
  cmd->add_option("--analogies", o.analogies, "w2v: questions-words file to score each setting's vectors");
  cmd->add_option("--ratings", o.ratings, "mf: a ratings file (default: 4M generated ratings)");
  cmd->add_option("--schedules", o.schedules, "mf: hogwild, blocks, or hogwild,blocks for both")->capture_default_str();
  cmd->add_option("--examples", o.gen.examples, "Generated examples")->capture_default_str();
  cmd->add_option("--features", o.gen.features, "Generated features")->capture_default_str();
  cmd->add_option("--nnz", o.gen.nnz_per_example, "Non-zeros per example")->capture_default_str();
  cmd->add_option("--l2", o.l2, "L2 strength")->capture_default_str();
  cmd->add_option("--out", o.out, "Output folder for the CSV and PNG")->capture_default_str();
  cmd->add_flag("--no-plot", f->no_plot, "Write the CSV only");
  cmd->callback([f, cmd, &exit_code] {
    // The options given, by the member names the library checks ("gen.features" for --features).
    for (const auto& [option, flag] : kOptionNames) {
      if (cmd->count(std::string(flag)) > 0) f->options.given.insert(std::string(option.substr(option.find("::") + 2)));
    }
    exit_code = run_guarded([&] { return staleness(*f); }, kOptionNames);
  });
}

}  // namespace asgd::cli
