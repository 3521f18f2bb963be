#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <latch>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "asgd/engine/block_scheduler.hpp"
#include "asgd/engine/errors.hpp"

// Under contention (more workers than cores, random work per block), no two
// workers ever hold blocks sharing a row group or a column group, and an
// epoch hands out every block exactly once.
TEST(BlockScheduler, NeverHandsTwoWorkersTheSameRowsOrColumns) {
  const std::size_t bins = 5, workers = 4;
  asgd::BlockScheduler s(bins, 7);
  std::vector<std::atomic<int>> row_holders(bins), col_holders(bins);
  std::atomic<int> violations{0};
  std::mutex seen_mutex;
  for (int epoch = 0; epoch < 20; ++epoch) {
    std::multiset<std::pair<std::size_t, std::size_t>> seen;
    std::vector<std::thread> pool;
    for (std::size_t w = 0; w < workers; ++w) {
      pool.emplace_back([&, w] {
        std::minstd_rand rng(static_cast<unsigned>(epoch * 31 + w));
        while (auto b = s.get()) {
          if (row_holders[b->row].fetch_add(1) != 0) ++violations;
          if (col_holders[b->col].fetch_add(1) != 0) ++violations;
          volatile int spin = 0;
          for (int i = 0, n = static_cast<int>(rng() % 20000); i < n; ++i) spin = spin + i;
          {
            std::scoped_lock lock(seen_mutex);
            seen.insert({b->row, b->col});
          }
          row_holders[b->row].fetch_sub(1);
          col_holders[b->col].fetch_sub(1);
          s.put(*b);
        }
      });
    }
    for (auto& t : pool) t.join();
    ASSERT_EQ(seen.size(), bins * bins);
    const std::set<std::pair<std::size_t, std::size_t>> distinct(seen.begin(), seen.end());
    EXPECT_EQ(distinct.size(), bins * bins);
    s.next_epoch(static_cast<std::uint64_t>(epoch));
  }
  EXPECT_EQ(violations.load(), 0);
}

TEST(BlockScheduler, CancelWakesWaitersAndBadBinsAreRefused) {
  asgd::BlockScheduler s(2, 1);
  // Two blocks out on the diagonal: both untaken blocks share a row or a
  // column with them, so the next get() must wait.
  const auto first = s.get(), second = s.get();
  ASSERT_TRUE(first && second);
  EXPECT_NE(first->row, second->row);
  EXPECT_NE(first->col, second->col);
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    EXPECT_FALSE(s.get().has_value());
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load());
  s.cancel();
  waiter.join();
  EXPECT_TRUE(returned.load());
  EXPECT_THROW(asgd::BlockScheduler(0, 1), asgd::InputError);
}

// Many bins: an epoch of 512 x 512 blocks hands out each block once, and picks stay cheap (each used to scan
// every block, so this epoch took hours; now well under a second). Workers holding most rows and columns
// (bins = workers + 1) are the hard case for a pick: checked for a correct, complete epoch too.
TEST(BlockScheduler, ManyBinsMakeAFullEpochQuickly) {
  const std::size_t bins = 512;
  asgd::BlockScheduler s(bins, 3);
  std::vector<char> seen(bins * bins, 0);
  const auto start = std::chrono::steady_clock::now();
  std::size_t handed = 0;
  while (auto b = s.get()) {
    ASSERT_EQ(seen[b->row * bins + b->col], 0) << "block handed out twice";
    seen[b->row * bins + b->col] = 1;
    ++handed;
    s.put(*b);
  }
  EXPECT_EQ(handed, bins * bins);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);

  // 3 workers, 4 bins: three of four rows busy whenever all hold a block.
  asgd::BlockScheduler tight(4, 5);
  std::atomic<int> handed_tight{0}, violations{0};
  std::vector<std::atomic<int>> rows(4), cols(4);
  std::vector<std::thread> pool;
  for (int w = 0; w < 3; ++w) {
    pool.emplace_back([&] {
      while (auto b = tight.get()) {
        if (rows[b->row].fetch_add(1) != 0) ++violations;
        if (cols[b->col].fetch_add(1) != 0) ++violations;
        std::this_thread::yield();
        rows[b->row].fetch_sub(1);
        cols[b->col].fetch_sub(1);
        ++handed_tight;
        tight.put(*b);
      }
    });
  }
  for (auto& t : pool) t.join();
  EXPECT_EQ(handed_tight.load(), 16);
  EXPECT_EQ(violations.load(), 0);
}

