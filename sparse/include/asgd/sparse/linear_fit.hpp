// A whole linear-model training run as one call, in one process or on the
// ranks of a job: read the data, train (fresh, resumed, or in a shared
// segment), score the result and write the model file. What scikit-learn's
// SGDClassifier(loss=..., alpha=...).fit(X, y) is, for libsvm files.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/options_record.hpp"
#include "asgd/engine/rank_group.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/engine/training_run.hpp"
#include "asgd/sparse/libsvm.hpp"
#include "asgd/sparse/linear.hpp"
#include "asgd/sparse/linear_quality.hpp"

namespace asgd::sparse {

// Errors name these options (LinearFitOptions::l2, TrainingRunOptions::resume, TrainerOptions::seed,
// Schedule::adagrad); a caller with other names for them maps them.
struct LinearFitOptions {
  // libsvm, gzipped or not. "{rank}" in it: on several ranks each reads its own file, rank r's with r for {rank}
  // (needs `features`); otherwise each rank trains every size()-th example of the one file.
  std::string data;
  std::string test;            // scored by rank 0 after training; empty: none
  // The model's width; 0: the data's largest feature id + 1, at most kMaxInferredFeatures. Either way checked
  // against the memory available (training_bytes_per_feature a feature) before anything that wide is allocated.
  std::uint32_t features = 0;
  double l2 = 1e-4;            // finite, >= 0
  LinearLoss loss = LinearLoss::logistic;
  UnsortedIds unsorted = UnsortedIds::sort;
  bool reference = false;          // also solve with L-BFGS (smooth losses) and report the gap
  std::uint64_t until_epoch = 0;   // the last epoch this call trains (the schedule spans trainer.epochs); 0: all
  bool seed_given = false;         // trainer.seed was chosen: a resume of a run with another seed is refused
  std::filesystem::path model;     // written by rank 0 after training; empty: none
  bool keep_weights = false;       // LinearFitReport::weights: the trained weights, for a caller that uses them
  TrainerOptions trainer;
  // The store (shm, attach.recover_stale), checkpoints, the stop request and progress. `resume`: the checkpoint to
  // go on from, this rank's as the group reads it (RankGroup::resume_checkpoint); `attach.settings` is set here
  // (the objective every trainer of the segment shares).
  TrainingRunOptions run;
};

// The widest model the data alone may ask for: 2^27 (134,217,728) features, 1.6 GB to train. A wider one (from a
// feature id of 2^27 or more, refused at its line) is asked for with LinearFitOptions::features, so that one stray id
// (`1 3:1.5 2147483647:2`) cannot size a model of 26 GB; hashed data sets such as Criteo's (10^6 to 10^8
// features) train as they are.
inline constexpr std::uint64_t kMaxInferredFeatures = std::uint64_t{1} << 27;

// The bytes a feature takes to train as `options` say, at the peak: the weights, the regulariser's per-feature
// weights and the counts they are made from (12), AdaGrad's sums, the copy a test set or a shared segment is scored
// on (4 each), and L-BFGS's 25 vectors of doubles with LinearFitOptions::reference (200).
std::uint64_t training_bytes_per_feature(const LinearFitOptions& options);

struct LinearFitReport {
  TrainReport training;  // `stopped`: by the stop request; nothing else is filled in then
  // Rank 0 only (every rank holds the same model): on the training set (this rank's file with {rank}), the test set.
  std::optional<LinearQuality> train, test;
  std::optional<ReferenceGap> reference;
  bool model_written = false;
  // Rank 0 with LinearFitOptions::keep_weights: the trained weights, one a feature (a copy: the store is gone).
  std::vector<float> weights;
};

// Where a fit stands just before it trains.
struct LinearFitReady {
  const TrainingRun& run;
  // Resumed: how this run's options and data differ from those of the checkpoint's run (resume_changes; the
  // settings' digest "run" left out, the options that differ are told one by one), now loaded.
  ResumeChanges changes = {};
  bool resumed = false;
  std::uint64_t epoch = 0;          // epochs done before this call
  std::size_t examples = 0;         // this rank trains
  std::uint64_t all_examples = 0;   // all ranks train together
};

// Told as the fit goes, for a caller that reports as it happens (each may be unset).
struct LinearFitEvents {
  // Once the inputs are read and checked, just before the store opens: the stop request from then on (the flag of
  // a StopOnSignal installed there, so that a signal while reading still ends the process); null: run.stop's.
  std::function<std::atomic<bool>*()> stop_from_here;
  std::function<void(const TrainingRun&)> opened;     // the store is open, the options record set
  std::function<void(const LinearFitReady&)> ready;   // resumed (if so), about to train
  std::function<void(const TrainReport&)> trained;    // every rank, after the last epoch (not when stopped)
  std::function<void(const LinearFitReport&)> scored; // rank 0, scored, before the model file is written
};

// Trains as `options` say on `group`'s ranks (collective; a default RankGroup is one process). InputError naming
// the option for bad options and inputs, checked before the data is read where they need none: among them the
// outputs (model, run.checkpoint) that could not be written or name an input, and stdin read twice.
LinearFitReport fit_linear(const LinearFitOptions& options, RankGroup& group, const LinearFitEvents& events = {});
// The same on examples in memory (dataset_from_csr's, say) instead of a file: LinearFitOptions::data only names them
// in errors ("X"; no {rank}), LinearFitOptions::features, when given, widens them (InputError when narrower) and
// LinearFitOptions::unsorted is not used (SparseDataset::validate refuses unsorted ids). On several ranks each holds
// all of them and trains its share, as of one file.
LinearFitReport fit_linear(SparseDataset data, const LinearFitOptions& options, RankGroup& group,
                           const LinearFitEvents& events = {});

}  // namespace asgd::sparse
