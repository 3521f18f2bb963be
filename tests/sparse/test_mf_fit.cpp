// mf::fit, the whole training run as one call: squared MF reaches the planted model's noise floor on generated
// ratings, BPR beats most-popular, the events come in order, a stop ends the run with nothing written, the model
// file reads back, the block grid and the split are as documented, and option errors name the option.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/sparse/mf/fit.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "asgd/sparse/mf/metrics.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/mf/model_file.hpp"

using namespace asgd::sparse::mf;

namespace {

using asgd::testing::message_of;
using asgd::testing::ScratchDir;

Ratings planted(std::size_t ratings, double noise, std::size_t users = 300, std::size_t items = 200) {
  RatingsGeneratorOptions g;
  g.users = users;
  g.items = items;
  g.ratings = ratings;
  g.rank = 4;
  g.noise = noise;
  g.zipf = 0.5;
  return generate_ratings(g);
}

FitOptions squared_options() {
  FitOptions o;
  o.model.factors = 8;
  o.model.l2 = 0.02f;
  o.trainer.workers = 2;
  o.trainer.epochs = 15;
  o.trainer.step_examples = 4096;
  o.trainer.schedule.lr = 0.02f;
  o.test_fraction = 0.1;
  o.validation_fraction = 0.1;
  return o;
}

TEST(MfFit, SquaredReachesNearTheNoiseFloorWithAnErrorEveryEpoch) {
  std::vector<FitEpoch> epochs;
  std::vector<std::string> order;
  FitEvents events;
  events.on_data = [&](const FitSetup& s) {
    order.push_back("data");
    EXPECT_EQ(s.ratings, 30000u);
    EXPECT_NEAR(static_cast<double>(s.trained), 30000 * 0.9 * 0.9, 2);
  };
  events.on_start = [&](const FitSetup& s) {
    order.push_back("start");
    EXPECT_TRUE(s.created);
    EXPECT_EQ(s.examples, s.trained);  // one process trains them all
  };
  events.on_epoch = [&](const FitEpoch& e) {
    order.push_back("epoch");
    epochs.push_back(e);
  };
  asgd::RankGroup one;
  const FitReport r = fit(planted(30000, 0.3), squared_options(), one, events);
  ASSERT_FALSE(r.train.stopped);
  EXPECT_EQ(order.front(), "data");
  EXPECT_EQ(order[1], "start");
  ASSERT_EQ(epochs.size(), 15u);
  EXPECT_EQ(epochs.back().epoch, 15u);
  ASSERT_TRUE(epochs.front().validation_rmse && epochs.back().test_rmse);
  EXPECT_LT(*epochs.back().validation_rmse, *epochs.front().validation_rmse);
  ASSERT_TRUE(r.validation && r.test);
  EXPECT_NEAR(static_cast<double>(r.test->count), 3000, 1);
  EXPECT_DOUBLE_EQ(r.test->rmse, *epochs.back().test_rmse);
  // The planted model's noise is 0.3; the mean alone misses by about 1.1.
  EXPECT_LT(r.test->rmse, 0.6);
  EXPECT_FALSE(r.model_written);
  EXPECT_EQ(r.bins, 0u);  // 27,000 ratings: the automatic order is hogwild's
}

TEST(MfFit, BprBeatsMostPopularOnHeldOutPositives) {
  FitOptions o;
  o.loss = Loss::bpr;
  o.model.factors = 8;
  o.model.l2 = 0.02f;
  o.model.bias_l2 = 0.005f;
  o.trainer.workers = 2;
  o.trainer.epochs = 20;
  o.trainer.step_examples = 4096;
  o.trainer.schedule.lr = 0.05f;
  o.test_fraction = 0.2;
  o.sampled_eval = true;
  // Half of all pairs rated: which items a user likes (rating >= 4) is then mostly the planted preference.
  const FitReport r = fit(planted(75000, 0.3, 500, 300), o);
  ASSERT_TRUE(r.ranking && r.sampled);
  EXPECT_GT(r.held_out, r.positives / 10);
  EXPECT_GT(r.ranking->ours.ndcg, 1.3 * r.ranking->popular.ndcg);
  EXPECT_FALSE(r.sampled->stopped);
  EXPECT_TRUE(r.sampled->by_time);
  EXPECT_GT(r.sampled->ours.hit_rate, r.sampled->popular.hit_rate);
}

TEST(MfFit, TheModelFileReadsBackAsTrained) {
  ScratchDir dir;
  FitOptions o = squared_options();
  o.trainer.epochs = 3;
  o.model_file = dir / "model.bin";
  const Ratings ratings = planted(5000, 0.3);
  const FitReport r = fit(ratings, o);
  ASSERT_TRUE(r.model_written);
  const LoadedModel m = load_model(o.model_file);
  EXPECT_EQ(m.loss, "squared");
  EXPECT_EQ(m.epochs, 3u);
  EXPECT_EQ(m.users.size(), ratings.users.size());
  const ErrorMetrics again = evaluate_errors(*m.store, m.scale, ratings, m.range.lo, m.range.hi, &m.cold);
  EXPECT_LT(again.rmse, 1.0);
}

// A ratings file read for a model maps its ids to the model's rows; ids the model lacks come after them.
TEST(MfFit, RatingsReadForAModelUseItsRows) {
  ScratchDir dir;
  FitOptions o = squared_options();
  o.trainer.epochs = 1;
  o.model_file = dir / "model.bin";
  fit(planted(2000, 0.3), o);
  const LoadedModel m = load_model(o.model_file);
  const std::string known = m.users.name(3), item = m.items.name(0);
  const auto file = dir.file("more.txt", known + " " + item + " 4\nnewcomer " + item + " 2\n");
  const Ratings r = read_ratings_for(m, file, RatingsFormat::libmf);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r.user[0], 3u);
  EXPECT_EQ(r.user[1], m.users.size());
  EXPECT_EQ(r.item[0], 0u);
  EXPECT_EQ(r.users.size(), m.users.size() + 1);
}

