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
#include <string_view>
#include <utility>

#include "asgd/sparse/word2vec/vectors_evaluation.hpp"
#include "cli_common.hpp"

namespace asgd::cli {
namespace {

namespace w2v = sparse::w2v;

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

constexpr std::pair<std::string_view, std::string_view> kNames[] = {
    {"VectorsEvaluationOptions::vectors", "--vectors"}, {"VectorsEvaluationOptions::analogies", "--analogies"},
    {"VectorsEvaluationOptions::similarity", "--similarity"},
    {"VectorsEvaluationOptions::neighbours", "--neighbours"}, {"VectorsEvaluationOptions::k", "-k"}};

void print_similarity(const w2v::SimilarityReport& r) {
  if (r.pairs_used < 2)  // a rank correlation needs two pairs: nan says nothing
    fmt::print("similarity: no Spearman rho: {} of {} pairs have both words in the vocabulary (2 needed)\n",
               r.pairs_used, r.pairs_total);
  else if (std::isnan(r.spearman))  // spearman(): either side without variation
    fmt::print("similarity: no Spearman rho: the scores or the cosines of the {} pairs used (of {}) are all equal\n",
               r.pairs_used, r.pairs_total);
  else
    fmt::print("similarity: Spearman rho {:.4f} ({} of {} pairs)\n", r.spearman, r.pairs_used, r.pairs_total);
}

int run_w2v_eval(const w2v::VectorsEvaluationOptions& f) {
  const w2v::VectorsEvaluation r = w2v::evaluate_vectors(f);
  fmt::print("vectors: {}: {} words x {} dimensions ({})\n", f.vectors, r.words, r.dim, r.binary ? "binary" : "text");
  if (r.analogies) print_analogies(*r.analogies);
  if (r.similarity) print_similarity(*r.similarity);
  for (const auto& [word, near] : r.neighbours) {
    std::string line = word + ":";
    for (std::size_t n = 0; n < near.size(); ++n) line += fmt::format("{} {} ({:.2f})", n ? "," : "", near[n].first, near[n].second);
    fmt::print("{}\n", line);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

void add_w2v_eval_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<w2v::VectorsEvaluationOptions>();
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
  cmd->callback([flags, &exit_code] { exit_code = run_guarded([&] { return run_w2v_eval(*flags); }, kNames); });
}

}  // namespace asgd::cli
