#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"

using asgd::BoundedDelay;
using asgd::kUnbounded;

namespace {

// Runs `workers` threads for `steps` steps each with random work per step,
// while an observer checks that no worker computes more than tau steps
// ahead of the slowest. Returns the largest gap the observer saw.
std::uint64_t run_with_observer(std::size_t workers, std::uint64_t tau, std::uint64_t steps,
                                std::uint64_t* violations) {
  BoundedDelay gate(workers, tau);
  std::atomic<bool> done{false};
  std::uint64_t largest = 0;
  *violations = 0;
  std::thread observer([&] {
    while (!done.load()) {
      // Read what workers compute first, then the clocks: clocks only grow,
      // so a gap seen this way is a real violation, never a skewed read.
      std::uint64_t computing_max = 0;
      bool any = false;
      for (std::size_t w = 0; w < workers; ++w) {
        const auto s = gate.in_step(w);
        if (s != kUnbounded) {
          computing_max = std::max(computing_max, s);
          any = true;
        }
      }
      const std::uint64_t slow = gate.slowest();
      if (any && slow != kUnbounded && computing_max > slow) {
        const std::uint64_t gap = computing_max - slow;
        largest = std::max(largest, gap);
        if (tau != kUnbounded && gap > tau) ++*violations;
      }
    }
  });
  std::vector<std::thread> pool;
  for (std::size_t w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      std::mt19937 rng(static_cast<unsigned>(w) * 7 + 1);
      for (std::uint64_t s = 0; s < steps; ++s) {
        ASSERT_TRUE(gate.enter(w).has_value());
        // Uneven work: worker 0 is slow, others vary.
        const int spin = (w == 0 ? 2000 : 0) + static_cast<int>(rng() % 1000);
        volatile int sink = 0;
        for (int i = 0; i < spin; ++i) sink = sink + i;
        gate.finish_step(w);
      }
      gate.retire(w);
    });
  }
  for (auto& t : pool) t.join();
  done = true;
  observer.join();
  return largest;
}

}  // namespace

class GateInvariant : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(GateInvariant, NoWorkerComputesMoreThanTauAheadOfTheSlowest) {
  const std::uint64_t tau = GetParam();
  std::uint64_t violations = 0;
  const auto largest = run_with_observer(4, tau, 3000, &violations);
  EXPECT_EQ(violations, 0u) << "largest gap " << largest << " with tau " << tau;
  EXPECT_LE(largest, tau);
}

INSTANTIATE_TEST_SUITE_P(Taus, GateInvariant, ::testing::Values(0u, 1u, 3u, 8u));

TEST(BoundedDelay, UnboundedLetsAWorkerRunFarAhead) {
  BoundedDelay gate(2, kUnbounded);
  for (int s = 0; s < 100; ++s) {
    const auto lead = gate.enter(0);
    ASSERT_TRUE(lead.has_value());
    EXPECT_EQ(*lead, static_cast<std::uint64_t>(s));
    gate.finish_step(0);
  }
  EXPECT_EQ(gate.clock(0), 100u);
  EXPECT_EQ(gate.slowest(), 0u);
}

