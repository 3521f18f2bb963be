// BlockTrainer on a quadratic whose minibatch gradients are known exactly:
// f(w) = 1/2 |w - t_b|^2 for minibatch b, so the gradient is w - t_b.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cmath>
#include <thread>
#include <vector>

#include "asgd/engine/block_trainer.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd {
namespace {

Layout flat() {
  Layout l;
  l.add("a", {16});
  l.add("b", {24});
  return l;
}

std::vector<BlockTrainer::Block> blocks_of(const Layout& l) {
  std::vector<BlockTrainer::Block> out;
  for (const auto& t : l.tensors()) out.push_back({t.offset, t.span()});
  return out;
}

// Target of minibatch b: a different point per batch, mean 1.
float target(std::size_t b, std::size_t i) { return 1.0f + 0.5f * std::sin(static_cast<float>(b * 7 + i)); }

BlockTrainer::Gradient quadratic(const Layout& l) {
  return [&l](std::size_t, std::size_t b, const float* view, float* grad) {
    double loss = 0;
    std::size_t i = 0;
    for (const auto& t : l.tensors())
      for (std::size_t k = 0; k < t.elements(); ++k, ++i) {
        grad[t.offset + k] = view[t.offset + k] - target(b, i);
        loss += 0.5 * grad[t.offset + k] * grad[t.offset + k];
      }
    return BlockTrainer::Minibatch{loss, 1};
  };
}

// The same gradient, `value` in each of the store's n floats, for every
// minibatch: each update moves every parameter alike.
BlockTrainer::Gradient constant(std::size_t n, float value) {
  return [n, value](std::size_t, std::size_t, const float*, float* grad) {
    std::fill(grad, grad + n, value);
    return BlockTrainer::Minibatch{0, 1};
  };
}

TEST(BlockTrainer, SynchronousRoundsAverageTheWorkersGradients) {
  // Two workers at tau 0 make one update per round with the mean of
  // batches 2r and 2r + 1: the same as one worker whose gradient is that mean.
  const Layout l = flat();
  ParamStore two = ParamStore::on_heap(l), one = ParamStore::on_heap(l);
  std::vector<float> m2(l.size()), m1(l.size());
  BlockTrainOptions o;
  o.lr = 0.1f;
  o.momentum = 0.5f;
  o.workers = 2;
  BlockTrainer t2(two, m2, blocks_of(l), o);
  t2.run_epoch(10, quadratic(l));
  o.workers = 1;
  BlockTrainer t1(one, m1, blocks_of(l), o);
  const auto grad = quadratic(l);
  std::vector<float> g2(l.size());
  t1.run_epoch(5, [&](std::size_t w, std::size_t r, const float* view, float* g) {
    grad(w, 2 * r, view, g);
    grad(w, 2 * r + 1, view, g2.data());
    for (std::size_t i = 0; i < l.size(); ++i) g[i] = 0.5f * (g[i] + g2[i]);
    return BlockTrainer::Minibatch{0, 2};
  });
  EXPECT_EQ(t2.updates(), 5u);
  for (std::size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(two.data()[i], one.data()[i], 1e-6) << i;
}

TEST(BlockTrainer, EveryModeConvergesAndViewsStayWithinTau) {
  const Layout l = flat();
  for (std::uint64_t tau : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4}, kUnbounded})
    for (std::size_t workers : {1u, 4u}) {
      ParamStore store = ParamStore::on_heap(l);
      std::vector<float> m(l.size());
      BlockTrainOptions o;
      o.workers = workers;
      o.tau = tau;
      o.lr = 0.05f;
      o.momentum = 0.5f;
      o.compensate = true;
      BlockTrainer t(store, m, blocks_of(l), o);
      BlockEpochStats s;
      for (int e = 0; e < 5; ++e) s = t.run_epoch(200, quadratic(l));
      if (tau != kUnbounded) {
        EXPECT_LE(s.max_view_age, tau);
      }
      if (workers == 1 && tau != kUnbounded) {
        EXPECT_EQ(s.max_staleness, tau);  // refreshed every tau + 1 updates
      }
      double err = 0;
      for (const auto& tensor : l.tensors())
        for (std::size_t k = 0; k < tensor.elements(); ++k)
          err = std::max(err, std::abs(double(store.data()[tensor.offset + k]) - 1.0));
      EXPECT_LT(err, 0.3) << "tau " << tau_to_string(tau) << " workers " << workers;
    }
}

