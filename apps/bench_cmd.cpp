// `asgd bench staleness`: convergence vs staleness. Sweeps consistency policy
// x workers x tau on a problem with a known optimum, writes one CSV row per
// (setting, epoch) and plots loss vs epoch and vs seconds.
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <optional>
#include <memory>
#include <set>
#include <sstream>

#include "asgd/config.hpp"
#include "asgd_build_paths.hpp"
#include "asgd/dense/mnist.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "asgd/sparse/mf/ratings.hpp"
#include "cli_common.hpp"
#include "staleness.hpp"

extern char** environ;

namespace asgd::cli {

namespace {

struct StalenessFlags {
  std::string problem = "linear";
  std::string policies;  // default per problem
  std::string workers;  // default per problem
  std::string taus;     // default per problem
  std::uint64_t epochs = 0;  // default per problem
  std::size_t step_examples = 0;
  sparse::GeneratorOptions gen;
  double l2 = sparse::kReferenceL2;
  std::string corpus, analogies;  // w2v
  std::string ratings;            // mf: a ratings file instead of generated data
  std::string schedules = "hogwild,blocks";
  std::string data = "builtin";   // cnn: MNIST folder
  std::string compensation = "off,on";  // cnn: without and with staleness compensation
  std::string out = "staleness";
  bool no_plot = false;
  std::set<std::string> given;  // the flags on the command line, as "--name"
};

// The flags that mean something for one problem only (the others apply to every problem): given with another
// problem they would be ignored, so they are refused, as the commands refuse flags they would ignore.
void check_flags_apply(const StalenessFlags& f) {
  static const std::pair<const char*, std::set<std::string>> only[] = {
      {"--policies", {"linear", "w2v", "mf"}}, {"--step", {"linear", "w2v", "mf"}},
      {"--examples", {"linear"}},              {"--features", {"linear"}},
      {"--nnz", {"linear"}},                   {"--l2", {"linear"}},
      {"--corpus", {"w2v"}},                   {"--analogies", {"w2v"}},
      {"--ratings", {"mf"}},                   {"--schedules", {"mf"}},
      {"--data", {"cnn"}},                     {"--compensation", {"cnn"}}};
  for (const auto& [flag, problems] : only) {
    if (f.given.count(flag) && !problems.count(f.problem)) {
      std::string with;
      for (const auto& p : problems) with += (with.empty() ? "" : ", ") + p;
      throw InputError(fmt::format("{}: does nothing with --problem {} (it is for {})", flag, f.problem, with));
    }
  }
  // 0 is not "the default": a typo would run another sweep than the one asked for.
  if (f.given.count("--epochs") && (f.epochs == 0 || f.epochs > kMaxEpochs))
    throw InputError(fmt::format("--epochs {}: expected 1 to {}", f.epochs, kMaxEpochs));
  if (f.given.count("--step") && f.step_examples == 0) throw InputError("--step 0: expected at least 1 example");
}

using bench::CsvLog;
using bench::Setting;
using bench::SettingResult;

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
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path() / ASGD_PLOT_SCRIPT_FROM_BINDIR;
    if (std::filesystem::exists(installed, ec)) return installed;
  }
  if (std::filesystem::exists(ASGD_PLOT_SCRIPT_SOURCE, ec)) return ASGD_PLOT_SCRIPT_SOURCE;
  return ASGD_PLOT_SCRIPT_INSTALLED;
}

// Debian's matplotlib lives under /usr/bin/python3, which may not be the
// python3 first on PATH. Spawned directly (no shell): any path is safe.
// The plot goes to a temp file beside PNG (its name ends in .png: matplotlib picks the format by it), renamed over
// PNG when the script succeeds, so a killed plot never leaves half a PNG.
int run_plot(const std::filesystem::path& csv, const std::filesystem::path& png, const std::string& title) {
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::filesystem::path partial =
      png.parent_path() / fmt::format(".{}.tmp.{}.png", png.stem().string(), static_cast<long>(::getpid()));
  std::vector<std::string> args = {python, plot_script().string(), csv.string(), partial.string(), title};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return 127;
  int status = 0;
  const bool done = ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::error_code ec;
  if (done) std::filesystem::rename(partial, png, ec);
  if (!done || ec) {
    std::filesystem::remove(partial, ec);
    return 1;
  }
  return 0;
}

