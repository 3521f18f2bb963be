// check_linear_resume refuses a checkpoint a linear fit cannot continue and
// says which option differs.
#include "asgd/sparse/linear_resume_check.hpp"

#include <gtest/gtest.h>

#include <string>

#include "../common/message_of.hpp"
#include "asgd/sparse/linear_model_file.hpp"

namespace asgd::sparse {
namespace {

using asgd::testing::message_of;

struct ResumeCheck : ::testing::Test {
  ResumeCheck() {
    options.run.resume = "ck";
    options.trainer.epochs = 10;
    saved.metadata = linear_model_metadata(1e-4, 20, LinearLoss::logistic);
    saved.state.epoch = 4;
    saved.state.seed = 3;
  }
  std::string refusal(std::uint64_t features = 20, int ranks = 1) const {
    return message_of([&] { check_linear_resume(saved, "ck", options, features, ranks); });
  }
  LinearFitOptions options;
  CheckpointData saved;
};

TEST_F(ResumeCheck, TheSameRunGoesOn) { EXPECT_EQ(refusal(), "(no exception)"); }

TEST_F(ResumeCheck, AnotherKindOfModelIsSaidFirst) {
  saved.metadata = R"({"model": "mf", "loss": "bpr"})";
  EXPECT_EQ(refusal(), "TrainingRunOptions::resume ck: not a linear model (its kind: mf)");
}

// A kind, width, loss or rank count of the wrong kind names the file and the key (before: a "model" that is no
// string escaped as the JSON library's exception).
TEST_F(ResumeCheck, DamagedMetadataIsNamedWithTheKey) {
  saved.metadata = R"({"model": 5})";
  EXPECT_EQ(refusal(), "TrainingRunOptions::resume ck: not a linear model");
  saved.metadata = R"({"model": "logistic", "features": "20"})";
  EXPECT_EQ(refusal(), "TrainingRunOptions::resume ck: its metadata is malformed: features is \"20\", not a whole "
                       "number");
  saved.metadata = R"({"model": "linear", "loss": ["hinge"]})";
  EXPECT_EQ(refusal(), "TrainingRunOptions::resume ck: its metadata is malformed: loss is [\"hinge\"], not a string");
  saved.metadata = R"({"model": "logistic", "ranks": 1.5})";
  EXPECT_EQ(refusal(), "TrainingRunOptions::resume ck: its metadata is malformed: ranks is 1.5, not a number of "
                       "ranks");
  saved.metadata = R"({"model": "logistic", "options": {"ranks": "2x"}})";
  EXPECT_EQ(refusal(), "TrainingRunOptions::resume ck: its metadata is malformed: options.ranks is \"2x\", not a "
                       "number of ranks");
}

TEST_F(ResumeCheck, AnotherWidthLossOrL2IsAnotherObjective) {
  EXPECT_EQ(refusal(21), "TrainingRunOptions::resume ck: trained with 20 features, and this run has 21 (from "
                         "LinearFitOptions::data's largest feature id): give LinearFitOptions::features 20");
  options.loss = LinearLoss::hinge;
  EXPECT_EQ(refusal(), "TrainingRunOptions::resume ck: trained with LinearFitOptions::loss logistic, not hinge");
  options.loss = LinearLoss::logistic;
  options.l2 = 0.01;
  EXPECT_EQ(refusal(), "TrainingRunOptions::resume ck: trained with LinearFitOptions::l2 0.0001, not 0.01 (give "
                       "LinearFitOptions::l2 0.0001)");
}

// net::MultiRank cuts the sums of another number of ranks again (its metadata then records this job's); a
// group that does not (one process outside it) is refused.
TEST_F(ResumeCheck, AdaGradSumsOfAnotherNumberOfRanksAreRefused) {
  options.trainer.schedule.adagrad = true;
  saved.optimizer_state = {1, 2};
  EXPECT_EQ(refusal(20, 2), "TrainingRunOptions::resume ck: written by an AdaGrad job of 1 rank(s), each with its "
                            "own sums; resume with 1 rank(s), not 2");
  saved.metadata = linear_model_metadata(1e-4, 20, LinearLoss::logistic, {{"ranks", "2"}});
  EXPECT_EQ(refusal(20, 2), "(no exception)");
  EXPECT_EQ(refusal(20, 1), "TrainingRunOptions::resume ck: written by an AdaGrad job of 2 rank(s), each with its "
                            "own sums; resume with 2 rank(s), not 1");
}

TEST_F(ResumeCheck, AChosenSeedMustBeTheRunsAndAnEpochMustBeLeft) {
  options.trainer.seed = 5;
  EXPECT_EQ(refusal(), "(no exception)");  // not chosen: the run's seed is kept
  options.seed_given = true;
  EXPECT_EQ(refusal(), "TrainerOptions::seed 5: ck was trained with seed 3, and a resumed run keeps it");
  options.seed_given = false;
  options.until_epoch = 4;
  EXPECT_EQ(refusal(), "TrainingRunOptions::resume ck: 4 epochs are done already; LinearFitOptions::until_epoch is "
                       "the last to train (give more)");
}

}  // namespace
}  // namespace asgd::sparse
