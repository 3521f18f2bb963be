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

// ---------------------------------------------------------------------------
// Shared state of one run(): per-worker counters on their own cache lines.

struct Trainer::Run {
  struct alignas(kCacheLine) WorkerCounters {
    std::atomic<std::uint64_t> examples{0};
    std::atomic<double> loss_sum{0};
    std::atomic<float> lr{0};
  };
  struct EpochAccumulator {
    double loss_sum = 0;
    std::uint64_t examples = 0;
    std::uint64_t staleness_sum = 0;
    std::uint64_t steps = 0;
    std::uint64_t staleness_max = 0;
    std::uint64_t lead_max = 0;
  };
  struct alignas(kCacheLine) WorkerLocal {  // written every step by its worker alone: no line shared
    // Epochs first + 2k and first + 2k + 1 (a worker is at most one epoch ahead): the last worker to leave an
    // epoch folds every worker's sums into epoch_stats and clears them for the epoch after next, so the sums
    // take two slots a worker, whatever the number of epochs.
    std::array<EpochAccumulator, 2> epochs;
    std::uint64_t lead_max = 0;  // over the whole run, finished epochs or not
    StalenessHistogram staleness;
    std::uint64_t last_staleness = 0;  // of w's previous step: the staleness-aware rate's divisor
  };

  // Holds every worker at an epoch boundary while the last to arrive runs a
  // completion (a checkpoint); cancel() releases them all.
  class EpochBarrier {
   public:
    explicit EpochBarrier(std::size_t parties) : parties_(parties) {}
    // False when cancelled. Exceptions from `completion` reach its caller
    // only; the others are released by the cancel that the failure causes.
    template <class F>
    bool arrive_and_wait(F&& completion) {
      std::unique_lock lock(mutex_);
      if (cancelled_) return false;
      const std::uint64_t generation = generation_;
      if (++waiting_ == parties_) {
        waiting_ = 0;
        completion();
        ++generation_;
        wake_.notify_all();
        return true;
      }
      wake_.wait(lock, [&] { return generation_ != generation || cancelled_; });
      return generation_ != generation;
    }
    void cancel() {
      {
        std::scoped_lock lock(mutex_);
        cancelled_ = true;
      }
      wake_.notify_all();
    }

   private:
    std::mutex mutex_;
    std::condition_variable wake_;
    std::size_t parties_;
    std::size_t waiting_ = 0;
    std::uint64_t generation_ = 0;
    bool cancelled_ = false;
  };

  // The steps of one epoch. The examples are cut into one contiguous shard
  // per worker, each visited in its own shuffled order; worker w takes the
  // steps of shard w and, at tau inf, once they are all taken, those left in
  // the other shards: a slow or descheduled worker does fewer steps instead
  // of trailing behind with its part of the data. (Not at a finite tau: the
  // gate's clocks count steps over the whole run, so the fast worker would
  // wait for the straggler's clock anyway.) Two slots serve epochs first,
  // first + 1, then first + 2 once every worker has left `first`, and so on:
  // a worker is at most one epoch ahead. A shard's steps of the next epoch
  // wait for its steps of this one to finish (see wait_for_shard), so no
  // example is ever in two steps at once.
  struct EpochSlot {
    struct alignas(kCacheLine) Shard {
      std::atomic<std::uint64_t> next{0};            // the next step to take
      std::atomic<std::uint64_t> built{kUnbounded};  // the epoch `order` holds
      std::mutex build;
      std::vector<std::uint64_t> order;
    };
    std::atomic<std::uint64_t> epoch{0};  // the epoch served now
    std::unique_ptr<Shard[]> shards;
  };