std::vector<Setting> settings_of(const StalenessFlags& f, const std::string& default_workers,
                                 const std::string& default_taus,
                                 const std::string& default_policies = "racy,atomic,locked") {
  std::vector<Consistency> policies;
  for (const auto& p : split_list(f.policies.empty() ? default_policies : f.policies, "--policies")) {
    try {
      policies.push_back(parse_consistency(p));
    } catch (const InputError& e) {
      throw InputError(fmt::format("--policies: {}", e.what()));
    }
  }
  std::vector<std::size_t> workers;
  for (const auto& w : split_list(f.workers.empty() ? default_workers : f.workers, "--workers")) {
    std::size_t v = 0;
    const auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (ec != std::errc() || p != w.data() + w.size() || v == 0 || v > kMaxWorkers) {
      throw InputError(fmt::format("--workers: '{}': expected 1 to {}", w, kMaxWorkers));
    }
    workers.push_back(v);
  }
  std::vector<std::uint64_t> taus;
  for (const auto& t : split_list(f.taus.empty() ? default_taus : f.taus, "--taus")) {
    taus.push_back(parse_flag("--taus", [&] { return parse_tau(t); }));
  }
  return bench::setting_grid(policies, workers, taus);
}

std::filesystem::path output_folder(const StalenessFlags& f) {
  std::error_code made;
  std::filesystem::create_directories(f.out, made);
  if (made || !std::filesystem::is_directory(f.out)) {
    throw InputError(fmt::format("--out {}: cannot create the folder{}", f.out, made ? ": " + made.message() : ""));
  }
  return f.out;
}

void plot(const StalenessFlags& f, const std::filesystem::path& csv, const std::filesystem::path& png,
          const std::string& title) {
  fmt::print("wrote {}\n", csv.string());
  if (f.no_plot) return;
  if (run_plot(csv, png, title) == 0) {
    fmt::print("wrote {}\n", png.string());
  } else {
    fmt::print(stderr,
               "asgd: warning: plotting failed (it runs {} with /usr/bin/python3 and Debian's python3-matplotlib); "
               "the CSV is complete\n",
               plot_script().string());
  }
}

// Logistic regression with a known optimum: every setting must end within
// 1e-3 of it (exit 1 otherwise).
int staleness_linear(const StalenessFlags& f) {
  check_generator_flags(f.gen);
  const auto settings = settings_of(f, "1,2,4,8", "0,1,8,inf");
  const std::uint64_t epochs = f.epochs ? f.epochs : 10;
  const auto dir = output_folder(f);
  CsvLog csv(dir / "staleness_linear.csv", bench::LinearSweep::csv_header());
  fmt::print("problem: logistic regression, {} examples x {} features, {} non-zeros each, l2 {}\n", f.gen.examples,
             f.gen.features, f.gen.nnz_per_example, f.l2);
  const bench::LinearSweep sweep(f.gen, f.l2);
  const auto& optimum = sweep.reference().optimum;
  fmt::print("optimum (L-BFGS): {:.8f} (|grad| {:.1e}, {:.1f} s)\n", optimum.objective, optimum.gradient_norm,
             sweep.reference().lbfgs_seconds);

  csv.begin();  // the data is in: the previous CSV is replaced from here
  fmt::print("{:<7} {:>7} {:>4} {:>10} {:>12} {:>10} {:>9} {:>5} {:>6}\n", "policy", "workers", "tau", "seconds",
             "objective", "gap", "stale", "lead", "<=1e-3");
  int missed = 0;
  for (const auto& s : settings) {
    const SettingResult r = sweep.run(s, epochs, f.step_examples ? f.step_examples : 256, csv);
    const bool ok = r.gap <= 1e-3;
    missed += ok ? 0 : 1;
    fmt::print("{:<7} {:>7} {:>4} {:>10.3f} {:>12.8f} {:>10.2e} {:>9.2f} {:>5} {:>6}\n", to_string(s.policy),
               s.workers, tau_to_string(s.tau), r.seconds, optimum.objective * (1 + r.gap), r.gap, r.mean_staleness,
               r.max_lead, ok ? "yes" : "NO");
  }
  csv.close();
  plot(f, csv.path(), dir / "staleness_linear.png",
       fmt::format("logistic regression, {}k x {}k, nnz {}: loss vs staleness", f.gen.examples / 1000,
                   f.gen.features / 1000, f.gen.nnz_per_example));
  if (missed > 0) fmt::print("{} setting(s) did not reach 1e-3 of the optimum\n", missed);
  return missed > 0 ? kExitRuntime : 0;
}

