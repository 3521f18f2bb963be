// BlockTrainer: bounded-delay block updates for dense models (delayed block
// proximal gradient, Li et al. 2014; stale synchronous parallel, Ho et al.
// 2013). The engine owns the workers, the gate, the views and the update;
// the model only computes a minibatch gradient from a parameter view.
//
// W workers share one ParamStore and one momentum buffer. Each step a worker
// takes a minibatch, computes its gradient on a view of the parameters, and
// applies it block by block (each block update is atomic with respect to
// other block updates):
//
//   tau = 0    synchronous data-parallel SGD: in every round the W workers
//              compute on the same parameters, then one update is made with
//              the sample-weighted mean of their gradients (a barrier, the
//              one wait point). W workers at batch B take the same steps as
//              one worker at batch W*B.
//   0 < tau    each worker reads a private view refreshed only when it is
//              more than tau updates behind the shared parameters, so every
//              gradient starts from parameters at most tau updates old (what
//              a worker of a parameter server sees under SSP). BoundedDelay
//              also keeps every worker at most tau steps ahead of the
//              slowest, which bounds the updates others make meanwhile.
//   tau = inf  Hogwild! for dense models: no bound and no gate; the view is
//              refreshed every step, so the staleness is what concurrency
//              produces (about W - 1 updates).
//
// Views are copied block by block under the block locks that guard the
// updates: a model never reads memory another worker is writing (the
// engine's rule; the copy is ~1 % of a LeNet-5 step).
//
// Momentum and weight decay: v = mu v + (g + wd w); w -= lr v, per block.
// Staleness compensation (Mitliagkas et al. 2016: asynchrony behaves like
// implicit momentum of about s / (s + 1) at mean staleness s): with
// `compensate`, the explicit momentum becomes max(0, mu - s / (s + 1)) and,
// when the implicit part alone exceeds mu, the rate is scaled by
// (1 - s / (s + 1)) / (1 - mu) so that the effective step lr / (1 - total
// momentum) stays that of the synchronous run. s is a running mean of the
// staleness observed at each update.
#pragma once

#include <algorithm>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/param_store.hpp"

namespace asgd {

struct BlockTrainOptions {
  std::size_t workers = 1;
  std::uint64_t tau = 0;
  float lr = 0.01f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  bool compensate = false;
  // The rate over the run: constant, or cosine from lr to 0 over
  // `total_updates` (Loshchilov & Hutter 2017, without restarts).
  enum class Schedule { constant, cosine } schedule = Schedule::constant;
  double total_updates = 0;        // the run's length, for the schedule
  std::uint64_t first_update = 0;  // updates made before (a resumed run)
  // Called after every `every_updates`-th update of the run (numbered from
  // the run's start, first_update included, so a resumed run keeps the
  // rhythm) while no update or view copy is in progress: it may change the
  // parameters, not the momentum. Under mpirun the ranks average their
  // models there, a blocking collective: every rank calls it equally often
  // as long as all make the same updates per epoch. At tau = 0 every worker
  // waits for it (it runs between rounds); at tau > 0 workers that are
  // computing a gradient go on, on their own views, no update or view copy
  // starts while it is due (it runs at most the W - 1 updates under way
  // late), and every view taken before it is refreshed before its next
  // gradient. 0: never.
  std::uint64_t every_updates = 0;
  std::function<void()> after_updates;
  // A stop request, as TrainerOptions::stop: once it holds true (a signal
  // handler may set it), the workers take no further minibatch and
  // run_epoch returns with `stopped` set, the epoch unfinished (at tau = 0
  // after the round under way: every worker stops at the same round).
  const std::atomic<bool>* stop = nullptr;
  // Workers flush subnormal floats to zero (FlushDenormals, denormals.hpp): the default; false keeps IEEE
  // gradual underflow.
  bool flush_denormals = true;
  bool stop_requested() const noexcept { return stop != nullptr && stop->load(std::memory_order_relaxed); }
  bool has_update_hook() const noexcept { return every_updates != 0 && static_cast<bool>(after_updates); }
  // Whether after_updates runs after update number `update` (counted as
  // first_update is): what every backend asks.
  bool update_hook_due(std::uint64_t update) const noexcept {
    return has_update_hook() && update % every_updates == 0;
  }
  void validate() const;           // InputError naming the option
};

struct BlockEpochStats {
  double seconds = 0;
  double mean_loss = 0;            // mean over the epoch's minibatches
  double mean_staleness = 0;       // updates between a gradient's view and its update
  std::uint64_t max_staleness = 0;
  std::uint64_t max_view_age = 0;  // updates between a view and the start of its gradient (<= tau)
  float momentum = 0, lr = 0;      // in use at the end of the epoch
  bool stopped = false;            // by BlockTrainOptions::stop, before the epoch's last minibatch
};

// The momentum and rate of update number `update` made at mean staleness
// `staleness` (compensation and schedule as above): what every backend's
// update uses.
struct BlockStep {
  float momentum, lr;
};
BlockStep block_step(const BlockTrainOptions& options, double staleness, std::uint64_t update) noexcept;

// One worker's staleness as compensation reads it: a running mean over its
// first 100 updates, then an average over about the last 100 (compensation
// must act from the first stale update: a lagging estimate lets momentum 0.9
// at staleness 8 diverge in the first steps). Every backend keeps one per
// worker, and reports the workers' mean.
class StalenessEstimate {
 public:
  // Counts one update made `staleness` updates after its view; returns the estimate.
  double add(std::uint64_t staleness) noexcept {
    const double alpha = std::max(1.0 / static_cast<double>(++updates_), 0.01);
    mean_ += alpha * (static_cast<double>(staleness) - mean_);
    return mean_;
  }
  double value() const noexcept { return mean_; }

