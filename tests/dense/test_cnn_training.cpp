// Bounded-delay block training of dense networks: tau = 0 equals synchronous
// SGD on the combined batch, the view-age bound holds with 4 workers, every
// mode learns, and a saved model predicts exactly as before.
#include <gtest/gtest.h>

#include <limits>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <utility>

#include "../common/scratch_dir.hpp"
#include "../common/squares.hpp"
#include "asgd/dense/trainer.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::dense {
namespace {

using fixtures::small_net;
using fixtures::squares;

ParamStore fresh(const Network& net, std::uint64_t seed) {
  ParamStore store = ParamStore::on_heap(net.layout());
  std::vector<float> init(store.size());
  net.initialize(init, seed);
  store.assign(init);
  return store;
}

TEST(CnnTraining, SynchronousWorkersEqualOneWorkerOnTheCombinedBatch) {
  const Network net = small_net();
  const Dataset data = squares(1000, 1);  // 1000 = 15 rounds of 2 x 32, then a short one
  TrainOptions o;
  o.epochs = 2;
  o.lr = 0.05f;
  o.momentum = 0.9f;
  o.weight_decay = 1e-4f;
  o.tau = 0;

  ParamStore one = fresh(net, 7), two = fresh(net, 7), four = fresh(net, 7);
  std::vector<float> m1, m2, m4;
  o.workers = 1;
  o.batch = 64;
  train(net, one, m1, data, nullptr, o);
  o.workers = 2;
  o.batch = 32;
  train(net, two, m2, data, nullptr, o);
  o.workers = 4;
  o.batch = 16;
  train(net, four, m4, data, nullptr, o);
  const auto a = one.snapshot(), b = two.snapshot(), c = four.snapshot();
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - c[i])));
  }
  // Only the order of float sums differs.
  EXPECT_LT(worst, 1e-4);
  EXPECT_NE(a, fresh(net, 7).snapshot());  // it did train
}

TEST(CnnTraining, EveryModeLearns) {
  const Network net = small_net();
  const Dataset data = squares(3000, 2), test = squares(500, 3);
  struct Mode {
    std::size_t workers;
    std::uint64_t tau;
    bool compensate;
  };
  for (const Mode m : {Mode{1, 0, false}, Mode{2, 0, false}, Mode{2, 4, true}, Mode{2, kUnbounded, false},
                       Mode{1, 3, false}}) {
    ParamStore store = fresh(net, 11);
    std::vector<float> momentum;
    TrainOptions o;
    o.epochs = 3;
    o.batch = 32;
    o.lr = 0.02f;
    o.workers = m.workers;
    o.tau = m.tau;
    o.compensate = m.compensate;
    const auto reports = train(net, store, momentum, data, &test, o);
    ASSERT_EQ(reports.size(), 3u);
    EXPECT_GT(reports.back().test_accuracy, 0.9) << "workers " << m.workers << " tau " << tau_to_string(m.tau);
    EXPECT_LT(reports.back().mean_loss, reports.front().mean_loss);
  }
}

TEST(CnnTraining, ViewAgeBoundHoldsWithFourWorkers) {
  const Network net = small_net();
  const Dataset data = squares(4000, 4);
  for (std::uint64_t tau : {1u, 3u, 8u}) {
    ParamStore store = fresh(net, 5);
    std::vector<float> momentum;
    TrainOptions o;
    o.epochs = 2;
    o.batch = 8;
    o.workers = 4;
    o.tau = tau;
    o.lr = 0.01f;
    const auto reports = train(net, store, momentum, data, nullptr, o);
    for (const auto& r : reports) {
      // A gradient is computed on a view at most tau updates old. While it
      // is computed, another worker may start at most tau steps behind it and
      // enter steps up to tau ahead: at most 2 tau + 1 updates each.
      EXPECT_LE(r.max_view_age, tau);
      EXPECT_LE(r.max_staleness, tau + 3 * (2 * tau + 1));
    }
    // With one worker the staleness is exactly the view's age: 0, 1, ..., tau.
    o.workers = 1;
    ParamStore solo = fresh(net, 5);
    std::vector<float> m1;
    const auto r1 = train(net, solo, m1, data, nullptr, o);
    EXPECT_EQ(r1.back().max_staleness, tau);
    EXPECT_NEAR(r1.back().mean_staleness, tau / 2.0, 0.05 * static_cast<double>(tau) + 0.01);
  }
}

