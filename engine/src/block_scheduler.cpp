#include "asgd/engine/block_scheduler.hpp"

#include <fmt/format.h>

#include "asgd/engine/errors.hpp"

namespace asgd {

BlockScheduler::BlockScheduler(std::size_t bins, std::uint64_t seed)
    : bins_(bins), row_busy_(bins, 0), col_busy_(bins, 0), taken_(bins * bins, 0), rng_(seed) {
  if (bins == 0 || bins > 4096) throw InputError(fmt::format("block scheduler: {} bins, expected 1 to 4096", bins));
}

std::optional<Block> BlockScheduler::get() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (cancelled_ || handed_out_ == bins_ * bins_) return std::nullopt;
    // Free, untaken blocks; pick one at random.
    std::size_t candidates = 0;
    Block chosen;
    for (std::size_t r = 0; r < bins_; ++r) {
      if (row_busy_[r]) continue;
      for (std::size_t c = 0; c < bins_; ++c) {
        if (col_busy_[c] || taken_[r * bins_ + c]) continue;
        // Reservoir sampling: each candidate equally likely.
        if (rng_() % ++candidates == 0) chosen = {r, c};
      }
    }
    if (candidates > 0) {
      row_busy_[chosen.row] = col_busy_[chosen.col] = 1;
      taken_[chosen.row * bins_ + chosen.col] = 1;
      ++handed_out_;
      return chosen;
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
  std::fill(taken_.begin(), taken_.end(), 0);
  handed_out_ = 0;
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
