// Low-rank (PowerSGD) rounds of model averaging, with ranks as threads: every rank ends a round with the same
// parameters, its vectors and small matrices averaged whole; a rank-1 update is sent exactly by rank-1 factors; what a round leaves out is kept and sent later (error
// feedback), so over rounds the parameters follow the plain mean's; vectors go whole; fewer floats are sent.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../common/on_ranks.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/layout.hpp"
#include "asgd/net/averaging.hpp"
#include "asgd/net/low_rank.hpp"

namespace asgd::net {
namespace {

// Ranks as threads (testing::on_ranks); none may throw.
void on_ranks(int P, const std::function<void(Transport&, int)>& body) {
  for (const std::string& error : testing::on_ranks(P, body)) EXPECT_EQ(error, "(no exception)");
}

Layout model() {
  Layout l;
  l.add("w", {12, 20});  // a matrix: factored below rank 7
  l.add("b", {12});      // a vector: always whole
  l.add("v", {5, 3});    // too small to gain: whole
  return l;
}

// Rank r's update of round k at element i: a different full-rank pattern per rank and round.
float update(int r, int k, std::size_t i) {
  const float x = static_cast<float>(i);
  return 0.01f * (std::sin(0.37f * x * static_cast<float>(r + 1) + static_cast<float>(k)) + 1.0f +
                  0.3f * std::cos(0.11f * x));
}

// P ranks share a start, each adds its update, and one low-rank round averages; returns each rank's parameters
// after `rounds` rounds, with the plain mean's beside them.
struct Outcome {
  std::vector<std::vector<float>> low, plain;
  std::uint64_t sent = 0, dense = 0;
};
Outcome rounds_of(int P, std::size_t rank, int rounds, bool flush = false) {
  const Layout layout = model();
  Outcome out;
  out.low.resize(static_cast<std::size_t>(P));
  out.plain.resize(static_cast<std::size_t>(P));
  for (const bool low : {true, false}) {
    on_ranks(P, [&](Transport& t, int r) {
      auto& x = (low ? out.low : out.plain)[static_cast<std::size_t>(r)];
      x.assign(layout.size(), 0.0f);
      auto allreduce = make_allreduce(Algorithm::ring, t, 16);
      ModelAverager averager(*allreduce, x, AveragingOptions{.low_rank = low ? rank : 0}, &layout);
      averager.share(r == 0);
      for (int k = 0; k < rounds; ++k) {
        for (const Tensor& tensor : layout.tensors())
          for (std::size_t i = 0; i < tensor.elements(); ++i)
            x[tensor.at(i / tensor.cols, i % tensor.cols)] += update(r, k, i);
        averager.average();
      }
      if (flush) averager.flush();
      if (low && r == 0) {
        out.sent = averager.floats_sent();
        out.dense = averager.floats_dense();
      }
    });
  }
  return out;
}

float max_gap(const std::vector<float>& a, const std::vector<float>& b) {
  float gap = 0;
  for (std::size_t i = 0; i < a.size(); ++i) gap = std::max(gap, std::abs(a[i] - b[i]));
  return gap;
}

TEST(LowRank, EveryRankEndsTheSameAndVectorsGoWhole) {
  const Layout layout = model();
  LowRankMean probe(layout, 7);
  ASSERT_TRUE(probe.factored(layout["w"]));
  ASSERT_FALSE(probe.factored(layout["b"]));
  ASSERT_FALSE(probe.factored(layout["v"]));
  // One round from a common start: a 12 x 20 update of full rank is not sent exactly by 7 factors, but every
  // rank ends with the same parameters.
  for (int P : {1, 2, 3}) {
    const Outcome o = rounds_of(P, 7, 1);
    for (const auto& x : o.low) EXPECT_EQ(x, o.low[0]) << "P " << P;
    // The vectors go whole: exactly the plain mean there.
    const Tensor& b = layout["b"];
    for (std::size_t i = 0; i < b.cols; ++i) EXPECT_FLOAT_EQ(o.low[0][b.at(0, i)], o.plain[0][b.at(0, i)]);
  }
}

// A rank-1 update is sent exactly by factors of rank 1, and by rank 3 (whose other columns, left with nothing
// but rounding, are set to 0 rather than sent as noise); under Combine::sum every rank's update lands whole.
TEST(LowRank, ARankOneUpdateIsSentExactlyByFactorsOfRankOneOrMore) {
  const Layout layout = model();
  const Tensor& w = layout["w"];
  for (const std::size_t rank : {1u, 3u})
    for (const Combine combine : {Combine::mean, Combine::sum})
      for (int P : {1, 2, 4}) {
        std::vector<std::vector<float>> params(static_cast<std::size_t>(P));
        on_ranks(P, [&](Transport& t, int r) {
          auto& x = params[static_cast<std::size_t>(r)];
          x.assign(layout.size(), 0.0f);
          auto allreduce = make_allreduce(Algorithm::tree, t, 16);
          ModelAverager averager(*allreduce, x, AveragingOptions{.combine = combine, .low_rank = rank}, &layout);
          averager.share(r == 0);
          // u v^T scaled by the rank: the mean is ((P + 1) / 2) u v^T and the sum P (P + 1) / 2 u v^T, rank one.
          for (std::size_t i = 0; i < w.rows; ++i)
            for (std::size_t j = 0; j < w.cols; ++j)
              x[w.at(i, j)] += static_cast<float>(r + 1) * 0.1f * static_cast<float>(i + 1) * (1.0f - 0.05f * j);
          averager.average();
        });
        const float times = combine == Combine::sum ? P * (P + 1) / 2.0f : (P + 1) / 2.0f;
        for (std::size_t i = 0; i < w.rows; ++i)
          for (std::size_t j = 0; j < w.cols; ++j) {
            const float want = times * 0.1f * static_cast<float>(i + 1) * (1.0f - 0.05f * j);
            EXPECT_NEAR(params[0][w.at(i, j)], want, 1e-5f * (1 + std::abs(want)))
                << "P " << P << " rank " << rank << (combine == Combine::sum ? " sum" : " mean");
          }
      }
}

// Error feedback: the part of each update a rank-1 round leaves out is kept and sent in later rounds, so the
// parameters stay within a round's update of the plain mean's instead of drifting away from them.
TEST(LowRank, WhatARoundLeavesOutIsSentLater) {
  const Outcome o = rounds_of(2, 1, 60);
  float scale = 0;
  for (float v : o.plain[0]) scale = std::max(scale, std::abs(v));
  ASSERT_GT(scale, 0.5f);  // the updates add up to something
  EXPECT_LT(max_gap(o.low[0], o.plain[0]), 0.1f * scale) << "scale " << scale;
  EXPECT_EQ(o.low[0], o.low[1]);
  // Fewer floats than plain rounds: 12 + 20 for w's two factors, 12 + 15 whole and 2 counters, a round.
  EXPECT_LT(o.sent * 3, o.dense);
}

// The flush after the last round sends each rank's kept error whole: the job ends on the plain mean, up to
// float rounding, every rank the same, after full-rank updates that rank-1 rounds could not send.
TEST(LowRank, TheFlushSendsWhatTheRoundsLeftOut) {
  for (const int P : {1, 2, 3}) {
    const Outcome o = rounds_of(P, 1, 12, true);
    float scale = 0;
    for (float v : o.plain[0]) scale = std::max(scale, std::abs(v));
    for (const auto& x : o.low) EXPECT_EQ(x, o.low[0]) << "P " << P;
    EXPECT_LT(max_gap(o.low[0], o.plain[0]), 2e-6f * scale) << "P " << P << " scale " << scale;
  }
  // Without it, the same rounds end a visible distance away: the flush is what closes it.
  const Outcome unflushed = rounds_of(2, 1, 12);
  EXPECT_GT(max_gap(unflushed.low[0], unflushed.plain[0]), 1e-3f);
}

// Rounds in the background while "workers" add (r + 1) to every parameter, step by step: every rank ends with
// the same parameters, and after the flush on the plain mean's sum of all steps (a snapshot taken mid-step
// holds an update of higher rank, whose remainder waits in the kept error until a later round or the flush).
// Rounds in which no rank changed a matrix come up here too: its Q is drawn again, or the factors would stay 0.
TEST(LowRank, TheCommunicationThreadEndsWithTheSameParametersOnEveryRank) {
  const Layout layout = model();
  auto steps = [](int r) { return static_cast<std::uint64_t>(150 + 31 * r); };
  for (int P : {2, 3}) {
    std::vector<std::vector<float>> params(static_cast<std::size_t>(P));
    on_ranks(P, [&](Transport& t, int r) {
      auto& x = params[static_cast<std::size_t>(r)];
      x.assign(layout.size(), 0.0f);
      auto allreduce = make_allreduce(Algorithm::ring, t, 16);
      ModelAverager averager(*allreduce, x, AveragingOptions{.low_rank = 1}, &layout);
      averager.share(r == 0);
      averager.start(4);
      std::thread worker([&] {
        for (std::uint64_t s = 0; s < steps(r); ++s) {
          for (const Tensor& tensor : layout.tensors())
            for (std::size_t i = 0; i < tensor.rows; ++i)
              for (std::size_t j = 0; j < tensor.cols; ++j)
                std::atomic_ref<float>(x[tensor.at(i, j)]).fetch_add(static_cast<float>(r + 1),
                                                                      std::memory_order_relaxed);
          averager.step_done(1);
        }
      });
      worker.join();
      averager.stop();
      averager.flush();
    });
    double expected = 0;
    for (int r = 0; r < P; ++r) expected += static_cast<double>(steps(r)) * (r + 1);
    expected /= P;
    for (int r = 0; r < P; ++r) EXPECT_EQ(params[static_cast<std::size_t>(r)], params[0]) << "P " << P;
    const Tensor& w = layout["w"];
    for (std::size_t i = 0; i < w.rows; ++i)
      for (std::size_t j = 0; j < w.cols; ++j) ASSERT_NEAR(params[0][w.at(i, j)], expected, 1e-5 * expected);
  }
}

TEST(LowRank, RefusesWhatItCannotDo) {
  LocalFabric fabric(1);
  auto allreduce = make_allreduce(Algorithm::tree, fabric.endpoint(0), 16);
  const Layout layout = model();
  std::vector<float> x(layout.size());
  EXPECT_THROW(ModelAverager(*allreduce, x, AveragingOptions{.low_rank = 2}), InputError);  // no layout
  EXPECT_THROW(ModelAverager(*allreduce, x, AveragingOptions{.weighted = true, .low_rank = 2}, &layout), InputError);
  EXPECT_THROW(LowRankMean(layout, 0), InputError);
}

}  // namespace
}  // namespace asgd::net