TEST(CnnTraining, CompensationLowersMomentumThenRate) {
  const Network net = small_net();
  const Dataset data = squares(2000, 6);
  ParamStore store = fresh(net, 9);
  std::vector<float> momentum;
  TrainOptions o;
  o.epochs = 1;
  o.batch = 16;
  o.tau = 16;
  o.compensate = true;
  o.momentum = 0.9f;
  o.lr = 0.01f;
  const auto r = train(net, store, momentum, data, nullptr, o);
  // Mean staleness ~8: implicit momentum 8/9 ~ 0.89 leaves almost none
  // explicit; the rate is kept.
  EXPECT_LT(r.back().momentum, 0.1f);
  EXPECT_GT(r.back().lr, 0.005f);
}

TEST(CnnTraining, CosineScheduleEndsAtZeroAndResumesWhereItStopped) {
  const Network net = small_net();
  const Dataset data = squares(640, 12);
  TrainOptions o;
  o.epochs = 4;
  o.batch = 64;
  o.schedule = TrainOptions::Schedule::cosine;
  ParamStore whole = fresh(net, 2);
  std::vector<float> mw;
  const auto r = train(net, whole, mw, data, nullptr, o);
  EXPECT_NEAR(r[1].lr, 0.5f * o.lr, 1e-6f);  // half way
  EXPECT_NEAR(r.back().lr, 0.0f, 1e-6f);
  // Two epochs, then two more resumed from the same state, equal four.
  ParamStore split = fresh(net, 2);
  std::vector<float> ms;
  o.epochs = 2;
  o.total_epochs = 4;
  train(net, split, ms, data, nullptr, o);
  o.first_epoch = 2;
  const auto rest = train(net, split, ms, data, nullptr, o);
  EXPECT_EQ(rest.back().epoch, 4u);
  // Equal up to float rounding: Eigen's vectorised sums start where the
  // buffer's alignment lets them, so the order of additions can differ.
  const auto a = split.snapshot(), b = whole.snapshot();
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << i;
}

// The after_epoch hook (what averaging under mpirun uses) may replace the
// parameters between epochs: the test accuracy is measured after it, and the
// next epoch starts from what it left, even for a worker whose view tau
// would let it keep (1 worker, tau far above an epoch's updates).
TEST(CnnTraining, AfterEpochHookReplacesTheParameters) {
  const Network net = small_net();
  const Dataset data = squares(640, 13), test = squares(300, 14);
  TrainOptions o;
  o.epochs = 2;
  o.batch = 64;
  o.lr = 0.05f;
  o.tau = 1000000;
  const std::vector<float> other = fresh(net, 99).snapshot();
  ParamStore hooked = fresh(net, 3);
  std::vector<float> mh;
  std::size_t calls = 0;
  o.after_epoch = [&] {
    if (++calls == 1) hooked.assign(other);
  };
  const auto r = train(net, hooked, mh, data, &test, o);
  EXPECT_EQ(calls, 2u);
  // Epoch 1's accuracy is that of the parameters the hook left.
  EXPECT_DOUBLE_EQ(r[0].test_accuracy, evaluate(net, other.data(), test, 1000).accuracy);
  // Epoch 2 equals a run resumed at epoch 2 from `other`, with the momentum epoch 1 left.
  ParamStore baseline = fresh(net, 3);  // its momentum is the hooked run's after epoch 1
  std::vector<float> mb;
  TrainOptions one = o;
  one.after_epoch = {};
  one.epochs = 1;
  train(net, baseline, mb, data, nullptr, one);
  ParamStore expect = fresh(net, 99);
  one.first_epoch = 1;
  one.total_epochs = 2;
  train(net, expect, mb, data, nullptr, one);
  const auto a = hooked.snapshot(), b = expect.snapshot();
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << i;
}

TEST(CnnTraining, DivergenceIsARuntimeError) {
  const Network net = small_net();
  const Dataset data = squares(500, 8);
  ParamStore store = fresh(net, 3);
  std::vector<float> momentum;
  TrainOptions o;
  o.lr = 1e6f;
  o.epochs = 3;
  EXPECT_THROW(train(net, store, momentum, data, nullptr, o), RuntimeError);
}

TEST(CnnTraining, BadOptionsAreInputErrors) {
  const Network net = small_net();
  const Dataset data = squares(10, 8);
  ParamStore store = fresh(net, 3);
  std::vector<float> momentum;
  TrainOptions o;
  o.batch = 0;
  EXPECT_THROW(train(net, store, momentum, data, nullptr, o), InputError);
  o = {};
  o.momentum = 1.0f;
  EXPECT_THROW(train(net, store, momentum, data, nullptr, o), InputError);
  o = {};
  Dataset wrong = data;
  wrong.rows = wrong.cols = 4;
  EXPECT_THROW(train(net, store, momentum, wrong, nullptr, o), InputError);
  // As many pixels in another shape (4x16 for 8x8) are not the network's images either, in training or evaluation.
  Dataset reshaped = data;
  reshaped.rows = 4;
  reshaped.cols = 16;
  EXPECT_THROW(train(net, store, momentum, reshaped, nullptr, o), InputError);
  EXPECT_THROW(train(net, store, momentum, data, &reshaped, o), InputError);
  EXPECT_THROW(evaluate(net, store.snapshot().data(), reshaped), InputError);
}