TEST(BlockTrainer, CompensationAndCosineShapeTheStep) {
  const Layout l = flat();
  ParamStore store = ParamStore::on_heap(l);
  std::vector<float> m(l.size());
  BlockTrainOptions o;
  o.tau = 8;
  o.momentum = 0.9f;
  o.lr = 0.01f;
  o.compensate = true;
  o.schedule = BlockTrainOptions::Schedule::cosine;
  o.total_updates = 400;
  BlockTrainer t(store, m, blocks_of(l), o);
  auto s = t.run_epoch(200, quadratic(l));
  // One worker refreshing every 9 updates: mean staleness 4, implicit
  // momentum 0.8, explicit 0.1; half way through the cosine: lr / 2.
  EXPECT_NEAR(s.mean_staleness, 4.0, 0.1);
  EXPECT_NEAR(s.momentum, 0.1f, 0.02f);
  EXPECT_NEAR(s.lr, 0.005f, 1e-4f);
  s = t.run_epoch(200, quadratic(l));
  EXPECT_NEAR(s.lr, 0.0f, 1e-6f);
}

TEST(BlockTrainer, ErrorsStopEveryWorkerAndReachTheCaller) {
  const Layout l = flat();
  for (std::uint64_t tau : {std::uint64_t{0}, std::uint64_t{2}, kUnbounded}) {
    ParamStore store = ParamStore::on_heap(l);
    std::vector<float> m(l.size());
    BlockTrainOptions o;
    o.workers = 3;
    o.tau = tau;
    BlockTrainer t(store, m, blocks_of(l), o);
    const auto grad = quadratic(l);
    EXPECT_THROW(t.run_epoch(100,
                             [&](std::size_t w, std::size_t b, const float* v, float* g) {
                               if (b == 17) return BlockTrainer::Minibatch{NAN, 1};
                               return grad(w, b, v, g);
                             }),
                 RuntimeError);
  }
  ParamStore store = ParamStore::on_heap(l);
  std::vector<float> wrong(3);
  EXPECT_THROW(BlockTrainer(store, wrong, blocks_of(l), {}), InputError);
  std::vector<float> m(l.size());
  BlockTrainOptions bad;
  bad.momentum = 1.0f;
  EXPECT_THROW(BlockTrainer(store, m, blocks_of(l), bad), InputError);
  // A block whose end wraps around (before: accepted, then read and written out of bounds), and overlapping
  // blocks (updated twice at tau > 0, once at tau 0).
  const std::vector<BlockTrainer::Block> wraps = {{SIZE_MAX, 2}};
  EXPECT_THROW(BlockTrainer(store, m, wraps, {}), InputError);
  const std::vector<BlockTrainer::Block> overlap = {{0, 8}, {4, 8}};
  EXPECT_THROW(BlockTrainer(store, m, overlap, {}), InputError);
  const std::vector<BlockTrainer::Block> apart = {{8, 8}, {0, 8}};
  EXPECT_NO_THROW(BlockTrainer(store, m, apart, {}));
}

