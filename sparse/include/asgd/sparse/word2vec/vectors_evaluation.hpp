// One evaluation of a word-vectors file in one call: the analogies,
// similarity pairs and nearest neighbours asked for (what `asgd w2v-eval` runs).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "asgd/sparse/word2vec/evaluation.hpp"

namespace asgd::sparse::w2v {

struct VectorsEvaluationOptions {
  std::string vectors;                 // word2vec text or binary (detected); "-" reads stdin
  std::string analogies;               // questions-words file; empty: none
  std::size_t restrict_vocab = 30000;  // for the analogies (0: all words)
  std::string similarity;              // WordSim-353-style pairs; empty: none
  std::vector<std::string> neighbours;  // words whose nearest words are asked for
  std::size_t k = 10;                  // neighbours per word
};

struct WordNeighbours {
  std::string word;
  std::vector<std::pair<std::string, float>> nearest;  // best first
};

struct VectorsEvaluation {
  std::size_t words = 0, dim = 0;
  bool binary = false;
  std::optional<AnalogyReport> analogies;      // when asked for
  std::optional<SimilarityReport> similarity;  // when asked for
  std::vector<WordNeighbours> neighbours;      // in the order asked
};

// Reads the request files first (a bad one fails before the vectors, the slow part), then the vectors once (they
// may be a pipe). InputError naming the option for an empty request, k = 0, two inputs on stdin, a file without
// vectors, or a neighbour word not in the vocabulary.
VectorsEvaluation evaluate_vectors(const VectorsEvaluationOptions& options);

}  // namespace asgd::sparse::w2v
