// fit_linear: a whole linear training run as one call trains to the
// optimum's neighbourhood, writes a model that scores as it reported, goes
// on from its checkpoint to the uninterrupted result, and names the option
// that is wrong.
#include "asgd/sparse/linear_fit.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../common/limited_child.hpp"
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
  std::vector<ResumeChanges> changes;  // what ready says differs from the checkpoint's run
  events.ready = [&](const LinearFitReady& ready) {
    told.push_back(ready.epoch);
    changes.push_back(ready.changes);
  };
  const LinearFitReport rest = fit_linear(o, one, events);
  EXPECT_EQ(told, std::vector<std::uint64_t>{2});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_FALSE(changes[0].data_differs);
  EXPECT_TRUE(changes[0].options.empty());
  LinearFitOptions faster = o;
  faster.trainer.schedule.lr *= 2;
  fit_linear(faster, one, events);
  ASSERT_EQ(changes.size(), 2u);
  ASSERT_EQ(changes[1].options.size(), 1u);
  EXPECT_NE(changes[1].options[0].key.find("lr"), std::string::npos) << changes[1].options[0].key;
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

// The outputs are checked before any data is read: one that could not be written, one that names an input, stdin
// read twice; each named as the option that gives it.
TEST(LinearFit, OutputsAreCheckedBeforeTheDataIsRead) {
  const ScratchDir dir;
  LinearFitOptions o = generated(dir);
  RankGroup one;
  o.model = (dir / "no-folder/model").string();
  EXPECT_EQ(message_of([&] { fit_linear(o, one); }).rfind("LinearFitOptions::model: " + o.model.string() + ": cannot write", 0),
            0u);
  o.model = o.data;
  EXPECT_EQ(message_of([&] { fit_linear(o, one); }).rfind("LinearFitOptions::model: " + o.data + " is also "
                                                          "LinearFitOptions::data's", 0),
            0u);
  o = generated(dir);
  o.test = dir.file("test.svm", "1 0:1\n").string();
  o.run.checkpoint = o.test;
  EXPECT_EQ(message_of([&] { fit_linear(o, one); }).rfind("TrainingRunOptions::checkpoint: " + o.test + " is also "
                                                          "LinearFitOptions::test's", 0),
            0u);
  o = generated(dir);
  o.data = o.test = "-";
  EXPECT_NE(message_of([&] { fit_linear(o, one); }).find("LinearFitOptions::test"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "test.svm.tmp"));
}

// Examples handed over in memory (as the Python module does) train the weights their file trains, bit for bit, and
// the report keeps them when asked.
TEST(LinearFit, DataInMemoryTrainsTheWeightsOfItsFile) {
  const ScratchDir dir;
  LinearFitOptions o = generated(dir);
  o.keep_weights = true;
  RankGroup one;
  const LinearFitReport from_file = fit_linear(o, one);
  ASSERT_EQ(from_file.weights.size(), 40u);
  o.data = "X";
  const LinearFitReport in_memory = fit_linear(read_libsvm(dir / "train.svm"), o, one);
  EXPECT_EQ(in_memory.weights, from_file.weights);
  EXPECT_EQ(in_memory.train->objective, from_file.train->objective);
  // Not kept unless asked (a copy as large as the model).
  o.keep_weights = false;
  EXPECT_TRUE(fit_linear(read_libsvm(dir / "train.svm"), o, one).weights.empty());
  o.features = 10;
  EXPECT_EQ(message_of([&] { fit_linear(read_libsvm(dir / "train.svm"), o, one); }),
            "LinearFitOptions::features 10: narrower than LinearFitOptions::data X (40 features)");
  o.features = 0;
  o.data = "X{rank}";
  EXPECT_NE(message_of([&] { fit_linear(read_libsvm(dir / "train.svm"), o, one); }).find("{rank} has no file"),
            std::string::npos);
}

// One number in the input no longer sets the allocation: an id far past the others is refused at its line with
// what it would take (before, `1 3:1.5 2147483647:2` allocated 8.6 GB and died of std::bad_alloc naming neither
// file nor line, and an id of 200000000 silently took 1.5 GB), and so is a width past the memory available, from
// the data or asked for. Each fit runs in a child that may take 1 GB more: before, each ended in std::bad_alloc.
TEST(LinearFit, AnIdOrAWidthPastTheMemoryIsRefusedBeforeItIsAllocated) {
  const ScratchDir dir;
  LinearFitOptions o = generated(dir);
  const auto fit = [&o] {
    return asgd::testing::message_in_limited_child(std::uint64_t{1} << 30, [&o] {
      RankGroup one;
      fit_linear(o, one);
    });
  };
  o.data = dir.file("huge.svm", "1 3:1.5 2147483647:2\n").string();
  EXPECT_EQ(fit(), o.data + ":1:9: feature id 2147483647 would make the model 2147483648 features wide, more than the "
                            "134217728 (2^27) a model takes from its data: give LinearFitOptions::features (above "
                            "2147483647) to train a model that wide (25.8 GB to train, 12 bytes a feature), or remap "
                            "the ids");
  o.data = dir.file("wide.svm", "1 3:1.5\n-1 200000000:2\n").string();
  EXPECT_NE(fit().find(o.data + ":2:4: feature id 200000000 would make the model 200000001 features wide"),
            std::string::npos);
  // Within the limit on what the data sets, not within the memory there is.
  o.data = dir.file("big.svm", "1 3:1.5 100000000:2\n").string();
  std::string message = fit();
  EXPECT_EQ(message.rfind(o.data + ":1:9: feature id 100000000: a model of 100000001 features (12 bytes a feature to "
                                   "train) needs 1.2 GB (1200000012 bytes), more than the ",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find("of memory available (RLIMIT_AS, ulimit -v)"), std::string::npos) << message;
  // A width asked for: before the data is read.
  o = generated(dir);
  o.features = 2147483647;
  message = fit();
  EXPECT_EQ(message.rfind("LinearFitOptions::features 2147483647: a model of 2147483647 features (12 bytes a feature "
                          "to train) needs 25.8 GB (25769803764 bytes), more than the ",
                          0),
            0u)
      << message;
}

}  // namespace
}  // namespace asgd::sparse