// Ranking metrics at k as the CLI prints them.
TEST(MfFit, RankingMetricsReadAsText) {
  RankingMetrics m;
  m.precision = 0.5;
  m.recall = 0.25;
  m.ndcg = 0.125;
  m.map = 1;
  m.hit_rate = 0.75;
  EXPECT_EQ(m.text(5), "precision@5 0.5000 recall@5 0.2500 NDCG@5 0.1250 MAP@5 1.0000 HR@5 0.7500");
}

TEST(MfFit, BprTellsEachEpochsLoss) {
  FitOptions o;
  o.loss = Loss::bpr;
  o.model.factors = 4;
  o.trainer.epochs = 5;
  o.trainer.step_examples = 4096;
  o.trainer.schedule.lr = 0.05f;
  std::vector<FitEpoch> epochs;
  FitEvents events;
  events.on_epoch = [&](const FitEpoch& e) { epochs.push_back(e); };
  asgd::RankGroup one_process;
  const FitReport r = fit(planted(20000, 0.3), o, one_process, events);
  ASSERT_EQ(epochs.size(), 5u);
  for (std::size_t e = 0; e < epochs.size(); ++e) {
    EXPECT_EQ(epochs[e].epoch, e + 1);
    EXPECT_EQ(epochs[e].loss, r.train.epochs[e].loss);
  }
  EXPECT_LT(epochs.back().loss, epochs.front().loss);  // BPR's -ln sigma falls as it learns
}