// The pick is uniform over the free untaken blocks: over 9,000 seeds each of a 3 x 3 grid's blocks comes first
// about 1,000 times, and with (0, 0) held each of the four blocks free of row 0 and column 0 comes next about
// 2,250 times (a scheduler taking the first free block would give 9,000 and 0).
TEST(BlockScheduler, PicksUniformlyAmongTheFreeBlocks) {
  std::vector<int> first(9, 0), second(9, 0);
  for (std::uint64_t seed = 0; seed < 9000; ++seed) {
    asgd::BlockScheduler s(3, seed);
    const auto b = s.get();
    ++first[b->row * 3 + b->col];
  }
  for (std::uint64_t seed = 0; seed < 9000; ++seed) {
    asgd::BlockScheduler s(3, seed + 100000);
    auto held = s.get();
    for (std::uint64_t attempt = 1; held->row != 0 || held->col != 0; ++attempt) {  // hold (0, 0)
      s.put(*held);
      s.next_epoch(seed * 1000 + attempt);
      held = s.get();
    }
    const auto b = s.get();
    ++second[b->row * 3 + b->col];
  }
  for (int k = 0; k < 9; ++k) {
    EXPECT_GT(first[k], 850) << k;
    EXPECT_LT(first[k], 1150) << k;
    if (k / 3 == 0 || k % 3 == 0) {
      EXPECT_EQ(second[k], 0) << k;
    } else {
      EXPECT_GT(second[k], 2000) << k;
      EXPECT_LT(second[k], 2500) << k;
    }
  }
}

// When workers hold nearly every row and column, a pick passes over the free rows x free columns instead of every
// untaken block, and stays uniform: with 62 of 64 rows and columns held, the four blocks left free come next about
// equally often (32 random draws among ~4,000 untaken blocks nearly always miss them, so this is that pass).
TEST(BlockScheduler, PicksUniformlyWhenWorkersHoldMostRows) {
  constexpr std::size_t bins = 64, held = 62, seeds = 2000;
  std::map<std::pair<int, int>, int> next;  // by (free row rank, free column rank)
  for (std::uint64_t seed = 0; seed < seeds; ++seed) {
    asgd::BlockScheduler s(bins, seed);
    std::vector<char> row_held(bins, 0), col_held(bins, 0);
    for (std::size_t i = 0; i < held; ++i) {
      const auto b = s.get();
      ASSERT_TRUE(b);
      ASSERT_FALSE(row_held[b->row] || col_held[b->col]);
      row_held[b->row] = col_held[b->col] = 1;
    }
    const auto b = s.get();
    ASSERT_TRUE(b);
    ASSERT_FALSE(row_held[b->row] || col_held[b->col]) << "a held row or column handed out";
    // Which of the two free rows and the two free columns: its rank among them.
    const auto rank = [](const std::vector<char>& held_of, std::size_t i) {
      return static_cast<int>(std::count(held_of.begin(), held_of.begin() + static_cast<std::ptrdiff_t>(i), 0));
    };
    ++next[{rank(row_held, b->row), rank(col_held, b->col)}];
  }
  ASSERT_EQ(next.size(), 4u);
  for (const auto& [which, count] : next) {
    EXPECT_GT(count, 400) << which.first << "," << which.second;
    EXPECT_LT(count, 600) << which.first << "," << which.second;
  }
}

// As many workers as bins allow (bins - 1, far more than cores): an epoch completes with every block once and
// no row or column held twice. Every put used to wake every waiter, and each passed over all untaken blocks:
// minutes an epoch at this size (the hang guard below); a put now wakes one waiter, who wakes the next.
TEST(BlockScheduler, AsManyWorkersAsBinsAllowFinishAnEpoch) {
  constexpr std::size_t bins = 128, workers = bins - 1;
  asgd::BlockScheduler s(bins, 11);
  std::vector<std::atomic<int>> rows(bins), cols(bins);
  std::vector<std::atomic<int>> seen(bins * bins);
  std::atomic<int> violations{0};
  std::latch ready(workers + 1);  // all start together: the first one alone could take the whole epoch
  std::vector<std::thread> pool;
  for (std::size_t w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      ready.arrive_and_wait();
      while (auto b = s.get()) {
        if (rows[b->row].fetch_add(1) != 0) ++violations;
        if (cols[b->col].fetch_add(1) != 0) ++violations;
        ++seen[b->row * bins + b->col];
        std::this_thread::yield();
        rows[b->row].fetch_sub(1);
        cols[b->col].fetch_sub(1);
        s.put(*b);
      }
    });
  }
  const auto start = std::chrono::steady_clock::now();
  ready.arrive_and_wait();
  for (auto& t : pool) t.join();
  EXPECT_EQ(violations.load(), 0);
  for (std::size_t b = 0; b < bins * bins; ++b) ASSERT_EQ(seen[b].load(), 1) << "block " << b;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60.0);
}
