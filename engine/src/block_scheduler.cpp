#include "asgd/engine/block_scheduler.hpp"

#include <fmt/format.h>

#include "asgd/engine/errors.hpp"

namespace asgd {

BlockScheduler::BlockScheduler(std::size_t bins, std::uint64_t seed)
    : bins_(bins), row_busy_(bins, 0), col_busy_(bins, 0), rng_(seed) {
  if (bins == 0 || bins > kMostBins)
    throw InputError(fmt::format("block scheduler: {} bins, expected 1 to {}", bins, kMostBins));
  next_epoch(seed);
}

Block BlockScheduler::take(std::size_t at) {
  const std::uint32_t b = untaken_[at];
  untaken_[at] = untaken_.back();
  untaken_.pop_back();
  const Block block{b / bins_, b % bins_};
  row_busy_[block.row] = col_busy_[block.col] = 1;
  return block;
}

std::optional<Block> BlockScheduler::get() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (cancelled_ || untaken_.empty()) return std::nullopt;
    // Uniform over the free untaken blocks: untaken blocks drawn at random until one is free (each accepted draw
    // is uniform over the free ones) ...
    constexpr int kDraws = 32;
    for (int d = 0; d < kDraws; ++d) {
      const std::size_t at = rng_() % untaken_.size();
      if (free(untaken_[at])) return take(at);
    }
    // ... and when free ones are rare (workers hold most rows and columns, or the epoch is ending), one counted pass.
    std::size_t candidates = 0;
    for (const std::uint32_t b : untaken_) candidates += free(b);
    if (candidates > 0) {
      std::size_t pick = rng_() % candidates;
      for (std::size_t at = 0;; ++at) {
        if (free(untaken_[at]) && pick-- == 0) return take(at);
      }
    }
    freed_.wait(lock);  // the one wait point: until a block is put back
  }
}

void BlockScheduler::put(Block b) {
  {
    std::scoped_lock lock(mutex_);
    row_busy_[b.row] = col_busy_[b.col] = 0;
  }
  freed_.notify_all();
}

void BlockScheduler::next_epoch(std::uint64_t seed) {
  std::scoped_lock lock(mutex_);
  untaken_.resize(bins_ * bins_);
  for (std::size_t b = 0; b < untaken_.size(); ++b) untaken_[b] = static_cast<std::uint32_t>(b);
  rng_.seed(seed);
}

void BlockScheduler::cancel() {
  {
    std::scoped_lock lock(mutex_);
    cancelled_ = true;
  }
  freed_.notify_all();
}

}  // namespace asgd
