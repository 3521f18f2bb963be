// mf::fit with checkpoints: a run stopped after an epoch and resumed from its checkpoint ends with the factors of
// the run that was never stopped (one worker, a constant rate), for either loss, whatever seed the resume is given
// (the checkpoint's goes on); a model file is a checkpoint too;
// a checkpoint of another model or other ratings is refused, naming FitOptions::resume and what differs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/sparse/mf/fit.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "asgd/sparse/mf/model_file.hpp"

using namespace asgd::sparse::mf;

namespace {

using asgd::testing::message_of;
using asgd::testing::ScratchDir;

Ratings planted(std::size_t ratings, std::uint64_t seed = 7) {
  RatingsGeneratorOptions g;
  g.users = 200;
  g.items = 150;
  g.ratings = ratings;
  g.rank = 4;
  g.noise = 0.3;
  g.seed = seed;
  return generate_ratings(g);
}

FitOptions one_worker(Loss loss) {
  FitOptions o;
  o.loss = loss;
  o.model.factors = 8;
  o.model.l2 = 0.02f;
  o.trainer.workers = 1;
  o.trainer.epochs = 5;
  o.trainer.step_examples = 512;
  o.trainer.schedule.lr = 0.02f;
  o.trainer.schedule.kind = asgd::ScheduleKind::constant;
  o.test_fraction = 0.1;
  return o;
}

// Trains `o` and asks for a stop once `epochs` epochs are done; the run stops early in the next one.
FitReport stopped_after(const Ratings& ratings, FitOptions o, std::uint64_t epochs) {
  std::atomic<bool> stop{false};
  o.stop = &stop;
  FitEvents events;
  events.on_epoch = [&](const FitEpoch& e) {
    if (e.epoch == epochs) stop.store(true);
  };
  asgd::RankGroup one_process;
  return fit(ratings, o, one_process, events);
}

// fit, with what on_start told kept in `started`.
FitReport fit_telling_start(const Ratings& ratings, const FitOptions& o, FitSetup& started) {
  FitEvents events;
  events.on_start = [&](const FitSetup& s) { started = s; };
  asgd::RankGroup one_process;
  return fit(ratings, o, one_process, events);
}

TEST(MfResume, AResumedRunEndsWithTheFactorsOfAnUninterruptedOne) {
  ScratchDir dir;
  const Ratings ratings = planted(8000);
  for (const Loss loss : {Loss::squared, Loss::bpr}) {
    FitOptions o = one_worker(loss);
    o.model_file = dir / "straight.model";
    const FitReport straight = fit(ratings, o);
    ASSERT_TRUE(straight.model_written);

    FitOptions first = o;
    first.model_file.clear();
    first.checkpoint = dir / "run.ckpt";
    const FitReport cut = stopped_after(ratings, first, 2);
    ASSERT_TRUE(cut.train.stopped);
    ASSERT_TRUE(std::filesystem::exists(first.checkpoint));
    EXPECT_EQ(load_model(first.checkpoint).epochs, 2u);  // a model file, as mf eval and recommend read it

    FitOptions second = o;
    second.model_file = dir / "resumed.model";
    second.resume = first.checkpoint;
    second.trainer.seed = 99;  // the checkpoint's seed goes on: its shuffles and draws
    FitSetup started;
    const FitReport resumed = fit_telling_start(ratings, second, started);
    ASSERT_FALSE(resumed.train.stopped);
    EXPECT_TRUE(started.resumed);
    EXPECT_EQ(started.resumed_epoch, 2u);
    EXPECT_TRUE(started.changes.empty());
    EXPECT_EQ(resumed.train.epochs.size(), 3u);  // epochs 3 to 5
    ASSERT_TRUE(resumed.model && straight.model);
    EXPECT_EQ(resumed.model->epochs, 5u);
    EXPECT_EQ(resumed.model->store->snapshot(), straight.model->store->snapshot()) << (loss == Loss::bpr ? "bpr" : "squared");
    if (loss == Loss::squared) {
      ASSERT_TRUE(resumed.test && straight.test);
      EXPECT_DOUBLE_EQ(resumed.test->rmse, straight.test->rmse);
    }
  }
}

TEST(MfResume, AModelFileGoesOnAndAChangedOptionIsTold) {
  ScratchDir dir;
  const Ratings ratings = planted(5000);
  FitOptions o = one_worker(Loss::squared);
  o.trainer.epochs = 2;
  o.model_file = dir / "two.model";
  ASSERT_TRUE(fit(ratings, o).model_written);
  FitOptions more = one_worker(Loss::squared);
  more.trainer.epochs = 4;
  more.trainer.schedule.lr = 0.01f;
  more.resume = o.model_file;
  FitSetup started;
  const FitReport r = fit_telling_start(ratings, more, started);
  EXPECT_EQ(r.train.epochs.size(), 2u);
  ASSERT_EQ(started.changes.size(), 1u);
  EXPECT_EQ(started.changes[0].key, "lr");
  EXPECT_EQ(started.changes[0].before, "0.02");
}

TEST(MfResume, AnotherModelOrOtherRatingsAreRefusedByName) {
  ScratchDir dir;
  const Ratings ratings = planted(5000);
  FitOptions o = one_worker(Loss::squared);
  o.trainer.epochs = 1;
  o.checkpoint = dir / "run.ckpt";
  fit(ratings, o);
  FitOptions again = one_worker(Loss::squared);
  again.resume = o.checkpoint;

  FitOptions l2 = again;
  l2.model.l2 = 0.05f;
  const std::string l2_error = message_of([&] { fit(ratings, l2); });
  EXPECT_NE(l2_error.find("FitOptions::resume"), std::string::npos) << l2_error;
  EXPECT_NE(l2_error.find("l2 0.02"), std::string::npos) << l2_error;

  const std::string data_error = message_of([&] { fit(planted(5000, 8), again); });
  EXPECT_NE(data_error.find("FitOptions::resume"), std::string::npos) << data_error;

  FitOptions bpr = one_worker(Loss::bpr);
  bpr.resume = o.checkpoint;
  const std::string loss_error = message_of([&] { fit(ratings, bpr); });
  EXPECT_NE(loss_error.find("loss"), std::string::npos) << loss_error;

  FitOptions biased = one_worker(Loss::squared);
  biased.model.biases = false;
  biased.trainer.epochs = 1;
  biased.checkpoint = dir / "no-biases.ckpt";
  fit(ratings, biased);
  FitOptions with_biases = again;
  with_biases.resume = biased.checkpoint;
  const std::string biases_error = message_of([&] { fit(ratings, with_biases); });
  EXPECT_NE(biases_error.find("MfOptions::biases"), std::string::npos) << biases_error;
  biased.resume = biased.checkpoint;  // without biases their L2 weight may differ
  biased.checkpoint.clear();
  biased.trainer.epochs = 2;
  biased.model.bias_l2 = 0.5f;
  EXPECT_EQ(fit(ratings, biased).train.epochs.size(), 1u);

  FitOptions done = again;
  done.trainer.epochs = 1;  // the checkpoint's epoch: nothing left to train
  EXPECT_EQ(message_of([&] { fit(ratings, done); }),
            fmt::format("FitOptions::resume {}: 1 epochs are done already; TrainerOptions::epochs 1 is the run's "
                        "total (give more)",
                        o.checkpoint.string()));

  FitOptions same_file = again;
  same_file.checkpoint = same_file.model_file = dir / "m";
  EXPECT_NE(message_of([&] { same_file.validate(); }).find("FitOptions::checkpoint"), std::string::npos);
  same_file.checkpoint = dir / "." / "m";  // another spelling of the same file, not written yet
  EXPECT_NE(message_of([&] { same_file.validate(); }).find("FitOptions::checkpoint"), std::string::npos);
}

}  // namespace
