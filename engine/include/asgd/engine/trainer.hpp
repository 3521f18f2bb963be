// Trainer: runs a Problem for E epochs with W workers under a consistency
// policy and a BoundedDelay gate, and reports what happened (loss curve,
// examples/s, staleness histogram).
//
// Staleness is measured, not inferred from the clocks: a step's staleness is
// the number of other workers' steps (of this Trainer: not those of other
// processes on a shared segment, nor of other ranks) that finished while it
// ran, i.e. how many of their updates the parameters it read may have missed
// (at most; a step that finished early in ours was partly visible to it). That is the delay of the
// analyses of asynchronous SGD (Recht et al. 2011, Zhang et al. 2016) and
// what the block trainer reports for the dense models. The gate's clock lead
// (a worker's steps minus the slowest's, what tau bounds) is reported
// separately as max_lead. With W workers the staleness is at most
// (W - 1)(2 tau + 1) at a finite tau; at tau 0 one step of each other worker.
//
// Workers are threads the Trainer owns for the run, all started before step
// 0: a worker blocked in the BoundedDelay gate waits for the others, so they
// must really run at the same time (a task scheduler such as oneTBB may run
// tasks one after another, or cap their number, and then the gate deadlocks
// or "Hogwild!" quietly runs serially). The examples are cut into one
// contiguous shard per worker, reshuffled every epoch with a generator seeded
// from (seed + stream, shard, epoch) and walked in steps of `step_examples`;
// worker w takes its own shard's steps and, at tau inf, then any left in the
// others, so a straggler (a descheduled thread on a busy machine) does fewer
// steps instead of trailing epochs behind with its part of the data, trained
// at the end at the schedule's lowest rates. A worker is at most one epoch
// ahead of the others (at a finite tau too: a tau longer than an epoch's
// steps binds less than that). One step is one tick of the worker's
// BoundedDelay clock and one learning-rate update. Loss and counts are
// reduced per worker, never "thread 0's loss". The first
// error (an exception, a non-finite loss, a failed checkpoint) wins: the
// others stop at their next step and run() rethrows it. The parameters then
// hold whatever the workers had done, but state() still says where the run
// started: go on from the last checkpoint (load_checkpoint), not by calling
// run() again. A progress callback that returns false, or TrainerOptions::stop
// set from anywhere (another thread, a signal handler), stops the run cleanly:
// every worker ends its step and leaves, and the report says stopped.
//
// Checkpoints are taken at epoch boundaries with every worker held there, so
// a checkpoint is a consistent snapshot with an exact example count. With
// one worker and a fixed seed a run is bit-for-bit reproducible, and
// resuming from a checkpoint gives the uninterrupted result; with several,
// the order of updates (and so the last bits) varies from run to run.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "asgd/engine/block_scheduler.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/problem.hpp"
#include "asgd/engine/random.hpp"
#include "asgd/engine/schedule.hpp"
#include "asgd/engine/update_sink.hpp"

