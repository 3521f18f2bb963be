#include "staleness_experiment.hpp"

#include <fmt/format.h>

#include <utility>

#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/sparse/mf/ratings.hpp"
#include "staleness_plot.hpp"

namespace asgd::bench {

namespace {

// The output folder, made when it is not there.
std::filesystem::path output_folder(const std::string& out) {
  std::error_code made;
  std::filesystem::create_directories(out, made);
  if (made || !std::filesystem::is_directory(out)) {
    throw InputError(
        fmt::format("StalenessOptions::out {}: cannot create the folder{}", out, made ? ": " + made.message() : ""));
  }
  return out;
}

const StalenessOptions& for_problem(const StalenessOptions& o, StalenessProblem problem) {
  if (o.problem != problem) {
    throw InputError(fmt::format("StalenessOptions::problem {}: expected {} for this experiment", to_string(o.problem),
                                 to_string(problem)));
  }
  return o;
}

std::string csv_name(StalenessProblem problem) { return fmt::format("staleness_{}.csv", to_string(problem)); }

}  // namespace

// The members are made in this order: the options' checks and lists, then the folder, then the CSV's check.
StalenessExperiment::StalenessExperiment(const StalenessOptions& o, StalenessProblem problem, const char* csv_header)
    : options_(for_problem(o, problem)),
      runs_(staleness_runs(options_)),
      epochs_(o.epochs ? o.epochs : staleness_defaults(problem).epochs),
      step_examples_(o.step_examples ? o.step_examples : staleness_defaults(problem).step_examples),
      folder_(output_folder(o.out)),
      csv_(folder_ / csv_name(problem), csv_header) {}

std::filesystem::path StalenessExperiment::png_path() const {
  return folder_ / fmt::format("staleness_{}.png", to_string(options_.problem));
}

SweepSummary StalenessExperiment::run(const OnRun& on_run) {
  SweepSummary summary;
  for (const SweepRun& r : runs_) {
    const SettingResult result = run_one(r, csv_);
    ++summary.runs;
    summary.missed_optimum += result.missed_optimum ? 1 : 0;
    on_run(r, result);
  }
  csv_.close();
  return summary;
}

bool StalenessExperiment::plot() const { return plot_csv(csv_path(), png_path(), plot_title()); }

LinearExperiment::LinearExperiment(const StalenessOptions& o)
    : StalenessExperiment(o, StalenessProblem::linear, LinearSweep::csv_header()) {}

void LinearExperiment::load() { sweep_.emplace(options().gen, options().l2); }

SettingResult LinearExperiment::run_one(const SweepRun& run, CsvLog& csv) const {
  return problem().run(run.setting, epochs(), step_examples(), csv);
}

std::string LinearExperiment::about_options() const {
  const auto& g = options().gen;
  return fmt::format("problem: logistic regression, {} examples x {} features, {} non-zeros each, l2 {}\n", g.examples,
                     g.features, g.nnz_per_example, options().l2);
}

std::string LinearExperiment::about_data() const {
  const auto& optimum = problem().reference().optimum;
  return fmt::format("optimum (L-BFGS): {:.8f} (|grad| {:.1e}, {:.1f} s)\n", optimum.objective, optimum.gradient_norm,
                     problem().reference().lbfgs_seconds);
}

std::string LinearExperiment::table_header() const {
  return fmt::format("{:<7} {:>7} {:>4} {:>10} {:>12} {:>10} {:>9} {:>5} {:>6}\n", "policy", "workers", "tau",
                     "seconds", "objective", "gap", "stale", "lead", "<=1e-3");
}

std::string LinearExperiment::table_row(const SweepRun& run, const SettingResult& r) const {
  const auto& s = run.setting;
  return fmt::format("{:<7} {:>7} {:>4} {:>10.3f} {:>12.8f} {:>10.2e} {:>9.2f} {:>5} {:>6}\n", to_string(s.policy),
                     s.workers, tau_to_string(s.tau), r.seconds,
                     problem().reference().optimum.objective * (1 + r.gap), r.gap, r.mean_staleness, r.max_lead,
                     r.missed_optimum ? "NO" : "yes");
}

std::string LinearExperiment::plot_title() const {
  const auto& gen = options().gen;
  return fmt::format("logistic regression, {}k x {}k, nnz {}: loss vs staleness", gen.examples / 1000,
                     gen.features / 1000, gen.nnz_per_example);
}

W2vExperiment::W2vExperiment(const StalenessOptions& o)
    : StalenessExperiment(o, StalenessProblem::w2v, W2vSweep::csv_header()) {}

void W2vExperiment::load() { sweep_.emplace(options().corpus, options().analogies); }

SettingResult W2vExperiment::run_one(const SweepRun& run, CsvLog& csv) const {
  const std::size_t step = step_examples() ? step_examples() : problem().sentences_per_step();
  return problem().run(run.setting, epochs(), step, csv);
}

std::string W2vExperiment::about_data() const {
  const auto& m = problem().model_options();
  return fmt::format("problem: word2vec skip-gram d{} w{} neg{} sample {}, {} ({} words, vocabulary {})\n", m.dim,
                     m.window, m.negative, m.sample, options().corpus, problem().words(), problem().vocabulary());
}

std::string W2vExperiment::table_header() const {
  return fmt::format("{:<7} {:>7} {:>4} {:>10} {:>12} {:>9} {:>10}\n", "policy", "workers", "tau", "seconds",
                     "words/s", "loss", "analogy");
}

std::string W2vExperiment::table_row(const SweepRun& run, const SettingResult& r) const {
  const std::string analogy =
      r.analogy_accuracy < 0 ? std::string("-") : fmt::format("{:.2f}%", 100.0 * r.analogy_accuracy);
  return fmt::format("{:<7} {:>7} {:>4} {:>10.2f} {:>12.0f} {:>9.4f} {:>10}\n", to_string(run.setting.policy),
                     run.setting.workers, tau_to_string(run.setting.tau), r.seconds, r.rate, r.loss, analogy);
}

std::string W2vExperiment::plot_title() const {
  return fmt::format("word2vec skip-gram on {}: training loss vs staleness",
                     std::filesystem::path(options().corpus).filename().string());
}

sparse::mf::RatingsGeneratorOptions mf_generated_ratings() {
  sparse::mf::RatingsGeneratorOptions g;
  g.users = 40000;
  g.items = 8000;
  g.ratings = 4000000;
  g.rank = 8;
  g.noise = 0.5f;
  return g;
}

MfExperiment::MfExperiment(const StalenessOptions& o)
    : StalenessExperiment(o, StalenessProblem::mf, MfSweep::csv_header()) {}

void MfExperiment::load() {
  namespace mf = sparse::mf;
  mf::Ratings all;
  if (options().ratings.empty()) {
    const mf::RatingsGeneratorOptions g = mf_generated_ratings();
    all = mf::generate_ratings(g);
    description_ = fmt::format("generated {} ratings, {} users x {} items, rank {}, noise floor {}", g.ratings,
                               g.users, g.items, g.rank, g.noise);
  } else {
    all = mf::read_ratings(options().ratings);
    description_ = options().ratings;
  }
  sweep_.emplace(std::move(all), fmt::format("StalenessOptions::ratings {}", options().ratings));
}

SettingResult MfExperiment::run_one(const SweepRun& run, CsvLog& csv) const {
  return problem().run(run.setting, run.blocks, epochs(), step_examples(), csv);
}

std::string MfExperiment::about_data() const {
  return fmt::format("problem: biased MF k 32, lr 0.02, l2 0.05, on {} (90/10 split)\n", description_);
}

std::string MfExperiment::table_header() const {
  return fmt::format("{:<8} {:<7} {:>7} {:>4} {:>9} {:>14} {:>9} {:>9}\n", "schedule", "policy", "workers", "tau",
                     "seconds", "updates/s", "stale", "test RMSE");
}

std::string MfExperiment::table_row(const SweepRun& run, const SettingResult& r) const {
  const auto& s = run.setting;
  return fmt::format("{:<8} {:<7} {:>7} {:>4} {:>9.2f} {:>14.3g} {:>9.2f} {:>9.4f}\n",
                     run.blocks ? "blocks" : "hogwild", to_string(s.policy), s.workers,
                     run.blocks ? "-" : tau_to_string(s.tau), r.seconds, r.rate, r.mean_staleness, r.test_rmse);
}

std::string MfExperiment::plot_title() const {
  return fmt::format("biased MF: test RMSE vs staleness ({})", description_);
}

CnnExperiment::CnnExperiment(const StalenessOptions& o)
    : StalenessExperiment(o, StalenessProblem::cnn, CnnSweep::csv_header()) {}

void CnnExperiment::load() { load(dense::load_mnist(options().data)); }

void CnnExperiment::load(dense::TrainTest data) { sweep_.emplace(std::move(data)); }

SettingResult CnnExperiment::run_one(const SweepRun& run, CsvLog& csv) const {
  return problem().run(run.setting, run.compensate, epochs(), csv);
}

// The recipe that reaches 99 % at tau 0: batch 64 per worker, lr 0.02 cosine, momentum 0.9, weight decay 5e-4.
std::string CnnExperiment::about_data() const {
  return fmt::format("problem: LeNet-5, {} train / {} test images, batch 64 per worker, lr 0.02 cosine, momentum "
                     "0.9, weight decay 5e-4, {} epochs\n",
                     problem().data().train.size(), problem().data().test.size(), epochs());
}

std::string CnnExperiment::table_header() const {
  return fmt::format("{:<12} {:>7} {:>4} {:>9} {:>10} {:>7} {:>9}\n", "policy", "workers", "tau", "seconds",
                     "images/s", "stale", "accuracy");
}

std::string CnnExperiment::table_row(const SweepRun& run, const SettingResult& r) const {
  return fmt::format("{:<12} {:>7} {:>4} {:>9.1f} {:>10.0f} {:>7.2f} {:>8.2f}%\n",
                     run.compensate ? "compensated" : "plain", run.setting.workers, tau_to_string(run.setting.tau),
                     r.seconds, r.rate, r.mean_staleness, 100.0 * r.test_accuracy);
}

std::string CnnExperiment::plot_title() const {
  return "LeNet-5 on MNIST: test error vs staleness (batch 64 per worker, momentum 0.9)";
}

std::unique_ptr<StalenessExperiment> make_experiment(const StalenessOptions& o) {
  switch (o.problem) {
    case StalenessProblem::w2v: return std::make_unique<W2vExperiment>(o);
    case StalenessProblem::mf: return std::make_unique<MfExperiment>(o);
    case StalenessProblem::cnn: return std::make_unique<CnnExperiment>(o);
    case StalenessProblem::linear: break;
  }
  return std::make_unique<LinearExperiment>(o);
}

}  // namespace asgd::bench
