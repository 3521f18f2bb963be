// `asgd w2v-eval`: judge word vectors (word2vec text or binary) as word2vec's
// compute-accuracy and the WordSim-353 literature do, and show neighbours.
//
// Output, one report per request, each starting with a line that names it:
//
//   vectors: FILE: V words x D dimensions (binary|text)
//   analogies: accuracy A % (C/S) coverage P % (S/T) semantic A1 % syntactic A2 % restrict R
//   <section>: accuracy A % (C/S)                      (one per section)
//   Total accuracy: A % (C/S)   Semantic accuracy: A1 % (C1/S1)   Syntactic accuracy: A2 % (C2/S2)
//   Questions seen / total: S T   P %
//   similarity: Spearman rho R (P of T pairs)
//   WORD: N1 (0.83), N2 (0.80), ...                    (one per --neighbours word)
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "asgd/engine/errors.hpp"
#include "asgd/sparse/word2vec/embeddings.hpp"
#include "asgd/sparse/word2vec/evaluation.hpp"
#include "cli_common.hpp"

namespace asgd::cli {
namespace {

namespace w2v = sparse::w2v;

struct W2vEvalFlags {
  std::string vectors, analogies, similarity;
  std::size_t restrict_vocab = 30000;
  std::vector<std::string> neighbours;
  std::size_t k = 10;
};

double percent(std::size_t num, std::size_t den) {
  return den ? 100.0 * static_cast<double>(num) / static_cast<double>(den) : 0.0;
}

void print_analogies(const w2v::AnalogyReport& r) {
  fmt::print(
      "analogies: accuracy {:.2f} % ({}/{}) coverage {:.2f} % ({}/{}) semantic {:.2f} % syntactic {:.2f} % "
      "restrict {}\n",
      percent(r.correct, r.seen), r.correct, r.seen, percent(r.seen, r.total), r.seen, r.total,
      percent(r.semantic_correct, r.semantic_seen), percent(r.syntactic_correct, r.syntactic_seen), r.restrict_vocab);
  for (const auto& s : r.sections) {
    fmt::print("{}: accuracy {:.2f} % ({}/{})\n", s.name.empty() ? "(no section)" : s.name, percent(s.correct, s.seen),
               s.correct, s.seen);
  }
  fmt::print(
      "Total accuracy: {:.2f} % ({}/{})   Semantic accuracy: {:.2f} % ({}/{})   "
      "Syntactic accuracy: {:.2f} % ({}/{})\n",
      percent(r.correct, r.seen), r.correct, r.seen, percent(r.semantic_correct, r.semantic_seen), r.semantic_correct,
      r.semantic_seen, percent(r.syntactic_correct, r.syntactic_seen), r.syntactic_correct, r.syntactic_seen);
  fmt::print("Questions seen / total: {} {}   {:.2f} %\n", r.seen, r.total, percent(r.seen, r.total));
}

int run_w2v_eval(const W2vEvalFlags& f) {
  if (f.analogies.empty() && f.similarity.empty() && f.neighbours.empty()) {
    throw InputError("nothing to evaluate: give --analogies, --similarity and/or --neighbours");
  }
  if (f.k == 0) throw InputError("-k 0: expected at least 1 neighbour");
  check_one_stdin({{"--vectors", f.vectors}, {"--analogies", f.analogies}, {"--similarity", f.similarity}});
  // Bad request files fail before the vectors (the slow part) are read.
  std::vector<w2v::AnalogySectionQuestions> questions;
  if (!f.analogies.empty()) questions = w2v::read_analogy_questions(f.analogies);
  std::vector<w2v::SimilarityPair> pairs;
  if (!f.similarity.empty()) pairs = w2v::read_similarity_pairs(f.similarity);

  auto embeddings = w2v::read_word2vec(f.vectors);  // once: --vectors may be a pipe
  const bool binary = embeddings.binary;
  if (embeddings.size() == 0) throw InputError(fmt::format("{}: no word vectors in the file", f.vectors));
  const w2v::EmbeddingIndex index(std::move(embeddings));
  std::vector<std::size_t> neighbour_ids;
  for (const auto& word : f.neighbours) {
    try {
      neighbour_ids.push_back(index.at(word));
    } catch (const InputError& e) {
      throw InputError(fmt::format("--neighbours: {} of {}", e.what(), f.vectors));
    }
  }

  fmt::print("vectors: {}: {} words x {} dimensions ({})\n", f.vectors, index.size(), index.dim(),
             binary ? "binary" : "text");
  if (!f.analogies.empty()) print_analogies(w2v::evaluate_analogies(index, questions, f.restrict_vocab));
  if (!f.similarity.empty()) {
    const auto r = w2v::evaluate_similarity(index, pairs);
    if (r.pairs_used < 2)  // a rank correlation needs two pairs: nan says nothing
      fmt::print("similarity: no Spearman rho: {} of {} pairs have both words in the vocabulary (2 needed)\n",
                 r.pairs_used, r.pairs_total);
    else if (std::isnan(r.spearman))  // spearman(): either side without variation
      fmt::print("similarity: no Spearman rho: the scores or the cosines of the {} pairs used (of {}) are all "
                 "equal\n",
                 r.pairs_used, r.pairs_total);
    else
      fmt::print("similarity: Spearman rho {:.4f} ({} of {} pairs)\n", r.spearman, r.pairs_used, r.pairs_total);
  }
  for (std::size_t w = 0; w < neighbour_ids.size(); ++w) {
    std::string line = f.neighbours[w] + ":";
    const auto near = index.nearest(neighbour_ids[w], f.k);
    for (std::size_t n = 0; n < near.size(); ++n) {
      line += fmt::format("{} {} ({:.2f})", n ? "," : "", near[n].first, near[n].second);
    }
    fmt::print("{}\n", line);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

void add_w2v_eval_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<W2vEvalFlags>();
  auto* cmd = app.add_subcommand("w2v-eval",
                                 "Evaluate word vectors: analogies (compute-accuracy), similarity (Spearman), "
                                 "nearest neighbours");
  cmd->add_option("--vectors", flags->vectors, "Word vectors, word2vec text or binary (detected); - reads stdin")->required();
  cmd->add_option("--analogies", flags->analogies, "Analogy questions file (questions-words.txt format)");
  cmd->add_option("--restrict", flags->restrict_vocab,
                  "Use only the N most frequent words for analogies, as candidates and for coverage (0: all)")
      ->capture_default_str();
  cmd->add_option("--similarity", flags->similarity, "Word pairs with human scores (WordSim-353 format)");
  cmd->add_option("--neighbours", flags->neighbours, "Print the nearest words of WORD[,WORD...]")->delimiter(',');
  cmd->add_option("-k", flags->k, "How many neighbours")->capture_default_str();
  cmd->callback([flags, &exit_code] { exit_code = run_guarded([&] { return run_w2v_eval(*flags); }); });
}

}  // namespace asgd::cli
