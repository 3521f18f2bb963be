// fit_linear: a whole linear training run as one call trains to the
// optimum's neighbourhood, writes a model that scores as it reported, goes
// on from its checkpoint to the uninterrupted result, and names the option
// that is wrong.
#include "asgd/sparse/linear_fit.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/sparse/generator.hpp"
#include "asgd/sparse/linear_model_file.hpp"

namespace asgd::sparse {
namespace {

using asgd::testing::message_of;
using asgd::testing::ScratchDir;

// 1000 generated examples of 40 features written to `dir`/train.svm, and options to fit them in one worker.
LinearFitOptions generated(const ScratchDir& dir) {
  write_libsvm(dir / "train.svm",
               generate_sparse({.examples = 1000, .features = 40, .nnz_per_example = 5, .seed = 3}).data);
  LinearFitOptions o;
  o.data = (dir / "train.svm").string();
  o.l2 = 1e-3;
  o.trainer.workers = 1;
  o.trainer.epochs = 20;
  o.trainer.seed = 7;
  o.trainer.schedule.kind = ScheduleKind::linear;
  o.trainer.schedule.lr = 0.5f;
  return o;
}

TEST(LinearFit, TrainsNearTheOptimumAndWritesAModelThatScoresAsReported) {
  const ScratchDir dir;
  LinearFitOptions o = generated(dir);
  o.reference = true;
  o.model = dir / "m.asgd";
  RankGroup one;
  const LinearFitReport r = fit_linear(o, one);
  ASSERT_FALSE(r.training.stopped);
  ASSERT_EQ(r.training.epochs.size(), 20u);
  ASSERT_TRUE(r.train && r.reference);
  EXPECT_EQ(r.train->examples, 1000u);
  EXPECT_GT(r.train->accuracy, 0.6);  // the planted model's labels are drawn: they overlap
  EXPECT_LT((r.reference->ours - r.reference->optimum) / r.reference->optimum, 1e-2);
  ASSERT_TRUE(r.model_written);
  LinearEvalOptions eval;
  eval.data = o.data;
  const LinearQuality again = evaluate_linear_model(o.model, eval);
  EXPECT_DOUBLE_EQ(again.objective, r.train->objective);
  EXPECT_EQ(read_linear_model(o.model).loss(), LinearLoss::logistic);
  EXPECT_EQ(read_linear_model(o.model).l2(), 1e-3);
}

TEST(LinearFit, ResumedFromItsCheckpointEndsWhereAnUninterruptedFitEnds) {
  const ScratchDir dir;
  LinearFitOptions o = generated(dir);
  o.trainer.epochs = 4;
  RankGroup one;
  const LinearFitReport whole = fit_linear(o, one);
  o.until_epoch = 2;
  o.run.checkpoint = dir / "ck";
  ASSERT_EQ(fit_linear(o, one).training.epochs.size(), 2u);
  o.until_epoch = 0;
  o.run.checkpoint.clear();
  o.run.resume = dir / "ck";
  std::vector<std::uint64_t> told;
  LinearFitEvents events;
  events.ready = [&](const LinearFitReady& ready) { told.push_back(ready.epoch); };
  const LinearFitReport rest = fit_linear(o, one, events);
  EXPECT_EQ(told, std::vector<std::uint64_t>{2});
  ASSERT_EQ(rest.training.epochs.size(), 2u);
  EXPECT_EQ(rest.train->objective, whole.train->objective);
  // Another objective is refused, naming the option.
  o.l2 = 1e-2;
  EXPECT_NE(message_of([&] { fit_linear(o, one); }).find("LinearFitOptions::l2 0.001, not 0.01"), std::string::npos);
}

TEST(LinearFit, ErrorsNameTheOption) {
  const ScratchDir dir;
  LinearFitOptions o = generated(dir);
  RankGroup one;
  o.l2 = -1;
  o.data = (dir / "missing.svm").string();  // said after the l2, which needs no data
  EXPECT_EQ(message_of([&] { fit_linear(o, one); }), "LinearFitOptions::l2 -1: expected finite and >= 0");
  o = generated(dir);
  o.loss = LinearLoss::hinge;
  o.reference = true;
  EXPECT_NE(message_of([&] { fit_linear(o, one); }).find("LinearFitOptions::reference: not with LinearFitOptions::loss "
                                                         "hinge"),
            std::string::npos);
  o = generated(dir);
  o.until_epoch = 3;
  EXPECT_NE(message_of([&] { fit_linear(o, one); }).find("LinearFitOptions::until_epoch: give "
                                                         "TrainingRunOptions::checkpoint"),
            std::string::npos);
  o.data = (dir / "train-{rank}.svm").string();
  EXPECT_NE(message_of([&] { fit_linear(o, one); }).find("give LinearFitOptions::features"), std::string::npos);
  // A test file with no examples: said before training, naming it (before: after training, naming nothing).
  o = generated(dir);
  o.test = dir.file("empty.svm", "").string();
  o.run.checkpoint = dir / "ck";
  EXPECT_EQ(message_of([&] { fit_linear(o, one); }), "LinearFitOptions::test " + o.test + ": no examples to score");
  EXPECT_FALSE(std::filesystem::exists(dir / "ck"));
}

}  // namespace
}  // namespace asgd::sparse