TEST(MfFit, TrainingGoesOnFromInitialFactorsAndGrowsNewIds) {
  FitOptions o = squared_options();
  o.test_fraction = o.validation_fraction = 0;
  o.trainer.epochs = 8;
  const Ratings ratings = planted(20000, 0.3);
  const FitReport first = fit(ratings, o);
  ASSERT_TRUE(first.model);
  // One more epoch from the trained factors starts where the first run ended, not where a new one starts.
  FitOptions more = o;
  more.trainer.epochs = 1;
  more.initial = &*first.model->store;
  const FitReport again = fit(ratings, more);
  const FitReport fresh = fit(ratings, [&] { FitOptions f = o; f.trainer.epochs = 1; return f; }());
  // Measured: 0.151 after 8 epochs, 0.151 in the epoch from them, 0.183 in a new run's first.
  EXPECT_LT(again.train.epochs[0].loss, 0.9 * fresh.train.epochs[0].loss);
  EXPECT_LT(again.train.epochs[0].loss, 1.05 * first.train.epochs.back().loss);

  // A store with more users keeps the copied rows and its own beyond them.
  const FactorLayout a = FactorLayout::of(first.model->store->layout());
  auto grown = asgd::ParamStore::on_heap(FactorLayout::make(a.users + 3, a.items, a.factors, a.has_user_bias));
  const std::vector<float> before = grown.snapshot();
  copy_factor_rows(*first.model->store, grown);
  const FactorLayout b = FactorLayout::of(grown.layout());
  EXPECT_EQ(grown.load(b.p + 5 * b.stride + 1), first.model->store->load(a.p + 5 * a.stride + 1));
  EXPECT_EQ(grown.load(b.q + 7 * b.stride), first.model->store->load(a.q + 7 * a.stride));
  EXPECT_EQ(grown.load(b.item_bias + 2), first.model->store->load(a.item_bias + 2));
  EXPECT_EQ(grown.load(b.user_bias + 4), first.model->store->load(a.user_bias + 4));
  EXPECT_EQ(grown.load(b.p + a.users * b.stride), before[b.p + a.users * b.stride]);
  // Fewer factors or rows do not fit.
  auto smaller = asgd::ParamStore::on_heap(FactorLayout::make(a.users - 1, a.items, a.factors, a.has_user_bias));
  EXPECT_NE(message_of([&] { copy_factor_rows(*first.model->store, smaller); }).find("does not fit"),
            std::string::npos);
}

TEST(MfFit, TheReportHoldsTheModelTheFileHolds) {
  ScratchDir dir;
  FitOptions o = squared_options();
  o.trainer.epochs = 2;
  o.test_fraction = 0.2;
  o.model_file = dir / "model.bin";
  const FitReport r = fit(planted(5000, 0.3), o);
  ASSERT_TRUE(r.model);
  const LoadedModel m = load_model(o.model_file);
  EXPECT_EQ(r.model->store->snapshot(), m.store->snapshot());
  EXPECT_EQ(r.model->users.size(), m.users.size());
  EXPECT_EQ(r.model->items.name(0), m.items.name(0));
  EXPECT_EQ(r.model->scale.scale, m.scale.scale);
  EXPECT_EQ(r.model->range.hi, m.range.hi);
  EXPECT_EQ(r.model->cold.items, m.cold.items);
  EXPECT_EQ(r.model->epochs, 2u);
}

TEST(MfFit, AStopBeforeTheFirstEpochWritesNothing) {
  ScratchDir dir;
  std::atomic<bool> stop{true};
  FitOptions o = squared_options();
  o.model_file = dir / "model.bin";
  o.stop = &stop;
  const FitReport r = fit(planted(5000, 0.3), o);
  EXPECT_TRUE(r.train.stopped);
  EXPECT_FALSE(r.model_written);
  EXPECT_FALSE(r.test.has_value());
  EXPECT_FALSE(std::filesystem::exists(o.model_file));
}

