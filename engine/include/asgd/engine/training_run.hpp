// A whole training run as one object: what a program holds from the moment
// it decides where the parameters live until the model is written. It owns
//  * the store: the heap, or a shared segment created or attached (removed
//    again if the run fails before training starts; an attached segment that
//    holds NaN or inf is refused, and writers that died are reported);
//  * the stop request: request_stop() from any thread, a signal handler
//    (StopOnSignal) or Python's KeyboardInterrupt; both engine loops read it;
//  * the events: progress while an epoch runs and one EpochSummary per
//    epoch, the same vocabulary for the sparse Trainer and the dense
//    BlockTrainer;
//  * checkpoints: the path written after each epoch (locked for the run:
//    a second run writing it is refused, CheckpointLock), the checkpoint resumed
//    (read once, first), the options record it kept and what differs now
//    (the caller decides how to say it), and the run id that files of one
//    run carry.
// The model, its data and the engine loop stay the caller's: a TrainingRun
// configures the loop's options and is told of its reports.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "asgd/engine/block_trainer.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/checkpoint_lock.hpp"
#include "asgd/engine/options_record.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/engine/training_store.hpp"

namespace asgd {

// One epoch, from either engine loop.
struct EpochSummary {
  std::uint64_t epoch = 0;     // 1-based, counting the epochs before a resume
  double loss = 0;             // mean example (Trainer) or minibatch (BlockTrainer) loss
  double seconds = 0;          // of training
  std::uint64_t examples = 0;  // trained in the epoch (0 when the loop does not count them)
  double mean_staleness = 0;
  std::uint64_t max_staleness = 0;
  bool stopped = false;        // by a stop request, before the epoch's end
};
EpochSummary summarize(const EpochStats& epoch, double seconds_before = 0);
EpochSummary summarize(const BlockEpochStats& epoch, std::uint64_t epoch_number);

struct TrainingRunOptions {
  std::string shm = {};  // empty: the heap; else the shared segment of that name
  // recover_stale: take over a segment whose writer was killed; settings:
  // the objective every process training the segment must share.
  AttachOptions attach = {};
  std::filesystem::path checkpoint = {};  // written after every checkpoint_every epochs; empty: none
  std::uint64_t checkpoint_every = 1;
  // Whether this process holds `checkpoint`'s lock for the whole run (CheckpointLock), so that a second run
  // writing the same path is refused at its start. The ranks of a job share the path: rank 0 alone takes it (a
  // job refused there never reaches the common start, RankGroup::start, before which no rank writes a file).
  bool lock_checkpoint = true;
  std::filesystem::path resume = {};  // a checkpoint to go on from, read when the run is made; empty: none
  // The checkpoint `resume` names, already read (the ranks of a job agree
  // first on the file each one reads: MultiRank::resume_own_checkpoint).
  std::optional<CheckpointData> resumed = std::nullopt;
  // The stop request: a flag of the caller's (StopOnSignal::flag(), a
  // binding's), set from anywhere; null: the run's own (request_stop()).
  std::atomic<bool>* stop = nullptr;
  ProgressCallback on_progress = {};  // while an epoch runs (Progress); return false to stop
  std::function<void(const EpochSummary&)> on_epoch = {};  // after each epoch
};

class TrainingRun {
 public:
  // Reads the checkpoint to resume, if any (first: a resume that cannot be
  // read costs nothing), then opens the store for `layout` (initialize fills
  // a new one). InputError naming the file or the segment.
  TrainingRun(Layout layout, TrainingRunOptions options, const std::function<void(ParamStore&)>& initialize = {});
  // Movable (the stop request stays where it is: a flag handed out keeps working), not copyable.
  TrainingRun(TrainingRun&&) = default;
  TrainingRun& operator=(TrainingRun&&) = delete;

  ParamStore& store() noexcept { return store_.store; }
  const ParamStore& store() const noexcept { return store_.store; }
  // Whether the store is new (false: a segment attached, its parameters kept).
  bool created() const noexcept { return store_.created; }
  // The processes that trained the attached segment and died without detaching (it holds what they wrote).
  const std::vector<int>& dead_writers() const noexcept { return dead_writers_; }
  const TrainingRunOptions& options() const noexcept { return options_; }

  // Any thread, or a signal handler (a lock-free store): the workers end their step and the loop returns stopped.
  void request_stop() noexcept { stop_->store(true, std::memory_order_relaxed); }
  bool stop_requested() const noexcept { return stop_->load(std::memory_order_relaxed); }
  // From now on the stop request is `flag` (one made after the run, such as a StopOnSignal installed once the data
  // is read); null keeps the current one. Before configure().
  void use_stop_flag(std::atomic<bool>* flag) noexcept {
    if (flag != nullptr) stop_ = flag;
  }

  // The checkpoint resumed (TrainingRunOptions::resume), as read; none for a fresh run, or once loaded.
  const std::optional<CheckpointData>& resumed() const noexcept { return resumed_; }
  // What this run records in its checkpoints' metadata under "options"
  // (engine_options and the model's own), and its id, kept there as "run": a
  // digest of `seed` (the resumed run's when resuming), `settings` (the
  // model's, as text) and the record, the same for every process of one job
  // (not random: a run's files stay the same byte for byte), so that a file
  // of another run is told apart.
  void set_record(OptionsRecord record, std::uint64_t seed, std::string_view settings);
  // A value recorded beside the options that is not part of the run id (what the run trains on, counted).
  void add_to_record(const std::string& key, std::string value) { record_[key] = std::move(value); }
  const OptionsRecord& record() const noexcept { return record_; }
  std::uint64_t run_id() const noexcept { return run_id_; }
  // The options of `record()` that the resumed checkpoint recorded with another value (none for a fresh run,
  // or a checkpoint that recorded none).
  std::vector<OptionChange> changes_since_resumed() const;

  // The sparse loop's options wired to this run: stop, progress, checkpoint path and every.
  void configure(TrainerOptions& options) const;
  // The dense loop's: stop.
  void configure(BlockTrainOptions& options) const;
  // Loads the resumed checkpoint into `trainer` (parameters, state, AdaGrad sums); nothing for a fresh run.
  void load_resumed(Trainer& trainer);

  // Training starts: from here on a segment this run created holds work worth keeping, whatever happens next.
  void started() noexcept { store_.cleanup.release(); }
  // Tells the run of a loop's report: on_epoch for each of its epochs.
  void report(const TrainReport& report) const;
  void report(const EpochSummary& epoch) const;

 private:
  TrainingRunOptions options_;
  CheckpointLock checkpoint_lock_;  // taken first: a second run on the path is refused before anything is read
  std::optional<CheckpointData> resumed_;  // read before the store opens: a resume that fails costs nothing
  // Of the resumed checkpoint, kept once it is loaded: the options it recorded (none: it recorded none) and its seed.
  std::optional<OptionsRecord> resumed_options_;
  std::uint64_t resumed_seed_ = 0;
  TrainingStore store_;
  std::vector<int> dead_writers_;
  std::unique_ptr<std::atomic<bool>> own_stop_ = std::make_unique<std::atomic<bool>>(false);
  std::atomic<bool>* stop_ = own_stop_.get();
  OptionsRecord record_;
  std::uint64_t run_id_ = 0;
};

// "0123456789": a run id as checkpoints record it (10 hex digits, 40 bits).
std::string run_id_text(std::uint64_t id);

}  // namespace asgd
