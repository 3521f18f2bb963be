// The parameter server with ranks as threads (LocalFabric): a common start
// gives every rank the root's parameters bit for bit; a bulk-synchronous
// round adds every rank's deltas (summed or averaged); only changed keys travel; the AdaGrad rule
// takes sign-sized first steps; rounds on a thread while "workers" add to the
// parameters keep every update and leave all ranks with the same bits, with
// the clock gap within tau under a slow rank; one rank and one worker train
// what the single process trains; the multi-rank run with the server reaches
// the whole data's optimum. Each over both transports (messages to a server
// thread, and one-sided windows) where both apply.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <thread>
#include <tuple>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/on_ranks.hpp"
#include "../common/scratch_dir.hpp"
#include "../common/sharded_quadratic.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/net/multi_rank.hpp"
#include "asgd/net/parameter_server.hpp"
#include "asgd/net/transport.hpp"

namespace asgd::net {
namespace {

using asgd::testing::message_of;
using asgd::testing::on_ranks;
using asgd::testing::ScratchDir;
using asgd::testing::ShardedQuadratic;


void expect_no_errors(const std::vector<std::string>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "(no exception)") << "rank " << r;
}

std::vector<float> root_values(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.1f * static_cast<float>(i) - 37.3f + 1e-7f * static_cast<float>(i * i);
  v[5] = -0.0f;
  return v;
}

constexpr PsTransport kTransports[] = {PsTransport::messages, PsTransport::one_sided};

TEST(ParameterServer, ShareGivesEveryRankTheRootsParametersExactly) {
  for (const PsTransport transport : kTransports) {
  for (int P : {1, 2, 3, 5}) {
    for (std::size_t w : {std::size_t{1}, std::size_t{7}, std::size_t{32}, std::size_t{4096}}) {
      const std::vector<float> root = root_values(1001);
      std::vector<std::vector<float>> params(static_cast<std::size_t>(P));
      expect_no_errors(on_ranks(P, [&](Transport& t, int r) {
        auto& x = params[static_cast<std::size_t>(r)];
        x = r == 0 ? root : std::vector<float>(root.size(), static_cast<float>(r));
        ParameterServer ps(t, x, PsOptions{.key_floats = w, .transport = transport});
        ps.share(r == 0);
        ps.stop();
      }));
      for (const auto& x : params)
        for (std::size_t i = 0; i < root.size(); ++i)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(x[i]), std::bit_cast<std::uint32_t>(root[i]))
              << "P " << P << " w " << w << " " << to_string(transport);
    }
  }
  }
}

// The test fabric's windows: adds, puts, raises and gets land on the rank named, at the byte offset named;
// an operation outside a region is refused.
TEST(ParameterServer, WindowOperationsLandOnTheRankAndOffsetNamed) {
  const int P = 3;
  std::vector<std::vector<float>> seen(P);
  std::vector<std::vector<std::uint64_t>> words(P);
  expect_no_errors(on_ranks(P, [&](Transport& t, int r) {
    auto w = t.window(16 + 4 * 4 * static_cast<std::size_t>(r + 1));  // 2 words, then 4 (r + 1) floats
    const std::uint64_t mine[] = {static_cast<std::uint64_t>(r + 1)};
    for (int q = 0; q < P; ++q) w->raise(q, 8, mine);
    const float ones[] = {1, 1, 1, 1};
    for (int q = 0; q < P; ++q) w->add(q, 16, ones);
    w->barrier();
    if (r == 0) {
      const float put[] = {5, 6};
      w->put(2, 16 + 4 * 10, put);
    }
    w->barrier();
    const int next = (r + 1) % P;
    seen[static_cast<std::size_t>(r)].resize(4 * static_cast<std::size_t>(next + 1));
    words[static_cast<std::size_t>(r)].resize(2);
    w->get(next, 16, seen[static_cast<std::size_t>(r)]);
    w->get(next, 0, words[static_cast<std::size_t>(r)]);
    w->flush();
    float past_the_end = 0;
    EXPECT_THROW(w->get(next, 16 + 4 * 4 * static_cast<std::size_t>(next + 1), std::span<float>(&past_the_end, 1)),
                 RuntimeError);
    w->barrier();
    w->close();
  }));
  for (int r = 0; r < P; ++r) {
    const int next = (r + 1) % P;
    const auto& v = seen[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < v.size(); ++i) {
      const float want = i < 4 ? static_cast<float>(P) : next == 2 && i == 10 ? 5.0f : next == 2 && i == 11 ? 6.0f : 0.0f;
      EXPECT_EQ(v[i], want) << "rank " << r << " reads rank " << next << " float " << i;
    }
    EXPECT_EQ(words[static_cast<std::size_t>(r)], (std::vector<std::uint64_t>{0, static_cast<std::uint64_t>(P)}));
  }
}