namespace asgd {

namespace detail {
// What a diverged run's message suggests (the Trainer's and the BlockTrainer's): the rate is the usual cause,
// not the only one.
inline constexpr const char* kDivergenceAdvice =
    "lower the learning rate, or the L2 / weight decay or initial scale if large, or check the input for extreme "
    "values";
// The NaN/Inf guard's message (trainer.cpp).
std::string nonfinite_loss_message(double loss, std::uint64_t epoch, std::uint64_t example, std::size_t worker,
                                   float lr);
}  // namespace detail

struct Progress {
  double fraction = 0;            // of the whole run, in [0, 1]
  std::uint64_t epoch = 0;        // epochs completed, from the examples processed
  std::uint64_t examples = 0;     // processed in this run
  double loss = 0;                // mean example loss since the previous event
  double examples_per_second = 0; // since the run started
  float learning_rate = 0;        // last rate a worker used
  double elapsed_seconds = 0;
  double eta_seconds = 0;         // to the end of this run() (its until_epoch), at the rate so far
  bool last = false;              // the closing event of this run()
};

// Called from a worker thread (the closing event: from the thread that called
// run()), never two at once; return false to stop: the
// workers stop at their next step and the callback is not called again in
// this run(). (False from the closing event, `last`, changes nothing: the run
// is over.)
using ProgressCallback = std::function<bool(const Progress&)>;

// A run keeps statistics for each of its epochs: more than this many is a typo, not a plan.
inline constexpr std::uint64_t kMaxEpochs = 1'000'000;
// Workers are threads, each with its own counters and clock.
inline constexpr std::size_t kMaxWorkers = 1024;

struct TrainerOptions {
  std::size_t workers = 1;
  std::uint64_t epochs = 1;  // total, counting epochs done before a resume; at most kMaxEpochs
  std::uint64_t seed = 1;
  // Which random stream of the run this process draws: shuffles, block
  // orders and sampled negatives derive from seed + stream. Rank r of a
  // multi-process job draws stream r, so ranks do not repeat each other's
  // draws. It is not part of the checkpoint: a checkpoint records the run's
  // seed, and a resumed process draws its own stream of it again.
  std::uint64_t stream = 0;
  Consistency consistency = Consistency::racy;
  std::uint64_t tau = kUnbounded;     // BoundedDelay bound, in steps
  std::size_t step_examples = 256;    // examples per step (clock tick)
  Schedule schedule;
  ProgressCallback on_progress;
  double progress_interval_seconds = 0.5;
  // Called by a worker after every step it finishes, with the step's
  // examples (model averaging counts local steps with it). Must be cheap and
  // must not block.
  std::function<void(std::uint64_t examples)> on_step;
  // A stop request, read by each worker before every step: once
  // it holds true (a lock-free store, so a signal handler may make it),
  // each finishes the step it is in and run() returns a report with stopped
  // set. The epoch under way is left unfinished: state() counts the epochs
  // done and no checkpoint is written for it, so a resume from the last
  // checkpoint trains it whole. Null: no request. Outlives run().
  const std::atomic<bool>* stop = nullptr;
  // Empty: no checkpoints. The Trainer's constructor throws the InputError a
  // write would (AtomicFile::check), so a path that cannot be written costs
  // nothing rather than the first epoch.
  std::filesystem::path checkpoint_path;
  std::uint64_t checkpoint_every = 1;     // epochs
  std::string checkpoint_metadata;        // stored with every checkpoint
  // Before a checkpoint (an epoch's, or save_checkpoint's) replaces the
  // file this Trainer loaded or last wrote, keep that as PATH.prev
  // (keep_previous_checkpoint): under mpirun each rank may write its own
  // file, and a job killed between two ranks' writes leaves them an epoch
  // apart; the ranks ahead then resume from their .prev. A file another run
  // left at the path is no generation of this one: its .prev is removed at
  // this run's first write there. Loaded from a .prev itself, the first
  // write keeps nothing (the .prev already holds that generation). Paths are
  // compared as files (./ck and ck alike).
  bool checkpoint_keep_previous = false;
  // Workers flush subnormal floats to zero (FlushDenormals, denormals.hpp):
  // the default; false keeps IEEE gradual underflow.
  bool flush_denormals = true;
  // LIBMF-style block schedule (a BlockedProblem only): workers take blocks
  // with disjoint rows and columns from a BlockScheduler; tau and
  // step_examples do not apply (one block is one step).
  bool blocks = false;

  // Throws InputError naming the option that is wrong.
  void validate() const;
};

struct EpochStats {
  std::uint64_t epoch = 0;         // 1-based epoch number
  double loss = 0;                 // mean example loss during the epoch
  double seconds = 0;              // since run() started, when the last worker finished it
  std::uint64_t examples = 0;
  double mean_staleness = 0;        // other workers' updates that landed while a step ran
  std::uint64_t max_staleness = 0;
  std::uint64_t max_lead = 0;       // most steps a worker ran ahead of the slowest (what tau bounds)
};

struct TrainReport {
  std::vector<EpochStats> epochs;  // the epochs this run() trained
  double seconds = 0;
  std::uint64_t examples = 0;
  double examples_per_second = 0;
  StalenessHistogram staleness;  // per step: other workers' updates that landed while it ran
  std::uint64_t max_lead = 0;    // most steps a worker ran ahead of the slowest (<= tau)
  bool stopped = false;  // by the progress callback or TrainerOptions::stop
  std::string stop_reason;
  TrainState state;  // after the run
  std::string summary() const;
  // Adds the report of a run() that went on from this one (the next epochs):
  // its epochs, time, examples and staleness; its state and stop.
  void append(const TrainReport& later);
};

class Trainer {
 public:
  Trainer(ParamStore& store, TrainerOptions options);

  // Trains from state().epoch to options.epochs.
  template <Problem P>
  TrainReport run(P& problem) {
    return run(problem, options_.epochs);
  }
  // Trains from state().epoch to until_epoch (<= options.epochs), so a caller
  // can evaluate between epochs; schedules still span options.epochs.
  // InputError when state().epoch is past until_epoch.
  template <Problem P>
  TrainReport run(P& problem, std::uint64_t until_epoch);

  const TrainState& state() const noexcept { return state_; }
  void set_state(const TrainState& s) { state_ = s; }
  const TrainerOptions& options() const noexcept { return options_; }
  std::span<const float> adagrad_sums() const noexcept { return adagrad_sums_; }
  // Which AdaGrad wrote those sums, as checkpoints record it (for a model file written with save_checkpoint).
  OptimizerKind optimizer_kind() const noexcept;

  // Parameters + state + AdaGrad sums; resume with load_checkpoint + run().
  // load_checkpoint throws InputError when the file holds AdaGrad sums and
  // this Trainer's schedule has no AdaGrad, or the other way round. It
  // restores the state the run recorded, its seed included: state().seed is
  // then the checkpoint's, whatever TrainerOptions::seed says (a resume that
  // should refuse another seed compares the two itself, as the CLI does).
  void save_checkpoint(const std::filesystem::path& path) const;
  // The job's model as one file that one process or any number of ranks resumes: where this trainer's
  // checkpoints are one of several ranks' files (options.ranks in checkpoint_metadata, as MultiRank records it),
  // its AdaGrad sums times that count stand for the job's (each rank's are of its share of the examples), and
  // the count is left out. Otherwise as save_checkpoint. Not a generation of the run's checkpoints: no .prev is
  // kept or removed for it.
  void save_model(const std::filesystem::path& path) const;
  // The metadata save_model writes: checkpoint_metadata without a rank count (unchanged where it has none).
  std::string model_metadata() const;
  void load_checkpoint(const std::filesystem::path& path);
  // The same from a checkpoint already read (read_checkpoint); `path` names it in errors.
  void load_checkpoint(CheckpointData data, const std::filesystem::path& path);


