// What a rank of a linear fit trains on: its own file for "{rank}", every
// P-th example of one file otherwise, the width fixed by `features`, and the
// regulariser weighted by every rank's counts.
#include "asgd/sparse/linear_training_data.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"

namespace asgd::sparse {
namespace {

using asgd::testing::message_of;

// Rank 1 of 2, whose partner holds the same counts (sum_of_ranks doubles them).
class SecondOfTwo : public RankGroup {
 public:
  int rank() const noexcept override { return 1; }
  int size() const noexcept override { return 2; }
  std::vector<std::size_t> shard(std::size_t n, std::string_view, bool) const override {
    std::vector<std::size_t> odd;
    for (std::size_t i = 1; i < n; i += 2) odd.push_back(i);
    return odd;
  }
  void same_on_all_ranks(std::span<const std::uint64_t> values, std::string_view what) override {
    agreed.emplace_back(std::string(what), std::vector<std::uint64_t>(values.begin(), values.end()));
  }
  void sum_of_ranks(std::span<float> data) override {
    for (float& x : data) x *= 2;
  }
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> agreed;
};

TEST(LinearTrainingData, ARankPathNamesTheRanksOwnFileOnceTheRanksAgree) {
  LinearFitOptions o;
  o.data = "part-{rank}.svm.{rank}";
  o.features = 10;
  SecondOfTwo group;
  EXPECT_EQ(rank_data_path(o, group), "part-1.svm.1");
  ASSERT_EQ(group.agreed.size(), 2u);
  EXPECT_EQ(group.agreed[0].second, (std::vector<std::uint64_t>{1, 10}));
  o.features = 0;
  EXPECT_EQ(message_of([&] { rank_data_path(o, group); }),
            "LinearFitOptions::data with {rank}: give LinearFitOptions::features, the model width every rank shares");
  o.data = "one.svm";
  EXPECT_EQ(rank_data_path(o, group), "one.svm");
}

TEST(LinearTrainingData, OneFileIsShardedAndFeaturesFixTheWidth) {
  const asgd::testing::ScratchDir dir;
  LinearFitOptions o;
  o.data = dir.file("d.svm", "+1 0:1\n-1 1:1\n+1 0:1 1:2\n-1 0:2 1:1\n").string();
  o.features = 5;
  SecondOfTwo group;
  const LinearTrainingData d(o, o.data, group);
  EXPECT_EQ(d.whole().num_examples(), 4u);
  EXPECT_EQ(d.problem().num_examples(), 2u);  // examples 1 and 3
  EXPECT_EQ(d.trained().label, (std::vector<float>{-1, -1}));
  EXPECT_EQ(d.problem().num_features(), 5u);
  EXPECT_EQ(d.all_examples(), 4u);
  o.features = 1;
  EXPECT_EQ(message_of([&] { LinearTrainingData(o, o.data, group); }),
            o.data + ":2:4: feature id 1 is beyond LinearFitOptions::features 1");
}

TEST(LinearTrainingData, OwnFilesWeighTheRegulariserByEveryRanksCounts) {
  const asgd::testing::ScratchDir dir;
  LinearFitOptions o;
  o.data = (dir / "d-{rank}.svm").string();
  o.features = 2;
  o.l2 = 0.1;
  const std::string own = dir.file("d-1.svm", "+1 0:1\n-1 0:1 1:1\n").string();
  SecondOfTwo group;
  const LinearTrainingData d(o, own, group);
  EXPECT_EQ(d.all_examples(), 4u);
  // n l2 / d_u over both ranks' files: 4 x 0.1 / 4 for feature 0, 4 x 0.1 / 2 for feature 1.
  const auto r = d.problem().regulariser_per_feature();
  EXPECT_FLOAT_EQ(r[0], 0.1f);
  EXPECT_FLOAT_EQ(r[1], 0.2f);
}

// Data with no examples names the file, and under several ranks the rank (before: "linear model: the dataset has
// no examples", naming neither).
TEST(LinearTrainingData, NoExamplesNamesTheFileAndTheRank) {
  const asgd::testing::ScratchDir dir;
  LinearFitOptions o;
  o.data = dir.file("empty.svm", "# a comment, no example\n\n").string();
  RankGroup one_process;
  EXPECT_EQ(message_of([&] { LinearTrainingData(o, o.data, one_process); }),
            "LinearFitOptions::data " + o.data + ": no examples to train");
  // Rank 1's own file.
  o.data = (dir / "d-{rank}.svm").string();
  o.features = 2;
  const std::string own = dir.file("d-1.svm", "").string();
  SecondOfTwo group;
  EXPECT_EQ(message_of([&] { LinearTrainingData(o, own, group); }),
            "LinearFitOptions::data " + o.data + ": rank 1's file " + own + " has no examples to train");
  // Rank 1's share of one file (every other example): none of one example.
  o.data = dir.file("one.svm", "+1 0:1\n").string();
  EXPECT_EQ(message_of([&] { LinearTrainingData(o, o.data, group); }),
            "LinearFitOptions::data " + o.data + ": rank 1 of 2 has none of its 1 examples to train");
}

}  // namespace
}  // namespace asgd::sparse