// word2vec skip-gram on a corpus: training loss per epoch for each setting,
// and analogy accuracy at the end when --analogies is given.
int staleness_w2v(const StalenessFlags& f) {
  if (f.corpus.empty()) throw InputError("--problem w2v needs --corpus FILE (e.g. scripts/fetch-brown.sh)");
  const auto settings = settings_of(f, "1,2,4", "inf");
  const std::uint64_t epochs = f.epochs ? f.epochs : 5;
  const auto dir = output_folder(f);
  // analogy_accuracy: on each setting's last epoch, with --analogies.
  CsvLog csv(dir / "staleness_w2v.csv", bench::W2vSweep::csv_header());
  const bench::W2vSweep sweep(f.corpus, f.analogies);
  const auto& m = sweep.model_options();
  fmt::print("problem: word2vec skip-gram d{} w{} neg{} sample {}, {} ({} words, vocabulary {})\n", m.dim, m.window,
             m.negative, m.sample, f.corpus, sweep.words(), sweep.vocabulary());

  csv.begin();  // the data is in: the previous CSV is replaced from here
  fmt::print("{:<7} {:>7} {:>4} {:>10} {:>12} {:>9} {:>10}\n", "policy", "workers", "tau", "seconds", "words/s",
             "loss", "analogy");
  for (const auto& s : settings) {
    const SettingResult r = sweep.run(s, epochs, f.step_examples ? f.step_examples : sweep.sentences_per_step(), csv);
    const std::string analogy =
        r.analogy_accuracy < 0 ? std::string("-") : fmt::format("{:.2f}%", 100.0 * r.analogy_accuracy);
    fmt::print("{:<7} {:>7} {:>4} {:>10.2f} {:>12.0f} {:>9.4f} {:>10}\n", to_string(s.policy), s.workers,
               tau_to_string(s.tau), r.seconds, r.rate, r.loss, analogy);
  }
  csv.close();
  plot(f, csv.path(), dir / "staleness_w2v.png",
       fmt::format("word2vec skip-gram on {}: training loss vs staleness", std::filesystem::path(f.corpus).filename().string()));
  return 0;
}

