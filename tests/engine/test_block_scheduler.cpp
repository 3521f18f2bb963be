#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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
