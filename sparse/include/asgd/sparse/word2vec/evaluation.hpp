// Judging word vectors as their users do: analogy accuracy (word2vec's
// compute-accuracy on a questions-words file), Spearman correlation with
// human similarity scores (WordSim-353 style), and nearest neighbours.
//
// Matching is case-insensitive everywhere: words are compared lowercased
// (ASCII letters only, as compute-accuracy's toupper in the C locale), and
// where the vocabulary holds several spellings of one word (Paris, paris)
// the first, i.e. most frequent, stands for it. Two differences from
// compute-accuracy, both gensim's rules: no spelling of a question's three
// words is an answer (compute-accuracy skips only the first, so "Woman" can
// answer a question about "woman"), and the best answer is taken even when
// every cosine is <= 0 (compute-accuracy then answers nothing). On a
// lowercased corpus (text8) neither changes a score.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "asgd/sparse/word2vec/embeddings.hpp"

namespace asgd::sparse::w2v {

// Unit-length copies of the vectors and a lowercase word -> id map. Zero
// vectors stay zero (cosine 0 with everything).
class EmbeddingIndex {
 public:
  // Takes the embeddings by value: pass an rvalue (std::move) to normalise
  // in place instead of holding two copies of the matrix.
  explicit EmbeddingIndex(Embeddings embeddings);

  std::size_t size() const noexcept { return words_.size(); }
  std::size_t dim() const noexcept { return dim_; }
  const std::string& word(std::size_t id) const noexcept { return words_[id]; }
  std::span<const float> unit(std::size_t id) const noexcept { return {unit_.data() + id * dim_, dim_}; }
  // The unit vectors, size() x dim() row-major.
  std::span<const float> units() const noexcept { return unit_; }

  // Case-insensitive: the most frequent word with this lowercase form.
  std::optional<std::size_t> find(std::string_view word) const;
  // `word` spelt exactly, else as find(). InputError if it is not there.
  std::size_t at(std::string_view word) const;
  // The id that stands for word `id`'s spelling: the first word with the
  // same lowercase form (often `id` itself).
  std::size_t canonical(std::size_t id) const noexcept { return canonical_[id]; }

  // The k words of highest cosine with word `id`, best first, `id` itself
  // left out (fewer than k in a small vocabulary).
  std::vector<std::pair<std::string, float>> nearest(std::size_t id, std::size_t k) const;
  // gensim's most_similar: the k words of highest cosine with the normalised mean of the unit vectors of
  // `positive` (weight +1) and `negative` (weight -1), best first (ties: lower id), those words left out.
  // InputError for no word at all or an id out of range.
  std::vector<std::pair<std::size_t, float>> most_similar(std::span<const std::size_t> positive,
                                                          std::span<const std::size_t> negative, std::size_t k) const;
  // The cosine of words `a` and `b` (0 when either vector is zero); InputError for an id out of range.
  float similarity(std::size_t a, std::size_t b) const;

 private:
  void check_id(std::size_t id) const;
  std::vector<std::string> words_;
  std::size_t dim_ = 0;
  std::vector<float> unit_;
  std::unordered_map<std::string, std::size_t> lower_;  // lowercase -> first id
  std::vector<std::uint32_t> canonical_;
};

std::string ascii_lowercase(std::string_view word);

// ---- analogies ----------------------------------------------------------

// A questions-words file: ": section" lines start sections, every other
// non-blank line is "a b c d" (a is to b as c is to d). Questions before the
// first ": " line belong to a section named "".
struct AnalogySectionQuestions {
  std::string name;
  std::vector<std::array<std::string, 4>> questions;
};
// InputError "FILE:LINE: ..." for a line that is not 4 words, a ": " with no
// name, or a file that cannot be opened.
std::vector<AnalogySectionQuestions> read_analogy_questions(const std::filesystem::path& path);

struct AnalogySection {
  std::string name;
  bool syntactic = false;  // the name starts with "gram"
  std::size_t correct = 0, seen = 0, total = 0;
  double accuracy() const noexcept { return seen ? static_cast<double>(correct) / static_cast<double>(seen) : 0.0; }
};

struct AnalogyReport {
  std::vector<AnalogySection> sections;  // in file order
  std::size_t correct = 0, seen = 0, total = 0;
  std::size_t semantic_correct = 0, semantic_seen = 0;
  std::size_t syntactic_correct = 0, syntactic_seen = 0;
  double semantic_accuracy = 0.0;   // semantic_correct / semantic_seen (0 if none seen)
  double syntactic_accuracy = 0.0;  // syntactic_correct / syntactic_seen
  std::size_t restrict_vocab = 0;   // candidates used: min(restrict, vocabulary)

