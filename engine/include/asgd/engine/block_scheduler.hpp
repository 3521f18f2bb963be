// The LIBMF/FPSGD block scheduler: the rows and columns of a matrix problem
// are cut into `bins` groups each, giving bins x bins blocks; a worker takes
// a block whose row group and column group no other worker holds, trains on
// it and puts it back, so two workers never touch the same rows of P or Q
// and each works on a cache-sized piece. It hands out a free block not yet
// taken in this epoch, chosen uniformly at random, so an epoch visits every
// block once. get() has the one wait point: a condition variable, no
// spinning. A pick costs O(1) expected while free untaken blocks are common
// (it draws untaken blocks at random until one is free, so the choice is
// uniform over the free untaken blocks), and when they are not, a pass over
// the blocks still untaken or over the free rows x free columns, whichever
// is shorter (workers holding most rows, or the epoch's end). put() wakes one
// waiter, and a waiter that got a block wakes the next, so a put costs the
// waiters it can serve, not all of them.
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
  // and 270 MB at 4096 (the block offsets and the scheduler's list and positions: 16 bytes a block).
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
  static constexpr std::uint32_t kTaken = ~std::uint32_t{0};
  // A set of rows (or columns) out of n: a list in no order, with each one's place in it (kTaken: not in it).
  struct IndexSet {
    std::vector<std::uint32_t> list, at;
    void fill(std::size_t n);   // all n in it
    void clear(std::size_t n);  // none of n in it
    void remove(std::uint32_t i) noexcept;
    void add(std::uint32_t i) noexcept;
    bool has(std::uint32_t i) const noexcept { return at[i] != kTaken; }
  };
  // Whether block (r, c), r * bins + c, may be handed out now.
  bool free(std::uint32_t block) const noexcept { return rows_.has(block / bins_) && cols_.has(block % bins_); }
  std::optional<Block> pick();   // a free untaken block, uniformly, if there is one
  Block take(std::uint32_t block);  // out of untaken_, its row and column held

  std::size_t bins_;
  std::mutex mutex_;
  std::condition_variable freed_;
  IndexSet rows_, cols_;  // the rows and columns no worker holds
  std::vector<std::uint32_t> untaken_;  // the blocks not yet handed out this epoch, in no order
  std::vector<std::uint32_t> place_;    // each block's index in untaken_ (kTaken: handed out this epoch)
  std::size_t waiting_ = 0;             // threads in get()'s wait
  // Set when a pass found no free untaken block: since then, only the rows and columns put back and still free
  // can hold one.
  bool none_known_ = false;
  IndexSet rows_since_, cols_since_;
  bool cancelled_ = false;
  std::mt19937_64 rng_;
};

}  // namespace asgd