// tau 0: a round's pull waits for every rank's push of that round, so each
// rank gets the start plus the sum of all ranks' deltas (model averaging's
// Combine::sum). A key no rank changed is not pulled again.
// The sum adds every rank's delta whole, the mean each over the number of ranks (model averaging's parameters).
TEST(ParameterServer, SynchronousRoundAddsEveryRanksDeltasByTheRule) {
  for (const PsTransport transport : kTransports) {
  for (const ServerRule rule : {ServerRule::sum, ServerRule::mean}) {
    const int P = 3;
    const float share = rule == ServerRule::sum ? 1.0f : 1.0f / P;
    const std::size_t n = 100, w = 10;
    std::vector<std::vector<float>> params(P);
    std::vector<PsStats> stats(P);
    expect_no_errors(on_ranks(P, [&](Transport& t, int r) {
      auto& x = params[static_cast<std::size_t>(r)];
      x.assign(n, 1.0f);
      ParameterServer ps(t, x, PsOptions{.tau = 0, .rule = rule, .key_floats = w, .transport = transport});
      ps.share(r == 0);
      for (int round = 1; round <= 4; ++round) {
        x[static_cast<std::size_t>(r)] += 1.0f;        // key 0, every rank
        x[50 + static_cast<std::size_t>(r)] += 0.5f;   // key 5
        ps.round();
        // Every rank's deltas of this round and before.
        for (int q = 0; q < P; ++q) {
          EXPECT_FLOAT_EQ(x[static_cast<std::size_t>(q)], 1.0f + share * static_cast<float>(round))
              << to_string(rule) << " rank " << r;
          EXPECT_FLOAT_EQ(x[50 + static_cast<std::size_t>(q)], 1.0f + share * 0.5f * static_cast<float>(round));
        }
        EXPECT_EQ(x[99], 1.0f);
      }
      ps.stop();
      stats[static_cast<std::size_t>(r)] = ps.stats();
    }));
    const bool one_sided = transport == PsTransport::one_sided;
    for (const auto& s : stats) {
      EXPECT_EQ(s.rounds, 5u);  // 4 and the last
      EXPECT_EQ(s.keys_pushed, 4u * 2u);
      // The share pulls 10 keys; each round 2 (keys 0 and 5); the last none (one-sided: all 10).
      EXPECT_EQ(s.keys_pulled, 10u + 4u * 2u + (one_sided ? 10u : 0u));
      EXPECT_EQ(s.max_clock_gap, 0u);
      EXPECT_LE(s.staleness.max(), static_cast<std::uint64_t>(P - 1));
    }
  }
  }
}

TEST(ParameterServer, AdagradRuleTakesSignSizedFirstSteps) {
  std::vector<float> x(8, 2.0f);
  expect_no_errors(on_ranks(1, [&](Transport& t, int) {
    ParameterServer ps(t, x, PsOptions{.rule = ServerRule::adagrad, .server_lr = 0.25f, .key_floats = 4});
    ps.share(true);
    x[0] += 3.0f;
    x[6] -= 0.001f;
    ps.round();
    ps.stop();
  }));
  EXPECT_NEAR(x[0], 2.25f, 1e-5);
  EXPECT_NEAR(x[6], 1.75f, 1e-3);
  EXPECT_EQ(x[1], 2.0f);
}

TEST(ParameterServer, OptionsAreCheckedByName) {
  std::vector<float> x(4);
  LocalFabric fabric(1);
  EXPECT_NE(message_of([&] { ParameterServer(fabric.endpoint(0), x, PsOptions{.key_floats = 0}); })
                .find("PsOptions::key_floats 0"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              ParameterServer(fabric.endpoint(0), x, PsOptions{.rule = ServerRule::adagrad, .server_lr = -1});
            }).find("PsOptions::server_lr -1"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              ParameterServer(fabric.endpoint(0), x,
                              PsOptions{.rule = ServerRule::adagrad, .transport = PsTransport::one_sided});
            }).find("PsOptions::transport one-sided: takes the mean or sum rule and float pushes, not the AdaGrad"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              ParameterServer(fabric.endpoint(0), x,
                              PsOptions{.push = PushEncoding::int8, .transport = PsTransport::one_sided});
            }).find("not compressed pushes"),
            std::string::npos);
}

// auto is one-sided where it applies (the mean or sum rule, float pushes: the test fabric is one host), and
// messages for AdaGrad's state and compressed pushes, which need a server.
TEST(ParameterServer, AutomaticTransportIsOneSidedWhereItApplies) {
  LocalFabric fabric(1);
  Transport& t = fabric.endpoint(0);
  EXPECT_EQ(resolve_transport(PsOptions{}, t), PsTransport::one_sided);
  EXPECT_EQ(resolve_transport(PsOptions{.rule = ServerRule::sum}, t), PsTransport::one_sided);
  EXPECT_EQ(resolve_transport(PsOptions{.rule = ServerRule::adagrad}, t), PsTransport::messages);
  EXPECT_EQ(resolve_transport(PsOptions{.push = PushEncoding::sign}, t), PsTransport::messages);
  EXPECT_EQ(resolve_transport(PsOptions{.transport = PsTransport::messages}, t), PsTransport::messages);
  std::vector<float> x(4, 1.0f);
  ParameterServer ps(t, x, PsOptions{});
  EXPECT_EQ(ps.options().transport, PsTransport::one_sided);
  ps.share(true);
  ps.stop();
}

