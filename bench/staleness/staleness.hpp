// Convergence against staleness, the experiment behind `asgd bench
// staleness`: each problem is made once (its data, its optimum or test set)
// and then trained from the same start under every swept setting
// (consistency policy x workers x tau), one CSV row per (setting, epoch) and
// one summary per setting for the caller to print.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "asgd/dense/mnist.hpp"
#include "asgd/dense/network.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/consistency.hpp"
#include "asgd/sparse/generator.hpp"
#include "asgd/sparse/linear_reference.hpp"
#include "asgd/sparse/mf/ratings.hpp"
#include "asgd/sparse/word2vec/corpus.hpp"
#include "asgd/sparse/word2vec/evaluation.hpp"
#include "asgd/sparse/word2vec/model.hpp"
#include "asgd/sparse/word2vec/vocabulary.hpp"

namespace asgd::bench {

struct Setting {
  Consistency policy;
  std::size_t workers;
  std::uint64_t tau;
};
// Every (policy, workers, tau), in that nesting order.
std::vector<Setting> setting_grid(std::span<const Consistency> policies, std::span<const std::size_t> workers,
                                  std::span<const std::uint64_t> taus);

// One CSV row at a time, flushed and checked: a sweep that is stopped keeps
// the rows of the settings it ran, and a disk that fills stops it with the
// error. Made before the data is read, it checks that the file can be
// written (InputError); begin() replaces the file (header first) once the
// data is in, so a sweep refused for its input leaves the previous CSV.
class CsvLog {
 public:
  CsvLog(std::filesystem::path path, std::string header);
  void begin();
  void row(std::string_view line);
  void close();
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  std::string header_;
  std::ofstream out_;
};

// How close to the optimum a linear run must end (relative gap) to have reached it.
inline constexpr double kOptimumGap = 1e-3;

// What every setting's run reports (per problem, the fields it measures).
struct SettingResult {
  double seconds = 0;            // of training, evaluation left out
  double mean_staleness = 0;
  std::uint64_t max_lead = 0;    // linear
  double objective = 0, gap = 0;  // linear: the final objective, relative to the optimum
  bool missed_optimum = false;   // linear: the gap is not within kOptimumGap (or not a number)
  double rate = 0;               // w2v: words/s; mf: updates/s; cnn: images/s
  double loss = 0;               // w2v: the last epoch's training loss
  double analogy_accuracy = -1;  // w2v: with questions; -1: none
  double test_rmse = 0;          // mf
  double test_accuracy = 0;      // cnn
};

// Logistic regression with a known optimum (L-BFGS): the gap to it per epoch.
class LinearSweep {
 public:
  LinearSweep(const sparse::GeneratorOptions& gen, double l2);
  const sparse::LinearReference& reference() const noexcept { return reference_; }
  SettingResult run(const Setting& s, std::uint64_t epochs, std::size_t step_examples, CsvLog& csv) const;
  static const char* csv_header();

 private:
  sparse::LinearReference reference_;
};

// word2vec skip-gram on a corpus (min-count 5, sample 1e-4): the training
// loss per epoch, and analogy accuracy on the last with questions.
class W2vSweep {
 public:
  // Reads the corpus, and the analogy questions unless `analogies` is empty.
  W2vSweep(const std::filesystem::path& corpus, const std::filesystem::path& analogies);
  W2vSweep(const W2vSweep&) = delete;  // the model refers to the corpus and vocabulary
  W2vSweep& operator=(const W2vSweep&) = delete;
  const sparse::w2v::ModelOptions& model_options() const noexcept { return options_; }
  std::size_t words() const noexcept { return corpus_.tokens.size(); }
  std::size_t vocabulary() const noexcept { return vocab_.size(); }
  std::size_t sentences_per_step() const noexcept { return model_->sentences_per_step(); }
  SettingResult run(const Setting& s, std::uint64_t epochs, std::size_t step_examples, CsvLog& csv) const;
  static const char* csv_header();

 private:
  sparse::w2v::Vocabulary vocab_;
  sparse::w2v::EncodedCorpus corpus_;
  sparse::w2v::ModelOptions options_;
  std::unique_ptr<sparse::w2v::Word2Vec> model_;
  std::vector<sparse::w2v::AnalogySectionQuestions> questions_;
};

// Biased MF (k 32, lr 0.02, l2 0.05) on a 90/10 split (seed 42): the test
// RMSE per epoch, under the Hogwild or LIBMF's block schedule.
class MfSweep {
 public:
  // InputError naming `source` when the split leaves no test or training rating.
  MfSweep(sparse::mf::Ratings all, std::string_view source);
  SettingResult run(const Setting& s, bool blocks, std::uint64_t epochs, std::size_t step_examples,
                    CsvLog& csv) const;
  static const char* csv_header();

 private:
  sparse::mf::Split split_;
};

// LeNet-5 on MNIST (batch 64 per worker, lr 0.02 cosine, momentum 0.9,
// weight decay 5e-4): test accuracy per epoch, with or without staleness
// compensation.
class CnnSweep {
 public:
  explicit CnnSweep(dense::TrainTest data);
  const dense::TrainTest& data() const noexcept { return data_; }
  SettingResult run(const Setting& s, bool compensate, std::uint64_t epochs, CsvLog& csv) const;
  static const char* csv_header();

 private:
  dense::TrainTest data_;
  dense::Network net_;
};

}  // namespace asgd::bench
