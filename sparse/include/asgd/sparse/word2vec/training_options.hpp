// The options of one word2vec training run (gensim's Word2Vec(...) arguments,
// word2vec.c's defaults): the data, the model, how it trains, and its files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "asgd/engine/consistency.hpp"

namespace asgd::sparse::w2v {

struct Word2VecOptions {
  // Text, one sentence per line, whitespace-separated tokens (gzipped or not; "-" reads stdin). May be empty only
  // for a resume of a run that holds all its epochs (its vectors are written again).
  std::string corpus;
  std::optional<std::string> read_vocab;  // the vocabulary from this file ("word count" lines; "-": stdin)

  // The model and its vocabulary. Unset: ModelOptions' and VocabOptions' defaults (seed 1); on resume the
  // checkpoint's, and a value set must be the checkpoint's (InputError naming the option otherwise).
  // batch unset: HogBatch wherever it applies (batch_applies); false trains per pair, as word2vec.c.
  std::optional<bool> cbow, hs, batch;
  std::optional<std::size_t> dim, window, negative;
  std::optional<double> sample;
  std::optional<std::size_t> min_count, max_vocab;
  std::optional<std::uint64_t> seed;

  // How it trains. Unset: the default; on resume the run's own (another value goes on: Word2VecStart has both).
  std::optional<std::size_t> workers;   // all cores
  std::optional<std::uint64_t> epochs;  // 5; on resume the run's total
  std::optional<float> alpha;           // the starting rate, decayed linearly (0.05 CBOW, 0.025 skip-gram)
  std::optional<std::string> policy;    // how updates land: racy (Hogwild!), atomic, locked
  std::optional<std::string> tau;       // bounded delay in steps of ~10,000 words, or inf

  std::string checkpoint;  // parameters, vocabulary and epoch, written after every epoch (may be `resume`)
  std::string resume;      // a checkpoint to go on from, up to `epochs` epochs in all
  std::string save_vocab;  // the vocabulary, "word count" lines
  std::string output;      // the vectors in word2vec's format (text unless `binary`)
  bool binary = false;
  std::size_t classes = 0;  // > 0: "word class" lines by K-means over the vectors instead of the vectors
  // The trained vectors also in Word2VecReport::vectors (rank 0), for a caller that uses them in memory (the
  // Python module's KeyedVectors) rather than reading `output` back.
  bool keep_vectors = false;

  // The options taken alone and together: InputError naming them (no corpus and no resume; workers, epochs out of
  // range; classes with binary, or without output).
  void validate() const;
};

// The policy and tau set, parsed (InputError naming the option), or their defaults: racy, no bound.
Consistency policy_of(const Word2VecOptions& options);
std::uint64_t tau_of(const Word2VecOptions& options);
// The workers set, or one per core.
std::size_t workers_of(const Word2VecOptions& options);

}  // namespace asgd::sparse::w2v
