// A word2vec checkpoint's metadata, as `asgd w2v -checkpoint` writes it and
// -resume reads it: one JSON line with the model's shape and how the run
// trained, then the vocabulary as "word count" lines. Words are byte strings
// (maybe not UTF-8, which JSON cannot carry) without whitespace, so these
// lines are safe. The parameters are the checkpoint's (engine/checkpoint.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "asgd/engine/options_record.hpp"

#include "asgd/sparse/word2vec/model.hpp"
#include "asgd/sparse/word2vec/vocabulary.hpp"

namespace asgd::sparse::w2v {

// How the run trained, beside the model's shape.
struct RunInfo {
  float alpha = 0;
  std::uint64_t corpus_tokens = 0;
  std::uint64_t iter = 0;  // the run's epochs: a resume without -iter finishes that run (0: not recorded)
  // How the run updates (a resume without the flag continues with the run's; a resume with another is warned):
  // threads (0: not recorded), policy and tau (empty: not recorded).
  std::size_t threads = 0;
  std::string policy, tau;
  // The vocabulary's min-count and max-vocab (not recorded by an older asgd): a resume may repeat them.
  std::optional<std::size_t> min_count, max_vocab;
};

std::string checkpoint_metadata(const ModelOptions& model, const Vocabulary& vocab, const RunInfo& run);

// How a resumed run (`now`) updates otherwise than the run it continues (`saved`): alpha, threads, policy and tau,
// each where the checkpoint recorded it. Another rate or other updates give another result than an uninterrupted
// run's (threads beyond one reorder the updates; atomic adds round otherwise than racy stores).
std::vector<OptionChange> changed_settings(const RunInfo& saved, const RunInfo& now);

// What a checkpoint's metadata holds. InputError naming `path` for metadata that is not word2vec's or is damaged.
struct SavedRun {
  ModelOptions model;
  Vocabulary vocab;
  RunInfo info;
};
SavedRun read_checkpoint_metadata(const std::string& path, const std::string& metadata);

}  // namespace asgd::sparse::w2v
