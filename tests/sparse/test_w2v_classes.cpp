// Word classes (word2vec.c's -classes): K-means over word vectors' directions.
#include "asgd/sparse/word2vec/classes.hpp"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../common/scratch_dir.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::sparse::w2v {
namespace {

// n words of `dim` floats: word i points along axis (i % groups), with noise and a length that varies, so only
// directions say which group a word is in.
std::vector<float> planted(std::size_t n, std::size_t dim, std::size_t groups, float noise, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, noise);
  std::uniform_real_distribution<float> length(0.2f, 5.0f);
  std::vector<float> v(n * dim);
  for (std::size_t i = 0; i < n; ++i) {
    const float len = length(rng);
    for (std::size_t d = 0; d < dim; ++d) v[i * dim + d] = len * ((d == i % groups ? 1.0f : 0.0f) + g(rng));
  }
  return v;
}

WordClasses classes_of(const std::vector<float>& v, std::size_t dim, std::size_t k, std::size_t rounds = 10) {
  return word_classes(v.size() / dim, dim, [&](std::size_t i) { return v.data() + i * dim; }, k, rounds);
}

// Checks that each planted group of the first n words (word i in group i % groups) is one class, and returns the
// classes the groups have.
std::set<std::uint32_t> classes_of_groups(const WordClasses& c, std::size_t n, std::size_t groups) {
  std::map<std::size_t, std::set<std::uint32_t>> class_of_group;
  for (std::size_t i = 0; i < n; ++i) class_of_group[i % groups].insert(c.of[i]);
  std::set<std::uint32_t> used;
  for (const auto& [group, classes] : class_of_group) {
    EXPECT_EQ(classes.size(), 1u) << "group " << group;
    used.insert(*classes.begin());
  }
  return used;
}

TEST(WordClasses, PlantedDirectionsAreFoundWhateverTheLengths) {
  constexpr std::size_t n = 600, dim = 16, groups = 4;
  const auto v = planted(n, dim, groups, 0.15f, 1);
  const auto c = classes_of(v, dim, groups);
  ASSERT_EQ(c.of.size(), n);
  EXPECT_TRUE(c.settled);
  EXPECT_LE(c.rounds, 10u);
  EXPECT_EQ(classes_of_groups(c, n, groups).size(), groups);
}

TEST(WordClasses, TheSameForAnyNumberOfThreads) {
  constexpr std::size_t n = 5000, dim = 24;
  const auto v = planted(n, dim, 7, 0.6f, 2);  // noisy: many words near a border
  WordClasses one;
  {
    tbb::global_control single(tbb::global_control::max_allowed_parallelism, 1);
    one = classes_of(v, dim, 40);
  }
  const auto all = classes_of(v, dim, 40);
  EXPECT_EQ(one.of, all.of);
  EXPECT_EQ(one.rounds, all.rounds);
}

TEST(WordClasses, NoClassEndsEmpty) {
  // All words alike: every word's best centre is the first (ties go to the lower class), so each round leaves the
  // other classes empty and refills them with a word each. word2vec.c would return one class.
  constexpr std::size_t n = 10, dim = 3, k = 4;
  std::vector<float> v;
  for (std::size_t i = 0; i < n; ++i) v.insert(v.end(), {1.0f, 2.0f, 3.0f});
  const auto c = classes_of(v, dim, k);
  EXPECT_FALSE(c.settled);
  EXPECT_EQ(c.rounds, 10u);
  EXPECT_GE(c.reseeded, 1u);
  std::vector<std::size_t> size(k);
  for (const auto x : c.of) ++size.at(x);
  for (std::size_t x = 0; x < k; ++x) EXPECT_GE(size[x], 1u) << "class " << x;
  // A class may also be empty from the start's rounds (k = n: a word each).
  const auto each = classes_of(planted(8, 5, 8, 0.05f, 3), 5, 8);
  EXPECT_EQ(std::set<std::uint32_t>(each.of.begin(), each.of.end()).size(), 8u);
}

TEST(WordClasses, AWordWithANaNStaysAndTheOthersAreFound) {
  // A NaN has no best dot, so its word stays in its start class; that class's centre is NaN and takes no other
  // word, and the rest are clustered as without it.
  constexpr std::size_t n = 801, dim = 8, groups = 4;
  auto v = planted(n, dim, groups, 0.1f, 4);
  const std::size_t bad = 800;  // class 800 % 5 = 0 at the start
  v[bad * dim + 3] = std::nanf("");
  const auto c = classes_of(v, dim, groups + 1);
  EXPECT_EQ(c.of[bad], 0u);
  const auto used = classes_of_groups(c, bad, groups);
  EXPECT_EQ(used.size(), groups);
  EXPECT_EQ(used.count(0u), 0u);
}

TEST(WordClasses, BadArgumentsAreRefused) {
  const std::vector<float> v(12, 1.0f);
  EXPECT_THROW(classes_of(v, 3, 0), InputError);
  EXPECT_THROW(classes_of(v, 3, 5), InputError);  // 4 words
  EXPECT_THROW(classes_of(v, 3, 2, 0), InputError);
  EXPECT_THROW(word_classes(0, 3, [&](std::size_t) { return v.data(); }, 1), InputError);
  EXPECT_THROW(word_classes(4, 0, [&](std::size_t) { return v.data(); }, 1), InputError);
}

TEST(WordClasses, WrittenAsWord2vecWritesThem) {
  asgd::testing::ScratchDir dir;
  const std::vector<std::string> words = {"the", "of", "caf\xc3\xa9"};
  const std::vector<std::uint32_t> classes = {0, 12, 3};
  write_word_classes(dir.path() / "c.txt", words, classes);
  std::ifstream in(dir.path() / "c.txt", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "the 0\nof 12\ncaf\xc3\xa9 3\n");
  const std::vector<std::string> spaced = {"a b"};
  const std::vector<std::uint32_t> one = {0};
  EXPECT_THROW(write_word_classes(dir.path() / "d.txt", spaced, one), InputError);
  EXPECT_THROW(write_word_classes(dir.path() / "d.txt", words, one), InputError);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "d.txt"));
}

}  // namespace
}  // namespace asgd::sparse::w2v