// Stopped a few steps into epoch 3, a fit that keeps its last epoch holds the model of a run of 2 epochs, byte for
// byte (one worker, a constant rate: the first two epochs are the same steps), and writes no file; without
// keep_last_epoch it holds none.
TEST(MfFit, AStoppedFitKeepsTheModelOfItsLastFinishedEpoch) {
  ScratchDir dir;
  for (const Loss loss : {Loss::squared, Loss::bpr}) {
    FitOptions o = squared_options();
    o.loss = loss;
    o.test_fraction = o.validation_fraction = 0;
    o.trainer.workers = 1;
    o.trainer.step_examples = 512;
    o.trainer.schedule.kind = asgd::ScheduleKind::constant;
    const Ratings ratings = planted(20000, 0.3);
    FitOptions two = o;
    two.trainer.epochs = 2;
    const FitReport expected = fit(ratings, two);
    ASSERT_TRUE(expected.model);

    std::atomic<bool> stop{false};
    std::uint64_t epochs_seen = 0, steps_after = 0;
    FitOptions stopped = o;
    stopped.trainer.epochs = 5;
    stopped.stop = &stop;
    stopped.keep_last_epoch = true;
    stopped.model_file = dir / "model.bin";
    // Three steps into epoch 3: updates of the unfinished epoch have landed when the stop comes.
    stopped.trainer.on_step = [&](std::uint64_t) {
      if (epochs_seen == 2 && ++steps_after == 3) stop.store(true);
    };
    FitEvents events;
    events.on_epoch = [&](const FitEpoch& e) { epochs_seen = e.epoch; };
    asgd::RankGroup one_process;
    const FitReport r = fit(ratings, stopped, one_process, events);
    ASSERT_TRUE(r.train.stopped);
    EXPECT_EQ(steps_after, 3u);
    ASSERT_TRUE(r.model);
    EXPECT_EQ(r.model->epochs, 2u);
    EXPECT_EQ(r.train.state.epoch, 2u);
    EXPECT_EQ(r.model->store->snapshot(), expected.model->store->snapshot());
    EXPECT_EQ(r.model->users.size(), expected.model->users.size());
    EXPECT_FALSE(r.model_written);
    EXPECT_FALSE(std::filesystem::exists(stopped.model_file));

    // The same stop without keep_last_epoch: no model.
    stop.store(false);
    epochs_seen = steps_after = 0;
    stopped.keep_last_epoch = false;
    const FitReport none = fit(ratings, stopped, one_process, events);
    ASSERT_TRUE(none.train.stopped);
    EXPECT_FALSE(none.model);
  }
  // A stop before the first epoch ends keeps none either.
  std::atomic<bool> stop{true};
  FitOptions o = squared_options();
  o.stop = &stop;
  o.keep_last_epoch = true;
  EXPECT_FALSE(fit(planted(5000, 0.3), o).model);
}

// The automatic order is LIBMF's blocks in one process on a set too large for the caches, or where bins are
// given, without a bounded delay; hogwild otherwise.
TEST(MfFit, TheAutomaticOrderIsBlocksOnLargeSetsInOneProcessWithoutABoundedTau) {
  constexpr std::size_t kLarge = BiasedMf::kReshuffleBelow + 1;
  FitOptions o;
  EXPECT_TRUE(block_order(o, false, kLarge));
  EXPECT_FALSE(block_order(o, false, BiasedMf::kReshuffleBelow));  // reshuffled each epoch: hogwild
  EXPECT_FALSE(block_order(o, true, kLarge));                      // several ranks
  o.model.bins = 3;
  EXPECT_TRUE(block_order(o, true, 10));  // bins ask for the grid
  o.model.bins = 0;
  o.trainer.tau = 2;
  EXPECT_FALSE(block_order(o, false, kLarge));
  o.trainer.tau = asgd::kUnbounded;
  o.order = Order::hogwild;
  EXPECT_FALSE(block_order(o, false, kLarge));
  o.order = Order::blocks;
  EXPECT_TRUE(block_order(o, true, 10));
  o.order = Order::automatic;
  o.loss = Loss::bpr;
  EXPECT_FALSE(block_order(o, false, kLarge));
  EXPECT_EQ(parse_order("auto"), Order::automatic);
  EXPECT_EQ(parse_order("hogwild"), Order::hogwild);
  EXPECT_EQ(parse_order("blocks"), Order::blocks);
  EXPECT_EQ(message_of([] { parse_order("grid"); }), "FitOptions::order 'grid': expected auto, hogwild or blocks");
}

