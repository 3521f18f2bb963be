// The objective a linear model's shared segment keeps round-trips, a given
// objective wins over it, and a segment without weights is no linear model.
#include "asgd/sparse/linear_segment.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <string>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"

namespace asgd::sparse {
namespace {

using asgd::testing::message_of;

void write_text(const std::filesystem::path& path, const std::string& text) { std::ofstream(path) << text; }

TEST(LinearSegment, TheObjectiveKeptReadsBack) {
  const std::string kept = linear_segment_settings(LinearLoss::squared_hinge, 0.25);
  EXPECT_EQ(kept, "--loss squared-hinge --l2 0.25");
  const LinearSegmentObjective o = linear_segment_objective(kept, "s");
  EXPECT_EQ(o.loss, LinearLoss::squared_hinge);
  EXPECT_EQ(o.l2, 0.25);
  EXPECT_FALSE(linear_segment_objective("", "s").l2);  // another program's segment: parameters only
}

TEST(LinearSegment, WhatIsGivenIsNotReadFromTheSegment) {
  const LinearSegmentObjective given{.loss = LinearLoss::hinge, .l2 = 1.0};
  const LinearSegmentObjective o = linear_segment_objective("--loss bad --l2 x", "s", given);
  EXPECT_EQ(o.loss, LinearLoss::hinge);
  EXPECT_EQ(o.l2, 1.0);
  EXPECT_EQ(message_of([] { linear_segment_objective("--loss logistic --l2 x", "s"); }),
            "segment s: its --l2 'x' is not a number");
  EXPECT_NE(message_of([] { linear_segment_objective("--loss bad", "s"); }).find("the segment's --loss: "),
            std::string::npos);
}

TEST(LinearSegment, ASegmentsWeightsAreReadWithItsObjective) {
  const std::string name = "asgd-test-linear-segment-" + std::to_string(::getpid());
  ParamStore::remove_shared(name);
  Layout layout;
  layout.add("weights", {3});
  CreateOptions create;
  create.settings = linear_segment_settings(LinearLoss::hinge, 0.5);
  {
    ParamStore store = ParamStore::create_shared(name, layout, create);
    store.data()[2] = 4;
    const LinearSegmentModel m = linear_segment_model(store, name);
    EXPECT_EQ(m.weights, (std::vector<float>{0, 0, 4}));
    EXPECT_EQ(m.objective.loss, LinearLoss::hinge);
    EXPECT_EQ(m.objective.l2, 0.5);
  }
  ParamStore::remove_shared(name);
  Layout other;
  other.add("factors", {3});
  EXPECT_EQ(message_of([&] { linear_segment_model(ParamStore::on_heap(other), "h"); }),
            "segment h: not a linear model");
}

TEST(LinearSegment, ALiveSegmentIsScoredAndADivergedOneRefused) {
  const asgd::testing::ScratchDir dir;
  write_text(dir / "d.svm", "1 1:1\n-1 2:1\n");
  const std::string name = "asgd-test-linear-eval-" + std::to_string(::getpid());
  ParamStore::remove_shared(name);
  Layout layout;
  layout.add("weights", {3});
  ParamStore store = ParamStore::create_shared(name, layout, CreateOptions{});  // another program's: no settings
  store.data()[1] = 2;   // feature 1: +1's, right
  store.data()[2] = -2;  // feature 2: -1's, right
  LinearEvalOptions o;
  o.data = dir / "d.svm";
  LinearSegmentEval e = evaluate_linear_segment(name, o);
  EXPECT_TRUE(e.l2_assumed);
  EXPECT_EQ(e.l2, 1e-4);
  EXPECT_EQ(e.quality.examples, 2u);
  EXPECT_EQ(e.quality.accuracy, 1.0);
  o.l2 = 0.5;
  e = evaluate_linear_segment(name, o);
  EXPECT_FALSE(e.l2_assumed);
  EXPECT_EQ(e.l2, 0.5);
  store.data()[2] = std::nanf("");
  EXPECT_NE(message_of([&] { evaluate_linear_segment(name, o); })
                .find("segment '" + name + "': parameter 2 is nan: a run that trained into it diverged"),
            std::string::npos);
  ParamStore::remove_shared(name);
}

}  // namespace
}  // namespace asgd::sparse
