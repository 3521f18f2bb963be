#include "asgd/sparse/word2vec/training.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "asgd/engine/checkpoint_lock.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/file_checks.hpp"
#include "asgd/engine/fingerprint.hpp"
#include "asgd/sparse/word2vec/embeddings.hpp"
#include "asgd/sparse/word2vec/resume.hpp"

namespace asgd::sparse::w2v {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Before anything is read: every output can be written and is none of the inputs; standard input is read once at
// most (and never on several ranks, where under mpirun it reaches rank 0 alone: every rank reads the corpus and
// the vocabulary).
void check_files(const Word2VecOptions& o, const RankGroup& group) {
  const std::string read_vocab = o.read_vocab.value_or("");
  if (group.root()) {
    check_output("Word2VecOptions::output", o.output);
    check_output("Word2VecOptions::save_vocab", o.save_vocab);
    check_rewritten_output("Word2VecOptions::checkpoint", o.checkpoint);
    // checkpoint may be the resume file (a run that goes on in one file); nothing else may be shared.
    check_distinct("Word2VecOptions::output", o.output,
                   {{"Word2VecOptions::corpus", o.corpus}, {"Word2VecOptions::read_vocab", read_vocab},
                    {"Word2VecOptions::checkpoint", o.checkpoint}, {"Word2VecOptions::resume", o.resume},
                    {"Word2VecOptions::save_vocab", o.save_vocab}});
    check_distinct("Word2VecOptions::save_vocab", o.save_vocab,
                   {{"Word2VecOptions::corpus", o.corpus}, {"Word2VecOptions::read_vocab", read_vocab},
                    {"Word2VecOptions::checkpoint", o.checkpoint}, {"Word2VecOptions::resume", o.resume}});
    check_distinct("Word2VecOptions::checkpoint", o.checkpoint,
                   {{"Word2VecOptions::corpus", o.corpus}, {"Word2VecOptions::read_vocab", read_vocab}});
    check_one_on_stdout({{"Word2VecOptions::output", o.output}, {"Word2VecOptions::save_vocab", o.save_vocab}});
  }
  check_one_stdin({{"Word2VecOptions::corpus", o.corpus}, {"Word2VecOptions::read_vocab", read_vocab}});
  if (!group.active()) return;
  for (const auto& [name, path] : {std::pair{"Word2VecOptions::corpus", o.corpus},
                                   std::pair{"Word2VecOptions::read_vocab", read_vocab}}) {
    if (reads_stdin(path)) {
      throw InputError(fmt::format("{} {}: under mpirun standard input reaches rank 0 only; give a file every "
                                   "rank can read",
                                   name, path));
    }
  }
}

// Checked before the corpus is read (a 627 MB corpus took 16 s to read before a rate of 0 was refused).
void check_alpha(float alpha) {
  if (!(alpha > 0) || !std::isfinite(alpha))
    throw InputError(fmt::format("Word2VecOptions::alpha {}: expected a finite rate > 0", alpha));
}

void check_classes(const Word2VecOptions& o, std::size_t vocabulary) {
  if (o.classes > vocabulary) {
    throw InputError(fmt::format("Word2VecOptions::classes {}: more classes than the vocabulary's {} words",
                                 o.classes, vocabulary));
  }
}

ModelOptions model_options(const Word2VecOptions& o) {
  ModelOptions m;
  m.cbow = o.cbow.value_or(m.cbow);
  m.dim = o.dim.value_or(m.dim);
  m.window = o.window.value_or(m.window);
  m.negative = o.negative.value_or(m.negative);
  m.hs = o.hs.value_or(m.hs);
  m.sample = o.sample.value_or(m.sample);
  m.batch = o.batch.value_or(batch_applies(m));
  m.validate();
  return m;
}

// What a run starts from: the model's shape, vocabulary and how it updates, from a checkpoint or the options;
// the epochs in all and the starting rate.
struct Plan {
  bool resuming = false;
  ResumedRun from;  // checkpoint and saved: a resume's only
  std::uint64_t epochs = 0;
  float alpha = 0;
};

Plan plan_run(const Word2VecOptions& o) {
  Plan p;
  // The options that need parsing first (a resume without them takes its run's).
  const Consistency consistency = policy_of(o);
  const std::uint64_t tau = tau_of(o);
  if (o.alpha) check_alpha(*o.alpha);
  p.resuming = !o.resume.empty();
  if (p.resuming) {
    p.from = resume_word2vec(o);
  } else {
    p.from.model = model_options(o);
    p.from.workers = workers_of(o);
    p.from.consistency = consistency;
    p.from.tau = tau;
  }
  const RunInfo& saved = p.from.saved;
  // A resume without epochs finishes the checkpointed run's (on its schedule), as alpha defaults to its rate.
  p.epochs = p.resuming && !o.epochs && saved.iter > 0 ? saved.iter : o.epochs.value_or(5);
  p.alpha = o.alpha ? *o.alpha : saved.alpha > 0 ? saved.alpha : (p.from.model.cbow ? 0.05f : 0.025f);
  // Before the parameters are allocated: a checkpoint whose metadata does not describe its own parameters
  // (forged, or from another build) must not size them.
  if (p.resuming && p.from.checkpoint.layout.hash() != Word2Vec::layout_for(p.from.vocab.size(), p.from.model).hash())
    throw InputError(fmt::format("{}: its layout does not match the model", o.resume));
  return p;
}

// Every rank takes the same path: one that returned as finished while the others trained would leave them
// waiting forever for its first round.
void check_plan(const Word2VecOptions& o, const Plan& p, RankGroup& group) {
  const std::uint64_t epochs_done = p.resuming ? p.from.checkpoint.state.epoch : 0;
  if (group.active()) {
    const std::uint64_t plan[] = {p.resuming, epochs_done, p.epochs};
    group.same_on_all_ranks(plan, "Word2VecOptions::resume (1: given)/epochs done/epochs in all (every rank needs "
                                  "the same Word2VecOptions::resume and Word2VecOptions::epochs)");
  }
  if (epochs_done > p.epochs) {
    throw InputError(fmt::format("Word2VecOptions::epochs {}: {} holds {} epochs already; Word2VecOptions::epochs "
                                 "is the run's total (give more, or leave it out to finish the run)",
                                 p.epochs, o.resume, epochs_done));
  }
}

// The input vectors as Embeddings (the rows unpadded), for Word2VecOptions::keep_vectors.
Embeddings embeddings_of(const Vocabulary& vocab, std::size_t dim, const Layout& layout, const float* params) {
  const Tensor& in = layout["input"];
  Embeddings e;
  e.words = vocab.words();
  e.dim = dim;
  e.vectors.resize(vocab.size() * dim);
  for (std::size_t id = 0; id < vocab.size(); ++id)
    std::copy_n(params + in.at(id), dim, e.vectors.data() + id * dim);
  return e;
}

// The vectors (or the word classes) to options.output.
void write_vectors(const Word2VecOptions& o, const Vocabulary& vocab, std::size_t dim, const Layout& layout,
                   const float* params, Word2VecReport& report) {
  if (o.output.empty()) return;
  const Tensor& in = layout["input"];
  const auto row = [&](std::size_t id) { return params + in.at(id); };
  if (o.classes == 0) {
    write_word2vec(o.output, o.binary, vocab.words(), dim, row);
    return;
  }
  const auto began = Clock::now();
  report.classes = word_classes(vocab.size(), dim, row, o.classes);
  write_word_classes(o.output, vocab.words(), report.classes->of);
  report.classes_seconds = seconds_since(began);
}

Word2VecReport report_of(const Plan& p) {
  Word2VecReport r;
  r.model = p.from.model;
  r.vocabulary = p.from.vocab.size();
  r.workers = p.from.workers;
  r.epochs = p.epochs;
  return r;
}

// A resume of a finished run: its vectors as they were (a way to write them again, in another format), with no
// corpus to read; rank 0 writes them.
Word2VecReport finish_resumed(const Word2VecOptions& o, const Plan& p, RankGroup& group,
                              const Word2VecEvents& events) {
  Word2VecReport r = report_of(p);
  const CheckpointData& resumed = p.from.checkpoint;
  r.already_finished = true;
  r.resumed_epochs = resumed.state.epoch;
  r.resumed_run_epochs = p.from.saved.iter;
  // The checkpoint option names where this run's checkpoint goes: the finished one, unless it is that very file.
  std::error_code ec;
  r.checkpoint_copied = !o.checkpoint.empty() && !std::filesystem::equivalent(o.checkpoint, o.resume, ec);
  if (group.root() && !o.save_vocab.empty()) p.from.vocab.save(o.save_vocab);
  if (events.on_trained) events.on_trained(r);
  if (!group.root()) return r;
  write_vectors(o, p.from.vocab, p.from.model.dim, resumed.layout, resumed.params.data(), r);
  if (o.keep_vectors)
    r.vectors = embeddings_of(p.from.vocab, p.from.model.dim, resumed.layout, resumed.params.data());
  if (r.checkpoint_copied) {
    auto finished = ParamStore::on_heap(resumed.layout);
    std::copy(resumed.params.begin(), resumed.params.end(), finished.data());
    save_checkpoint(o.checkpoint, finished, resumed.state, resumed.optimizer_state, resumed.metadata,
                    resumed.optimizer_kind, resumed.row_head);
  }
  return r;
}

// The ranks average one model: the same objective, over shards of one corpus with one vocabulary. The vocabulary
// may come from a checkpoint or read_vocab rather than the corpus: both are compared, the corpus as the words it
// encodes to (sentence by sentence).
void agree_on_corpus(const ModelOptions& m, const Vocabulary& vocab, const EncodedCorpus& corpus, RankGroup& group) {
  std::uint64_t words = kFnv1aStart, text = kFnv1aStart;
  for (std::uint32_t id = 0; id < vocab.size(); ++id)
    words = fnv1a_u64(fnv1a_field(words, vocab.word(id)), vocab.count(id));
  text = fnv1a(text, corpus.tokens.data(), corpus.tokens.size() * sizeof(std::uint32_t));
  text = fnv1a(text, corpus.sentence_begin.data(), corpus.sentence_begin.size() * sizeof(std::uint64_t));
  const auto flag = [](bool b) { return fmt::format("{}", b); };  // "true": as the settings always read
  const std::pair<std::string_view, std::string> settings[] = {
      {"Word2VecOptions::cbow", flag(m.cbow)},
      {"Word2VecOptions::hs", flag(m.hs)},
      {"Word2VecOptions::negative", fmt::format("{}", m.negative)},
      {"Word2VecOptions::window", fmt::format("{}", m.window)},
      {"Word2VecOptions::sample", fmt::format("{}", m.sample)},
      {"Word2VecOptions::batch", flag(m.batch)},
      {"the vocabulary", fmt::format("{} words, digest {:016x}", vocab.size(), words)},
      {"the corpus", fmt::format("{} tokens, digest {:016x}", corpus.stats.tokens, text)}};
  group.same_settings(settings);
}

// The corpus this rank trains, encoded with the vocabulary (counted from it, or read_vocab, for a fresh run);
// every rank reads the whole corpus (one vocabulary, one noise distribution), the ranks agree on the objective,
// and each keeps its shard of the sentences. `start` gets its sizes and the odd input that changes what is
// trained.
EncodedCorpus read_corpus(const Word2VecOptions& o, Plan& p, RankGroup& group, Word2VecStart& start) {
  TokenReader reader(o.corpus);
  CorpusStats counted;
  Vocabulary& vocab = p.from.vocab;
  if (!p.resuming) {
    const VocabOptions vo{o.min_count.value_or(VocabOptions{}.min_count), o.max_vocab.value_or(VocabOptions{}.max_size)};
    vocab = o.read_vocab ? Vocabulary::read(*o.read_vocab, vo, &start.read_vocab_left_out)
                         : count_vocabulary(reader, vo, &counted);
    check_classes(o, vocab.size());  // before the corpus is encoded and trained
  }
  if (!o.save_vocab.empty() && group.root()) vocab.save(o.save_vocab);  // rank 0's, as the vectors
  // Counted here: the tokens it keeps are known (0 from a checkpoint or read_vocab: grown).
  EncodedCorpus corpus = encode_corpus(reader, vocab, counted.kept_tokens);
  start.now.corpus_tokens = corpus.stats.kept_tokens;
  if (group.active()) {
    agree_on_corpus(p.from.model, vocab, corpus, group);
    corpus = shard_sentences(corpus, static_cast<std::size_t>(group.rank()), static_cast<std::size_t>(group.size()));
  }
  start.corpus = corpus.stats;
  start.corpus.vocabulary_prunes = counted.vocabulary_prunes;
  start.vocabulary = vocab.size();
  return corpus;
}

// The engine's options: word2vec.c's linearly decaying rate, a step of ~10,000 words (as word2vec.c's rate
// updates), checkpoints that record the model, its vocabulary and how the run updates.
TrainerOptions trainer_options(const Word2VecOptions& o, const Plan& p, const Word2Vec& model, RunInfo& now) {
  TrainerOptions t;
  t.workers = p.from.workers;
  t.epochs = p.epochs;
  t.seed = o.seed.value_or(1);
  t.consistency = p.from.consistency;
  t.tau = p.from.tau;
  t.step_examples = model.sentences_per_step();
  t.schedule.kind = ScheduleKind::linear;
  t.schedule.lr = p.alpha;
  t.schedule.floor = 1e-4f;
  now.alpha = t.schedule.lr;
  now.iter = t.epochs;
  now.threads = t.workers;
  now.policy = std::string(to_string(t.consistency));
  now.tau = tau_to_string(t.tau);
  // A resumed run keeps the vocabulary options it was made with (those of an older checkpoint are not known).
  const RunInfo& saved = p.from.saved;
  now.min_count = p.resuming ? saved.min_count : std::optional(o.min_count.value_or(VocabOptions{}.min_count));
  now.max_vocab = p.resuming ? saved.max_vocab : std::optional(o.max_vocab.value_or(VocabOptions{}.max_size));
  t.checkpoint_metadata = checkpoint_metadata(p.from.model, p.from.vocab, now);
  return t;
}

// The run: the parameters, progress, checkpoints, the resumed checkpoint (read once, when planned).
TrainingRun open_run(const Word2VecOptions& o, Plan& p, const Word2Vec& model, const Word2VecEvents& events) {
  TrainingRunOptions ro;
  ro.checkpoint = o.checkpoint;
  ro.lock_checkpoint = false;  // held since the start (train_word2vec)
  if (p.resuming) {
    ro.resume = o.resume;
    ro.resumed = std::move(p.from.checkpoint);
  }
  ro.on_progress = events.on_progress;
  return TrainingRun(model.layout(), std::move(ro));
}

// Reads the corpus and trains its epochs; rank 0 writes the vectors unless the run was stopped.
Word2VecReport train_epochs(const Word2VecOptions& o, Plan& p, RankGroup& group, const Word2VecEvents& events,
                            Clock::time_point began) {
  Word2VecReport r = report_of(p);
  Word2VecStart& start = r.start;
  start.resumed = p.resuming;
  start.saved = p.from.saved;
  const EncodedCorpus corpus = read_corpus(o, p, group, start);
  r.vocabulary = start.vocabulary;
  const Word2Vec model(corpus, p.from.vocab, p.from.model);
  start.words_per_sentence = model.words_per_example();
  start.workers = p.from.workers;
  TrainingRun run = open_run(o, p, model, events);
  TrainerOptions t = trainer_options(o, p, model, start.now);
  t.progress_interval_seconds = events.progress_interval_seconds;
  if (events.on_start) events.on_start(start, run);
  run.configure(t);
  group.prepare(t);
  ParamStore& store = run.store();
  Trainer trainer(store, t);
  if (p.resuming) {
    run.load_resumed(trainer);
  } else {
    model.initialize(store, t.seed);
  }
  r.prepare_seconds = seconds_since(began);
  group.start(trainer, store);
  r.train = run_averaged(group, trainer, model, t.epochs);
  if (events.on_trained) events.on_trained(r);
  // Every rank holds the same vectors after the last epoch: rank 0 writes them.
  if (r.train.stopped || !group.root()) return r;
  write_vectors(o, p.from.vocab, p.from.model.dim, store.layout(), std::as_const(store).data(), r);
  if (o.keep_vectors)
    r.vectors = embeddings_of(p.from.vocab, p.from.model.dim, store.layout(), std::as_const(store).data());
  return r;
}

}  // namespace