// BlockTrainOptions::stop (Ctrl-C in `asgd cnn train`): the workers take no minibatch after it, every one of
// them leaves (at tau 0 all at the same round, none waiting at the barrier), and the epoch says it stopped. An
// epoch whose last minibatch was taken before the request is whole.
TEST(BlockTrainer, AStopRequestEndsTheEpochEarly) {
  const Layout l = flat();
  for (std::uint64_t tau : {std::uint64_t{0}, std::uint64_t{2}, kUnbounded}) {
    for (const std::size_t stop_at : {std::size_t{0}, std::size_t{1}, std::size_t{40}, std::size_t{1000}}) {
      SCOPED_TRACE(::testing::Message() << "tau " << tau << ", stop at gradient " << stop_at);
      ParamStore store = ParamStore::on_heap(l);
      std::vector<float> m(l.size());
      BlockTrainOptions o;
      o.workers = 3;
      o.tau = tau;
      o.lr = 0.05f;
      std::atomic<bool> stop{stop_at == 0};
      o.stop = &stop;
      BlockTrainer t(store, m, blocks_of(l), o);
      const auto grad = quadratic(l);
      std::atomic<std::size_t> calls{0};
      const BlockEpochStats s = t.run_epoch(100, [&](std::size_t w, std::size_t b, const float* v, float* g) {
        if (calls.fetch_add(1) + 1 == stop_at) stop.store(true);
        return grad(w, b, v, g);
      });
      const bool early = stop_at < 100;
      EXPECT_EQ(s.stopped, early);
      if (stop_at == 0) {
        EXPECT_EQ(calls.load(), 0u);
      }
      // After the request: at most the minibatches under way (tau 0: the round under way, 3 gradients).
      if (early && stop_at > 0) {
        EXPECT_LE(calls.load(), stop_at + 2);
      }
      if (!early) {
        EXPECT_EQ(calls.load(), 100u);
      }
      EXPECT_EQ(t.updates(), tau == 0 ? (calls.load() + 2) / 3 : calls.load());
    }
  }
}

TEST(BlockTrainer, AfterUpdatesRunsEveryKUpdatesOfTheRunWithNoUpdateInFlight) {
  const Layout l = flat();
  for (std::uint64_t tau : {std::uint64_t{0}, std::uint64_t{2}, kUnbounded}) {
    ParamStore store = ParamStore::on_heap(l);
    std::vector<float> m(l.size());
    BlockTrainOptions o;
    o.workers = 3;
    o.tau = tau;
    o.lr = 1.0f;
    o.momentum = 0.0f;
    o.first_update = 3;  // a resumed run: the rhythm counts the updates made before
    o.every_updates = 4;
    int calls = 0;
    // Each update moves every parameter by -1; the hook puts them back to 0
    // (it runs alone: no update is half applied when it does).
    o.after_updates = [&] {
      ++calls;
      std::fill(store.data(), store.data() + store.size(), 0.0f);
    };
    BlockTrainer t(store, m, blocks_of(l), o);
    t.run_epoch(tau == 0 ? 60 : 20, constant(store.size(), 1.0f));  // 20 updates: numbers 4 .. 23
    EXPECT_EQ(t.updates(), 23u);
    EXPECT_EQ(calls, 5) << "tau " << tau_to_string(tau);  // after 4, 8, 12, 16, 20
    // What is left is updates 21 .. 23, or at tau > 0 those of them that
    // landed after the last reset (the others were applied before the hook
    // took the locks and reset too). Every parameter moves together: no
    // update is seen half applied.
    for (const auto& tensor : l.tensors())
      for (std::size_t i = tensor.offset; i < tensor.offset + tensor.elements(); ++i) {
        EXPECT_EQ(store.data()[i], store.data()[0]) << i;
        EXPECT_LE(store.data()[i], 0.0f) << i;
        EXPECT_GE(store.data()[i], -3.0f) << i;
      }
    if (tau == 0) {
      EXPECT_EQ(store.data()[0], -3.0f);
    }
  }
}

// A view taken before the hook changed the parameters is not used for a
// new gradient, however large tau is: the hook (an average across ranks)
// moved the model by more than the updates count. One worker, so that the
// order is fixed (with several, a hook may also end while a worker is
// between its refresh check and its gradient).
TEST(BlockTrainer, ViewsTakenBeforeTheHookAreRefreshed) {
  const Layout l = flat();
  ParamStore store = ParamStore::on_heap(l);
  std::vector<float> m(l.size());
  BlockTrainOptions o;
  o.workers = 1;
  o.tau = 1000;  // no view would be refreshed for its age
  o.momentum = 0.0f;
  o.every_updates = 4;
  std::atomic<int> hooks{0};
  o.after_updates = [&] {
    const int c = hooks.load() + 1;
    std::fill(store.data(), store.data() + store.size(), static_cast<float>(c));
    hooks.store(c);
  };
  BlockTrainer t(store, m, blocks_of(l), o);
  std::atomic<int> stale{0};
  t.run_epoch(60, [&](std::size_t, std::size_t, const float* view, float* g) {
    if (view[0] != static_cast<float>(hooks.load())) stale.fetch_add(1);
    std::fill(g, g + store.size(), 0.0f);  // updates leave the parameters as they are
    return BlockTrainer::Minibatch{0, 1};
  });
  EXPECT_EQ(hooks.load(), 15);
  EXPECT_EQ(stale.load(), 0);
}