// Matrix factorization: test RMSE per epoch for the Hogwild schedule at each
// tau and for LIBMF's block schedule (no staleness to bound: no two workers
// share a row), at each worker count. Generated ratings with a known noise
// floor unless --ratings is given (then a 90/10 split, seed 42).
int staleness_mf(const StalenessFlags& f) {
  namespace mf = sparse::mf;
  const auto settings = settings_of(f, "1,2,4", "0,1,8,inf", "racy");
  const auto schedules = split_list(f.schedules, "--schedules");
  for (const auto& s : schedules) {
    if (s != "hogwild" && s != "blocks") throw InputError(fmt::format("--schedules: '{}': expected hogwild or blocks", s));
  }
  const std::uint64_t epochs = f.epochs ? f.epochs : 20;
  const auto dir = output_folder(f);
  CsvLog csv(dir / "staleness_mf.csv", bench::MfSweep::csv_header());
  mf::Ratings all;
  std::string what;
  if (f.ratings.empty()) {
    mf::RatingsGeneratorOptions g;
    g.users = 40000;
    g.items = 8000;
    g.ratings = 4000000;
    g.rank = 8;
    g.noise = 0.5f;
    all = mf::generate_ratings(g);
    what = fmt::format("generated {} ratings, {} users x {} items, rank {}, noise floor {}", g.ratings, g.users,
                       g.items, g.rank, g.noise);
  } else {
    all = mf::read_ratings(f.ratings);
    what = fmt::format("{}", f.ratings);
  }
  const bench::MfSweep sweep(std::move(all), fmt::format("--ratings {}", f.ratings));
  fmt::print("problem: biased MF k 32, lr 0.02, l2 0.05, on {} (90/10 split)\n", what);

  csv.begin();  // the data is in: the previous CSV is replaced from here
  fmt::print("{:<8} {:<7} {:>7} {:>4} {:>9} {:>14} {:>9} {:>9}\n", "schedule", "policy", "workers", "tau", "seconds",
             "updates/s", "stale", "test RMSE");
  for (const auto& schedule : schedules) {
    const bool blocks = schedule == "blocks";
    std::vector<std::pair<std::size_t, Consistency>> blocks_done;
    for (const auto& s : settings) {
      // The block schedule has no delay to bound: one run per (workers, policy).
      if (blocks) {
        const std::pair<std::size_t, Consistency> key{s.workers, s.policy};
        if (std::find(blocks_done.begin(), blocks_done.end(), key) != blocks_done.end()) continue;
        blocks_done.push_back(key);
      }
      const SettingResult r = sweep.run(s, blocks, epochs, f.step_examples ? f.step_examples : 4096, csv);
      fmt::print("{:<8} {:<7} {:>7} {:>4} {:>9.2f} {:>14.3g} {:>9.2f} {:>9.4f}\n", schedule, to_string(s.policy),
                 s.workers, blocks ? "-" : tau_to_string(s.tau), r.seconds, r.rate, r.mean_staleness, r.test_rmse);
    }
  }
  csv.close();
  plot(f, csv.path(), dir / "staleness_mf.png", fmt::format("biased MF: test RMSE vs staleness ({})", what));
  return 0;
}

// LeNet-5 on MNIST: test accuracy per epoch for each tau, without and with
// staleness compensation (tau 0 and inf have nothing to compensate for a
// view's age: one run each). The recipe that reaches 99 % at tau 0: batch 64
// per worker, lr 0.02 cosine, momentum 0.9, weight decay 5e-4.
int staleness_cnn(const StalenessFlags& f) {
  const auto settings = settings_of(f, "2", "0,1,4,16,inf", "racy");
  std::vector<bool> modes;
  for (const auto& c : split_list(f.compensation, "--compensation")) {
    if (c != "off" && c != "on") throw InputError(fmt::format("--compensation: '{}': expected off or on", c));
    modes.push_back(c == "on");
  }
  // Compensation acts on a view's age: tau 0 and inf have none to act on (one plain run each).
  const auto runs_with = [](const Setting& s, bool compensate) {
    return !compensate || (s.tau != 0 && s.tau != kUnbounded);
  };
  std::size_t runs = 0;
  for (const auto& s : settings)
    for (const bool compensate : modes) runs += runs_with(s, compensate) ? 1 : 0;
  if (runs == 0) {
    throw InputError("--compensation on: applies to a bounded tau > 0 only, and --taus has none: nothing to run");
  }
  const std::uint64_t epochs = f.epochs ? f.epochs : 10;
  const auto dir = output_folder(f);
  CsvLog csv(dir / "staleness_cnn.csv", bench::CnnSweep::csv_header());
  const bench::CnnSweep sweep(dense::load_mnist(resolve_mnist_dir(f.data)));
  fmt::print("problem: LeNet-5, {} train / {} test images, batch 64 per worker, lr 0.02 cosine, momentum 0.9, "
             "weight decay 5e-4, {} epochs\n",
             sweep.data().train.size(), sweep.data().test.size(), epochs);
  csv.begin();  // the data is in: the previous CSV is replaced from here
  fmt::print("{:<12} {:>7} {:>4} {:>9} {:>10} {:>7} {:>9}\n", "policy", "workers", "tau", "seconds", "images/s",
             "stale", "accuracy");
  for (const auto& s : settings)
    for (const bool compensate : modes) {
      if (!runs_with(s, compensate)) continue;
      const SettingResult r = sweep.run(s, compensate, epochs, csv);
      fmt::print("{:<12} {:>7} {:>4} {:>9.1f} {:>10.0f} {:>7.2f} {:>8.2f}%\n", compensate ? "compensated" : "plain",
                 s.workers, tau_to_string(s.tau), r.seconds, r.rate, r.mean_staleness, 100.0 * r.test_accuracy);
    }
  csv.close();
  plot(f, csv.path(), dir / "staleness_cnn.png",
       "LeNet-5 on MNIST: test error vs staleness (batch 64 per worker, momentum 0.9)");
  return 0;
}

