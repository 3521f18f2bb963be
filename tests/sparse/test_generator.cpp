// The synthetic data generator: deterministic, the shape it promises, and
// labels that follow the planted logistic model.
#include "asgd/sparse/generator.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::sparse {
namespace {

GeneratorOptions small_options() {
  GeneratorOptions o;
  o.examples = 20000;
  o.features = 3000;
  o.nnz_per_example = 15;
  o.seed = 42;
  return o;
}

TEST(Generator, SameSeedSameDataOtherSeedOtherData) {
  const auto a = generate_sparse(small_options());
  const auto b = generate_sparse(small_options());
  EXPECT_EQ(a.planted_weights, b.planted_weights);
  EXPECT_EQ(a.data.row_ptr, b.data.row_ptr);
  EXPECT_EQ(a.data.index, b.data.index);
  EXPECT_EQ(a.data.value, b.data.value);
  EXPECT_EQ(a.data.label, b.data.label);

  auto other = small_options();
  other.seed = 43;
  const auto c = generate_sparse(other);
  EXPECT_NE(a.planted_weights, c.planted_weights);
  EXPECT_NE(a.data.index, c.data.index);
}

TEST(Generator, ExamplesHaveExactlyNnzDistinctSortedFeatures) {
  const auto o = small_options();
  const auto g = generate_sparse(o);
  const auto& d = g.data;
  EXPECT_NO_THROW(d.validate());  // ids strictly increasing and below num_features, labels +-1
  ASSERT_EQ(d.rows(), o.examples);
  EXPECT_EQ(d.num_features, o.features);
  EXPECT_EQ(g.planted_weights.size(), o.features);
  for (std::size_t r = 0; r < d.rows(); ++r) {
    ASSERT_EQ(d.row_ptr[r + 1] - d.row_ptr[r], o.nnz_per_example) << r;
  }
  // Every feature is drawn with probability nnz/features per example: about
  // 100 times here; uniformity means no feature is far off that.
  std::vector<int> count(o.features, 0);
  for (auto u : d.index) ++count[u];
  const double expected = static_cast<double>(o.examples) * o.nnz_per_example / o.features;
  for (std::uint32_t u = 0; u < o.features; ++u) {
    EXPECT_GT(count[u], expected * 0.5) << u;
    EXPECT_LT(count[u], expected * 1.5) << u;
  }
  // Values N(0, 1/nnz): squared norm of an example about 1.
  double sum_sq = 0.0;
  for (float v : d.value) sum_sq += static_cast<double>(v) * v;
  EXPECT_NEAR(sum_sq / static_cast<double>(d.rows()), 1.0, 0.03);
}

TEST(Generator, AllFeaturesInEveryExampleWhenNnzEqualsFeatures) {
  GeneratorOptions o;
  o.examples = 50;
  o.features = 8;
  o.nnz_per_example = 8;
  const auto g = generate_sparse(o);
  for (std::size_t r = 0; r < g.data.rows(); ++r) {
    for (std::uint32_t k = 0; k < 8; ++k) EXPECT_EQ(g.data.index[g.data.row_ptr[r] + k], k);
  }
}

// Fraction of examples whose label has the sign of the planted margin.
double agreement(const GeneratedData& g) {
  const auto& d = g.data;
  std::size_t agree = 0;
  for (std::size_t r = 0; r < d.rows(); ++r) {
    double m = 0.0;
    for (auto k = d.row_ptr[r]; k < d.row_ptr[r + 1]; ++k) m += g.planted_weights[d.index[k]] * d.value[k];
    agree += (m >= 0.0) == (d.label[r] > 0.0f);
  }
  return static_cast<double>(agree) / static_cast<double>(d.rows());
}

TEST(Generator, LabelsFollowThePlantedLogisticModel) {
  const auto g = generate_sparse(small_options());
  // With margins about N(0, 1), E[sigmoid(|m|)] is about 0.70: clearly
  // informative, clearly not separable.
  EXPECT_NEAR(agreement(g), 0.70, 0.03);
  std::size_t positive = 0;
  for (float y : g.data.label) positive += y > 0.0f;
  EXPECT_NEAR(static_cast<double>(positive) / static_cast<double>(g.data.rows()), 0.5, 0.03);
}

TEST(Generator, LabelNoiseOnlyFlipsLabels) {
  auto o = small_options();
  const auto clean = generate_sparse(o);
  o.label_noise = 0.2f;
  const auto noisy = generate_sparse(o);
  EXPECT_EQ(clean.data.index, noisy.data.index);
  EXPECT_EQ(clean.data.value, noisy.data.value);
  std::size_t flipped = 0;
  for (std::size_t r = 0; r < clean.data.rows(); ++r) flipped += clean.data.label[r] != noisy.data.label[r];
  EXPECT_NEAR(static_cast<double>(flipped) / static_cast<double>(clean.data.rows()), 0.2, 0.015);
  o.label_noise = 0.5f;  // labels independent of the model
  EXPECT_NEAR(agreement(generate_sparse(o)), 0.5, 0.02);
}

using asgd::testing::message_of;

TEST(Generator, RejectsImpossibleOptions) {
  auto bad = [](auto change) {
    auto o = small_options();
    change(o);
    EXPECT_THROW(generate_sparse(o), InputError);
  };
  bad([](GeneratorOptions& o) { o.examples = 0; });
  bad([](GeneratorOptions& o) { o.features = 0; });
  bad([](GeneratorOptions& o) { o.features = 2147483649u; });
  bad([](GeneratorOptions& o) { o.nnz_per_example = 0; });
  bad([](GeneratorOptions& o) { o.nnz_per_example = o.features + 1; });
  bad([](GeneratorOptions& o) { o.label_noise = -0.1f; });
  bad([](GeneratorOptions& o) { o.label_noise = 1.5f; });
  bad([](GeneratorOptions& o) { o.label_noise = std::nanf(""); });
  // The message names the option and its range.
  auto o = small_options();
  o.nnz_per_example = o.features + 1;
  EXPECT_EQ(message_of([&] { o.validate(); }),
            fmt::format("GeneratorOptions::nnz_per_example {}: expected 1 to GeneratorOptions::features ({})",
                        o.features + 1, o.features));
  o = small_options();
  o.features = 0;
  EXPECT_EQ(message_of([&] { o.validate(); }), "GeneratorOptions::features 0: expected 1 to 2147483648");
}

// Options whose data would not fit in memory are refused before anything is allocated, naming the options and
// the bytes (it was std::bad_alloc, naming nothing).
TEST(Generator, OptionsTooLargeForMemoryAreRefusedNamingThem) {
  GeneratorOptions o;
  o.examples = std::size_t{1} << 50;
  o.features = 1u << 31;
  try {
    generate_sparse(o);
    FAIL() << "generated data of a petabyte";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("GeneratorOptions::features 2147483648 with GeneratorOptions::examples 1125899906842624"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("more than"), std::string::npos) << m;
  }
}

// write_generated: the training file holds generate_sparse's first examples, the test file the next ones of the
// same planted model, both with the ids from first_id.
TEST(Generator, WritesTrainingAndTestExamplesOfOnePlantedModel) {
  const asgd::testing::ScratchDir dir;
  const GeneratorOptions o{.examples = 50, .features = 30, .nnz_per_example = 4, .seed = 7};
  write_generated(o, dir / "train.svm", 20, dir / "test.svm", 1);
  GeneratorOptions all = o;
  all.examples = 70;
  const SparseDataset whole = generate_sparse(all).data;
  const SparseDataset train = read_libsvm(dir / "train.svm"), test = read_libsvm(dir / "test.svm");
  ASSERT_EQ(train.rows(), 50u);
  ASSERT_EQ(test.rows(), 20u);
  EXPECT_EQ(test.label, std::vector<float>(whole.label.begin() + 50, whole.label.end()));
  EXPECT_EQ(train.index[0], whole.index[0] + 1);  // one-based
  EXPECT_EQ(test.index.back(), whole.index.back() + 1);
  write_generated(o, dir / "alone.svm");
  EXPECT_EQ(read_libsvm(dir / "alone.svm").index, std::vector<std::uint32_t>(whole.index.begin(),
                                                                             whole.index.begin() + 50 * 4));
}

}  // namespace
}  // namespace asgd::sparse