// A due hook is not held back by a stream of quick updates (at tau = inf,
// 8 workers on 2 cores): while it waits no update starts, so it sees at
// most about 2 W updates past its own.
TEST(BlockTrainer, ADueHookGoesBeforeNewUpdates) {
  const Layout l = flat();
  ParamStore store = ParamStore::on_heap(l);
  std::vector<float> m(l.size());
  BlockTrainOptions o;
  o.workers = 8;
  o.tau = kUnbounded;
  o.lr = 1e-6f;
  o.every_updates = 100;
  std::uint64_t calls = 0, worst = 0;
  BlockTrainer* trainer = nullptr;
  o.after_updates = [&] {
    ++calls;
    worst = std::max(worst, trainer->updates() - 100 * calls);
  };
  BlockTrainer t(store, m, blocks_of(l), o);
  trainer = &t;
  t.run_epoch(20000, constant(store.size(), 0.0f));
  EXPECT_EQ(calls, 200u);
  EXPECT_LE(worst, 2u * o.workers) << "updates made past the due one before the hook ran";
}

// What `asgd cnn train --average-every 1` does under mpirun, with two
// trainers in one process as the two ranks and a barrier as the allreduce:
// averaging the two models after every update (momentum kept per trainer)
// is synchronous data-parallel SGD, one update with the mean gradient and the
// mean momentum, as one trainer with two workers at tau 0 makes.
TEST(BlockTrainer, AveragingModelsAfterEveryUpdateIsSynchronousDataParallel) {
  const Layout l = flat();
  ParamStore a = ParamStore::on_heap(l), b = ParamStore::on_heap(l), one = ParamStore::on_heap(l);
  std::vector<float> ma(l.size()), mb(l.size()), m1(l.size());
  BlockTrainOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  o.weight_decay = 0.01f;
  o.workers = 2;
  BlockTrainer single(one, m1, blocks_of(l), o);
  single.run_epoch(20, quadratic(l));  // rounds r: batches 2r and 2r + 1

  std::barrier average(2, [&]() noexcept {
    for (std::size_t i = 0; i < l.size(); ++i) a.data()[i] = b.data()[i] = 0.5f * (a.data()[i] + b.data()[i]);
  });
  o.workers = 1;
  o.every_updates = 1;
  o.after_updates = [&] { average.arrive_and_wait(); };
  BlockTrainer ta(a, ma, blocks_of(l), o), tb(b, mb, blocks_of(l), o);
  const auto grad = quadratic(l);
  {
    // "Rank" a trains the even batches, b the odd ones.
    std::jthread rank_b([&] {
      tb.run_epoch(10, [&](std::size_t w, std::size_t r, const float* v, float* g) { return grad(w, 2 * r + 1, v, g); });
    });
    ta.run_epoch(10, [&](std::size_t w, std::size_t r, const float* v, float* g) { return grad(w, 2 * r, v, g); });
  }
  for (std::size_t i = 0; i < l.size(); ++i) {
    EXPECT_EQ(a.data()[i], b.data()[i]) << i;
    EXPECT_NEAR(a.data()[i], one.data()[i], 1e-5) << i;
  }
  // Without the averaging the two models part.
  ParamStore c = ParamStore::on_heap(l);
  std::vector<float> mc(l.size());
  o.every_updates = 0;
  BlockTrainer tc(c, mc, blocks_of(l), o);
  tc.run_epoch(10, [&](std::size_t w, std::size_t r, const float* v, float* g) { return grad(w, 2 * r, v, g); });
  double apart = 0;
  for (std::size_t i = 0; i < l.size(); ++i) apart = std::max(apart, std::abs(double(c.data()[i]) - one.data()[i]));
  EXPECT_GT(apart, 1e-3);
}

}  // namespace
}  // namespace asgd