int staleness(const StalenessFlags& f) {
  static const std::pair<const char*, int (*)(const StalenessFlags&)> problems[] = {
      {"linear", staleness_linear}, {"w2v", staleness_w2v}, {"mf", staleness_mf}, {"cnn", staleness_cnn}};
  std::string names;
  for (const auto& [name, sweep] : problems) {
    if (f.problem == name) {
      check_flags_apply(f);  // the problem is known: its flags can be told from the others'
      return sweep(f);
    }
    names += fmt::format("{}{}", names.empty() ? "" : ", ", name);
  }
  throw InputError(fmt::format("--problem '{}': expected one of {}", f.problem, names));
}

}  // namespace

void add_bench_commands(CLI::App& app, int& exit_code) {
  auto* bench = app.add_subcommand("bench", "Experiments: convergence vs staleness");
  bench->require_subcommand(1);
  auto f = std::make_shared<StalenessFlags>();
  auto* cmd = bench->add_subcommand("staleness", "Sweep policy x workers x tau; write CSV and PNG");
  cmd->add_option("--problem", f->problem, "Problem to sweep: linear, w2v, mf or cnn")->capture_default_str();
  cmd->add_option("--policies", f->policies, "Comma-separated consistency policies (linear, w2v: racy,atomic,locked; mf: racy)");
  cmd->add_option("--workers", f->workers, "Comma-separated worker counts (linear 1,2,4,8; w2v, mf 1,2,4; cnn 2)");
  cmd->add_option("--taus", f->taus, "Comma-separated bounds, inf = async (linear, mf 0,1,8,inf; w2v inf; cnn 0,1,4,16,inf)");
  cmd->add_option("--epochs", f->epochs, "Epochs per setting (linear 10, w2v 5, mf 20, cnn 10)");
  cmd->add_option("--data", f->data, "cnn: MNIST folder (IDX files) or builtin")->capture_default_str();
  cmd->add_option("--compensation", f->compensation, "cnn: off, on, or off,on for both (bounded taus)")->capture_default_str();
  cmd->add_option("--step", f->step_examples, "Examples per step (linear 256, w2v ~10,000 words of sentences)");
  cmd->add_option("--corpus", f->corpus, "w2v: text corpus (one sentence per line)");
  cmd->add_option("--analogies", f->analogies, "w2v: questions-words file to score each setting's vectors");
  cmd->add_option("--ratings", f->ratings, "mf: a ratings file (default: 4M generated ratings)");
  cmd->add_option("--schedules", f->schedules, "mf: hogwild, blocks, or hogwild,blocks for both")->capture_default_str();
  cmd->add_option("--examples", f->gen.examples, "Generated examples")->capture_default_str();
  cmd->add_option("--features", f->gen.features, "Generated features")->capture_default_str();
  cmd->add_option("--nnz", f->gen.nnz_per_example, "Non-zeros per example")->capture_default_str();
  cmd->add_option("--l2", f->l2, "L2 strength")->capture_default_str();
  cmd->add_option("--out", f->out, "Output folder for the CSV and PNG")->capture_default_str();
  cmd->add_flag("--no-plot", f->no_plot, "Write the CSV only");
  cmd->callback([f, cmd, &exit_code] {
    for (const CLI::Option* o : cmd->get_options()) {
      if (o->count() > 0) f->given.insert(o->get_name());
    }
    exit_code = run_guarded([&] { return staleness(*f); });
  });
}

}  // namespace asgd::cli
