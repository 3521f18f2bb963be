// A whole dense training run as one object: a fresh or resumed run of a
// network for a number of epochs, in one process or over the ranks of a job
// (RankGroup), with a checkpoint and a CSV row after every epoch; run()
// returns the history. The model file it writes is a LeNet-5 file (lenet_file.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "asgd/dense/mnist.hpp"
#include "asgd/dense/network.hpp"
#include "asgd/dense/trainer.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/options_record.hpp"
#include "asgd/engine/rank_group.hpp"
#include "asgd/engine/training_run.hpp"

namespace asgd::dense {

struct FitOptions {
  // The trainer's options; train.epochs is the run's total (a resume's epochs counted). Fit sets first_epoch,
  // total_epochs and seed from the fields below.
  TrainOptions train;
  std::size_t until_epoch = 0;  // stop after this epoch (0: train.epochs); the schedule still spans train.epochs
  std::optional<std::uint64_t> seed;  // none: 1, or a resumed run's
  std::filesystem::path resume;       // a checkpoint to go on from; empty: a fresh run
  std::optional<CheckpointData> resumed;  // `resume` already read (read_lenet); none: Fit reads it
  std::string checkpoint;  // written after every epoch (by rank 0); empty: none
  std::string csv;         // EpochLog written by rank 0 ("-": stdout); empty: none
  std::string device = "cpu";  // recorded in the files; "cpu" records the GEMM threads too
  TrainFunction trainer;       // empty: dense::train (the CPU); gpu::trainer for the GPU
  // Sets `resume` to `path` and reads it into `resumed` (read_lenet: once, here, so that a caller learns of a bad
  // file before anything else). With `its_epochs`, train.epochs becomes the epochs that run was to train
  // (recorded_epochs; left as it is when the file records none): a resume that gives no count finishes the run
  // it continues.
  void resume_from(const std::filesystem::path& path, const Network& net, bool its_epochs);
  // InputError naming the option: the trainer's options, then what a resume
  // cannot do (another seed, no epochs left, an until_epoch already done).
  void validate() const;
};

// What a resumed run does differently from the run it continues (asgd::resume_changes: each makes the result
// differ from an uninterrupted run's): other training images of the same number, and the options of `now` that
// `metadata` recorded otherwise (the epochs count only under the cosine schedule; a longer constant-rate run is
// the same run, continued).
ResumeChanges resume_changes(const std::string& metadata, OptionsRecord now);

struct FitReport {
  std::vector<EpochReport> history;  // the epochs this run trained
  std::size_t epochs_at_start = 0;   // a resume's
  std::size_t last_epoch = 0;        // the epoch it was to end with
  bool stopped = false;              // by a stop request, before last_epoch
  double seconds = 0;                // of training
  std::uint64_t images = 0;          // trained by this rank
};

class Fit {
 public:
  // Initialises the parameters (seeded) or takes the resumed ones and their
  // momentum, and this rank's share of `train` (every P-th image; equal
  // shares when the ranks average every K updates). `test` (rank 0's) is
  // measured after every epoch; null: none. The network, data and group must outlive the Fit.
  Fit(const Network& net, const Dataset& train, const Dataset* test, FitOptions options, RankGroup& group);
  Fit(const Network& net, const Dataset& train, const Dataset* test, FitOptions options);

  const ResumeChanges& changes() const noexcept { return changes_; }  // none for a fresh run
  std::size_t epochs_done() const noexcept { return done_; }          // at the start
  std::size_t last_epoch() const noexcept { return stop_; }           // the run ends after it (until_epoch or epochs)
  std::uint64_t images_per_epoch() const noexcept { return rows_.size(); }
  const TrainOptions& options() const noexcept { return options_.train; }
  ParamStore& params() noexcept { return run_.store(); }
  const std::vector<float>& momentum() const noexcept { return momentum_; }
  // The stop request from now on (a StopOnSignal's flag; null keeps the run's own).
  void use_stop_flag(std::atomic<bool>* flag) noexcept { run_.use_stop_flag(flag); }
  void request_stop() noexcept { run_.request_stop(); }

  // Trains to the last epoch (collective over the group); `on_epoch` sees each
  // epoch's report before its CSV row and checkpoint are written.
  FitReport run(const std::function<void(const EpochReport&)>& on_epoch = {});
  // The model as it stands after epoch `epoch`, with its momentum and record: a file to resume from or evaluate.
  void save(const std::filesystem::path& path, std::size_t epoch) const;

 private:
  OptionsRecord make_record() const;
  void average_across_ranks(TrainOptions& o, const Dataset& shard);

  const Network& net_;
  const Dataset& train_;
  const Dataset* test_;
  FitOptions options_;
  RankGroup own_group_;
  RankGroup& group_;
  TrainingRun run_;
  std::vector<float> momentum_;
  bool resumed_ = false;
  TrainState resumed_state_;
  std::size_t done_ = 0, stop_ = 0;
  std::uint64_t seed_ = 1;
  std::string metadata_;
  ResumeChanges changes_;
  std::vector<std::size_t> rows_;
};

}  // namespace asgd::dense
