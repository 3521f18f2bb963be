#include "asgd/engine/block_trainer.hpp"
#include "asgd/engine/denormals.hpp"
#include "asgd/engine/trainer.hpp"  // detail::kDivergenceAdvice

#include <algorithm>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <exception>
#include <fmt/format.h>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "asgd/engine/errors.hpp"

namespace asgd {

void BlockTrainOptions::validate() const {
  // The options' own names: a command line maps them to its flags.
  if (workers == 0 || workers > 256) throw InputError("BlockTrainOptions::workers: must be 1..256");
  if (!(lr > 0) || !std::isfinite(lr)) throw InputError("BlockTrainOptions::lr: must be positive");
  if (!(momentum >= 0 && momentum < 1)) throw InputError("BlockTrainOptions::momentum: must be in [0, 1)");
  if (!(weight_decay >= 0) || !std::isfinite(weight_decay))
    throw InputError("BlockTrainOptions::weight_decay: must be >= 0");
}

std::uint64_t BlockTrainer::updates_per_epoch(std::size_t batches, const BlockTrainOptions& options) noexcept {
  return options.tau == 0 ? (batches + options.workers - 1) / options.workers : batches;
}

BlockTrainer::BlockTrainer(ParamStore& store, std::span<float> momentum, std::vector<Block> blocks,
                           BlockTrainOptions options)
    : store_(store),
      momentum_(momentum),
      blocks_(std::move(blocks)),
      options_(options),
      workers_(options.workers),
      version_(options.first_update) {
  options_.validate();
  if (!store_.writable()) throw InputError("BlockTrainer: the parameter store is read-only");
  if (momentum_.size() != store_.size())
    throw InputError(fmt::format("BlockTrainer: {} momentum values for {} parameters", momentum_.size(), store_.size()));
  for (const auto& b : blocks_)  // (written so that no sum can wrap)
    if (b.offset > store_.size() || b.size > store_.size() - b.offset)
      throw InputError("BlockTrainer: a block lies outside the store");
  std::vector<Block> sorted = blocks_;
  std::sort(sorted.begin(), sorted.end(), [](const Block& a, const Block& b) { return a.offset < b.offset; });
  for (std::size_t k = 1; k < sorted.size(); ++k)
    if (sorted[k].offset < sorted[k - 1].offset + sorted[k - 1].size)
      throw InputError("BlockTrainer: two blocks overlap (each parameter would be updated twice)");
  for (auto& w : workers_) {
    w.grad.assign(store_.size(), 0.0f);
    if (options_.tau != 0) w.view.assign(store_.size(), 0.0f);
  }
}

BlockStep block_step(const BlockTrainOptions& o, double staleness, std::uint64_t update) noexcept {
  BlockStep step{o.momentum, o.lr};
  if (o.compensate && staleness > 0) {
    const double implicit = staleness / (staleness + 1.0);
    if (implicit <= o.momentum)
      step.momentum = static_cast<float>(o.momentum - implicit);
    else
      step = {0.0f, static_cast<float>(o.lr * (1.0 - implicit) / (1.0 - o.momentum))};
  }
  if (o.schedule == BlockTrainOptions::Schedule::cosine && o.total_updates > 0) {
    const double t = std::min(1.0, static_cast<double>(update) / o.total_updates);
    step.lr *= static_cast<float>(0.5 * (1.0 + std::cos(3.14159265358979323846 * t)));
  }
  return step;
}

void BlockTrainer::apply(const float* g, std::size_t first, std::size_t last, BlockStep step) noexcept {
  float* w = store_.data();
  float* v = momentum_.data();
  const float wd = options_.weight_decay;
  for (std::size_t i = first; i < last; ++i) {
    v[i] = step.momentum * v[i] + (g[i] + wd * w[i]);
    w[i] -= step.lr * v[i];
  }
}

namespace {
// The first exception of any worker; the others see `failed` and stop.
struct Failure {
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex mutex;
  void set(std::exception_ptr p) {
    std::lock_guard lock(mutex);
    if (!error) error = p;
    failed.store(true);
  }
};

BlockTrainer::Minibatch checked(BlockTrainer::Minibatch m, std::size_t batch) {
  if (!std::isfinite(m.loss))
    throw RuntimeError(fmt::format("training diverged: loss {} on minibatch {}; {}", m.loss, batch,
                                   detail::kDivergenceAdvice));
  return m;
}
}  // namespace

// Rounds: worker i takes batch r * W + i. The barrier's completion step
// (one thread, all others waiting) makes the single update from the
// sample-weighted mean gradient.
bool BlockTrainer::run_sync(std::size_t batches, const Gradient& gradient) {
  const std::size_t W = workers_.size(), P = store_.size();
  const std::uint64_t before = version_.load(std::memory_order_relaxed);
  const std::size_t rounds = (batches + W - 1) / W;
  Failure failure;
  // Read by every worker after a round's barrier, written in its completion alone: all leave at the same round.
  bool stopping = options_.stop_requested();
  auto update_once = [&]() noexcept {
    if (failure.failed.load()) return;
    std::size_t total = 0;
    for (const auto& wk : workers_) total += wk.samples;
    if (total == 0) return;
    float* g = workers_[0].grad.data();
    const float s0 = static_cast<float>(workers_[0].samples) / static_cast<float>(total);
    for (std::size_t i = 0; i < P; ++i) g[i] *= s0;
    for (std::size_t k = 1; k < W; ++k) {
      if (workers_[k].samples == 0) continue;
      const float sk = static_cast<float>(workers_[k].samples) / static_cast<float>(total);
      const float* gk = workers_[k].grad.data();
      for (std::size_t i = 0; i < P; ++i) g[i] += sk * gk[i];
    }
    apply(g, 0, P, block_step(options_, 0, version_.load(std::memory_order_relaxed)));
    const std::uint64_t made = version_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (options_.update_hook_due(made)) {
      try {
        options_.after_updates();
      } catch (...) {
        failure.set(std::current_exception());
      }
    }
  };
  // After the update and its hook: a request the hook makes stops the next round, as at tau > 0 the next minibatch.
  auto update = [&]() noexcept {
    update_once();
    stopping = stopping || options_.stop_requested();
  };
  std::barrier round_end(static_cast<std::ptrdiff_t>(W), update);
  {
    std::vector<std::jthread> pool;
    for (std::size_t i = 0; i < W; ++i)
      pool.emplace_back([&, i] {
        const FlushDenormals subnormals(options_.flush_denormals);
        Worker& wk = workers_[i];
        for (std::size_t r = 0; r < rounds && !stopping; ++r) {
          wk.samples = 0;
          const std::size_t b = r * W + i;
          if (b < batches && !failure.failed.load()) {
            try {
              const Minibatch m = checked(gradient(i, b, store_.data(), wk.grad.data()), b);
              wk.loss_sum += m.loss;
              ++wk.batches;
              wk.samples = m.examples;
              wk.staleness.add(0);
            } catch (...) {
              failure.set(std::current_exception());
              wk.samples = 0;
            }
          }
          round_end.arrive_and_wait();
        }
      });
  }
  if (failure.error) std::rethrow_exception(failure.error);
  return version_.load(std::memory_order_relaxed) - before < rounds;  // only a stop leaves rounds undone
}

bool BlockTrainer::run_async(std::size_t batches, const Gradient& gradient) {
  const std::size_t W = workers_.size();
  const bool live = options_.tau == kUnbounded;
  std::vector<std::mutex> block_locks(blocks_.size());
  // With a hook: each whole update (with its version) and each whole view
  // copy holds this shared, the hook exclusively, so that it never sees an
  // update half applied nor runs in the middle of a copy (the block locks
  // alone let a worker between two blocks be overtaken).
  // A hook that is due goes first: once an update makes one due, no update
  // or copy starts until it has run (with glibc's lock alone new readers go
  // ahead of a waiting writer, and at tau = inf with quick gradients a
  // stream of updates held the hook back by thousands, keeping the other
  // ranks waiting in their round). It then sees at most the W - 1 updates
  // that were under way.
  std::shared_mutex whole;
  std::mutex hook_mutex;
  std::condition_variable hook_done;
  Failure failure;
  const std::uint64_t K = std::max<std::uint64_t>(options_.every_updates, 1);
  // Hooks due so far in this trainer's life (hooks_ counts those made): its
  // updates started at first_update.
  const auto hooks_due = [&] { return version_.load(std::memory_order_acquire) / K - options_.first_update / K; };
  const auto share_whole = [&] {
    if (!options_.has_update_hook()) return std::shared_lock<std::shared_mutex>();
    {
      std::unique_lock lock(hook_mutex);
      hook_done.wait(lock, [&] { return hooks_.load(std::memory_order_acquire) >= hooks_due() || failure.failed.load(); });
    }
    return std::shared_lock<std::shared_mutex>(whole);
  };
  const auto wake_waiters = [&] {
    { std::scoped_lock lock(hook_mutex); }
    hook_done.notify_all();
  };
  const auto run_hook = [&] {
    {
      std::unique_lock alone(whole);
      options_.after_updates();
      hooks_.fetch_add(1, std::memory_order_acq_rel);
    }
    wake_waiters();
  };
  BoundedDelay gate(W, options_.tau);
  std::atomic<std::size_t> next{0};
  {
    std::vector<std::jthread> pool;
    for (std::size_t i = 0; i < W; ++i)
      pool.emplace_back([&, i] {
        const FlushDenormals subnormals(options_.flush_denormals);
        Worker& wk = workers_[i];
        try {
          while (!failure.failed.load()) {
            if (!gate.enter(i)) break;
            if (options_.stop_requested()) break;
            const std::size_t b = next.fetch_add(1);
            if (b >= batches) break;
            // Refresh the view when it is more than tau updates old (tau =
            // inf: every step), or older than the hook's last change of the
            // parameters. Copied block by block under the block locks, so a
            // model never reads memory another worker is writing.
            const std::uint64_t now_at_start = version_.load(std::memory_order_acquire);
            if (live || !wk.has_view || now_at_start - wk.view_version > options_.tau ||
                wk.view_hooks != hooks_.load(std::memory_order_acquire)) {
              const auto in_whole = share_whole();
              wk.view_version = version_.load(std::memory_order_acquire);
              wk.view_hooks = hooks_.load(std::memory_order_acquire);
              for (std::size_t k = 0; k < blocks_.size(); ++k) {
                std::lock_guard lock(block_locks[k]);
                std::copy_n(store_.data() + blocks_[k].offset, blocks_[k].size, wk.view.data() + blocks_[k].offset);
              }
              wk.has_view = true;
            }
            wk.max_view_age = std::max(wk.max_view_age, now_at_start - std::min(now_at_start, wk.view_version));
            const std::uint64_t seen = wk.view_version;
            const Minibatch m = checked(gradient(i, b, wk.view.data(), wk.grad.data()), b);
            wk.loss_sum += m.loss;
            ++wk.batches;
            const std::uint64_t now = version_.load(std::memory_order_acquire);
            wk.staleness.add(now - seen);
            const BlockStep step = block_step(options_, wk.estimate.add(now - seen), now);
            std::uint64_t made = 0;
            {
              const auto in_whole = share_whole();
              for (std::size_t k = 0; k < blocks_.size(); ++k) {
                std::lock_guard lock(block_locks[k]);
                apply(wk.grad.data(), blocks_[k].offset, blocks_[k].offset + blocks_[k].size, step);
              }
              made = version_.fetch_add(1, std::memory_order_acq_rel) + 1;
            }
            if (options_.update_hook_due(made)) {
              // Alone: no update or view copy runs meanwhile. Views taken
              // before it are refreshed before their next gradient.
              run_hook();
            }
            gate.finish_step(i);
          }
        } catch (...) {
          failure.set(std::current_exception());
          gate.cancel();
          wake_waiters();  // those waiting for a hook that will not come
        }
        gate.retire(i);
      });
  }
  if (failure.error) std::rethrow_exception(failure.error);
  return next.load() < batches;  // only a stop leaves minibatches untaken
}

BlockEpochStats BlockTrainer::run_epoch(std::size_t batches, const Gradient& gradient) {
  for (auto& wk : workers_) {
    wk.loss_sum = 0;
    wk.batches = 0;
    wk.staleness = StalenessHistogram{};
    wk.max_view_age = 0;
  }
  const auto start = std::chrono::steady_clock::now();
  const bool stopped = options_.tau == 0 ? run_sync(batches, gradient) : run_async(batches, gradient);
  BlockEpochStats s;
  s.stopped = stopped;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double loss = 0, staleness = 0;
  std::size_t count = 0;
  StalenessHistogram all;
  for (const auto& wk : workers_) {
    loss += wk.loss_sum;
    count += wk.batches;
    all.merge(wk.staleness);
    s.max_view_age = std::max(s.max_view_age, wk.max_view_age);
    staleness += wk.estimate.value() / static_cast<double>(workers_.size());
  }
  s.mean_loss = count ? loss / static_cast<double>(count) : 0.0;
  s.mean_staleness = all.mean();
  s.max_staleness = all.max();
  const BlockStep step = block_step(options_, options_.tau == 0 ? 0.0 : staleness, version_.load());
  s.momentum = step.momentum;
  s.lr = step.lr;
  return s;
}

}  // namespace asgd
