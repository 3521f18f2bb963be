#include "staleness_experiment.hpp"

#include <fmt/format.h>

#include <utility>

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

std::string MfExperiment::plot_title() const {
  return fmt::format("biased MF: test RMSE vs staleness ({})", description_);
}

CnnExperiment::CnnExperiment(const StalenessOptions& o)
    : StalenessExperiment(o, StalenessProblem::cnn, CnnSweep::csv_header()) {}

void CnnExperiment::load(dense::TrainTest data) { sweep_.emplace(std::move(data)); }

SettingResult CnnExperiment::run_one(const SweepRun& run, CsvLog& csv) const {
  return problem().run(run.setting, run.compensate, epochs(), csv);
}

std::string CnnExperiment::plot_title() const {
  return "LeNet-5 on MNIST: test error vs staleness (batch 64 per worker, momentum 0.9)";
}

}  // namespace asgd::bench