TEST(MfFit, TheBlockScheduleTrainsOnTheGridItChose) {
  FitOptions o = squared_options();
  o.order = Order::blocks;
  o.trainer.epochs = 3;
  FitEvents events;
  std::optional<BlockGrid> told;
  events.on_data = [&](const FitSetup& s) { told = s.grid; };
  asgd::RankGroup one;
  const FitReport r = fit(planted(5000, 0.3), o, one, events);
  ASSERT_TRUE(told.has_value());
  EXPECT_EQ(told->bins, 5u);  // 2 x workers + 1
  EXPECT_EQ(r.bins, 5u);
  EXPECT_EQ(r.workers, 2u);
}

TEST(MfFit, BlockGridCutsToTheUsersOrItemsAndKeepsFewerWorkersThanBins) {
  const BlockGrid d = block_grid(0, 4, 1000, 500);
  EXPECT_EQ(d.bins, 9u);
  EXPECT_EQ(d.workers, 4u);
  EXPECT_FALSE(d.cut);
  const BlockGrid asked = block_grid(4, 8, 1000, 500);
  EXPECT_EQ(asked.workers, 3u);  // bins > workers
  const BlockGrid cut = block_grid(0, 8, 7, 500);
  EXPECT_TRUE(cut.cut);
  EXPECT_EQ(cut.bins, 7u);
  EXPECT_EQ(cut.workers, 3u);  // bins > 2 x workers
}

TEST(MfFit, AValidationSetAddsItsIdsAsUntrainedRows) {
  Ratings all;
  all.add("a", "x", 4);
  all.add("b", "y", 3);
  Ratings validation;
  validation.users = all.users;
  validation.items = all.items;
  validation.add("c", "x", 5);
  const RatingSets s = split_sets(all, 0, 0, 1, validation);
  EXPECT_TRUE(s.have_validation);
  EXPECT_EQ(s.train.size(), 2u);
  EXPECT_EQ(s.train.users.size(), 3u);
  Ratings other;
  other.add("z", "w", 1);
  EXPECT_NE(message_of([&] { split_sets(all, 0, 0, 1, other); }).find("validation set: the ratings' ids are not"),
            std::string::npos);
  EXPECT_NE(message_of([&] { split_sets(all, 0, 0.5, 1, validation); }).find("FitOptions::validation_fraction"),
            std::string::npos);
}

TEST(MfFit, OptionErrorsNameTheOption) {
  FitOptions o = squared_options();
  o.test_fraction = 1;
  EXPECT_NE(message_of([&] { fit(planted(1000, 0.3), o); }).find("FitOptions::test_fraction 1: expected 0 <= F < 1"),
            std::string::npos);
  o = squared_options();
  o.loss = Loss::bpr;
  o.validation_fraction = 0;
  o.positive = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(message_of([&] { fit(planted(1000, 0.3), o); }).find("FitOptions::positive nan"), std::string::npos);
  o.positive = 100;
  EXPECT_EQ(message_of([&] { fit(planted(1000, 0.3), o); }), "no rating >= 100 (FitOptions::positive)");
  o = squared_options();
  o.model.scale_ratings = true;
  o.trainer.schedule.lr = 50;
  EXPECT_NE(message_of([&] { fit(planted(1000, 0.3), o); }).find("a step at Schedule::lr 50 overshoots"),
            std::string::npos);
}

// The losses by name, as the CLI's --loss and Python's loss= give them.
TEST(MfFit, LossesAreParsedByName) {
  EXPECT_EQ(parse_loss("squared"), Loss::squared);
  EXPECT_EQ(parse_loss("bpr"), Loss::bpr);
  EXPECT_EQ(message_of([] { parse_loss("hinge"); }), "loss 'hinge': expected squared or bpr");
}

