#include "asgd/engine/bounded_delay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "asgd/engine/errors.hpp"

namespace asgd {

std::uint64_t parse_tau(std::string_view text) {
  if (text == "inf" || text == "infinity" || text == "async") return kUnbounded;
  std::uint64_t tau = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), tau);
  if (ec != std::errc() || p != text.data() + text.size() || tau == kUnbounded) {
    throw InputError(fmt::format("tau '{}': expected a non-negative integer or inf", text));
  }
  return tau;
}

std::string tau_to_string(std::uint64_t tau) { return tau == kUnbounded ? "inf" : std::to_string(tau); }

void StalenessHistogram::add(std::uint64_t s) noexcept {
  ++buckets_[s < kBuckets - 1 ? s : kBuckets - 1];
  ++count_;
  sum_ += s;
  if (s > max_) max_ = s;
}

void StalenessHistogram::merge(const StalenessHistogram& o) noexcept {
  for (std::size_t i = 0; i < kBuckets; ++i) buckets_[i] += o.buckets_[i];
  count_ += o.count_;
  sum_ += o.sum_;
  if (o.max_ > max_) max_ = o.max_;
}

std::array<std::uint64_t, StalenessHistogram::kWords> StalenessHistogram::words() const noexcept {
  std::array<std::uint64_t, kWords> w{};
  std::copy(buckets_.begin(), buckets_.end(), w.begin());
  w[kBuckets] = count_;
  w[kBuckets + 1] = sum_;
  w[kBuckets + 2] = max_;
  return w;
}

StalenessHistogram StalenessHistogram::of_words(const std::array<std::uint64_t, kWords>& w) noexcept {
  StalenessHistogram h;
  std::copy(w.begin(), w.begin() + kBuckets, h.buckets_.begin());
  h.count_ = w[kBuckets];
  h.sum_ = w[kBuckets + 1];
  h.max_ = w[kBuckets + 2];
  return h;
}

std::string StalenessHistogram::describe() const {
  std::string out;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    if (buckets_[i] == 0) continue;
    if (!out.empty()) out += ' ';
    out += i == kBuckets - 1 ? fmt::format(">={}:{}", i, buckets_[i]) : fmt::format("{}:{}", i, buckets_[i]);
  }
  return out.empty() ? "none" : out;
}

BoundedDelay::BoundedDelay(std::size_t workers, std::uint64_t tau)
    : workers_(workers), tau_(tau), clocks_(std::make_unique<WorkerClock[]>(workers)) {
  if (workers == 0) throw InputError("bounded delay: need at least one worker");
}

std::uint64_t BoundedDelay::clock(std::size_t w) const noexcept {
  return clocks_[w].completed.load(std::memory_order_acquire);
}

std::uint64_t BoundedDelay::in_step(std::size_t w) const noexcept {
  return clocks_[w].computing.load(std::memory_order_acquire);
}

std::uint64_t BoundedDelay::slowest() const noexcept {
  std::uint64_t m = kUnbounded;
  for (std::size_t j = 0; j < workers_; ++j) {
    const auto c = clocks_[j].completed.load(std::memory_order_seq_cst);
    if (c < m) m = c;
  }
  return m;
}

BoundedDelay::WorkerClock& BoundedDelay::own(std::size_t w, const char* what) {
  if (w >= workers_) {
    throw std::logic_error(fmt::format("bounded delay: {}({}) of {} workers", what, w, workers_));
  }
  return clocks_[w];
}

BoundedDelay::WorkerClock& BoundedDelay::between_steps(std::size_t w, const char* what) {
  WorkerClock& mine = own(w, what);
  const std::uint64_t c = mine.completed.load(std::memory_order_relaxed);
  if (c == kUnbounded || mine.computing.load(std::memory_order_relaxed) != kUnbounded) {
    throw std::logic_error(fmt::format("bounded delay: {}({}) while {}", what, w,
                                       c != kUnbounded ? "in a step"
                                       : mine.paused   ? "paused"
                                                       : "retired"));
  }
  return mine;
}

std::optional<std::uint64_t> BoundedDelay::enter(std::size_t w) {
  const std::uint64_t c = between_steps(w, "enter").completed.load(std::memory_order_relaxed);
  // A worker may start step c once every other worker completed c - tau steps.
  // (c - slow, not slow + tau: a huge finite tau must not wrap around.)
  auto allowed = [&](std::uint64_t slow) {
    return tau_ == kUnbounded || slow == kUnbounded || slow >= c || c - slow <= tau_;
  };
  std::uint64_t slow = slowest();
  if (!allowed(slow)) {
    std::unique_lock lock(mutex_);
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    while (!cancelled() && !allowed(slow = slowest())) wake_.wait(lock);
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (cancelled()) return std::nullopt;
  clocks_[w].computing.store(c, std::memory_order_seq_cst);
  return slow == kUnbounded || slow > c ? 0 : c - slow;
}

void BoundedDelay::finish_step(std::size_t w) {
  if (own(w, "finish_step").computing.load(std::memory_order_relaxed) == kUnbounded) {
    throw std::logic_error(fmt::format("bounded delay: finish_step({}) without enter({})", w, w));
  }
  clocks_[w].computing.store(kUnbounded, std::memory_order_seq_cst);
  clocks_[w].completed.fetch_add(1, std::memory_order_seq_cst);
  // Pairs with the waiter's seq_cst increment of waiters_ before it re-reads
  // the clocks: either it sees our new clock, or we see it waiting.
  if (waiters_.load(std::memory_order_seq_cst) > 0) {
    { std::scoped_lock lock(mutex_); }
    wake_.notify_all();
  }
}

void BoundedDelay::retire(std::size_t w) {
  own(w, "retire").paused = false;
  clocks_[w].computing.store(kUnbounded, std::memory_order_seq_cst);
  clocks_[w].completed.store(kUnbounded, std::memory_order_seq_cst);
  { std::scoped_lock lock(mutex_); }
  wake_.notify_all();
}

void BoundedDelay::pause(std::size_t w) {
  WorkerClock& mine = between_steps(w, "pause");
  mine.paused = true;
  mine.paused_at = mine.completed.load(std::memory_order_relaxed);
  mine.completed.store(kUnbounded, std::memory_order_seq_cst);
  { std::scoped_lock lock(mutex_); }
  wake_.notify_all();
}

void BoundedDelay::resume(std::size_t w) {
  WorkerClock& mine = own(w, "resume");
  if (!mine.paused) throw std::logic_error(fmt::format("bounded delay: resume({}) of a worker not paused", w));
  mine.paused = false;
  mine.completed.store(mine.paused_at, std::memory_order_seq_cst);
}

void BoundedDelay::cancel() {
  cancelled_.store(true, std::memory_order_seq_cst);
  { std::scoped_lock lock(mutex_); }
  wake_.notify_all();
}

}  // namespace asgd