 private:
  double mean_ = 0;
  std::uint64_t updates_ = 0;
};

class BlockTrainer {
 public:
  // One block per [offset, offset + size) range of the store (e.g. a
  // tensor). Blocks may not overlap (InputError) and should cover every
  // parameter the gradient writes: at tau > 0 each is updated on its own,
  // under its own lock; at tau 0 the whole store is updated in one step
  // (what lies outside every block then moves too, by its gradient).
  struct Block {
    std::size_t offset, size;
  };
  // The model's part: the gradient of minibatch `batch` of this epoch, from
  // the parameters `view`, written (not added) into `grad` (the store's
  // size); returns the mean loss and the number of examples. Called on
  // worker `worker`'s thread; a worker's calls never overlap.
  struct Minibatch {
    double loss;
    std::size_t examples;
  };
  using Gradient = std::function<Minibatch(std::size_t worker, std::size_t batch, const float* view, float* grad)>;

  // `momentum` holds store.size() floats (zeros to start) and outlives the
  // trainer: it is the optimiser state a checkpoint keeps.
  BlockTrainer(ParamStore& store, std::span<float> momentum, std::vector<Block> blocks, BlockTrainOptions options);

  // Runs minibatches 0 .. batches-1 once. With tau = 0 worker i takes
  // batches i, W + i, 2W + i, ... (the result does not depend on timing);
  // otherwise whichever worker is free takes the next. A non-finite loss is
  // a RuntimeError; an exception from `gradient` stops every worker and is
  // rethrown here.
  BlockEpochStats run_epoch(std::size_t batches, const Gradient& gradient);

  // For a caller that changed the store between epochs (averaged it across
  // processes, loaded a checkpoint): every worker takes a fresh view before
  // its next gradient, whatever tau allows.
  void refresh_views() noexcept {
    for (auto& w : workers_) w.has_view = false;
  }

  std::uint64_t updates() const noexcept { return version_.load(); }
  // Updates one epoch of `batches` minibatches makes (tau = 0: one per round).
  static std::uint64_t updates_per_epoch(std::size_t batches, const BlockTrainOptions& options) noexcept;

 private:
  struct Worker {
    std::vector<float> grad, view;
    std::uint64_t view_version = 0;
    std::uint64_t view_hooks = 0;  // after_updates calls made when the view was taken
    bool has_view = false;
    std::size_t samples = 0;  // in the current round (tau = 0)
    double loss_sum = 0;
    std::size_t batches = 0;
    StalenessEstimate estimate;
    std::uint64_t max_view_age = 0;
    StalenessHistogram staleness;
  };
  void apply(const float* g, std::size_t first, std::size_t last, BlockStep step) noexcept;
  // Each returns whether a stop request left minibatches of the epoch untrained.
  bool run_sync(std::size_t batches, const Gradient& gradient);
  bool run_async(std::size_t batches, const Gradient& gradient);

  ParamStore& store_;
  std::span<float> momentum_;
  std::vector<Block> blocks_;
  BlockTrainOptions options_;
  std::vector<Worker> workers_;
  std::atomic<std::uint64_t> version_;
  std::atomic<std::uint64_t> hooks_{0};  // after_updates calls made (tau > 0: views older are refreshed)
};

}  // namespace asgd
