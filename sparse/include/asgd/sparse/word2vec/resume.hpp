// A word2vec checkpoint to go on from, read and checked against the options
// of the run that resumes it: the model and vocabulary come from the checkpoint.
#pragma once

#include <cstddef>
#include <cstdint>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/consistency.hpp"
#include "asgd/sparse/word2vec/checkpoint_file.hpp"
#include "asgd/sparse/word2vec/training_options.hpp"

namespace asgd::sparse::w2v {

struct ResumedRun {
  CheckpointData checkpoint;
  ModelOptions model;
  Vocabulary vocab;
  RunInfo saved;  // how its run trained
  // How this run updates: the options' values, else the saved run's, else the defaults.
  std::size_t workers = 1;
  Consistency consistency = Consistency::racy;
  std::uint64_t tau = 0;
};

// Reads options.resume. InputError naming the option for a model, seed or vocabulary option set to another value
// than the checkpoint's, a read_vocab that is not the checkpoint's vocabulary, more classes than its words, or a
// saved policy or tau that does not parse.
ResumedRun resume_word2vec(const Word2VecOptions& options);

}  // namespace asgd::sparse::w2v