// An option that the loss or the schedule does not use is refused by validate, for any caller, not ignored.
TEST(MfFit, OptionsOfTheOtherLossOrScheduleAreRefused) {
  const auto refusal = [](const std::function<void(FitOptions&)>& set, Loss loss = Loss::squared) {
    FitOptions o = squared_options();
    o.loss = loss;
    if (loss == Loss::bpr) o.validation_fraction = 0;  // squared's alone
    set(o);
    return message_of([&] { o.validate(); });
  };
  EXPECT_EQ(refusal([](FitOptions&) {}), "(no exception)");
  EXPECT_EQ(refusal([](FitOptions&) {}, Loss::bpr), "(no exception)");
  EXPECT_EQ(refusal([](FitOptions& o) { o.validation_fraction = 0.2; }, Loss::bpr),
            "FitOptions::validation_fraction: only with Loss::squared");
  EXPECT_EQ(refusal([](FitOptions& o) { o.model.bins = 3; }, Loss::bpr), "MfOptions::bins: only with Loss::squared");
  EXPECT_EQ(refusal([](FitOptions& o) { o.model.biases = false; }, Loss::bpr),
            "MfOptions::biases: only with Loss::squared");
  EXPECT_EQ(refusal([](FitOptions& o) { o.model.center = false; }, Loss::bpr),
            "MfOptions::center: only with Loss::squared");
  EXPECT_EQ(refusal([](FitOptions& o) { o.model.scale_ratings = true; }, Loss::bpr),
            "MfOptions::scale_ratings: only with Loss::squared");
  EXPECT_EQ(refusal([](FitOptions& o) { o.order = Order::blocks; }, Loss::bpr),
            "FitOptions::order blocks: only with Loss::squared");
  EXPECT_EQ(refusal([](FitOptions& o) { o.trainer.blocks = true; }),
            "TrainerOptions::blocks: fit sets it from FitOptions::order (give blocks)");
  EXPECT_EQ(refusal([](FitOptions& o) { o.positive = 3; }), "FitOptions::positive: only with Loss::bpr");
  EXPECT_EQ(refusal([](FitOptions& o) { o.sampled_eval = true; }), "FitOptions::sampled_eval: only with Loss::bpr");
  EXPECT_EQ(refusal([](FitOptions& o) {
              o.order = Order::blocks;
              o.trainer.tau = 2;
            }).rfind("TrainerOptions::tau: only without FitOptions::order blocks", 0),
            0u);
  constexpr const char* kBinsRefused =
      "MfOptions::bins: only with FitOptions::order blocks, or automatic without a bounded TrainerOptions::tau";
  EXPECT_EQ(refusal([](FitOptions& o) {
              o.order = Order::hogwild;
              o.model.bins = 3;
            }),
            kBinsRefused);
  EXPECT_EQ(refusal([](FitOptions& o) {
              o.trainer.tau = 2;  // automatic is hogwild then
              o.model.bins = 3;
            }),
            kBinsRefused);
  for (const Order order : {Order::automatic, Order::blocks}) {
    EXPECT_EQ(refusal([order](FitOptions& o) {
                o.order = order;
                o.model.bins = 3;
              }),
              "(no exception)");
  }
  EXPECT_EQ(refusal([](FitOptions& o) { o.model.head_first = 8; }),
            "MfOptions::head_first: only with Schedule::row_adagrad (LIBMF's rule)");
  // The engine's options too: fit checks them all before it trains.
  EXPECT_EQ(refusal([](FitOptions& o) {
              o.trainer.schedule.adagrad = true;
              o.trainer.schedule.row_adagrad = true;
            }),
            "Schedule::adagrad and Schedule::row_adagrad: choose one, not both");
}

TEST(MfFit, TheObjectiveIsWhatASegmentKeeps) {
  FitOptions o;
  EXPECT_EQ(objective_settings(o), "--loss squared --l2 0.05 --bias-l2 0.05");
  o.model.biases = false;
  o.model.center = false;
  o.model.scale_ratings = true;
  EXPECT_EQ(objective_settings(o), "--loss squared --l2 0.05 --no-biases on --no-mean on --scale-ratings on");
  o.loss = Loss::bpr;
  EXPECT_EQ(objective_settings(o), "--loss bpr --l2 0.05 --bias-l2 0.05 --positive 4");
}

}  // namespace
