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

// Logistic regression with a known optimum: every setting must end within
// 1e-3 of it (exit 1 otherwise).
int staleness_linear(const bench::StalenessOptions& o, bool no_plot) {
  check_generator_flags(o.gen);  // the sizes, named as flags, before the lists are read
  bench::LinearExperiment sweep(o);
  fmt::print("problem: logistic regression, {} examples x {} features, {} non-zeros each, l2 {}\n", o.gen.examples,
             o.gen.features, o.gen.nnz_per_example, o.l2);
  sweep.load();
  const auto& optimum = sweep.problem().reference().optimum;
  fmt::print("optimum (L-BFGS): {:.8f} (|grad| {:.1e}, {:.1f} s)\n", optimum.objective, optimum.gradient_norm,
             sweep.problem().reference().lbfgs_seconds);
  sweep.begin();  // the data is in: the previous CSV is replaced from here
  fmt::print("{:<7} {:>7} {:>4} {:>10} {:>12} {:>10} {:>9} {:>5} {:>6}\n", "policy", "workers", "tau", "seconds",
             "objective", "gap", "stale", "lead", "<=1e-3");
  const auto summary = sweep.run([&](const SweepRun& run, const SettingResult& r) {
    const auto& s = run.setting;
    fmt::print("{:<7} {:>7} {:>4} {:>10.3f} {:>12.8f} {:>10.2e} {:>9.2f} {:>5} {:>6}\n", to_string(s.policy),
               s.workers, tau_to_string(s.tau), r.seconds, optimum.objective * (1 + r.gap), r.gap, r.mean_staleness,
               r.max_lead, r.missed_optimum ? "NO" : "yes");
  });
  report_files(sweep, no_plot);
  if (summary.missed_optimum > 0)
    fmt::print("{} setting(s) did not reach 1e-3 of the optimum\n", summary.missed_optimum);
  return summary.missed_optimum > 0 ? kExitRuntime : 0;
}

// word2vec skip-gram on a corpus: training loss per epoch for each setting,
// and analogy accuracy at the end when --analogies is given.
int staleness_w2v(const bench::StalenessOptions& o, bool no_plot) {
  bench::W2vExperiment sweep(o);
  sweep.load();
  const auto& m = sweep.problem().model_options();
  fmt::print("problem: word2vec skip-gram d{} w{} neg{} sample {}, {} ({} words, vocabulary {})\n", m.dim, m.window,
             m.negative, m.sample, o.corpus, sweep.problem().words(), sweep.problem().vocabulary());
  sweep.begin();  // the data is in: the previous CSV is replaced from here
  fmt::print("{:<7} {:>7} {:>4} {:>10} {:>12} {:>9} {:>10}\n", "policy", "workers", "tau", "seconds", "words/s",
             "loss", "analogy");
  sweep.run([&](const SweepRun& run, const SettingResult& r) {
    const std::string analogy =
        r.analogy_accuracy < 0 ? std::string("-") : fmt::format("{:.2f}%", 100.0 * r.analogy_accuracy);
    fmt::print("{:<7} {:>7} {:>4} {:>10.2f} {:>12.0f} {:>9.4f} {:>10}\n", to_string(run.setting.policy),
               run.setting.workers, tau_to_string(run.setting.tau), r.seconds, r.rate, r.loss, analogy);
  });
  report_files(sweep, no_plot);
  return 0;
}

// Matrix factorization: test RMSE per epoch for the Hogwild schedule at each
// tau and for LIBMF's block schedule (no staleness to bound: no two workers
// share a row), at each worker count. Generated ratings with a known noise
// floor unless --ratings is given (then a 90/10 split, seed 42).
int staleness_mf(const bench::StalenessOptions& o, bool no_plot) {
  bench::MfExperiment sweep(o);
  sweep.load();
  fmt::print("problem: biased MF k 32, lr 0.02, l2 0.05, on {} (90/10 split)\n", sweep.data_description());
  sweep.begin();  // the data is in: the previous CSV is replaced from here
  fmt::print("{:<8} {:<7} {:>7} {:>4} {:>9} {:>14} {:>9} {:>9}\n", "schedule", "policy", "workers", "tau", "seconds",
             "updates/s", "stale", "test RMSE");
  sweep.run([&](const SweepRun& run, const SettingResult& r) {
    const auto& s = run.setting;
    fmt::print("{:<8} {:<7} {:>7} {:>4} {:>9.2f} {:>14.3g} {:>9.2f} {:>9.4f}\n", run.blocks ? "blocks" : "hogwild",
               to_string(s.policy), s.workers, run.blocks ? "-" : tau_to_string(s.tau), r.seconds, r.rate,
               r.mean_staleness, r.test_rmse);
  });
  report_files(sweep, no_plot);
  return 0;
}

// LeNet-5 on MNIST: test accuracy per epoch for each tau, without and with
// staleness compensation (tau 0 and inf have nothing to compensate for a
// view's age: one run each). The recipe that reaches 99 % at tau 0: batch 64
// per worker, lr 0.02 cosine, momentum 0.9, weight decay 5e-4.
int staleness_cnn(const bench::StalenessOptions& o, bool no_plot) {
  bench::CnnExperiment sweep(o);
  sweep.load(dense::load_mnist(resolve_mnist_dir(o.data)));
  fmt::print("problem: LeNet-5, {} train / {} test images, batch 64 per worker, lr 0.02 cosine, momentum 0.9, "
             "weight decay 5e-4, {} epochs\n",
             sweep.problem().data().train.size(), sweep.problem().data().test.size(), sweep.epochs());
  sweep.begin();  // the data is in: the previous CSV is replaced from here
  fmt::print("{:<12} {:>7} {:>4} {:>9} {:>10} {:>7} {:>9}\n", "policy", "workers", "tau", "seconds", "images/s",
             "stale", "accuracy");
  sweep.run([&](const SweepRun& run, const SettingResult& r) {
    fmt::print("{:<12} {:>7} {:>4} {:>9.1f} {:>10.0f} {:>7.2f} {:>8.2f}%\n", run.compensate ? "compensated" : "plain",
               run.setting.workers, tau_to_string(run.setting.tau), r.seconds, r.rate, r.mean_staleness,
               100.0 * r.test_accuracy);
  });
  report_files(sweep, no_plot);
  return 0;
}

int staleness(const StalenessFlags& f) {
  bench::StalenessOptions o = f.options;
  o.problem = bench::parse_problem(f.problem);
  bench::check_options(o);  // the problem is known: its options can be told from the others'
  switch (o.problem) {
    case bench::StalenessProblem::w2v: return staleness_w2v(o, f.no_plot);
    case bench::StalenessProblem::mf: return staleness_mf(o, f.no_plot);
    case bench::StalenessProblem::cnn: return staleness_cnn(o, f.no_plot);
    case bench::StalenessProblem::linear: break;
  }
  return staleness_linear(o, f.no_plot);
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