  Run(std::size_t workers, std::uint64_t tau, std::uint64_t n, std::uint64_t first, std::uint64_t last,
      std::size_t step_examples)
      : gate(workers, tau),
        steal(tau == kUnbounded),
        started(static_cast<std::ptrdiff_t>(workers)),
        barrier(workers),
        counters(std::make_unique<WorkerCounters[]>(workers)),
        locals(workers),
        examples_per_epoch(n),
        examples_before(n * first),
        first_epoch(first),
        last_epoch(last),
        epoch_done(std::make_unique<std::atomic<std::size_t>[]>(last - first + 1)),
        epoch_stats(last - first) {
    for (std::uint64_t e = 0; e <= last - first; ++e) epoch_done[e] = 0;
    const std::uint64_t largest_shard = (n + workers - 1) / workers;
    steps_per_shard = std::max<std::uint64_t>(1, (largest_shard + step_examples - 1) / step_examples);
    shard_finished = std::make_unique<ShardCount[]>(workers);
    for (std::size_t k = 0; k < 2; ++k) {
      slots[k].epoch.store(first + k, std::memory_order_relaxed);
      slots[k].shards = std::make_unique<EpochSlot::Shard[]>(workers);
    }
  }

  // The slot of `epoch`, once it serves it; nullptr when the run stops first.
  // Worker w waits paused in the gate: it holds nobody back meanwhile.
  EpochSlot* slot_for(std::uint64_t epoch, std::size_t w) {
    EpochSlot& slot = slots[(epoch - first_epoch) % 2];
    if (slot.epoch.load(std::memory_order_acquire) != epoch) {
      gate.pause(w);
      {
        std::unique_lock lock(slot_mutex);
        slot_free.wait(lock, [&] {
          return slot.epoch.load(std::memory_order_acquire) == epoch || stop.load(std::memory_order_acquire);
        });
      }
      gate.resume(w);
    }
    return stop.load(std::memory_order_acquire) ? nullptr : &slot;
  }
  // Before a step of shard s in `epoch`: waits (paused in the gate) until
  // the shard's steps of the epochs before it have all finished. Without
  // this, a worker still in its last step of epoch e and one that started
  // e + 1 could hold the same example at once (a race on updates that are
  // otherwise disjoint). False when the run stops first.
  bool wait_for_shard(std::size_t s, std::uint64_t epoch, std::size_t w) {
    const std::uint64_t need = (epoch - first_epoch) * steps_per_shard;
    if (shard_finished[s].steps.load(std::memory_order_acquire) >= need) return true;
    gate.pause(w);
    shard_waiters.fetch_add(1, std::memory_order_seq_cst);
    {
      std::unique_lock lock(slot_mutex);
      // seq_cst, as the increment above and shard_step_done's: either this load sees the finished count, or the
      // finisher sees this waiter (acquire alone allows neither on a weakly ordered CPU: a lost wake-up).
      slot_free.wait(lock, [&] {
        return shard_finished[s].steps.load(std::memory_order_seq_cst) >= need || stop.load(std::memory_order_acquire);
      });
    }
    shard_waiters.fetch_sub(1, std::memory_order_relaxed);
    gate.resume(w);
    return !stop.load(std::memory_order_acquire);
  }
  // The next step of `slot` for worker w: one of its own shard while any is
  // left, else (when stealing) one of another shard (from w + 1 on); nullopt
  // when every step w may take is taken.
  std::optional<std::pair<std::size_t, std::uint64_t>> take_step(EpochSlot& slot, std::size_t w) {
    const std::size_t workers = steal ? gate.workers() : 1;
    for (std::size_t i = 0; i < workers; ++i) {
      const std::size_t s = (w + i) % gate.workers();
      auto& next = slot.shards[s].next;
      if (i > 0 && next.load(std::memory_order_relaxed) >= steps_per_shard) continue;
      const std::uint64_t k = next.fetch_add(1, std::memory_order_relaxed);
      if (k < steps_per_shard) return std::pair{s, k};
    }
    return std::nullopt;
  }
  // A step of shard s finished.
  void shard_step_done(std::size_t s) {
    const std::uint64_t done = shard_finished[s].steps.fetch_add(1, std::memory_order_seq_cst) + 1;
    // Pairs with the waiter's seq_cst increment: either it sees the new count, or this sees it waiting.
    if (done % steps_per_shard == 0 && shard_waiters.load(std::memory_order_seq_cst) > 0) {
      { std::scoped_lock lock(slot_mutex); }
      slot_free.notify_all();
    }
  }
  // Every worker has left `epoch`: its slot serves epoch + 2 from now on.
  void release_slot(std::uint64_t epoch) {
    EpochSlot& slot = slots[(epoch - first_epoch) % 2];
    for (std::size_t s = 0; s < gate.workers(); ++s) slot.shards[s].next.store(0, std::memory_order_relaxed);
    {
      std::scoped_lock lock(slot_mutex);
      slot.epoch.store(epoch + 2, std::memory_order_release);
    }
    slot_free.notify_all();
  }