// "Workers" add 1 to their rank's slots while rounds run every K steps on a
// thread; rank 0 is slow. At the end every rank holds the same bits and
// every increment of every rank, and no served pull ran more than tau
// rounds ahead of the slowest rank's pushes.
TEST(ParameterServer, RoundsWhileTrainingKeepEveryUpdateWithinTau) {
  for (const PsTransport transport : kTransports) {
  for (const std::uint64_t tau : {std::uint64_t{0}, std::uint64_t{2}, kUnbounded}) {
    const int P = 3;
    const std::size_t n = 64;
    const int steps = 60;
    std::vector<std::vector<float>> params(P);
    std::vector<PsStats> stats(P);
    expect_no_errors(on_ranks(P, [&](Transport& t, int r) {
      auto& x = params[static_cast<std::size_t>(r)];
      x.assign(n, 0.0f);
      ParameterServer ps(t, x, PsOptions{.tau = tau, .rule = ServerRule::sum, .key_floats = 8, .transport = transport});
      ps.share(r == 0);
      ps.start(3);
      for (int s = 0; s < steps + 10 * r; ++s) {
        for (std::size_t i = static_cast<std::size_t>(r); i < n; i += P)
          std::atomic_ref<float>(x[i]).fetch_add(1.0f, std::memory_order_relaxed);
        if (r == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
        ps.step_done(1);
      }
      ps.stop();
      stats[static_cast<std::size_t>(r)] = ps.stats();
    }));
    for (int r = 0; r < P; ++r) {
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(params[static_cast<std::size_t>(r)][i], static_cast<float>(steps + 10 * static_cast<int>(i % P)))
            << to_string(transport) << " tau " << tau << " rank " << r << " i " << i;
      }
      if (tau != kUnbounded) {
        EXPECT_LE(stats[static_cast<std::size_t>(r)].max_clock_gap, tau) << to_string(transport) << " rank " << r;
      }
    }
  }
  }
}