 private:
  struct Run;
  // A worker that leaves, for any reason, never holds the others back.
  struct Retire {
    BoundedDelay& gate;
    std::size_t w;
    ~Retire() { gate.retire(w); }
  };
  template <Problem P, class Sink>
  void worker_loop(P& problem, Sink sink, std::size_t w, Run& run);
  // One step's summed loss over examples example(lo) .. example(hi - 1); a
  // NaN or Inf loss stops the run with a message naming the example.
  template <class P, class Sink, class Example>
  static double step_loss(P& problem, Sink& sink, std::uint64_t lo, std::uint64_t hi, Example example,
                          std::uint64_t epoch, std::size_t w, float lr) {
    double loss = 0;
    for (std::uint64_t k = lo; k < hi; ++k) {
      const std::uint64_t i = example(k);
      const double l = problem.gradient(static_cast<std::size_t>(i), sink);
      if (!std::isfinite(l)) [[unlikely]] {
        throw RuntimeError(detail::nonfinite_loss_message(l, epoch + 1, i, w, lr));
      }
      loss += l;
    }
    return loss;
  }
  template <BlockedProblem P, class Sink>
  void worker_loop_blocks(P& problem, Sink sink, std::size_t w, Run& run);
  // Every worker has left `epoch` (the last to leave calls it): folds their sums into run.epoch_stats, clears
  // them for epoch + 2 and writes the checkpoint if one is due.
  void close_epoch(Run& run, std::uint64_t epoch);
  // After the run, and before an epoch's checkpoint: an AdaGrad sum that is inf throws (the input's scale).
  void check_adagrad_sums() const;
  // keep_previous_checkpoint(path) when checkpoint_keep_previous and `path` is this run's own file (lineage_).
  void keep_previous_of(const std::filesystem::path& path) const;
  // save_checkpoint's and save_model's file: the AdaGrad sums times sums_scale, under `metadata`; a
  // generation of this run's checkpoints (keep_previous_of, lineage_) or not (a model file).
  void write_file(const std::filesystem::path& path, float sums_scale, const std::string& metadata,
                  bool generation) const;
  template <Problem P, ConsistencyPolicy Policy>
  TrainReport run_with(P& problem, const Policy& policy, std::uint64_t until_epoch);
  static std::string fmt_until_epoch(std::uint64_t until, std::uint64_t epochs);
  static std::string fmt_past_epoch(std::uint64_t done, std::uint64_t until);

  // Non-template parts, in trainer.cpp.
  void launch(Run& run, const std::function<void(std::size_t)>& body);
  TrainReport finish(Run& run);
  // Worker w leaves `epoch` (it found no step left to take); the last to
  // leave closes it (a checkpoint: every worker waits for it, paused in the
  // gate) and frees its slot for epoch + 2.
  void epoch_finished(Run& run, std::uint64_t epoch, std::size_t w);
  void maybe_report(Run& run, bool force);
  // Whether TrainerOptions::stop asks to stop; if so, halts the run (the
  // workers waiting for a slot or a clock must not wait for one that left).
  bool stop_requested(Run& run) const noexcept;
  // The scheduled rate for the next step of a run that started `before`
  // examples into a training of `total`; `staleness`: that of the worker's
  // previous step (what a staleness-aware rate divides by).
  float rate_now(const Run& run, double before, double total, std::uint64_t staleness) const;
  // Books a finished step of worker w: its epoch's sums, the staleness
  // histogram and clock lead, the live counters, then the step and progress
  // callbacks.
  void record_step(Run& run, std::size_t w, std::uint64_t epoch, std::uint64_t examples, double loss,
                   std::uint64_t staleness, std::uint64_t lead, float lr);
  static std::uint64_t worker_seed(std::uint64_t seed, std::size_t worker, std::uint64_t epoch) noexcept;
  // The seed this process draws from: the run's (checkpointed) seed on its stream.
  std::uint64_t draw_seed() const noexcept { return state_.seed + options_.stream; }

  ParamStore& store_;
  TrainerOptions options_;
  TrainState state_;
  std::vector<float> adagrad_sums_;
  mutable std::filesystem::path lineage_;  // the checkpoint loaded or last written, normalised (keep_previous_of)
  // Each worker's last step's staleness, kept from one run() to the next (a caller that trains epoch by epoch
  // keeps the staleness-aware rate it would have in one run).
  std::vector<std::uint64_t> last_staleness_;
};

}  // namespace asgd

// The shared state of a run and the template members' definitions.
#include "asgd/engine/detail/trainer_run.hpp"