  // First error wins; everyone else stops at their next step.
  void fail(std::exception_ptr e) noexcept {
    {
      std::scoped_lock lock(error_mutex);
      if (!error) error = std::move(e);
    }
    halt();
  }
  // Stops every worker at its next step or wait.
  void halt() noexcept {
    stop.store(true, std::memory_order_release);
    gate.cancel();
    barrier.cancel();
    if (blocks) blocks->cancel();
    { std::scoped_lock lock(slot_mutex); }
    slot_free.notify_all();
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  BoundedDelay gate;
  const bool steal;    // take steps of other shards (see EpochSlot)
  std::latch started;  // every worker is running before anyone takes a step
  EpochBarrier barrier;
  std::unique_ptr<BlockScheduler> blocks;  // with TrainerOptions::blocks
  std::unique_ptr<WorkerCounters[]> counters;
  std::vector<WorkerLocal> locals;
  std::uint64_t examples_per_epoch;
  std::uint64_t steps_per_shard = 1;
  std::array<EpochSlot, 2> slots;
  struct alignas(kCacheLine) ShardCount {
    std::atomic<std::uint64_t> steps{0};  // finished in this run, over all epochs
  };
  std::unique_ptr<ShardCount[]> shard_finished;
  alignas(kCacheLine) std::atomic<int> shard_waiters{0};  // read at every shard's epoch end: off the mutex's line
  std::mutex slot_mutex;  // slot_free: a slot's epoch moved on, a shard finished an epoch, or the run stops
  std::condition_variable slot_free;
  // Where the run starts in the schedule: the epochs done times this problem's examples per epoch, so that a
  // resumed run takes the rates the uninterrupted one took, whatever count the checkpoint holds (rank 0's, under
  // mpirun, whose shard may be one example longer; or one with a part-epoch that a stopped run had trained).
  std::uint64_t examples_before;
  std::uint64_t first_epoch;
  std::uint64_t last_epoch;
  std::unique_ptr<std::atomic<std::size_t>[]> epoch_done;
  std::vector<EpochStats> epoch_stats;  // written by the last worker to leave each epoch (close_epoch)
  std::atomic<std::uint64_t> examples_done{0};
  // Steps finished in this run, by every worker: a step's staleness is how far it moved while the step ran.
  alignas(kCacheLine) std::atomic<std::uint64_t> updates{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> stopped_by_callback{false};
  std::atomic<bool> stopped_on_request{false};  // TrainerOptions::stop
  std::mutex error_mutex;
  std::exception_ptr error;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::atomic<std::int64_t> next_report_ns{0};
  std::atomic<bool> reporting{false};
  double last_report_loss = 0;         // guarded by `reporting`
  std::uint64_t last_report_examples = 0;
};

template <Problem P>
TrainReport Trainer::run(P& problem, std::uint64_t until_epoch) {
  static_assert(Problem<P>, "see asgd/engine/problem.hpp");
  if (until_epoch > options_.epochs) {
    throw InputError(fmt_until_epoch(until_epoch, options_.epochs));
  }
  switch (options_.consistency) {
    case Consistency::racy: return run_with(problem, Racy{}, until_epoch);
    case Consistency::atomic: return run_with(problem, Atomic{}, until_epoch);
    case Consistency::locked: return run_with(problem, Locked{}, until_epoch);
  }
  throw InputError("trainer: unknown consistency policy");
}

template <Problem P, ConsistencyPolicy Policy>
TrainReport Trainer::run_with(P& problem, const Policy& policy, std::uint64_t until_epoch) {
  const std::uint64_t n = problem.num_examples();
  if (n == 0) throw InputError("trainer: the problem has no examples");
  if constexpr (requires { problem.layout(); }) {
    if (problem.layout().hash() != store_.layout().hash()) {
      throw InputError("trainer: the parameters' layout is not the problem's:\n" + store_.layout().describe() +
                       "expected:\n" + problem.layout().describe());
    }
  }
  if (options_.schedule.has_adagrad() && adagrad_sums_.size() != store_.size()) {
    adagrad_sums_.assign(store_.size(), 0.0f);
  }
  // A run never goes back: resumed past until_epoch, it would record the earlier epoch and train the epochs in
  // between again on the next resume.
  if (state_.epoch > until_epoch) throw InputError(fmt_past_epoch(state_.epoch, until_epoch));
  const std::uint64_t first = state_.epoch;
  Run run(options_.workers, options_.tau, n, first, until_epoch, options_.step_examples);
  last_staleness_.resize(options_.workers, 0);
  for (std::size_t w = 0; w < options_.workers; ++w) run.locals[w].last_staleness = last_staleness_[w];
  if (options_.blocks) {
    if constexpr (BlockedProblem<P>) {
      if (problem.bins() == 0) throw InputError("trainer: a block schedule needs the problem split into bins");
      run.blocks = std::make_unique<BlockScheduler>(problem.bins(), worker_seed(draw_seed(), 0x6b, first));
    } else {
      throw InputError("trainer: a block schedule needs a problem split into blocks (see BlockedProblem)");
    }
  }
  float* params = store_.data();
  auto loop = [&](auto sink, std::size_t w) {
    if constexpr (BlockedProblem<P>) {
      if (options_.blocks) return worker_loop_blocks(problem, std::move(sink), w, run);
    }
    worker_loop(problem, std::move(sink), w, run);
  };
  auto body = [&](std::size_t w) {
    if (options_.schedule.adagrad) {
      loop(UpdateSink<Policy, StepRule::adagrad>(params, store_.size(), policy, adagrad_sums_.data(),
                                                 options_.schedule.adagrad_eps),
           w);
    } else if (options_.schedule.row_adagrad) {
      loop(UpdateSink<Policy, StepRule::row_adagrad>(params, store_.size(), policy, adagrad_sums_.data(),
                                                     options_.schedule.adagrad_eps, options_.schedule.row_head),
           w);
    } else {
      loop(UpdateSink<Policy, StepRule::sgd>(params, store_.size(), policy), w);
    }
  };
  launch(run, body);
  return finish(run);
}

template <Problem P, class Sink>
void Trainer::worker_loop(P& problem, Sink sink, std::size_t w, Run& run) {
  const Retire retire{run.gate, w};
  run.started.arrive_and_wait();
  try {
    const std::size_t workers = options_.workers;
    const std::uint64_t n = run.examples_per_epoch, steps = run.steps_per_shard;
    const double total = static_cast<double>(n) * static_cast<double>(options_.epochs);
    const double before = static_cast<double>(run.examples_before);
    // Shard s of this epoch in its order: made by the first worker to need it, from the seed of (s, epoch).
    const auto shard_order = [&](Run::EpochSlot& slot, std::size_t s, std::uint64_t epoch) -> const auto& {
      auto& shard = slot.shards[s];
      if (shard.built.load(std::memory_order_acquire) != epoch) {
        std::scoped_lock lock(shard.build);
        if (shard.built.load(std::memory_order_relaxed) != epoch) {
          const std::uint64_t begin = n * s / workers, end = n * (s + 1) / workers;
          shard.order.resize(end - begin);
          for (std::uint64_t k = 0; k < end - begin; ++k) shard.order[k] = begin + k;
          std::mt19937_64 rng(worker_seed(draw_seed(), s, epoch));
          if constexpr (ShufflingProblem<P>) {
            problem.shuffle(std::span<std::uint64_t>(shard.order), rng);
          } else {
            shuffle_in_place(std::span<std::uint64_t>(shard.order), rng);
          }
          shard.built.store(epoch, std::memory_order_release);
        }
      }
      return shard.order;
    };
    for (std::uint64_t epoch = run.first_epoch; epoch < run.last_epoch; ++epoch) {
      Run::EpochSlot* const slot = run.slot_for(epoch, w);
      if (slot == nullptr) return;
      sink.set_run(draw_seed(), epoch);
      while (const auto taken = run.take_step(*slot, w)) {
        const auto [shard, step] = *taken;
        if (!run.wait_for_shard(shard, epoch, w)) return;
        const auto lead = run.gate.enter(w);
        if (!lead || run.stop.load(std::memory_order_relaxed) || stop_requested(run)) return;
        const float lr = rate_now(run, before, total, run.locals[w].last_staleness);
        sink.set_learning_rate(lr);
        const std::vector<std::uint64_t>& order = shard_order(*slot, shard, epoch);
        const std::uint64_t lo = order.size() * step / steps, hi = order.size() * (step + 1) / steps;
        const std::uint64_t seen = run.updates.load(std::memory_order_acquire);
        const double loss =
            step_loss(problem, sink, lo, hi, [&](std::uint64_t k) { return order[k]; }, epoch, w, lr);
        // Counted before the clock moves: a worker the new clock lets in reads the count with it.
        const std::uint64_t staleness = run.updates.fetch_add(1, std::memory_order_acq_rel) - seen;
        run.gate.finish_step(w);
        run.shard_step_done(shard);
        record_step(run, w, epoch, hi - lo, loss, staleness, *lead, lr);
      }
      epoch_finished(run, epoch, w);
    }
  } catch (...) {
    run.fail(std::current_exception());
  }
}

template <BlockedProblem P, class Sink>
void Trainer::worker_loop_blocks(P& problem, Sink sink, std::size_t w, Run& run) {
  const Retire retire{run.gate, w};
  run.started.arrive_and_wait();
  try {
    const double total = static_cast<double>(run.examples_per_epoch) * static_cast<double>(options_.epochs);
    const double before = static_cast<double>(run.examples_before);
    for (std::uint64_t epoch = run.first_epoch; epoch < run.last_epoch; ++epoch) {
      sink.set_run(draw_seed(), epoch);
      while (const auto block = run.blocks->get()) {
        struct GiveBack {  // the block goes back whatever happens
          BlockScheduler& s;
          Block b;
          ~GiveBack() { s.put(b); }
        } give_back{*run.blocks, *block};
        if (run.stop.load(std::memory_order_relaxed) || stop_requested(run)) return;
        const float lr = rate_now(run, before, total, 0);
        sink.set_learning_rate(lr);
        const auto [lo, hi] = problem.block_range(block->row, block->col);
        const double loss = step_loss(problem, sink, lo, hi, [](std::uint64_t i) { return i; }, epoch, w, lr);
        record_step(run, w, epoch, hi - lo, loss, 0, 0, lr);
      }
      if (run.stop.load(std::memory_order_acquire)) return;
      // Every block of the epoch is done once all workers are here.
      const bool next = run.barrier.arrive_and_wait([&] {
        run.blocks->next_epoch(worker_seed(draw_seed(), 0x6b, epoch + 1));
        run.epoch_done[epoch - run.first_epoch].store(options_.workers, std::memory_order_release);
        close_epoch(run, epoch);
      });
      if (!next) return;
    }
  } catch (...) {
    run.fail(std::current_exception());
  }
}

}  // namespace asgd