// Rounds that do not overlap compute (PsOptions::overlap false) under BSP:
// after the step that starts round k a worker waits for it, so its copy then
// holds every rank's first k K steps, however slow rank 0 is. With overlap the
// fast rank goes on before the slow rank's push and sees less.
TEST(ParameterServer, RoundsWithoutOverlapAreSequentialUnderBsp) {
  for (const PsTransport transport : kTransports) {
  for (const bool overlap : {false, true}) {
    const int P = 3, K = 2, steps = 30;
    std::vector<int> behind(P, 0);  // round starts where a rank's copy lacked steps of another rank
    expect_no_errors(on_ranks(P, [&](Transport& t, int r) {
      std::vector<float> x(64, 0.0f);
      ParameterServer ps(t, x, PsOptions{.tau = 0, .overlap = overlap, .rule = ServerRule::sum, .key_floats = 8,
                                         .transport = transport});
      ps.share(r == 0);
      ps.start(K);
      for (int s = 1; s <= steps; ++s) {
        std::atomic_ref<float>(x[static_cast<std::size_t>(8 * r)]).fetch_add(1.0f, std::memory_order_relaxed);
        if (r == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
        ps.step_done(1);
        if (s % K != 0) continue;
        for (int q = 0; q < P; ++q)
          if (std::atomic_ref<float>(x[static_cast<std::size_t>(8 * q)]).load() < static_cast<float>(s))
            ++behind[static_cast<std::size_t>(r)];
      }
      ps.stop();
    }));
    if (!overlap) {
      EXPECT_EQ(behind, std::vector<int>(P, 0)) << to_string(transport);
    } else {
      EXPECT_GT(behind[1] + behind[2], 0) << to_string(transport);
    }
  }
  }
}

// A warm start (PsOptions::warm_rounds): under ASP the rounds it covers are
// served as under BSP, so with every round covered no pull runs ahead of the
// slowest rank even with a slow rank; without it ASP's do.
TEST(ParameterServer, WarmRoundsAreSynchronousUnderAsp) {
  for (const PsTransport transport : kTransports) {
  for (const std::uint64_t warm : {std::uint64_t{0}, std::uint64_t{1000}}) {
    const int P = 2;
    std::vector<PsStats> stats(P);
    std::vector<std::vector<float>> params(P);
    expect_no_errors(on_ranks(P, [&](Transport& t, int r) {
      auto& x = params[static_cast<std::size_t>(r)];
      x.assign(64, 0.0f);
      ParameterServer ps(t, x, PsOptions{.tau = kUnbounded, .warm_rounds = warm, .rule = ServerRule::sum,
                                         .key_floats = 8, .transport = transport});
      ps.share(r == 0);
      ps.start(2);
      for (int s = 0; s < 60; ++s) {
        std::atomic_ref<float>(x[static_cast<std::size_t>(r)]).fetch_add(1.0f, std::memory_order_relaxed);
        if (r == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
        ps.step_done(1);
      }
      ps.stop();
      stats[static_cast<std::size_t>(r)] = ps.stats();
    }));
    EXPECT_EQ(params[0], params[1]);
    EXPECT_EQ(params[0][0], 60.0f);
    const std::uint64_t gap = std::max(stats[0].max_clock_gap, stats[1].max_clock_gap);
    if (warm > 0) {
      EXPECT_EQ(gap, 0u) << to_string(transport);
    } else {
      EXPECT_GT(gap, 0u) << to_string(transport);
    }
  }
  }
}

// Compressed pushes: every rank adds uneven amounts to every value, with a
// round every 2 steps. With error feedback what a push leaves out (the
// keys outside the top fraction, the quantisation error) goes with a later
// push, so every rank ends with every update (the last round is exact);
// without it the left-out part is lost. Per round, int8 pushes take under
// 1/2.5 and sign pushes under 1/6 of the bytes of floats (keys of 32 values
// with their 8-byte ids: 44 and 16 bytes against 136).
struct Compressed {
  std::vector<float> x;
  PsStats stats;
};
std::vector<Compressed> train_compressed(PsOptions options) {
  const int P = 2;
  options.rule = ServerRule::sum;  // every update, whole
  std::vector<Compressed> out(P);
  expect_no_errors(on_ranks(P, [&](Transport& t, int r) {
    auto& x = out[static_cast<std::size_t>(r)].x;
    x.assign(4096, 0.0f);
    ParameterServer ps(t, x, options);
    ps.share(r == 0);
    for (int s = 0; s < 40; ++s) {
      for (std::size_t i = 0; i < x.size(); ++i)
        x[i] += 0.001f * static_cast<float>((i * 7 + static_cast<std::size_t>(s) * 3) % 11) * static_cast<float>(r + 1);
      if (s % 2 == 1) ps.round();
    }
    out[static_cast<std::size_t>(r)].stats = ps.stats();  // the 20 compressed rounds, not the exact last one
    ps.stop();
  }));
  return out;
}

float expected_total(std::size_t i) {
  float total = 0;
  for (int r = 0; r < 2; ++r)
    for (int s = 0; s < 40; ++s) total += 0.001f * static_cast<float>((i * 7 + static_cast<std::size_t>(s) * 3) % 11) * static_cast<float>(r + 1);
  return total;
}

TEST(ParameterServer, CompressedPushesWithErrorFeedbackKeepEveryUpdate) {
  const auto floats = train_compressed(PsOptions{.tau = 0, .key_floats = 32});
  for (const PushEncoding e : {PushEncoding::floats, PushEncoding::int8, PushEncoding::sign}) {
    for (const float fraction : {1.0f, 0.25f}) {
      const auto runs = train_compressed(PsOptions{.tau = 0, .key_floats = 32, .push = e, .push_fraction = fraction});
      for (const auto& run : runs) {
        EXPECT_EQ(run.x, runs[0].x) << to_string(e);
        for (std::size_t i = 0; i < run.x.size(); ++i)
          ASSERT_NEAR(run.x[i], expected_total(i), 1e-3f * (1 + expected_total(i))) << to_string(e) << " " << fraction << " i " << i;
      }
      const auto per_round = [](const PsStats& s) { return static_cast<double>(s.bytes_pushed) / static_cast<double>(s.rounds); };
      if (e == PushEncoding::int8 && fraction == 1.0f) {
        EXPECT_LT(per_round(runs[0].stats), per_round(floats[0].stats) / 2.5);
      }
      if (e == PushEncoding::sign && fraction == 1.0f) {
        EXPECT_LT(per_round(runs[0].stats), per_round(floats[0].stats) / 6);
      }
    }
  }
}

TEST(ParameterServer, WithoutErrorFeedbackWhatAPushLeavesOutIsLost) {
  const auto runs = train_compressed(PsOptions{.tau = 0, .key_floats = 32, .push = PushEncoding::sign,
                                               .push_fraction = 0.25f, .error_feedback = false});
  float worst = 0;
  for (std::size_t i = 0; i < runs[0].x.size(); ++i) worst = std::max(worst, std::fabs(runs[0].x[i] - expected_total(i)));
  EXPECT_EQ(runs[0].x, runs[1].x);
  EXPECT_GT(worst, 0.05f);
}


TrainerOptions one_worker(std::uint64_t epochs) {
  TrainerOptions o;
  o.workers = 1;
  o.epochs = epochs;
  o.seed = 7;
  o.step_examples = 4;
  o.schedule.kind = ScheduleKind::linear;
  o.schedule.lr = 0.05f;
  return o;
}

// One rank's part of a MultiRank run on the sharded quadratic (60 examples, 4 parameters, rank r starting from
// 10 r + 1, one worker): its parameters at the end, and what the group said of itself and its traffic.
std::pair<std::vector<float>, std::string> train_quadratic(Transport& t, int r, const MultiRankOptions& mo,
                                                           std::uint64_t epochs) {
  MultiRank group(t, mo);
  group.agree_on_options();
  ShardedQuadratic problem{group.shard(60, "examples"), 4};
  ParamStore store = ParamStore::on_heap(problem.layout());
  for (std::size_t k = 0; k < 4; ++k) store.store(k, static_cast<float>(r * 10 + 1));
  TrainerOptions o = one_worker(epochs);
  group.prepare(o);
  Trainer trainer(store, o);
  group.start(trainer, store);
  run_averaged(group, trainer, problem, epochs);
  return {store.snapshot(), group.describe() + "; " + group.traffic()};
}

// One rank, one worker, tau 0: the same parameters as the single process,
// within float rounding (a round adds server - snapshot, about 0).
TEST(ParameterServer, OneRankOneWorkerTrainsWhatOneProcessTrains) {
  std::vector<std::size_t> rows(60);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  const auto train = [&](Transport* t, PsTransport transport) {
    ShardedQuadratic problem{rows, 4};
    ParamStore store = ParamStore::on_heap(problem.layout());
    for (std::size_t k = 0; k < 4; ++k) store.store(k, 3.0f);
    TrainerOptions o = one_worker(5);
    std::unique_ptr<ParameterServer> ps;
    if (t != nullptr) {
      ps = std::make_unique<ParameterServer>(*t, std::span<float>(store.data(), store.size()),
                                             PsOptions{.tau = 0, .key_floats = 2, .transport = transport});
      o.on_step = [&](std::uint64_t examples) { ps->step_done(examples); };
    }
    Trainer trainer(store, o);
    if (ps) {
      ps->share(true);
      ps->start(2);
    }
    trainer.run(problem);
    if (ps) ps->stop();
    return store.snapshot();
  };
  const std::vector<float> alone = train(nullptr, PsTransport::messages);
  for (const PsTransport transport : kTransports) {
    std::vector<float> with_server;
    expect_no_errors(on_ranks(1, [&](Transport& t, int) { with_server = train(&t, transport); }));
    ASSERT_EQ(alone.size(), with_server.size());
    for (std::size_t k = 0; k < alone.size(); ++k)
      EXPECT_NEAR(with_server[k], alone[k], 1e-5f * (1 + std::fabs(alone[k]))) << to_string(transport);
  }
}

// Through MultiRank (every app's seam): three ranks, each its own shard of
// the examples, end with one model near the whole data's optimum, under BSP,
// SSP and ASP, rounds per epoch and every 3 steps.
TEST(ParameterServer, MultiRankRunReachesTheWholeDataOptimum) {
  std::vector<double> optimum(4);
  for (std::size_t k = 0; k < 4; ++k) optimum[k] = ShardedQuadratic::optimum(60, k);
  for (const PsTransport transport : kTransports) {
  for (const std::uint64_t every : {std::uint64_t{0}, std::uint64_t{3}}) {
    for (const std::uint64_t tau : {std::uint64_t{0}, std::uint64_t{4}, kUnbounded}) {
      const int P = 3;
      std::vector<std::vector<float>> params(P);
      std::vector<std::string> described(P);
      expect_no_errors(on_ranks(P, [&](Transport& t, int r) {
        const MultiRankOptions mo{.distributed = Distributed::ps,
                                  .ps = PsOptions{.tau = tau, .transport = transport},
                                  .average_every = every};
        std::tie(params[static_cast<std::size_t>(r)], described[static_cast<std::size_t>(r)]) =
            train_quadratic(t, r, mo, 30);
      }));
      for (int r = 0; r < P; ++r) {
        EXPECT_EQ(params[static_cast<std::size_t>(r)], params[0]) << "rank " << r << " tau " << tau;
        for (std::size_t k = 0; k < 4; ++k) {
          EXPECT_NEAR(params[static_cast<std::size_t>(r)][k], optimum[k], 0.15) << described[0];
        }
      }
      EXPECT_NE(described[0].find("parameter server (mean, tau " + tau_to_string(tau) + ", " +
                                  std::string(to_string(transport)) + ")"),
                std::string::npos)
          << described[0];
    }
  }
  }
}

TEST(ParameterServer, RanksGivenDifferentTausAreRefusedByName) {
  const auto errors = on_ranks(2, [&](Transport& t, int r) {
    MultiRank group(t, MultiRankOptions{.distributed = Distributed::ps, .ps = PsOptions{.tau = r == 0 ? 0u : 4u}});
    group.agree_on_options();
  });
  for (const auto& e : errors) EXPECT_NE(e.find("PsOptions::tau: rank 0 0, rank 1 4"), std::string::npos) << e;
}

// Dedicated server ranks (the last S): the workers' synchronous rounds add every worker's deltas by the rule,
// as server threads on every rank do, and the server ranks end once every worker has its final reply, with
// the staleness of the pushes they applied.
TEST(ParameterServer, DedicatedServerRanksApplyEveryWorkersDeltas) {
  for (const std::size_t S : {std::size_t{1}, std::size_t{2}}) {
    const int workers = 2, P = workers + static_cast<int>(S);
    const std::size_t n = 100, w = 10;
    std::vector<std::vector<float>> params(static_cast<std::size_t>(workers));
    std::vector<PsStats> served(S);
    const PsOptions options{.tau = 0, .rule = ServerRule::mean, .key_floats = w, .servers = S};
    expect_no_errors(on_ranks(P, [&](Transport& t, int r) {
      if (is_server_rank(options, t)) {
        served[static_cast<std::size_t>(r - workers)] = serve_dedicated(t, options);
        return;
      }
      auto& x = params[static_cast<std::size_t>(r)];
      x.assign(n, r == 0 ? 1.0f : 9.0f);  // the root's values win
      ParameterServer ps(t, x, options);
      EXPECT_EQ(ps.options().transport, PsTransport::messages);
      ps.share(r == 0);
      for (int round = 1; round <= 3; ++round) {
        x[static_cast<std::size_t>(r)] += 1.0f;       // key 0, in the first server's shard
        x[90 + static_cast<std::size_t>(r)] += 2.0f;  // key 9, in the last's
        ps.round();
        for (int q = 0; q < workers; ++q) {
          EXPECT_FLOAT_EQ(x[static_cast<std::size_t>(q)], 1.0f + 0.5f * static_cast<float>(round)) << "S " << S;
          EXPECT_FLOAT_EQ(x[90 + static_cast<std::size_t>(q)], 1.0f + 1.0f * static_cast<float>(round));
        }
        EXPECT_EQ(x[50], 1.0f);
      }
      ps.stop();
      const PsStats stats = ps.stats();
      EXPECT_EQ(stats.keys_pushed, 3u * 2u);
      // Measured where the shards are, and sent to worker 0 at the end.
      EXPECT_EQ(stats.staleness.count(), r == 0 ? S * workers * 4u : 0u);
    }));
    EXPECT_EQ(params[0], params[1]);
    std::uint64_t pushes = 0;
    for (const PsStats& s : served) {
      pushes += s.staleness.count();
      EXPECT_LE(s.staleness.max(), 1u);
      EXPECT_EQ(s.max_clock_gap, 0u);
    }
    EXPECT_EQ(pushes, S * workers * 4u) << "every worker's 3 rounds and its last push, at every shard";
  }
}

// Through MultiRank: 2 workers and a dedicated server train what 2 ranks with server threads train (BSP, the
// mean, rounds after each epoch: both are model averaging, up to the order a server adds the two pushes): the
// workers shard the data between themselves alone.
TEST(ParameterServer, MultiRankWithServerRanksTrainsAsServerThreadsDo) {
  const auto run = [](int P, std::size_t servers) {
    std::vector<std::vector<float>> params(static_cast<std::size_t>(P));
    std::vector<std::string> described(static_cast<std::size_t>(P));
    const MultiRankOptions mo{.distributed = Distributed::ps,
                              .ps = PsOptions{.tau = 0, .transport = PsTransport::messages, .servers = servers}};
    expect_no_errors(on_ranks(P, [&](Transport& t, int r) {
      if (is_server_rank(mo.ps, t)) {
        serve_dedicated(t, mo.ps);
        return;
      }
      std::tie(params[static_cast<std::size_t>(r)], described[static_cast<std::size_t>(r)]) =
          train_quadratic(t, r, mo, 10);
    }));
    return std::pair{params[0], described[0]};
  };
  const auto [threads, threads_said] = run(2, 0);
  const auto [dedicated, dedicated_said] = run(3, 1);
  ASSERT_EQ(threads.size(), dedicated.size());
  for (std::size_t k = 0; k < threads.size(); ++k)
    EXPECT_NEAR(dedicated[k], threads[k], 1e-5f * (1 + std::fabs(threads[k]))) << dedicated_said;
  EXPECT_NE(dedicated_said.find("2 ranks and 1 server rank, parameter server (mean, tau 0, messages)"),
            std::string::npos)
      << dedicated_said;
  EXPECT_NE(dedicated_said.find("staleness at the server ranks: mean"), std::string::npos) << dedicated_said;
}

// Server ranks are refused where they cannot work: a job they would leave with fewer than 2 workers (one
// would train as one process and never feed them), a worker's call on a server rank and the reverse, and the
// one-sided transport (whose shards are the workers' windows).
TEST(ParameterServer, ServerRanksAreRefusedWhereTheyCannotServe) {
  std::vector<float> x(4);
  const auto errors = on_ranks(3, [&](Transport& t, int r) {
    for (const std::size_t S : {std::size_t{2}, std::size_t{3}}) {
      const std::string said = fmt::format("PsOptions::servers {}: a job of 3 ranks keeps {} worker rank", S, 3 - S);
      EXPECT_NE(message_of([&] { ParameterServer(t, x, PsOptions{.servers = S}); }).find(said), std::string::npos);
      EXPECT_NE(message_of([&] { serve_dedicated(t, PsOptions{.servers = S}); }).find(said), std::string::npos);
      EXPECT_NE(message_of([&] { MultiRank(t, MultiRankOptions{.distributed = Distributed::ps, .ps = {.servers = S}}); })
                    .find(said),
                std::string::npos);
    }
    const PsOptions one{.servers = 1};
    if (r == 2) {
      EXPECT_NE(message_of([&] { ParameterServer(t, x, one); }).find("rank 2 is one of the 1 dedicated server ranks"),
                std::string::npos);
      EXPECT_NE(message_of([&] { MultiRank(t, MultiRankOptions{.distributed = Distributed::ps, .ps = one}); })
                    .find("rank 2 is one of the 1 dedicated server ranks"),
                std::string::npos);
    } else {
      EXPECT_NE(message_of([&] { serve_dedicated(t, one); }).find(fmt::format("rank {} of 3 is not one of the last", r)),
                std::string::npos);
    }
  });
  expect_no_errors(errors);
  // Ranks given different counts are refused on every rank before they take their roles.
  for (const auto& e : on_ranks(3, [](Transport& t, int r) {
         same_servers_on_all_ranks(t, r == 2 ? 1 : 0);
       })) {
    EXPECT_EQ(e, "the ranks were given different PsOptions::servers: rank 0 0, rank 1 0, rank 2 1; every rank needs "
                 "the same");
  }
  expect_no_errors(on_ranks(3, [](Transport& t, int) { same_servers_on_all_ranks(t, 1); }));
  EXPECT_NE(message_of([] { PsOptions{.transport = PsTransport::one_sided, .servers = 1}.validate(); })
                .find("PsOptions::transport one-sided: the shards are the workers' windows, so it takes no "
                      "PsOptions::servers 1"),
            std::string::npos);
  EXPECT_NE(message_of([] { MultiRankOptions{.ps = PsOptions{.servers = 1}}.validate(); })
                .find("PsOptions::servers 1: server ranks are the parameter server's (MultiRankOptions::distributed ps)"),
            std::string::npos);
  LocalFabric fabric(1);
  EXPECT_EQ(resolve_transport(PsOptions{.servers = 1}, fabric.endpoint(0)), PsTransport::messages);
}

// Server checkpoints: generations written while rounds run and a final one at the end, each of every shard;
// read back whole (values bit for bit, AdaGrad's sums, the least epoch the workers reported); a generation
// missing a shard's file, or with a damaged one, is passed over for an older complete one. With server threads
// on 2 ranks and with 1 dedicated server beside 2 workers.
TEST(ParameterServer, CheckpointGenerationsAreWholeOrPassedOver) {
  for (const std::size_t servers : {std::size_t{0}, std::size_t{1}}) {
    ScratchDir dir;
    const std::filesystem::path prefix = dir / "ck";
    const PsOptions options{.rule = ServerRule::adagrad, .server_lr = 0.25f, .key_floats = 4, .servers = servers,
                            .checkpoint = prefix, .checkpoint_seconds = 0.01};
    const int workers = 2, P = workers + static_cast<int>(servers);
    std::vector<std::vector<float>> params(static_cast<std::size_t>(workers));
    expect_no_errors(on_ranks(P, [&](Transport& t, int r) {
      if (is_server_rank(options, t)) {
        EXPECT_GE(serve_dedicated(t, options).generations, 2u);
        return;
      }
      auto& x = params[static_cast<std::size_t>(r)];
      x.assign(30, 2.0f);
      ParameterServer ps(t, x, options);
      ps.share(r == 0);
      for (int round = 1; round <= 6; ++round) {
        x[static_cast<std::size_t>(r)] += 3.0f;
        ps.epoch_done(static_cast<std::uint64_t>(round + r));  // rank 0 is the one behind
        std::this_thread::sleep_for(std::chrono::milliseconds(15));
        ps.round();
      }
      ps.stop();
      if (servers == 0) {
        EXPECT_GE(ps.stats().generations, 2u);
      }
    }));
    const auto g = read_generation(prefix);
    ASSERT_TRUE(g.has_value());
    EXPECT_EQ(g->generation, PsGeneration::final_generation);
    EXPECT_EQ(g->shards, servers > 0 ? servers : 2u);
    EXPECT_EQ(g->epoch, 6u);
    EXPECT_EQ(g->rule, ServerRule::adagrad);
    EXPECT_EQ(g->values, params[0]);
    ASSERT_EQ(g->sums.size(), 30u);
    EXPECT_FLOAT_EQ(g->sums[0], 6 * 9.0f);  // six pushes of 3 on parameter 0
    EXPECT_EQ(g->sums[29], 0.0f);
    // Without the final generation's last shard, the newest complete one before it; with a damaged file there,
    // none of that generation either.
    std::vector<std::filesystem::path> finals;
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
      if (e.path().filename().string().find("-gfinal-") != std::string::npos)
        finals.push_back(e.path());
    ASSERT_EQ(finals.size(), g->shards);
    std::sort(finals.begin(), finals.end());
    std::filesystem::remove(finals.back());
    const auto before = read_generation(prefix);
    ASSERT_TRUE(before.has_value()) << "servers " << servers;
    EXPECT_LT(before->generation, PsGeneration::final_generation);
    EXPECT_GE(before->generation, 1u);
    EXPECT_LE(before->values[0], params[0][0]);  // every round's step on parameter 0 is upward
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      if (e.path().filename().string().find(fmt::format("-g{}-", before->generation)) == std::string::npos) continue;
      std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(-1, std::ios::end);
      f.put('\x7f');
    }
    const auto older = read_generation(prefix);
    if (older) {
      EXPECT_LT(older->generation, before->generation);
    }
  }
}

// An elastic resume: 3 ranks' servers under AdaGrad write their final generation; 2 ranks start from it, every
// rank's copy its values, and the servers go on with its sums (the next step of 3 on parameter 0 is lr 3 /
// sqrt(9 + 9), not the sign-sized step of sums from zero). A generation that holds fewer epochs than the run
// has done gives its sums, not its values. One of another model is refused, and where there is none.
TEST(ParameterServer, ResumeFromAGenerationWithOtherRanksKeepsAdagradSums) {
  ScratchDir dir;
  const std::filesystem::path prefix = dir / "ck";
  const PsOptions writing{.rule = ServerRule::adagrad, .server_lr = 0.25f, .key_floats = 4,
                          .transport = PsTransport::messages, .checkpoint = prefix};
  expect_no_errors(on_ranks(3, [&](Transport& t, int r) {
    std::vector<float> x(12, 2.0f);
    ParameterServer ps(t, x, writing);
    ps.share(r == 0, 0, 77);
    if (r == 0) x[0] += 3.0f;
    ps.epoch_done(4);
    ps.round();
    ps.stop();
  }));
  PsOptions resuming = writing;
  resuming.checkpoint = dir / "again";  // its generations count the epochs it resumed at until one ends
  resuming.resume = prefix;
  std::vector<std::vector<float>> started(2), ended(2);
  std::vector<std::string> said(2);
  expect_no_errors(on_ranks(2, [&](Transport& t, int r) {
    std::vector<float> x(12, static_cast<float>(r));
    ParameterServer ps(t, x, resuming);
    const auto g = ps.share(r == 0, 4, 77);
    EXPECT_EQ(g.has_value(), r == 0);
    if (g) {
      EXPECT_EQ(g->shards, 3u);
      EXPECT_EQ(g->epoch, 4u);
      EXPECT_TRUE(g->values.empty());  // handed back without its vectors
    }
    started[static_cast<std::size_t>(r)] = x;
    if (r == 0) x[0] += 3.0f;
    ps.round();
    ps.stop();
    ended[static_cast<std::size_t>(r)] = x;
  }));
  EXPECT_EQ(started[0], started[1]);
  EXPECT_NEAR(started[0][0], 2.25f, 1e-5f);
  EXPECT_EQ(started[0][1], 2.0f);
  EXPECT_EQ(ended[0], ended[1]);
  EXPECT_NEAR(ended[0][0], 2.25f + 0.25f * 3.0f / std::sqrt(18.0f), 1e-4f);
  const auto again = read_generation(dir / "again");
  // A folder that cannot take the files is refused at the start, not a period into training.
  expect_no_errors(on_ranks(1, [&](Transport& t, int) {
    std::vector<float> x(12);
    const PsOptions nowhere{.transport = PsTransport::messages, .checkpoint = dir / "none" / "ck"};
    EXPECT_NE(message_of([&] { ParameterServer(t, x, nowhere); }).find("PsOptions::checkpoint: "), std::string::npos);
  }));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->epoch, 4u);
  EXPECT_EQ(again->shards, 2u);
  resuming.checkpoint.clear();
  // Older than the run: its sums, the run's own values (the next step of 3 is again lr 3 / sqrt(18)).
  expect_no_errors(on_ranks(1, [&](Transport& t, int) {
    std::vector<float> x(12, 5.0f);
    ParameterServer ps(t, x, resuming);
    const auto g = ps.share(true, 5, 77);
    ASSERT_TRUE(g.has_value());
    EXPECT_FALSE(g->values_taken);
    EXPECT_EQ(x[0], 5.0f);
    x[0] += 3.0f;
    ps.round();
    ps.stop();
    EXPECT_NEAR(x[0], 5.0f + 0.25f * 3.0f / std::sqrt(18.0f), 1e-4f);
  }));
  // Refusals, on the root (one rank).
  const auto refused = [&](PsOptions o, std::uint64_t epoch, std::uint64_t model) {
    std::string what;
    expect_no_errors(on_ranks(1, [&](Transport& t, int) {
      std::vector<float> x(12);
      ParameterServer ps(t, x, o);
      what = message_of([&] { ps.share(true, epoch, model); });
    }));
    return what;
  };
  EXPECT_NE(refused(resuming, 4, 78).find("is of another model"), std::string::npos);
  resuming.resume = dir / "none";
  EXPECT_NE(refused(resuming, 0, 77).find("PsOptions::resume " + (dir / "none").string() + ": no complete generation"),
            std::string::npos);
}

// A job writing where another job's checkpoints are removes them once it has a complete generation of its own,
// whatever the other job's number of shards.
TEST(ParameterServer, CheckpointsOfAnEarlierJobAreRemovedOnceANewOneIsComplete) {
  ScratchDir dir;
  const PsOptions options{.transport = PsTransport::messages, .checkpoint = dir / "ck", .checkpoint_seconds = 0.01};
  for (const int P : {3, 2}) {
    expect_no_errors(on_ranks(P, [&](Transport& t, int r) {
      std::vector<float> x(40, 1.0f);
      ParameterServer ps(t, x, options);
      ps.share(r == 0);
      for (int round = 0; round < 4; ++round) {
        x[static_cast<std::size_t>(r)] += 1.0f;
        std::this_thread::sleep_for(std::chrono::milliseconds(15));
        ps.round();
      }
      ps.stop();
    }));
  }
  std::set<std::string> jobs;
  for (const std::string& name : dir.entries()) jobs.insert(name.substr(0, name.find("-g")));
  EXPECT_EQ(jobs.size(), 1u) << fmt::format("{}", fmt::join(dir.entries(), ", "));
  const auto g = read_generation(dir / "ck");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->shards, 2u);
}

}  // namespace
}  // namespace asgd::net
