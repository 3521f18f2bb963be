#include "asgd/sparse/word2vec/vectors_evaluation.hpp"

#include <fmt/format.h>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/file_checks.hpp"

namespace asgd::sparse::w2v {
namespace {

void check_request(const VectorsEvaluationOptions& o) {
  if (o.analogies.empty() && o.similarity.empty() && o.neighbours.empty()) {
    throw InputError(
        "nothing to evaluate: give VectorsEvaluationOptions::analogies, VectorsEvaluationOptions::similarity "
        "and/or VectorsEvaluationOptions::neighbours");
  }
  if (o.k == 0) throw InputError("VectorsEvaluationOptions::k 0: expected at least 1 neighbour");
  check_one_stdin({{"VectorsEvaluationOptions::vectors", o.vectors},
                   {"VectorsEvaluationOptions::analogies", o.analogies},
                   {"VectorsEvaluationOptions::similarity", o.similarity}});
}

// The ids of the neighbour words, before any work on the vectors: an unknown word fails first.
std::vector<std::size_t> neighbour_ids(const EmbeddingIndex& index, const VectorsEvaluationOptions& o) {
  std::vector<std::size_t> ids;
  for (const auto& word : o.neighbours) {
    try {
      ids.push_back(index.at(word));
    } catch (const InputError& e) {
      throw InputError(fmt::format("VectorsEvaluationOptions::neighbours: {} of {}", e.what(), o.vectors));
    }
  }
  return ids;
}

}  // namespace

VectorsEvaluation evaluate_vectors(const VectorsEvaluationOptions& o) {
  check_request(o);
  std::vector<AnalogySectionQuestions> questions;
  if (!o.analogies.empty()) questions = read_analogy_questions(o.analogies);
  std::vector<SimilarityPair> pairs;
  if (!o.similarity.empty()) pairs = read_similarity_pairs(o.similarity);

  VectorsEvaluation r;
  auto embeddings = read_word2vec(o.vectors);  // once: the vectors may be a pipe
  r.binary = embeddings.binary;
  if (embeddings.size() == 0) throw InputError(fmt::format("{}: no word vectors in the file", o.vectors));
  const EmbeddingIndex index(std::move(embeddings));
  const std::vector<std::size_t> ids = neighbour_ids(index, o);
  r.words = index.size();
  r.dim = index.dim();
  if (!o.analogies.empty()) r.analogies = evaluate_analogies(index, questions, o.restrict_vocab);
  if (!o.similarity.empty()) r.similarity = evaluate_similarity(index, pairs);
  for (std::size_t w = 0; w < ids.size(); ++w) r.neighbours.push_back({o.neighbours[w], index.nearest(ids[w], o.k)});
  return r;
}

}  // namespace asgd::sparse::w2v
