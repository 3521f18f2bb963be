// Model averaging with ranks as threads: the blocking average (plain and
// weighted) gives the closed-form mean, and the communication thread, run
// while "workers" keep adding to the parameters, keeps every update and
// leaves all ranks with the same parameters, also when ranks take different
// numbers of steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "asgd/engine/errors.hpp"
#include "asgd/net/averaging.hpp"

namespace asgd::net {
namespace {

template <class F>
void on_ranks(int P, F&& body) {
  LocalFabric fabric(P);
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) threads.emplace_back([&, r] { body(fabric.endpoint(r), r); });
  for (auto& t : threads) t.join();
}

TEST(ModelAverager, BlockingAverageIsTheMean) {
  for (int P : {1, 2, 3, 4, 5}) {
    for (auto algorithm : {Algorithm::tree, Algorithm::ring}) {
      std::vector<std::vector<float>> params(static_cast<std::size_t>(P));
      on_ranks(P, [&](Transport& t, int r) {
        auto& x = params[static_cast<std::size_t>(r)];
        x.assign(1001, static_cast<float>(r + 1));
        x[3] = static_cast<float>(2 * r);
        auto allreduce = make_allreduce(algorithm, t, 64);
        ModelAverager averager(*allreduce, x);
        averager.average();
        EXPECT_EQ(averager.rounds(), 1u);
      });
      for (const auto& x : params) {
        EXPECT_FLOAT_EQ(x[0], (P + 1) / 2.0f) << "P " << P;
        EXPECT_FLOAT_EQ(x[3], static_cast<float>(P - 1)) << "P " << P;
        EXPECT_FLOAT_EQ(x[1000], (P + 1) / 2.0f);
      }
    }
  }
}

// The common start: rank 0's parameters on every rank, bit for bit, also
// where a mean of P equal values would round (P = 3) and for -0.0.
TEST(ModelAverager, ShareGivesEveryRankTheRootsParametersExactly) {
  for (int P : {1, 2, 3, 5}) {
    for (auto algorithm : {Algorithm::tree, Algorithm::ring}) {
      std::vector<float> root(1001);
      for (std::size_t i = 0; i < root.size(); ++i) root[i] = 0.1f * static_cast<float>(i) - 37.3f + 1e-7f * i * i;
      root[5] = -0.0f;
      std::vector<std::vector<float>> params(static_cast<std::size_t>(P));
      on_ranks(P, [&](Transport& t, int r) {
        auto& x = params[static_cast<std::size_t>(r)];
        x = r == 0 ? root : std::vector<float>(root.size(), static_cast<float>(r));
        auto allreduce = make_allreduce(algorithm, t, 64);
        ModelAverager averager(*allreduce, x);
        averager.share(r == 0);
        EXPECT_EQ(averager.rounds(), 1u);
      });
      for (const auto& x : params) {
        ASSERT_EQ(x.size(), root.size());
        for (std::size_t i = 0; i < x.size(); ++i)
          EXPECT_EQ(std::bit_cast<std::uint32_t>(x[i]), std::bit_cast<std::uint32_t>(root[i])) << "P " << P << " i " << i;
      }
    }
  }
}

TEST(ModelAverager, WeightedByExamples) {
  const int P = 4;
  std::vector<std::vector<float>> params(P);
  on_ranks(P, [&](Transport& t, int r) {
    auto& x = params[static_cast<std::size_t>(r)];
    x.assign(10, static_cast<float>(r));
    auto allreduce = make_allreduce(Algorithm::ring, t);
    ModelAverager averager(*allreduce, x, {.weighted = true});
    averager.average(r + 1);  // weights 1, 2, 3, 4
  });
  // (0*1 + 1*2 + 2*3 + 3*4) / 10 = 2
  for (const auto& x : params)
    for (float v : x) EXPECT_FLOAT_EQ(v, 2.0f);
}

TEST(ModelAverager, WeightedWithNoExamplesFallsBackToPlainMean) {
  const int P = 3;
  std::vector<std::vector<float>> params(P);
  on_ranks(P, [&](Transport& t, int r) {
    auto& x = params[static_cast<std::size_t>(r)];
    x.assign(5, static_cast<float>(3 * r));
    auto allreduce = make_allreduce(Algorithm::tree, t);
    ModelAverager averager(*allreduce, x, {.weighted = true});
    averager.average(0);
  });
  for (const auto& x : params)
    for (float v : x) EXPECT_FLOAT_EQ(v, 3.0f);
}

// Rank r takes steps(r) steps; each step adds (r + 1) to every parameter
// (atomically, like the Atomic policy). Averaging preserves the sum over
// ranks, so the final common value is sum_r steps(r) (r + 1) / P, whatever
// rounds happened in between.
void overlap_case(int P, std::uint64_t every, bool weighted, Algorithm algorithm, Combine combine = Combine::mean) {
  const std::size_t n = 4099;
  auto steps = [](int r) { return static_cast<std::uint64_t>(200 + 37 * r); };
  std::vector<std::vector<float>> params(static_cast<std::size_t>(P));
  std::vector<std::uint64_t> rounds(static_cast<std::size_t>(P));
  on_ranks(P, [&](Transport& t, int r) {
    auto& x = params[static_cast<std::size_t>(r)];
    x.assign(n, 0.0f);
    auto allreduce = make_allreduce(algorithm, t, 256);
    ModelAverager averager(*allreduce, x, {.weighted = weighted, .combine = combine});
    averager.average();  // the common start (Combine::sum's first point)
    averager.start(every);
    std::thread worker([&] {
      for (std::uint64_t s = 0; s < steps(r); ++s) {
        for (auto& v : x) std::atomic_ref<float>(v).fetch_add(static_cast<float>(r + 1), std::memory_order_relaxed);
        averager.step_done(8);
      }
    });
    worker.join();
    averager.stop();
    rounds[static_cast<std::size_t>(r)] = averager.rounds();
  });
  if (weighted) {
    // Weighted rounds do not preserve the plain sum; all ranks still agree.
    for (int r = 1; r < P; ++r) EXPECT_EQ(params[static_cast<std::size_t>(r)], params[0]);
  } else {
    double expected = 0;
    for (int r = 0; r < P; ++r) expected += static_cast<double>(steps(r)) * (r + 1);
    if (combine == Combine::mean) expected /= P;  // the mean keeps the sum over ranks; sum keeps every update
    for (int r = 0; r < P; ++r) {
      const auto& x = params[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < n; i += 97) ASSERT_NEAR(x[i], expected, 1e-5 * expected) << "rank " << r;
      EXPECT_EQ(x, params[0]) << "rank " << r << " differs from rank 0";
    }
  }
  for (int r = 1; r < P; ++r) EXPECT_EQ(rounds[static_cast<std::size_t>(r)], rounds[0]);
  EXPECT_GE(rounds[0], 1u);
}

TEST(ModelAverager, CommunicationThreadKeepsEveryUpdate) {
  for (int P : {1, 2, 3, 4})
    for (std::uint64_t every : {1u, 16u, 1000u}) {
      SCOPED_TRACE(testing::Message() << "P " << P << " every " << every);
      overlap_case(P, every, false, Algorithm::ring);
      overlap_case(P, every, false, Algorithm::tree);
    }
}

TEST(ModelAverager, SumOfUpdatesKeepsEveryUpdateWhole) {
  for (int P : {1, 2, 3, 4})
    for (std::uint64_t every : {1u, 16u}) {
      SCOPED_TRACE(testing::Message() << "P " << P << " every " << every);
      overlap_case(P, every, false, Algorithm::ring, Combine::sum);
    }
}

TEST(ModelAverager, BlockingSumAddsTheRanksUpdates) {
  const int P = 3;
  std::vector<std::vector<float>> params(P);
  on_ranks(P, [&](Transport& t, int r) {
    auto& x = params[static_cast<std::size_t>(r)];
    x.assign(7, static_cast<float>(r));  // first round: the mean, 1
    auto allreduce = make_allreduce(Algorithm::tree, t);
    ModelAverager averager(*allreduce, x, {.combine = Combine::sum});
    averager.average();
    for (auto& v : x) v += static_cast<float>(r + 1);  // updates 1, 2, 3
    averager.average();
  });
  for (const auto& x : params)
    for (float v : x) EXPECT_FLOAT_EQ(v, 7.0f);
}

// Small updates to large values keep their size when summed over many ranks: 8 ranks each add 1e-4 a round to
// values near 100 for 1,000 rounds, 0.8 in all. Summing the ranks' parameters (about 800) and taking away 8 times
// the common point rounded every round's 8e-4 at the scale of 800: 100.8545, 6.8 % too much.
TEST(ModelAverager, SumOfManySmallUpdatesKeepsItsSize) {
  const int P = 8;
  for (const Algorithm algorithm : {Algorithm::tree, Algorithm::ring}) {
    std::vector<float> ends(P);
    on_ranks(P, [&](Transport& t, int r) {
      std::vector<float> x(3, 100.0f);
      auto allreduce = make_allreduce(algorithm, t);
      ModelAverager averager(*allreduce, x, {.combine = Combine::sum});
      averager.average();
      for (int round = 0; round < 1000; ++round) {
        for (auto& v : x) v += 1e-4f;
        averager.average();
      }
      ends[static_cast<std::size_t>(r)] = x[0];
    });
    for (const float v : ends) {
      EXPECT_EQ(v, ends[0]);  // every rank the same, bit for bit
      EXPECT_NEAR(v, 100.8f, 0.01f);  // one process adding in float: 100.7935
    }
  }
}

TEST(ModelAverager, WeightedCommunicationThreadAgrees) {
  overlap_case(3, 8, true, Algorithm::ring);
  overlap_case(4, 1, true, Algorithm::tree);
}

// Rank 0 is slow (a sleep per step); ranks 1 and 2 are fast. Rounds start
// at every K-th step of every rank, and a worker waits once it is a period
// past the round in flight, so a fast rank is never more than 2 K steps
// ahead of the slow one, and every period gets its round.
TEST(ModelAverager, NoRankRunsMoreThanTwoPeriodsAheadOfTheSlowest) {
  const int P = 3;
  const std::uint64_t every = 8, steps = 120;
  std::atomic<std::uint64_t> slow_steps{0};
  std::vector<std::uint64_t> max_lead(P, 0), rounds(P, 0);
  on_ranks(P, [&](Transport& t, int r) {
    std::vector<float> x(100, 0.0f);
    auto allreduce = make_allreduce(Algorithm::ring, t);
    ModelAverager averager(*allreduce, x);
    averager.start(every);
    for (std::uint64_t s = 1; s <= steps; ++s) {
      if (r == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        slow_steps.fetch_add(1);
      }
      averager.step_done(1);
      if (r != 0) {
        const std::uint64_t slow = slow_steps.load();
        max_lead[static_cast<std::size_t>(r)] = std::max(max_lead[static_cast<std::size_t>(r)], s - std::min(s, slow));
      }
    }
    averager.stop();
    rounds[static_cast<std::size_t>(r)] = averager.rounds();
  });
  for (int r = 1; r < P; ++r) EXPECT_LE(max_lead[static_cast<std::size_t>(r)], 2 * every) << "rank " << r;
  EXPECT_GE(rounds[0], steps / every);  // one per period, plus the finishing ones
  for (int r = 1; r < P; ++r) EXPECT_EQ(rounds[static_cast<std::size_t>(r)], rounds[0]);
}

TEST(ModelAverager, RejectsMisuse) {
  LocalFabric fabric(1);
  auto allreduce = make_allreduce(Algorithm::ring, fabric.endpoint(0));
  std::vector<float> x(3, 1.0f);
  ModelAverager averager(*allreduce, x);
  EXPECT_THROW(averager.start(0), InputError);
  EXPECT_THROW(averager.start(ModelAverager::kMostEverySteps + 1), InputError);  // would wrap step counts
  EXPECT_THROW(ModelAverager(*allreduce, x, {.weighted = true, .combine = Combine::sum}), InputError);
  averager.start(2);
  EXPECT_THROW(averager.average(), InputError);
  EXPECT_THROW(averager.start(2), InputError);
  averager.stop();
  averager.average();
  EXPECT_FLOAT_EQ(x[0], 1.0f);
}

}  // namespace
}  // namespace asgd::net