  double accuracy() const noexcept { return seen ? static_cast<double>(correct) / static_cast<double>(seen) : 0.0; }
  double coverage() const noexcept { return total ? static_cast<double>(seen) / static_cast<double>(total) : 0.0; }
};

// compute-accuracy's protocol: only the first `restrict_vocab` words (0: all)
// count, both as candidates and for coverage; a question is seen when its
// four words are among them; its answer is the candidate of highest cosine
// with b - a + c (unit vectors), a, b and c excluded; it is correct when that
// is d. (compute-accuracy starts its search at cosine 0, so it counts a
// question whose every candidate has cosine <= 0 as wrong; here the argmax
// is taken over all candidates, which differs only in that case.) Sections
// whose name starts with "gram" are syntactic, the others semantic.
// Questions are scored in blocks against all candidates at once (a blocked
// matrix product, AVX2+FMA where the CPU has it, on all cores via TBB).
AnalogyReport evaluate_analogies(const EmbeddingIndex& index, std::span<const AnalogySectionQuestions> questions,
                                 std::size_t restrict_vocab = 30000);
AnalogyReport evaluate_analogies(const EmbeddingIndex& index, const std::filesystem::path& questions,
                                 std::size_t restrict_vocab = 30000);
AnalogyReport evaluate_analogies(const Embeddings& embeddings, const std::filesystem::path& questions,
                                 std::size_t restrict_vocab = 30000);

// ---- similarity ---------------------------------------------------------

struct SimilarityReport {
  double spearman = 0.0;  // NaN with fewer than 2 pairs used or no variation
  std::size_t pairs_used = 0, pairs_total = 0;
};

// A WordSim-353-style file: "word1 word2 score" per line, fields separated by
// tabs or spaces (further fields ignored); '#' starts a comment line; blank
// lines are skipped; the first data line is taken as a header, and skipped,
// when its score is not a number. Pairs with a word missing from the
// vocabulary are counted in pairs_total only. InputError "FILE:LINE: ..." for
// a line with fewer than 3 fields or a score that is not a finite number.
struct SimilarityPair {
  std::string first, second;
  double score = 0.0;
};
std::vector<SimilarityPair> read_similarity_pairs(const std::filesystem::path& path);

SimilarityReport evaluate_similarity(const EmbeddingIndex& index, std::span<const SimilarityPair> pairs);
SimilarityReport evaluate_similarity(const EmbeddingIndex& index, const std::filesystem::path& pairs);
SimilarityReport evaluate_similarity(const Embeddings& embeddings, const std::filesystem::path& pairs);

// Spearman's rank correlation, ties given their average rank (NaN when
// either side has no variation or fewer than 2 values).
double spearman(std::span<const double> x, std::span<const double> y);

// ---- neighbours ---------------------------------------------------------

// The k nearest words by cosine, best first, `word` itself excluded.
// InputError if `word` is not in the vocabulary (see EmbeddingIndex::at).
std::vector<std::pair<std::string, float>> nearest_neighbours(const Embeddings& embeddings, std::string_view word,
                                                              std::size_t k);

namespace detail {

enum class ScoreKernel { automatic, portable };

// For each query q (rows of `queries`, n_queries x dim), the candidate c in
// [0, n_candidates) maximising dot(q, candidates[c]) whose group[c] is none
// of excluded[q] (first such c on ties); n_candidates when none qualifies.
// `group` maps a candidate to the id that stands for its spelling.
std::vector<std::uint32_t> best_candidates(std::span<const float> queries, std::span<const float> candidates,
                                           std::span<const std::uint32_t> group,
                                           std::span<const std::array<std::uint32_t, 3>> excluded, std::size_t dim,
                                           ScoreKernel kernel = ScoreKernel::automatic);

// The same with query q made on demand: make_query(q, out) writes its dim floats to out. Each task makes only
// the queries it scores, so memory is a few tiles' worth per thread, not n_queries x dim (a wide model's
// analogy questions would take gigabytes); make_query is called from several threads at once.
std::vector<std::uint32_t> best_candidates(std::size_t n_queries,
                                           const std::function<void(std::size_t, float*)>& make_query,
                                           std::span<const float> candidates, std::span<const std::uint32_t> group,
                                           std::span<const std::array<std::uint32_t, 3>> excluded, std::size_t dim,
                                           ScoreKernel kernel = ScoreKernel::automatic);

// "avx2+fma" or "portable": what ScoreKernel::automatic runs here.
const char* score_kernel_name();

}  // namespace detail

}  // namespace asgd::sparse::w2v
