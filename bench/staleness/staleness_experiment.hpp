// A whole staleness sweep as `asgd bench staleness` runs it: the options
// read into runs, the problem's data, every run into the CSV, the plot, and
// the report's text (the problem, a table row per run) that the CLI prints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "asgd/dense/mnist.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "staleness.hpp"
#include "staleness_options.hpp"

namespace asgd::bench {

// What a whole sweep adds up to.
struct SweepSummary {
  std::size_t runs = 0;
  std::size_t missed_optimum = 0;  // linear: the runs that ended further than kOptimumGap from the optimum
};

// One problem's sweep, in the order a caller reports it: made (the runs listed, the output folder made and the
// CSV checked writable: nothing read yet, InputError naming the option), its data loaded (each problem's
// load), the CSV begun, every run, the plot.
class StalenessExperiment {
 public:
  using OnRun = std::function<void(const SweepRun&, const SettingResult&)>;
  virtual ~StalenessExperiment() = default;
  StalenessExperiment(const StalenessExperiment&) = delete;
  StalenessExperiment& operator=(const StalenessExperiment&) = delete;

  const StalenessOptions& options() const noexcept { return options_; }
  const std::vector<SweepRun>& runs() const noexcept { return runs_; }
  std::uint64_t epochs() const noexcept { return epochs_; }
  // The option's, else the problem's default; 0: the problem's own (w2v: the model's sentences per step).
  std::size_t step_examples() const noexcept { return step_examples_; }
  const std::filesystem::path& csv_path() const noexcept { return csv_.path(); }
  std::filesystem::path png_path() const;

  // Replaces the previous CSV with the header: once the data is in, so a sweep refused for its input leaves it.
  void begin() { csv_.begin(); }
  // Every run in order (after the data is loaded and the CSV begun), each one's result given to `on_run`; then
  // closes the CSV.
  SweepSummary run(const OnRun& on_run);
  // plot_csv of the CSV into the PNG, titled for the problem: false when plotting failed.
  bool plot() const;

  // Reads or makes the problem's data (each problem's load below).
  virtual void load() = 0;
  // The report's lines, each ending in a newline: what the options alone say of the problem (before load; linear's
  // generated data), what the loaded data says (sizes; linear: the optimum), the table's header and a run's row.
  virtual std::string about_options() const { return {}; }
  virtual std::string about_data() const = 0;
  virtual std::string table_header() const = 0;
  virtual std::string table_row(const SweepRun& run, const SettingResult& result) const = 0;

 protected:
  // InputError when `o` is for another problem than `problem`.
  StalenessExperiment(const StalenessOptions& o, StalenessProblem problem, const char* csv_header);
  virtual SettingResult run_one(const SweepRun& run, CsvLog& csv) const = 0;
  virtual std::string plot_title() const = 0;

 private:
  StalenessOptions options_;
  std::vector<SweepRun> runs_;
  std::uint64_t epochs_;
  std::size_t step_examples_;
  std::filesystem::path folder_;
  CsvLog csv_;
};

// Logistic regression on generated data, each setting's gap to the L-BFGS optimum.
class LinearExperiment final : public StalenessExperiment {
 public:
  explicit LinearExperiment(const StalenessOptions& o);
  // Generates the data and finds the optimum (L-BFGS).
  void load() override;
  const LinearSweep& problem() const { return sweep_.value(); }
  std::string about_options() const override;
  std::string about_data() const override;
  std::string table_header() const override;
  std::string table_row(const SweepRun& run, const SettingResult& result) const override;

 private:
  SettingResult run_one(const SweepRun& run, CsvLog& csv) const override;
  std::string plot_title() const override;
  std::optional<LinearSweep> sweep_;
};

// word2vec skip-gram on options().corpus (and its analogies, when given).
class W2vExperiment final : public StalenessExperiment {
 public:
  explicit W2vExperiment(const StalenessOptions& o);
  // Reads the corpus and the analogy questions.
  void load() override;
  const W2vSweep& problem() const { return sweep_.value(); }
  std::string about_data() const override;
  std::string table_header() const override;
  std::string table_row(const SweepRun& run, const SettingResult& result) const override;

 private:
  SettingResult run_one(const SweepRun& run, CsvLog& csv) const override;
  std::string plot_title() const override;
  std::optional<W2vSweep> sweep_;
};

// The generated ratings an mf sweep runs on without a ratings file: 4M ratings of 40,000 users x 8,000 items,
// rank 8, noise 0.5 (the noise floor the test RMSE approaches).
sparse::mf::RatingsGeneratorOptions mf_generated_ratings();

// Biased MF on options().ratings, or on mf_generated_ratings(), 90/10 split.
class MfExperiment final : public StalenessExperiment {
 public:
  explicit MfExperiment(const StalenessOptions& o);
  // Generates or reads the ratings and splits them (InputError when the split leaves no test rating).
  void load() override;
  const MfSweep& problem() const { return sweep_.value(); }
  // What the ratings are, in words ("generated 4000000 ratings, ..." or the file's name).
  const std::string& data_description() const noexcept { return description_; }
  std::string about_data() const override;
  std::string table_header() const override;
  std::string table_row(const SweepRun& run, const SettingResult& result) const override;

 private:
  SettingResult run_one(const SweepRun& run, CsvLog& csv) const override;
  std::string plot_title() const override;
  std::optional<MfSweep> sweep_;
  std::string description_;
};

// LeNet-5 on MNIST.
class CnnExperiment final : public StalenessExperiment {
 public:
  explicit CnnExperiment(const StalenessOptions& o);
  // Reads MNIST from the folder options().data names (load_mnist), or takes the caller's.
  void load() override;
  void load(dense::TrainTest data);
  const CnnSweep& problem() const { return sweep_.value(); }
  std::string about_data() const override;
  std::string table_header() const override;
  std::string table_row(const SweepRun& run, const SettingResult& result) const override;

 private:
  SettingResult run_one(const SweepRun& run, CsvLog& csv) const override;
  std::string plot_title() const override;
  std::optional<CnnSweep> sweep_;
};

// The experiment of o.problem (InputError as its constructor's).
std::unique_ptr<StalenessExperiment> make_experiment(const StalenessOptions& o);

}  // namespace asgd::bench
