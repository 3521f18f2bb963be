// BoundedDelay{tau}: per-worker clocks and the gate that keeps any worker at
// most tau steps ahead of the slowest (Ho et al. 2013, SSP). tau = 0 is
// bulk-synchronous; tau = kUnbounded is fully asynchronous (Hogwild!).
// The gate bounds a worker's lead (its clock minus the slowest's); the
// staleness its steps see (the other workers' steps that finish while one
// runs) follows from it: at most (W - 1)(2 tau + 1) (the Trainer measures it).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "asgd/engine/consistency.hpp"

namespace asgd {

inline constexpr std::uint64_t kUnbounded = std::numeric_limits<std::uint64_t>::max();

// "inf" | "infinity" | "async" -> kUnbounded, else a non-negative integer.
std::uint64_t parse_tau(std::string_view text);
std::string tau_to_string(std::uint64_t tau);

// Counts of observed staleness values; the last bucket holds everything >= it.
class StalenessHistogram {
 public:
  static constexpr std::size_t kBuckets = 65;
  void add(std::uint64_t staleness) noexcept;
  void merge(const StalenessHistogram& other) noexcept;
  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t max() const noexcept { return max_; }
  double mean() const noexcept { return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0.0; }
  std::uint64_t bucket(std::size_t s) const noexcept { return buckets_[s]; }
  // "0:812 1:90 2:3" (non-empty buckets only; the last as ">=64").
  std::string describe() const;
  // The histogram as kWords words and back, to send it (a parameter server's to the rank that reports).
  static constexpr std::size_t kWords = kBuckets + 3;
  std::array<std::uint64_t, kWords> words() const noexcept;
  static StalenessHistogram of_words(const std::array<std::uint64_t, kWords>& words) noexcept;

 private:
  std::array<std::uint64_t, kBuckets> buckets_{};
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;
  std::uint64_t max_ = 0;
};

class BoundedDelay {
 public:
  BoundedDelay(std::size_t workers, std::uint64_t tau);

  // Worker w is about to compute step clock(w). Blocks until the slowest
  // worker neither retired nor paused has completed at least clock(w) - tau steps, then returns
  // the lead it runs with (clock(w) - slowest). Returns nullopt once
  // cancel() was called. One waiting point: a condition variable.
  std::optional<std::uint64_t> enter(std::size_t w);
  // Worker w completed its step: clock(w) += 1; wakes waiters.
  void finish_step(std::size_t w);
  // Worker w does no more steps; it no longer holds anyone back.
  void retire(std::size_t w);
  // Worker w waits elsewhere (at an epoch barrier) between steps: until
  // resume(w) it holds nobody back, and then goes on from the clock it had.
  // Only w calls them, never during a step, or a thread that holds w parked
  // (the Trainer resumes every worker at its epoch barrier).
  void pause(std::size_t w);
  void resume(std::size_t w);
  // Misuse throws std::logic_error, naming the worker, and leaves the clocks
  // as they were: a worker out of range; enter() while in a step, paused or
  // retired; finish_step() without enter(); pause() during a step, while
  // paused or retired; resume() of a worker not paused. (A clock that went
  // wrong silently would hold every other worker back, or none.) retire() is
  // always allowed: a worker leaving for any reason must not hold others back.
  // Wakes every waiter; enter() returns nullopt from now on.
  void cancel();
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }

  std::size_t workers() const noexcept { return workers_; }
  std::uint64_t tau() const noexcept { return tau_; }
  // Steps completed by w (kUnbounded once retired, and while paused).
  std::uint64_t clock(std::size_t w) const noexcept;
  // The step w is computing now, or kUnbounded when it is between steps.
  std::uint64_t in_step(std::size_t w) const noexcept;
  // Minimum clock over workers neither retired nor paused (kUnbounded when none is).
  std::uint64_t slowest() const noexcept;

 private:
  struct alignas(kCacheLine) WorkerClock {
    std::atomic<std::uint64_t> completed{0};
    std::atomic<std::uint64_t> computing{kUnbounded};
    std::uint64_t paused_at = 0;  // the clock, while paused (w's own)
    bool paused = false;
  };
  // w's clock; std::logic_error naming `what` when w is out of range, or (between_steps) in a step, paused or
  // retired.
  WorkerClock& own(std::size_t w, const char* what);
  WorkerClock& between_steps(std::size_t w, const char* what);

  std::size_t workers_;
  std::uint64_t tau_;
  std::unique_ptr<WorkerClock[]> clocks_;
  std::atomic<bool> cancelled_{false};
  alignas(kCacheLine) std::atomic<int> waiters_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
};

}  // namespace asgd
