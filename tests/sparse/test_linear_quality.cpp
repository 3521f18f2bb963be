// Scoring linear weights: quality_of and score_linear agree with the
// problem's own figures, the gap to L-BFGS's optimum is 0 at the optimum,
// and a model file is scored with its objective unless told another.
#include "asgd/sparse/linear_quality.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/sparse/linear_model_file.hpp"

namespace asgd::sparse {
namespace {

// Five examples of two features; w = (1, -1) classifies three of them right.
SparseDataset five() {
  return parse_libsvm("+1 0:1\n-1 1:1\n+1 0:1 1:2\n-1 0:2 1:1\n+1 0:3\n", "five");
}

TEST(LinearQuality, IsTheProblemsObjectiveAndAccuracy) {
  const SparseDataset data = five();
  const LinearProblem p(data, 0.1);
  const std::vector<float> w = {1, -1};
  const LinearQuality q = quality_of(p, w);
  EXPECT_EQ(q.examples, 5u);
  EXPECT_EQ(q.objective, p.objective(w));
  EXPECT_EQ(q.accuracy, 0.6);
}

TEST(LinearQuality, TheGapAtTheOptimumIsNearZero) {
  const SparseDataset data = five();
  const LinearProblem p(data, 0.1);
  const LbfgsResult opt = solve_lbfgs(p);
  const std::vector<float> w(opt.weights.begin(), opt.weights.end());
  const ReferenceGap gap = reference_gap(p, w);
  EXPECT_NEAR(gap.ours, gap.optimum, 1e-6);
  EXPECT_GT(gap.iterations, 0);
  EXPECT_GT(reference_gap(p, std::vector<float>{1, -1}).ours, gap.optimum + 1e-3);
}

TEST(LinearQuality, ScoringLeavesOutFeaturesTheModelNeverSaw) {
  SparseDataset wider = parse_libsvm("+1 0:1 5:3\n-1 1:1\n+1 0:1 1:2\n-1 0:2 1:1\n+1 0:3\n", "wider");
  const SparseDataset data = five();
  const LinearQuality narrow = quality_of(LinearProblem(data, 0.1), std::vector<float>{1, -1});
  const LinearQuality scored = score_linear(wider, {1, -1}, 0.1, LinearLoss::logistic);
  EXPECT_EQ(scored.objective, narrow.objective);
  EXPECT_EQ(scored.accuracy, narrow.accuracy);
}

TEST(LinearQuality, AModelFileIsScoredWithItsObjectiveUnlessGivenAnother) {
  const asgd::testing::ScratchDir dir;
  write_libsvm(dir / "d.svm", five());
  Layout layout;
  layout.add("weights", {2});
  ParamStore store = ParamStore::on_heap(layout);
  store.data()[0] = 1;
  store.data()[1] = -1;
  save_checkpoint(dir / "m", store, {}, {}, linear_model_metadata(0.5, 2, LinearLoss::hinge));
  LinearEvalOptions o;
  o.data = dir / "d.svm";
  const SparseDataset data = five();
  const std::vector<float> w = {1, -1};
  EXPECT_EQ(evaluate_linear_model(dir / "m", o).objective, LinearProblem(data, 0.5, LinearLoss::hinge).objective(w));
  o.l2 = 0;
  o.loss = LinearLoss::logistic;
  EXPECT_EQ(evaluate_linear_model(dir / "m", o).objective, LinearProblem(data, 0, LinearLoss::logistic).objective(w));
}

// Metadata whose objective is of the wrong kind names the file and the key (before: "a model file's metadata is
// malformed: [json.exception.type_error.302] type must be number, but is string", naming no file).
TEST(LinearQuality, AModelFileWithDamagedMetadataIsNamedWithTheKey) {
  const asgd::testing::ScratchDir dir;
  write_libsvm(dir / "d.svm", five());
  Layout layout;
  layout.add("weights", {2});
  const ParamStore store = ParamStore::on_heap(layout);
  LinearEvalOptions o;
  o.data = dir / "d.svm";
  const std::string malformed = (dir / "m").string() + ": its metadata is malformed: ";
  const std::pair<const char*, std::string> cases[] = {
      {R"({"model": "logistic", "l2": "abc", "features": 2})", malformed + "l2 is \"abc\", not a number"},
      {R"({"model": "linear", "l2": -1, "loss": "hinge"})", malformed + "l2 is -1, expected a finite number >= 0"},
      {R"({"model": "linear", "l2": 0.1, "loss": 5})", malformed + "loss is 5, not a string"},
      {R"({"model": "linear", "l2": 0.1, "loss": "cubic"})",
       malformed + "loss is \"cubic\", expected logistic, squared-hinge or hinge"},
  };
  for (const auto& [metadata, expected] : cases) {
    save_checkpoint(dir / "m", store, {}, {}, metadata);
    const std::string message = asgd::testing::message_of([&] { evaluate_linear_model(dir / "m", o); });
    EXPECT_EQ(message, expected);
    EXPECT_EQ(message.find("json"), std::string::npos) << message;
  }
  // Given the objective, the file's is not read: a damaged one is no matter.
  o.l2 = 0.1;
  o.loss = LinearLoss::hinge;
  EXPECT_EQ(evaluate_linear_model(dir / "m", o).examples, 5u);
}

// Data with no examples is named (before: "linear model: the dataset has no examples").
TEST(LinearQuality, MarginsAreEachExamplesDotProduct) {
  const SparseDataset data = parse_libsvm("1 0:1 2:2\n-1 1:-1\n1\n", "m.svm");
  std::vector<double> margins(3, -7.0);
  const std::vector<float> w{0.5f, 3.0f, -0.25f, 100.0f};  // wider than the data: the rest is not read
  linear_margins(data, w, margins);
  EXPECT_EQ(margins, (std::vector<double>{0.0, -3.0, 0.0}));
  EXPECT_EQ(asgd::testing::message_of([&] { linear_margins(data, std::span(w).first(2), margins); }),
            "the weights: 2 for data 3 features wide");
  EXPECT_EQ(asgd::testing::message_of([&] { linear_margins(data, w, std::span(margins).first(2)); }),
            "the margins: room for 2 of 3 examples");
}

TEST(LinearQuality, DataWithNoExamplesIsNamed) {
  const asgd::testing::ScratchDir dir;
  Layout layout;
  layout.add("weights", {2});
  save_checkpoint(dir / "m", ParamStore::on_heap(layout), {}, {}, linear_model_metadata(0.5, 2, LinearLoss::hinge));
  LinearEvalOptions o;
  o.data = dir.file("empty.svm", "# only a comment\n\n");
  EXPECT_EQ(asgd::testing::message_of([&] { evaluate_linear_model(dir / "m", o); }),
            o.data.string() + ": no examples to score");
}

}  // namespace
}  // namespace asgd::sparse
