// word2vec trained in one call, as gensim's Word2Vec(corpus_file=..., ...)
// then wv.save_word2vec_format: the corpus read (sharded over the ranks of a
// RankGroup), a checkpoint resumed, the epochs trained, the vectors written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "asgd/engine/rank_group.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/engine/training_run.hpp"
#include "asgd/sparse/word2vec/checkpoint_file.hpp"
#include "asgd/sparse/word2vec/classes.hpp"
#include "asgd/sparse/word2vec/corpus.hpp"
#include "asgd/sparse/word2vec/embeddings.hpp"
#include "asgd/sparse/word2vec/model.hpp"
#include "asgd/sparse/word2vec/training_options.hpp"

namespace asgd::sparse::w2v {

// What is trained, known once the corpus is read (before the first epoch).
struct Word2VecStart {
  CorpusStats corpus;            // of the sentences this rank trains (vocabulary_prunes: of the counting)
  std::size_t vocabulary = 0;    // words
  double words_per_sentence = 0;  // of this rank's sentences: to turn examples (sentences) into words
  std::size_t workers = 0;
  std::size_t read_vocab_left_out = 0;  // read_vocab's words with \v, \f or \r, which no token matches
  bool resumed = false;
  RunInfo saved;  // how the resumed run trained (resumed only)
  RunInfo now;    // how this one trains (corpus_tokens: the whole corpus's words per epoch)
  // The odd input that changed what was trained, as "; ..." notes (empty: none): lines split at kMaxSentence
  // words, tokens cut to kMaxTokenBytes, the rarest words dropped while counting, read_vocab words left out.
  std::string notes() const;
};

struct Word2VecReport {
  ModelOptions model;
  std::size_t vocabulary = 0;  // words
  std::size_t workers = 0;
  std::uint64_t epochs = 0;    // the run's total, those before a resume included
  // A resumed checkpoint that held all `epochs`: nothing trained; its vectors written, and the checkpoint
  // copied to Word2VecOptions::checkpoint when that is another file (checkpoint_copied).
  bool already_finished = false;
  std::uint64_t resumed_epochs = 0;      // the epochs the resumed checkpoint held
  std::uint64_t resumed_run_epochs = 0;  // the epochs its run was to have (0: not recorded)
  bool checkpoint_copied = false;
  TrainReport train;            // the epochs trained (stopped: by the stop request; nothing is written then)
  double prepare_seconds = 0;     // from the call to the first epoch (reading, most of it)
  Word2VecStart start;  // when a corpus was read
  std::optional<WordClasses> classes;  // with Word2VecOptions::classes, once they are written
  double classes_seconds = 0;
  // With Word2VecOptions::keep_vectors, on rank 0, once trained (not when stopped): the input vectors in
  // vocabulary (frequency) order, the rows `output` holds.
  std::optional<Embeddings> vectors;
};

// What the call tells its caller while it runs; each may be empty. Called on every rank.
struct Word2VecEvents {
  // Before the first epoch. The run's stop request may be taken here (TrainingRun::use_stop_flag): a signal
  // handler installed now leaves the reading interruptible as any program is.
  std::function<void(const Word2VecStart&, TrainingRun&)> on_start;
  ProgressCallback on_progress;  // while an epoch runs
  double progress_interval_seconds = 0.5;
  // Training over (all epochs, stopped, or a finished run resumed), before any file is written.
  std::function<void(const Word2VecReport&)> on_trained;
};

// Trains word2vec on options.corpus with the ranks of `group` (a default RankGroup: this process): every rank
// reads the whole corpus (one vocabulary and noise distribution), the ranks agree on the objective and each trains
// its share of the sentences; rank 0 writes the vocabulary, vectors or classes. InputError naming the option for
// bad options, files that cannot be read or written, a checkpoint that does not fit the options.
Word2VecReport train_word2vec(const Word2VecOptions& options, RankGroup& group, const Word2VecEvents& events = {});

}  // namespace asgd::sparse::w2v