TEST(BoundedDelay, TauZeroIsLockstepAndCancelWakesWaiters) {
  BoundedDelay gate(2, 0);
  ASSERT_TRUE(gate.enter(0));
  gate.finish_step(0);
  std::atomic<bool> returned{false};
  std::thread ahead([&] {
    EXPECT_FALSE(gate.enter(0).has_value());  // blocked until cancel
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load());
  gate.cancel();
  ahead.join();
  EXPECT_TRUE(returned.load());
}

TEST(BoundedDelay, HugeFiniteTauDoesNotWrapAround) {
  BoundedDelay gate(2, kUnbounded - 1);
  for (int s = 0; s < 50; ++s) {
    ASSERT_TRUE(gate.enter(0));  // would block forever if slow + tau wrapped
    gate.finish_step(0);
  }
  EXPECT_EQ(gate.clock(0), 50u);
}

TEST(BoundedDelay, RetiredWorkerHoldsNobodyBack) {
  BoundedDelay gate(2, 1);
  gate.retire(1);
  for (int s = 0; s < 10; ++s) {
    ASSERT_TRUE(gate.enter(0));
    gate.finish_step(0);
  }
  EXPECT_EQ(gate.clock(0), 10u);
}

// A paused worker holds nobody back and wakes a waiter; resumed, it goes on from its clock and holds the others
// again.
TEST(BoundedDelay, APausedWorkerHoldsNobodyBackUntilResumed) {
  BoundedDelay gate(2, 0);
  ASSERT_TRUE(gate.enter(1));
  gate.finish_step(1);
  ASSERT_TRUE(gate.enter(0));
  gate.finish_step(0);
  ASSERT_TRUE(gate.enter(0));
  gate.finish_step(0);  // worker 0 at 2, worker 1 at 1: worker 0 must wait for it
  std::atomic<bool> entered{false};
  std::thread ahead([&] {
    EXPECT_TRUE(gate.enter(0).has_value());
    entered = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(entered.load());
  gate.pause(1);  // wakes it
  ahead.join();
  EXPECT_TRUE(entered.load());
  EXPECT_EQ(gate.clock(1), kUnbounded);
  gate.finish_step(0);
  gate.resume(1);
  EXPECT_EQ(gate.clock(1), 1u);
  EXPECT_EQ(gate.slowest(), 1u);  // worker 0, at 3, waits for worker 1 again
  ASSERT_TRUE(gate.enter(1));
  gate.finish_step(1);
  EXPECT_EQ(gate.clock(1), 2u);
}

// Misuse is refused, naming the worker, and leaves the clocks as they were: a finish_step() after retire() used
// to wrap the clock to 0 and hold every other worker back; a second pause() lost the clock.
TEST(BoundedDelay, MisuseIsRefusedAndLeavesTheClocksAlone) {
  BoundedDelay gate(2, 1);
  const auto refused = [](auto call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << " was accepted";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("bounded delay"), std::string::npos) << e.what();
    }
  };
  refused([&] { gate.enter(2); }, "enter(2) of 2 workers");
  refused([&] { gate.finish_step(0); }, "finish_step without enter");
  refused([&] { gate.resume(0); }, "resume of a worker not paused");
  ASSERT_TRUE(gate.enter(0));
  refused([&] { gate.enter(0); }, "enter in a step");
  refused([&] { gate.pause(0); }, "pause in a step");
  gate.finish_step(0);
  EXPECT_EQ(gate.clock(0), 1u);
  gate.pause(0);
  refused([&] { gate.pause(0); }, "pause twice");
  refused([&] { gate.enter(0); }, "enter while paused");
  gate.resume(0);
  EXPECT_EQ(gate.clock(0), 1u);
  gate.retire(1);
  refused([&] { gate.finish_step(1); }, "finish_step after retire");
  refused([&] { gate.enter(1); }, "enter after retire");
  EXPECT_EQ(gate.clock(1), kUnbounded);
  EXPECT_EQ(gate.slowest(), 1u);  // worker 0 alone, from where it was
  ASSERT_TRUE(gate.enter(0));
  gate.finish_step(0);
  EXPECT_EQ(gate.clock(0), 2u);
}

TEST(BoundedDelay, ParsesTau) {
  EXPECT_EQ(asgd::parse_tau("0"), 0u);
  EXPECT_EQ(asgd::parse_tau("16"), 16u);
  EXPECT_EQ(asgd::parse_tau("inf"), kUnbounded);
  EXPECT_THROW(asgd::parse_tau("-1"), asgd::InputError);
  EXPECT_THROW(asgd::parse_tau("4x"), asgd::InputError);
  EXPECT_EQ(asgd::tau_to_string(kUnbounded), "inf");
}

TEST(StalenessHistogram, CountsMeanMaxAndOverflow) {
  asgd::StalenessHistogram h;
  h.add(0);
  h.add(2);
  h.add(2);
  h.add(100);
  EXPECT_EQ(h.count(), 4u);
  EXPECT_EQ(h.max(), 100u);
  EXPECT_DOUBLE_EQ(h.mean(), 26.0);
  EXPECT_EQ(h.bucket(2), 2u);
  EXPECT_EQ(h.bucket(asgd::StalenessHistogram::kBuckets - 1), 1u);
  EXPECT_EQ(h.describe(), "0:1 2:2 >=64:1");
  // Sent as words and read back: the same histogram.
  const asgd::StalenessHistogram back = asgd::StalenessHistogram::of_words(h.words());
  EXPECT_EQ(back.describe(), h.describe());
  EXPECT_EQ(back.count(), 4u);
  EXPECT_EQ(back.max(), 100u);
  EXPECT_DOUBLE_EQ(back.mean(), 26.0);
}
