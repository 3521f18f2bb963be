// Trainer's internals: the shared state of one run() (Trainer::Run) and the
// template members that the header declares. Included by trainer.hpp; not a
// header to include on its own.
#pragma once

#include "asgd/engine/trainer.hpp"

namespace asgd {

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
