#include "asgd/sparse/word2vec/resume.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>

#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/trainer.hpp"

namespace asgd::sparse::w2v {
namespace {

template <class T>
std::string text(const T& value) {
  return fmt::format("{}", value);
}

// The vocabulary comes from the checkpoint: min_count or max_vocab set to another value than it was made with
// is a mistake, not something to ignore quietly (the same value again is no change).
void check_vocab_options(const Word2VecOptions& o, const RunInfo& saved) {
  const std::pair<const char*, std::pair<std::optional<std::size_t>, std::optional<std::size_t>>> options[] = {
      {"min_count", {o.min_count, saved.min_count}}, {"max_vocab", {o.max_vocab, saved.max_vocab}}};
  for (const auto& [name, values] : options) {
    if (!values.first || values.first == values.second) continue;
    throw InputError(values.second
                         ? fmt::format("Word2VecOptions::{} {}: {} was made with Word2VecOptions::{} {}; the "
                                       "vocabulary comes from the checkpoint on Word2VecOptions::resume",
                                       name, *values.first, o.resume, name, *values.second)
                         : fmt::format("Word2VecOptions::{}: the vocabulary comes from the checkpoint on "
                                       "Word2VecOptions::resume ({} does not record the Word2VecOptions::{} it was "
                                       "made with: leave it out)",
                                       name, o.resume, name));
  }
}

// The same read_vocab file again is no change: read as the run read it, it gives the checkpoint's words and counts.
void check_read_vocab(const Word2VecOptions& o, const SavedRun& r) {
  if (!o.read_vocab) return;
  const Vocabulary again = Vocabulary::read(
      *o.read_vocab, VocabOptions{r.info.min_count.value_or(o.min_count.value_or(VocabOptions{}.min_count)),
                                  r.info.max_vocab.value_or(o.max_vocab.value_or(VocabOptions{}.max_size))});
  bool same_words = again.size() == r.vocab.size();
  for (std::uint32_t id = 0; same_words && id < again.size(); ++id)
    same_words = again.word(id) == r.vocab.word(id) && again.count(id) == r.vocab.count(id);
  if (!same_words) {
    throw InputError(fmt::format("Word2VecOptions::read_vocab {}: not the vocabulary of {}, which the run "
                                 "continues on Word2VecOptions::resume",
                                 *o.read_vocab, o.resume));
  }
}

// The model's shape and seed come from the checkpoint: an option set to another value is refused.
void check_model_options(const Word2VecOptions& o, const ModelOptions& m, std::uint64_t seed) {
  const auto flag = [](bool b) { return b ? 1 : 0; };
  const auto given = [](const auto& value) { return value ? std::optional(text(*value)) : std::nullopt; };
  const auto given_flag = [&](const std::optional<bool>& value) {
    return value ? std::optional(text(flag(*value))) : std::nullopt;
  };
  const std::pair<const char*, std::pair<std::optional<std::string>, std::string>> same[] = {
      {"dim", {given(o.dim), text(m.dim)}},
      {"cbow", {given_flag(o.cbow), text(flag(m.cbow))}},
      {"window", {given(o.window), text(m.window)}},
      {"negative", {given(o.negative), text(m.negative)}},
      {"hs", {given_flag(o.hs), text(flag(m.hs))}},
      {"sample", {given(o.sample), text(m.sample)}},
      {"batch", {given_flag(o.batch), text(flag(m.batch))}},
      {"seed", {given(o.seed), text(seed)}}};
  for (const auto& [name, values] : same) {
    if (values.first && *values.first != values.second) {
      throw InputError(fmt::format("Word2VecOptions::{} {}: {} was trained with {}; the model and its seed come "
                                   "from the checkpoint on Word2VecOptions::resume",
                                   name, *values.first, o.resume, values.second));
    }
  }
}

// How the run updated: kept unless set (a different value is the caller's to warn about).
void updates_of(const Word2VecOptions& o, ResumedRun& r) {
  const RunInfo& saved = r.saved;
  if (!o.workers && saved.threads > 0 && saved.threads <= kMaxWorkers) r.workers = saved.threads;
  if (!o.policy && !saved.policy.empty()) {
    try {
      r.consistency = parse_consistency(saved.policy);
    } catch (const InputError& e) {
      throw InputError(fmt::format("the checkpoint's Word2VecOptions::policy: {}", e.what()));
    }
  }
  if (!o.tau && !saved.tau.empty()) {
    try {
      r.tau = parse_tau(saved.tau);
    } catch (const InputError& e) {
      throw InputError(fmt::format("the checkpoint's Word2VecOptions::tau: {}", e.what()));
    }
  }
}

}  // namespace

ResumedRun resume_word2vec(const Word2VecOptions& o) {
  ResumedRun r;
  r.checkpoint = read_checkpoint(o.resume);
  SavedRun saved = read_checkpoint_metadata(o.resume, r.checkpoint.metadata);
  r.model = saved.model;
  check_vocab_options(o, saved.info);
  check_read_vocab(o, saved);
  check_model_options(o, r.model, r.checkpoint.state.seed);
  r.vocab = std::move(saved.vocab);
  r.saved = std::move(saved.info);
  if (o.classes > r.vocab.size()) {
    throw InputError(fmt::format("Word2VecOptions::classes {}: more classes than the vocabulary's {} words",
                                 o.classes, r.vocab.size()));
  }
  r.workers = workers_of(o);
  r.consistency = policy_of(o);
  r.tau = tau_of(o);
  updates_of(o, r);
  return r;
}

}  // namespace asgd::sparse::w2v
