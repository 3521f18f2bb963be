// The LIBMF/FPSGD block scheduler: the rows and columns of a matrix problem
// are cut into `bins` groups each, giving bins x bins blocks; a worker takes
// a block whose row group and column group no other worker holds, trains on
// it and puts it back, so two workers never touch the same rows of P or Q
// and each works on a cache-sized piece. It hands out a free block not yet
// taken in this epoch, chosen uniformly at random, so an epoch visits every
// block once. get() has the one wait point: a condition variable, no
// spinning. A pick costs O(1) expected while free untaken blocks are common
// (it draws untaken blocks at random until one is free, so the choice is
// uniform over the free untaken blocks), and at most a pass over the blocks
// still untaken when they are not.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <vector>

namespace asgd {

struct Block {
  std::size_t row = 0, col = 0;
};

class BlockScheduler {
 public:
  // An epoch hands out bins^2 blocks, each pick O(1) expected: on 5 ratings, 0.07 s an epoch at 1024 bins, 6.6 s
  // and 270 MB at 4096 (the block offsets and the scheduler's list: 12 bytes a block).
  static constexpr std::size_t kMostBins = 4096;
  // bins >= workers + 1 keeps every worker busy (LIBMF uses 2 x threads + 1);
  // `seed` breaks the first epoch's ties.
  BlockScheduler(std::size_t bins, std::uint64_t seed);

  // A free block not yet taken this epoch, waiting while none is free.
  // nullopt when this epoch's bins x bins blocks are all handed out, or
  // after cancel().
  std::optional<Block> get();
  // Gives a block back: its row and column groups are free again.
  void put(Block b);
  // Starts the next epoch (all blocks untaken), its ties broken by `seed`:
  // seeded per epoch, a run resumed at epoch e draws what the uninterrupted
  // run drew there. Call with no block out.
  void next_epoch(std::uint64_t seed);
  // Wakes every waiter; get() returns nullopt from now on.
  void cancel();

  std::size_t bins() const noexcept { return bins_; }

 private:
  // Whether block (r, c), r * bins + c, may be handed out now.
  bool free(std::uint32_t block) const noexcept { return !row_busy_[block / bins_] && !col_busy_[block % bins_]; }
  Block take(std::size_t at);  // untaken_[at] out, its row and column busy

  std::size_t bins_;
  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<char> row_busy_, col_busy_;
  std::vector<std::uint32_t> untaken_;  // the blocks not yet handed out this epoch, in no order
  bool cancelled_ = false;
  std::mt19937_64 rng_;
};

}  // namespace asgd