Word2VecReport train_word2vec(const Word2VecOptions& options, RankGroup& group, const Word2VecEvents& events) {
  const auto began = Clock::now();
  options.validate();
  check_files(options, group);
  // Rank 0 writes the checkpoint (the ranks of a job share the path: TrainingRunOptions::lock_checkpoint): a second
  // run writing it is refused now, before the corpus is read, and this one holds it to the end.
  const CheckpointLock checkpoint_lock = group.root() ? CheckpointLock(options.checkpoint) : CheckpointLock();
  Plan plan = plan_run(options);
  check_plan(options, plan, group);
  if (plan.resuming && plan.from.checkpoint.state.epoch == plan.epochs) return finish_resumed(options, plan, group, events);
  if (options.corpus.empty()) throw InputError("Word2VecOptions::corpus: required to continue training");
  check_alpha(plan.alpha);  // a checkpoint's, when alpha was not given
  return train_epochs(options, plan, group, events, began);
}

std::string Word2VecStart::notes() const {
  std::string notes;
  if (corpus.split_lines > 0) notes += fmt::format("; {} line(s) split at {} words", corpus.split_lines, kMaxSentence);
  if (corpus.truncated_tokens > 0)
    notes += fmt::format("; {} token(s) cut to {} bytes", corpus.truncated_tokens, kMaxTokenBytes);
  if (corpus.vocabulary_prunes > 0) {
    notes += fmt::format("; past {} distinct words the rarest were dropped while counting (word2vec.c's "
                         "ReduceVocab), {} time(s): a rare word may be missing or undercounted",
                         Vocabulary::Counter::kPruneAt, corpus.vocabulary_prunes);
  }
  if (read_vocab_left_out > 0) {
    notes += fmt::format("; {} Word2VecOptions::read_vocab word(s) with \\v, \\f or \\r left out (no token can "
                         "match)",
                         read_vocab_left_out);
  }
  return notes;
}

}  // namespace asgd::sparse::w2v
