#include "asgd/net/periodic_rounds.hpp"

#include <fmt/format.h>

#include <limits>
#include <utility>

#include "asgd/engine/errors.hpp"

namespace asgd::net {

namespace {
constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();
}

PeriodicRounds::PeriodicRounds() : trigger_(kNever), limit_(kNever) {}  // step_done never waits without a thread

PeriodicRounds::~PeriodicRounds() { end_thread(); }

void PeriodicRounds::end_thread() noexcept {
  if (!thread_.joinable()) return;
  {
    std::scoped_lock lock(mutex_);
    finishing_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void PeriodicRounds::start(std::uint64_t every_steps, Round round, const char* who, bool overlap) {
  if (every_steps == 0 || every_steps > kMostEverySteps)
    throw InputError(fmt::format("{}: a round every {} steps, expected 1 to 2^40 - 1", who, every_steps));
  if (thread_.joinable()) throw InputError(fmt::format("{}: already started", who));
  round_ = std::move(round);
  finishing_ = false;
  error_ = nullptr;
  examples_at_last_round_ = examples_.load();
  const std::uint64_t base = steps_.load();
  // Steps a worker may take past a round's start before it waits for the round.
  const std::uint64_t slack = overlap ? every_steps : 0;
  trigger_.store(base + every_steps);
  limit_.store(base + every_steps + slack);
  thread_ = std::thread([this, base, every_steps, slack] { loop(base, every_steps, slack); });
}

void PeriodicRounds::step_done(std::uint64_t examples) noexcept {
  examples_.fetch_add(examples, std::memory_order_relaxed);
  const std::uint64_t s = steps_.fetch_add(1) + 1;  // seq_cst, paired with loop's trigger and limit stores
  if (s >= trigger_.load()) {
    std::scoped_lock lock(mutex_);
    wake_.notify_one();
  }
  if (s >= limit_.load()) {
    // A period ahead of the round in flight: wait for it.
    std::unique_lock lock(mutex_);
    ahead_.wait(lock, [&] { return s < limit_.load(); });
  }
}

void PeriodicRounds::release_workers(std::uint64_t limit) {
  {
    std::scoped_lock lock(mutex_);
    limit_.store(limit);
  }
  ahead_.notify_all();
}

void PeriodicRounds::loop(std::uint64_t base, std::uint64_t every_steps, std::uint64_t slack) {
  try {
    // The same grid of step counts on every rank, so a slow rank is never skipped over.
    for (std::uint64_t k = 1;; ++k) {
      const std::uint64_t next = base + k * every_steps;
      trigger_.store(next);
      bool finished = false;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return finishing_ || steps_.load() >= next; });
        finished = finishing_;
      }
      trigger_.store(kNever);
      const std::uint64_t examples = examples_.load();
      const std::uint64_t since = examples - std::exchange(examples_at_last_round_, examples);
      const bool all_finished = round_(since, finished);
      release_workers(all_finished ? kNever : next + every_steps + slack);
      if (all_finished) return;
    }
  } catch (...) {
    error_ = std::current_exception();
    release_workers(kNever);
  }
}

void PeriodicRounds::stop() {
  if (!thread_.joinable()) return;
  end_thread();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace asgd::net
