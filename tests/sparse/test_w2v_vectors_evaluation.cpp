// evaluate_vectors: a word-vectors file judged in one call (analogies,
// similarity, neighbours), and its requests refused by option name.
#include <gtest/gtest.h>

#include <string>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/sparse/word2vec/embeddings.hpp"
#include "asgd/sparse/word2vec/vectors_evaluation.hpp"

using namespace asgd::sparse::w2v;
using asgd::testing::message_of;
using asgd::testing::ScratchDir;

namespace {

// Dimensions: royal, gender, fruit.
std::string royal_vectors(const ScratchDir& dir, bool binary) {
  Embeddings e;
  e.dim = 3;
  e.words = {"man", "woman", "king", "queen", "apple"};
  e.vectors = {0, 1, 0, 0, -1, 0, 1, 1, 0, 1, -1, 0, 0, 0, 1};
  const auto path = dir / (binary ? "v.bin" : "v.txt");
  write_word2vec(path, binary, e);
  return path.string();
}

}  // namespace

TEST(EvaluateVectors, AnswersEveryRequestOfOneFile) {
  ScratchDir dir;
  VectorsEvaluationOptions o;
  o.vectors = royal_vectors(dir, true);
  o.analogies = dir.file("q.txt", ": royal\nman king woman queen\nman king girl queen\n").string();
  o.similarity = dir.file("s.tsv", "man woman 5\nking queen 6\napple king 1\n").string();
  o.neighbours = {"king", "apple"};
  o.k = 2;
  const VectorsEvaluation r = evaluate_vectors(o);
  EXPECT_EQ(r.words, 5u);
  EXPECT_EQ(r.dim, 3u);
  EXPECT_TRUE(r.binary);
  ASSERT_TRUE(r.analogies.has_value());
  EXPECT_EQ(r.analogies->correct, 1u);
  EXPECT_EQ(r.analogies->seen, 1u);
  EXPECT_EQ(r.analogies->total, 2u);
  ASSERT_TRUE(r.similarity.has_value());
  EXPECT_EQ(r.similarity->pairs_used, 3u);
  ASSERT_EQ(r.neighbours.size(), 2u);
  EXPECT_EQ(r.neighbours[0].word, "king");
  ASSERT_EQ(r.neighbours[0].nearest.size(), 2u);
  EXPECT_EQ(r.neighbours[1].word, "apple");

  VectorsEvaluationOptions only;  // what is not asked for is not there
  only.vectors = royal_vectors(dir, false);
  only.neighbours = {"queen"};
  const VectorsEvaluation n = evaluate_vectors(only);
  EXPECT_FALSE(n.binary);
  EXPECT_FALSE(n.analogies.has_value());
  EXPECT_FALSE(n.similarity.has_value());
  ASSERT_EQ(n.neighbours.size(), 1u);
  EXPECT_EQ(n.neighbours[0].nearest.size(), 4u);
}

TEST(EvaluateVectors, ABadRequestNamesItsOption) {
  ScratchDir dir;
  VectorsEvaluationOptions o;
  o.vectors = royal_vectors(dir, false);
  EXPECT_EQ(message_of([&] { evaluate_vectors(o); }),
            "nothing to evaluate: give VectorsEvaluationOptions::analogies, VectorsEvaluationOptions::similarity "
            "and/or VectorsEvaluationOptions::neighbours");
  o.neighbours = {"prince"};
  EXPECT_EQ(message_of([&] { evaluate_vectors(o); }).rfind("VectorsEvaluationOptions::neighbours: ", 0), 0u);
  o.k = 0;
  EXPECT_EQ(message_of([&] { evaluate_vectors(o); }), "VectorsEvaluationOptions::k 0: expected at least 1 neighbour");
}