// A batch beyond the data: one full-batch step an epoch, allocating no more than the images (before: 2^40 x 64
// floats per worker, std::bad_alloc); evaluation with a batch near 2^64 scores every image (before: 0 batches).
TEST(CnnTraining, ABatchLargerThanTheDataIsTheWholeData) {
  const Network net = small_net();
  const Dataset data = squares(50, 12);
  std::vector<float> m1, m2;
  ParamStore whole = fresh(net, 5), huge = fresh(net, 5);
  TrainOptions o;
  o.epochs = 2;
  o.batch = data.size();
  train(net, whole, m1, data, nullptr, o);
  o.batch = std::size_t{1} << 40;
  train(net, huge, m2, data, nullptr, o);
  EXPECT_EQ(whole.snapshot(), huge.snapshot());
  const auto w = whole.snapshot();
  const EvalResult all = evaluate(net, w.data(), data, data.size(), 1);
  const EvalResult wrapped = evaluate(net, w.data(), data, std::numeric_limits<std::size_t>::max(), 4);
  EXPECT_EQ(wrapped.confusion, all.confusion);
  EXPECT_EQ(wrapped.threads, 1u);  // one batch: one thread, whatever was asked
  std::size_t counted = 0;
  for (const auto c : wrapped.confusion) counted += c;
  EXPECT_EQ(counted, data.size());
}

// evaluate_timed: the evaluation's result, once per timed pass, and the median pass's rate; a count of 0 is
// refused with the option's name.
TEST(CnnTraining, TimedEvaluationKeepsEachPassAndTheResult) {
  const Network net = small_net();
  const Dataset test = squares(200, 3);
  const ParamStore store = fresh(net, 2);
  TimedEvalOptions o;
  o.batch = 64;
  o.threads = 2;
  o.repeats = 3;
  const TimedEval t = evaluate_timed(net, store.data(), test, o);
  ASSERT_EQ(t.seconds.size(), 3u);
  for (const double s : t.seconds) EXPECT_GT(s, 0.0);
  EXPECT_EQ(t.result.confusion, evaluate(net, store.data(), test, 64, 2).confusion);
  EXPECT_GT(t.images_per_second(test.size()), 0.0);
  TimedEval fixed;
  fixed.seconds = {4.0, 1.0, 2.0};
  EXPECT_DOUBLE_EQ(fixed.images_per_second(100), 50.0);  // the median pass
  for (const auto& [field, option] : {std::pair{&TimedEvalOptions::batch, "TimedEvalOptions::batch"},
                                      std::pair{&TimedEvalOptions::threads, "TimedEvalOptions::threads"},
                                      std::pair{&TimedEvalOptions::repeats, "TimedEvalOptions::repeats"}}) {
    TimedEvalOptions zero;
    zero.*field = 0;
    try {
      evaluate_timed(net, store.data(), test, zero);
      ADD_FAILURE() << option << " 0 was taken";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), std::string(option) + " 0: expected at least 1");
    }
  }
}

TEST(CnnTraining, SavedModelPredictsIdentically) {
  const Network net = small_net();
  const Dataset data = squares(600, 10), test = squares(300, 11);
  ParamStore store = fresh(net, 4);
  std::vector<float> momentum;
  TrainOptions o;
  o.epochs = 1;
  train(net, store, momentum, data, nullptr, o);
  testing::ScratchDir dir;
  const auto path = dir.path() / "model.ckpt";
  save_checkpoint(path, store, TrainState{1, 600, 1}, momentum, "test");
  ParamStore loaded = ParamStore::on_heap(net.layout());
  std::vector<float> m2;
  load_checkpoint(path, loaded, &m2);
  EXPECT_EQ(m2, momentum);
  Workspace a = net.workspace(300), b = net.workspace(300);
  const float* la = net.forward(store.data(), test.pixels.data(), 300, a);
  const float* lb = net.forward(loaded.data(), test.pixels.data(), 300, b);
  for (std::size_t i = 0; i < 300 * 10; ++i) ASSERT_EQ(la[i], lb[i]) << i;
  const auto ea = evaluate(net, store.data(), test), eb = evaluate(net, loaded.data(), test, 128, 2);
  EXPECT_EQ(ea.confusion, eb.confusion);
}

}  // namespace
}  // namespace asgd::dense
