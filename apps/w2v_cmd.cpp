// `asgd w2v`: word2vec with word2vec.c's flags and defaults, trained by the
// engine (Hogwild! by default). Flags are single-dash as in word2vec.c
// (`-train FILE -output FILE ...`); `--flag` works too.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/fingerprint.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/row_ops.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/sparse/word2vec/checkpoint_file.hpp"
#include "asgd/sparse/word2vec/classes.hpp"
#include "asgd/sparse/word2vec/corpus.hpp"
#include "asgd/sparse/word2vec/embeddings.hpp"
#include "asgd/sparse/word2vec/model.hpp"
#include "cli_common.hpp"
#include "distributed.hpp"

namespace asgd::cli {
namespace {

using namespace asgd::sparse::w2v;

// word2vec.c's flags, defaults included, plus asgd's engine flags.
struct W2vFlags {
  std::string train, output, save_vocab, read_vocab, checkpoint, resume;
  std::size_t size = 100, window = 5, negative = 5, min_count = 5, max_vocab = 0, classes = 0;
  std::size_t threads = std::max(1u, std::thread::hardware_concurrency());
  std::uint64_t iter = 5, seed = 1;
  double sample = 1e-3;
  std::optional<float> alpha;  // 0.05 for CBOW, 0.025 for skip-gram
  int hs = 0, cbow = 1, binary = 0, batch = 0;
  std::string policy = "racy", tau = "inf";
  bool quiet = false;
  DistributedFlags dist;
  std::set<std::string> given;  // flags on the command line, for -resume's checks
};

const char* kUsage = R"(usage: asgd w2v -train FILE [options]   (FILE may be - for stdin)
  -train FILE        text, one sentence per line, whitespace-separated tokens (gzipped or not; - is stdin)
  -output FILE       word vectors (word2vec format; text unless -binary 1)
  -size N            vector dimension (100)
  -window N          context words each side, shrunk at random per word (5)
  -sample T          subsample words with frequency above T (1e-3; 0 = off)
  -hs 0|1            hierarchical softmax (0)
  -negative N        negative samples (5; 0 = none)
  -threads N         workers (all cores)
  -iter N            epochs (5)
  -min-count N       drop words seen fewer times (5)
  -max-vocab N       keep only the N most frequent words (0 = all)
  -alpha A           starting learning rate, decayed linearly (0.05 CBOW, 0.025 skip-gram)
  -cbow 0|1          CBOW (1) or skip-gram (0)
  -binary 0|1        write vectors in binary (0)
  -classes N         write N word classes instead of the vectors: K-means over the vectors, "word class" lines
                     as word2vec.c writes them (0 = the vectors)
  -batch 0|1         HogBatch: skip-gram negatives shared across a window (0)
  -save-vocab FILE   write the vocabulary ("word count" lines)
  -read-vocab FILE   use this vocabulary instead of counting (- reads stdin)
  -seed N            seed for initialisation, subsampling, windows, negatives (1)
  -policy P          how updates land: racy (Hogwild!), atomic, locked (racy)
  -tau T             bounded delay in steps of ~10,000 words (inf)
  -checkpoint FILE   save parameters, vocabulary and epoch after every epoch
  -resume FILE       continue a checkpointed run up to -iter epochs; -iter, -threads, -policy, -tau
                     and -alpha default to the run's own (another value goes on, with a warning);
                     a finished run's vectors are written again without -train
  -quiet 1           no progress line (word2vec.c's -debug 0 is the same; -debug N > 0 is the default)
Under mpirun -np N (each rank trains 1/N of the sentences; rank 0 writes):
  -allreduce A       tree, ring or native (ring)
  -average-every E   average the ranks' vectors every epoch or every E local steps (epoch)
  -average-weighted 1  weight ranks by the sentences they trained (0)
  -combine C         sum of the ranks' updates, or mean of their vectors (sum;
                     mean with -average-weighted 1)
With -threads 1 and a fixed -seed, output is the same byte for byte.
)";

W2vFlags parse_flags(const std::vector<std::string>& args) {
  W2vFlags f;
  f.dist.dashes = "-";
  f.dist.epochs_flag = "-iter";
  auto number = [](const std::string& name, const std::string& text, auto& out) {
    using T = std::remove_reference_t<decltype(out)>;
    T value{};
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc::result_out_of_range && p == text.data() + text.size()) {
      throw InputError(fmt::format("-{} {}: out of range", name, text));
    }
    if (ec != std::errc() || p != text.data() + text.size()) {
      throw InputError(fmt::format("-{} '{}': expected a number", name, text));
    }
    if constexpr (std::is_signed_v<T>) {
      if (value < 0) throw InputError(fmt::format("-{} {}: must not be negative", name, text));
    }
    out = value;
  };
  auto boolean = [](const std::string& name, const std::string& text, int& out) {
    if (text != "0" && text != "1") throw InputError(fmt::format("-{} '{}': expected 0 or 1", name, text));
    out = text == "1";
  };
  auto unsigned_flag = [&](const std::string& name, const std::string& text, auto& out) {
    using T = std::remove_reference_t<decltype(out)>;
    if (text.starts_with('-')) throw InputError(fmt::format("-{} {}: must not be negative", name, text));
    std::uint64_t v = 0;  // the whole range: -seed 18446744073709551615 is a seed
    number(name, text, v);
    if (v > std::numeric_limits<T>::max()) throw InputError(fmt::format("-{} {}: too large", name, text));
    out = static_cast<T>(v);
  };
  std::map<std::string, std::function<void(const std::string&, const std::string&)>> handlers = {
      {"train", [&](auto&, auto& v) { f.train = v; }},
      {"output", [&](auto&, auto& v) { f.output = v; }},
      {"save-vocab", [&](auto&, auto& v) { f.save_vocab = v; }},
      {"read-vocab", [&](auto&, auto& v) { f.read_vocab = v; }},
      {"checkpoint", [&](auto&, auto& v) { f.checkpoint = v; }},
      {"resume", [&](auto&, auto& v) { f.resume = v; }},
      {"size", [&](auto& n, auto& v) { unsigned_flag(n, v, f.size); }},
      {"window", [&](auto& n, auto& v) { unsigned_flag(n, v, f.window); }},
      {"negative", [&](auto& n, auto& v) { unsigned_flag(n, v, f.negative); }},
      {"min-count", [&](auto& n, auto& v) { unsigned_flag(n, v, f.min_count); }},
      {"max-vocab", [&](auto& n, auto& v) { unsigned_flag(n, v, f.max_vocab); }},
      {"threads", [&](auto& n, auto& v) { unsigned_flag(n, v, f.threads); }},
      {"iter", [&](auto& n, auto& v) { unsigned_flag(n, v, f.iter); }},
      {"seed", [&](auto& n, auto& v) { unsigned_flag(n, v, f.seed); }},
      {"sample", [&](auto& n, auto& v) { number(n, v, f.sample); }},
      {"alpha", [&](auto& n, auto& v) { float a = 0; number(n, v, a); f.alpha = a; }},
      {"hs", [&](auto& n, auto& v) { boolean(n, v, f.hs); }},
      {"cbow", [&](auto& n, auto& v) { boolean(n, v, f.cbow); }},
      {"binary", [&](auto& n, auto& v) { boolean(n, v, f.binary); }},
      {"batch", [&](auto& n, auto& v) { boolean(n, v, f.batch); }},
      {"policy", [&](auto&, auto& v) { f.policy = v; }},
      {"tau", [&](auto&, auto& v) { f.tau = v; }},
      {"quiet", [&](auto& n, auto& v) { int q = 0; boolean(n, v, q); f.quiet = q; }},
      // word2vec.c's verbosity (2 by default): 0 is -quiet 1, more is asgd's usual report.
      {"debug", [&](auto& n, auto& v) { std::uint64_t d = 0; unsigned_flag(n, v, d); f.quiet = d == 0; }},
      {"classes", [&](auto& n, auto& v) { unsigned_flag(n, v, f.classes); }},
      {"allreduce", [&](auto&, auto& v) { f.dist.allreduce = v; }},
      {"average-every", [&](auto&, auto& v) { f.dist.average_every = v; }},
      {"average-weighted", [&](auto& n, auto& v) { int w = 0; boolean(n, v, w); f.dist.weighted = w; }},
      {"combine", [&](auto&, auto& v) { f.dist.combine = v; }},
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    if (name.rfind("--", 0) == 0) {
      name = name.substr(2);
    } else if (name.rfind('-', 0) == 0 && name.size() > 1) {
      name = name.substr(1);
    } else {
      throw InputError(fmt::format("w2v: unexpected argument '{}' (flags look like -train FILE)", args[i]));
    }
    if (name == "help" || name == "h") throw InputError("w2v: -help goes alone: asgd w2v -help");
    const auto h = handlers.find(name);
    if (h == handlers.end()) throw InputError(fmt::format("w2v: unknown flag '{}'; see asgd w2v -help", args[i]));
    if (i + 1 >= args.size()) throw InputError(fmt::format("-{}: expects a value", name));
    // word2vec.c reads a flag's first value, a last-wins parser its last: neither is what a repeat meant.
    if (f.given.count(name)) throw InputError(fmt::format("-{}: given twice", name));
    if ((name == "debug" && f.given.count("quiet")) || (name == "quiet" && f.given.count("debug")))
      throw InputError("-debug and -quiet: give one of them");
    h->second(name, args[++i]);
    f.given.insert(name);
  }
  for (const char* flag : {"allreduce", "average-every", "average-weighted", "combine"})
    if (f.given.count(flag)) f.dist.given.emplace_back(flag);
  if (f.train.empty() && f.resume.empty()) throw InputError("w2v: -train FILE is required (see asgd w2v -help)");
  if (f.threads == 0 || f.threads > kMaxWorkers)
    throw InputError(fmt::format("-threads {}: expected 1 to {}", f.threads, kMaxWorkers));
  if (f.classes > 0 && f.binary == 1)
    throw InputError("-classes writes \"word class\" text lines: -binary 1 does not apply");
  if (f.classes > 0 && f.output.empty()) throw InputError("-classes: give -output, where the classes go");
  if (f.iter == 0 || f.iter > kMaxEpochs)
    throw InputError(fmt::format("-iter {}: expected 1 to {} epochs", f.iter, kMaxEpochs));
  // Under mpirun the ranks' updates add up unless asked otherwise
  // (text8-prefix, skip-gram, 2 ranks, 4 seeds: analogies 10.47 % summing
  // against 9.78 % averaging, WS-353 0.62 against 0.54 for seeds 1 and 2).
  sum_unless_chosen(f.dist, f.given.count("combine") > 0);
  return f;
}

ModelOptions model_options(const W2vFlags& f) {
  ModelOptions m;
  m.cbow = f.cbow == 1;
  m.dim = f.size;
  m.window = f.window;
  m.negative = f.negative;
  m.hs = f.hs == 1;
  m.sample = f.sample;
  m.batch = f.batch == 1;
  m.validate();
  return m;
}

// -classes N needs N words at least (checked once the vocabulary is known, before training).
void check_classes(const W2vFlags& f, std::size_t vocabulary) {
  if (f.classes > vocabulary) {
    throw InputError(fmt::format("-classes {}: more classes than the vocabulary's {} words", f.classes, vocabulary));
  }
}

// Before anything is read: every output can be written and is none of the inputs; standard input is read once at
// most (and never under mpirun, which gives it to rank 0 alone: every rank reads the corpus and the vocabulary).
void check_io(const W2vFlags& f, const Distributed& dist) {
  if (dist.root()) {
    // word2vec.c does not train without -output; we do (the loss and speed are reported), and say so.
    if (f.output.empty() && f.save_vocab.empty() && f.checkpoint.empty())
      fmt::print(stderr, "asgd w2v: note: no -output, -save-vocab or -checkpoint: the vectors will not be kept\n");
    check_output("-output", f.output);
    check_output("-save-vocab", f.save_vocab);
    check_rewritten_output("-checkpoint", f.checkpoint);
    // -checkpoint may be the -resume file (a run that goes on in one file); nothing else may be shared.
    check_distinct("-output", f.output,
                   {{"-train", f.train}, {"-read-vocab", f.read_vocab}, {"-checkpoint", f.checkpoint},
                    {"-resume", f.resume}, {"-save-vocab", f.save_vocab}});
    check_distinct("-save-vocab", f.save_vocab,
                   {{"-train", f.train}, {"-read-vocab", f.read_vocab}, {"-checkpoint", f.checkpoint},
                    {"-resume", f.resume}});
    check_distinct("-checkpoint", f.checkpoint, {{"-train", f.train}, {"-read-vocab", f.read_vocab}});
    check_one_on_stdout({{"-output", f.output}, {"-save-vocab", f.save_vocab}});
  }
  check_one_stdin({{"-train", f.train}, {"-read-vocab", f.read_vocab}});
  if (!dist.active()) return;
  for (const auto& [flag, path] : {std::pair{"-train", f.train}, std::pair{"-read-vocab", f.read_vocab}}) {
    if (reads_stdin(path)) {
      throw InputError(fmt::format("{} {}: under mpirun standard input reaches rank 0 only; give a file every "
                                   "rank can read",
                                   flag, path));
    }
  }
}

// (a 627 MB corpus was read, 16 s, before "-alpha 0" was said)
void check_alpha(float alpha) {
  if (!(alpha > 0) || !std::isfinite(alpha)) throw InputError(fmt::format("-alpha {}: expected a finite rate > 0", alpha));
}

// What a run starts from: the model's shape, vocabulary and how it updates, from a checkpoint or from the flags.
struct Start {
  Consistency consistency;
  std::uint64_t tau;
  std::size_t threads;
  CheckpointData resumed = {};  // empty for a fresh run
  ModelOptions m = {};
  Vocabulary vocab = {};
  RunInfo saved = {};
};

// -resume: the model's shape and vocabulary come from the checkpoint: a flag that would change them is a mistake,
// not something to ignore quietly. The same value again (the first run's command with -resume added) is no change.
void resume_from(const W2vFlags& f, Start& s) {
  s.resumed = read_checkpoint(f.resume);
  auto r = read_checkpoint_metadata(f.resume, s.resumed.metadata);
  s.m = r.model;
  const std::pair<const char*, std::pair<std::size_t, std::optional<std::size_t>>> vocab_flags[] = {
      {"min-count", {f.min_count, r.info.min_count}}, {"max-vocab", {f.max_vocab, r.info.max_vocab}}};
  for (const auto& [flag, values] : vocab_flags) {
    if (!f.given.count(flag) || values.first == values.second) continue;
    throw InputError(values.second
                         ? fmt::format("-{} {}: {} was made with -{} {}; the vocabulary comes from the checkpoint "
                                       "on -resume",
                                       flag, values.first, f.resume, flag, *values.second)
                         : fmt::format("-{}: the vocabulary comes from the checkpoint on -resume ({} does not "
                                       "record the -{} it was made with: leave it out)",
                                       flag, f.resume, flag));
  }
  if (f.given.count("read-vocab")) {
    // The same file again is no change: read as the run read it, it gives the checkpoint's words and counts.
    const Vocabulary again = Vocabulary::read(
        f.read_vocab, VocabOptions{r.info.min_count.value_or(f.min_count), r.info.max_vocab.value_or(f.max_vocab)});
    bool same_words = again.size() == r.vocab.size();
    for (std::uint32_t id = 0; same_words && id < again.size(); ++id)
      same_words = again.word(id) == r.vocab.word(id) && again.count(id) == r.vocab.count(id);
    if (!same_words) {
      throw InputError(fmt::format("-read-vocab {}: not the vocabulary of {}, which the run continues on -resume",
                                   f.read_vocab, f.resume));
    }
  }
  const ModelOptions& m = s.m;
  const std::pair<const char*, std::pair<std::string, std::string>> same[] = {
      {"size", {as_text(f.size), as_text(m.dim)}},
      {"cbow", {as_text(f.cbow), as_text(m.cbow ? 1 : 0)}},
      {"window", {as_text(f.window), as_text(m.window)}},
      {"negative", {as_text(f.negative), as_text(m.negative)}},
      {"hs", {as_text(f.hs), as_text(m.hs ? 1 : 0)}},
      {"sample", {as_text(f.sample), as_text(m.sample)}},
      {"batch", {as_text(f.batch), as_text(m.batch ? 1 : 0)}},
      {"seed", {as_text(f.seed), as_text(s.resumed.state.seed)}}};
  for (const auto& [flag, values] : same) {
    if (f.given.count(flag) && values.first != values.second) {
      throw InputError(fmt::format("-{} {}: {} was trained with {}; the model and its seed come from the "
                                   "checkpoint on -resume",
                                   flag, values.first, f.resume, values.second));
    }
  }
  s.vocab = std::move(r.vocab);
  s.saved = r.info;
  check_classes(f, s.vocab.size());
  // How the run updated: kept unless given (a different value is warned about where the rate is, below).
  const RunInfo& saved = s.saved;
  if (!f.given.count("threads") && saved.threads > 0 && saved.threads <= kMaxWorkers) s.threads = saved.threads;
  if (!f.given.count("policy") && !saved.policy.empty())
    s.consistency = parse_flag("the checkpoint's -policy", [&] { return parse_consistency(saved.policy); });
  if (!f.given.count("tau") && !saved.tau.empty())
    s.tau = parse_flag("the checkpoint's -tau", [&] { return parse_tau(saved.tau); });
}

// The vectors (or, with -classes N, the word classes) to -output.
void write_vectors(const W2vFlags& f, const Start& s, const Layout& layout, const float* params) {
  if (f.output.empty()) return;
  const Tensor& in = layout["input"];
  const auto row = [&](std::size_t id) { return params + in.at(id); };
  if (f.classes == 0) {
    write_word2vec(f.output, f.binary == 1, s.vocab.words(), s.m.dim, row);
    return;
  }
  const auto began = std::chrono::steady_clock::now();
  const WordClasses classes = word_classes(s.vocab.size(), s.m.dim, row, f.classes);
  write_word_classes(f.output, s.vocab.words(), classes.of);
  fmt::print(stderr, "asgd w2v: {} word classes by K-means over the vectors: {} round(s){}, {:.2f} s{}\n", f.classes,
             classes.rounds, classes.settled ? " (settled)" : "",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count(),
             classes.reseeded > 0 ? fmt::format("; {} round(s) refilled an empty class", classes.reseeded) : "");
}

// -resume of a finished run: its vectors as they were (a way to write them again, in another format), with no
// corpus to read.
void write_finished(const W2vFlags& f, const Start& s) {
  if (!f.save_vocab.empty()) s.vocab.save(f.save_vocab);
  // -checkpoint names where this run's checkpoint goes: the finished one, unless it is that very file.
  std::error_code ec;
  const bool copy = !f.checkpoint.empty() && !std::filesystem::equivalent(f.checkpoint, f.resume, ec);
  const CheckpointData& resumed = s.resumed;
  // -iter given as the epochs done of a longer run: its vectors mid-schedule, the rate not decayed to its end.
  const std::string unfinished =
      s.saved.iter > resumed.state.epoch
          ? fmt::format("; its run has {} epochs (leave -iter out to finish it)", s.saved.iter)
          : "";
  fmt::print(stderr, "asgd w2v: {} holds all {} epochs: nothing left to train (give a larger -iter to go on){}{}{}\n",
             f.resume, resumed.state.epoch, unfinished,
             f.output.empty() ? "" : f.classes > 0 ? "; writing its word classes" : "; writing its vectors",
             copy ? fmt::format("; writing it to -checkpoint {}", f.checkpoint) : "");
  write_vectors(f, s, resumed.layout, resumed.params.data());
  if (copy) {
    auto finished = ParamStore::on_heap(resumed.layout);
    std::copy(resumed.params.begin(), resumed.params.end(), finished.data());
    save_checkpoint(f.checkpoint, finished, resumed.state, resumed.optimizer_state, resumed.metadata,
                    resumed.optimizer_kind, resumed.row_head);
  }
}

// The ranks average one model: the same objective, over shards of one corpus with one vocabulary. The vocabulary
// may come from a checkpoint or -read-vocab rather than the corpus: both are compared, the corpus as the words it
// encodes to (sentence by sentence).
void agree_on_corpus(const Start& s, const EncodedCorpus& corpus, Distributed& dist) {
  std::uint64_t words = kFnv1aStart, text = kFnv1aStart;
  for (std::uint32_t id = 0; id < s.vocab.size(); ++id)
    words = fnv1a_u64(fnv1a_field(words, s.vocab.word(id)), s.vocab.count(id));
  text = fnv1a(text, corpus.tokens.data(), corpus.tokens.size() * sizeof(std::uint32_t));
  text = fnv1a(text, corpus.sentence_begin.data(), corpus.sentence_begin.size() * sizeof(std::uint64_t));
  const ModelOptions& m = s.m;
  const std::pair<std::string_view, std::string> settings[] = {
      {"-cbow", as_text(m.cbow)},
      {"-hs", as_text(m.hs)},
      {"-negative", as_text(m.negative)},
      {"-window", as_text(m.window)},
      {"-sample", as_text(m.sample)},
      {"-batch", as_text(m.batch)},
      {"the vocabulary", fmt::format("{} words, digest {:016x}", s.vocab.size(), words)},
      {"the corpus", fmt::format("{} tokens, digest {:016x}", corpus.stats.tokens, text)}};
  dist.same_settings(settings);
}

// The corpus this rank trains, encoded with the vocabulary (counted from it, or -read-vocab, for a fresh run);
// under mpirun every rank reads the whole corpus (one vocabulary, one noise distribution), the ranks agree on the
// objective, and each keeps its shard of the sentences. `words` gets the whole corpus's words per epoch (what a
// checkpoint records), `notes` the odd input that changes what is trained.
EncodedCorpus read_corpus(const W2vFlags& f, Start& s, Distributed& dist, std::uint64_t& words, std::string& notes) {
  TokenReader reader(f.train);
  CorpusStats counted;
  std::size_t vocab_left_out = 0;  // -read-vocab's words with \v, \f or \r, which no token matches
  if (f.resume.empty()) {
    const VocabOptions vo{f.min_count, f.max_vocab};
    s.vocab = f.read_vocab.empty() ? count_vocabulary(reader, vo, &counted)
                                   : Vocabulary::read(f.read_vocab, vo, &vocab_left_out);
    check_classes(f, s.vocab.size());  // before the corpus is encoded and trained
  }
  if (!f.save_vocab.empty() && dist.root()) s.vocab.save(f.save_vocab);  // rank 0's, as -output
  // Counted here: the tokens it keeps are known (0 from a checkpoint or -read-vocab: grown).
  EncodedCorpus corpus = encode_corpus(reader, s.vocab, counted.kept_tokens);
  words = corpus.stats.kept_tokens;
  if (dist.active()) {
    agree_on_corpus(s, corpus, dist);
    corpus = shard_sentences(corpus, static_cast<std::size_t>(dist.rank()), static_cast<std::size_t>(dist.size()));
  }
  if (corpus.stats.split_lines > 0) {
    notes += fmt::format("; {} line(s) split at {} words", corpus.stats.split_lines, kMaxSentence);
  }
  if (corpus.stats.truncated_tokens > 0) {
    notes += fmt::format("; {} token(s) cut to {} bytes", corpus.stats.truncated_tokens, kMaxTokenBytes);
  }
  if (counted.vocabulary_prunes > 0) {
    notes += fmt::format("; past {} distinct words the rarest were dropped while counting (word2vec.c's "
                         "ReduceVocab), {} time(s): a rare word may be missing or undercounted",
                         Vocabulary::Counter::kPruneAt, counted.vocabulary_prunes);
  }
  if (vocab_left_out > 0) {
    notes += fmt::format("; {} -read-vocab word(s) with \\v, \\f or \\r left out (no token can match)",
                         vocab_left_out);
  }
  return corpus;
}

// The engine's options: word2vec.c's linearly decaying rate, a step of ~10,000 words (as word2vec.c's rate
// updates), checkpoints that record the model, its vocabulary and how the run updates.
TrainerOptions trainer_options(const W2vFlags& f, const Start& s, const Word2Vec& model, std::uint64_t epochs,
                               std::uint64_t corpus_words, RunInfo& now) {
  TrainerOptions o;
  o.workers = s.threads;
  o.epochs = epochs;
  o.seed = f.seed;
  o.consistency = s.consistency;
  o.tau = s.tau;
  o.step_examples = model.sentences_per_step();
  o.schedule.kind = ScheduleKind::linear;
  o.schedule.lr = f.alpha ? *f.alpha : s.saved.alpha > 0 ? s.saved.alpha : (s.m.cbow ? 0.05f : 0.025f);
  check_alpha(o.schedule.lr);  // a checkpoint's, when -alpha was not given
  o.schedule.floor = 1e-4f;
  now.alpha = o.schedule.lr;
  now.corpus_tokens = corpus_words;
  now.iter = o.epochs;
  now.threads = o.workers;
  now.policy = std::string(to_string(o.consistency));
  now.tau = tau_to_string(o.tau);
  // A resumed run keeps the vocabulary options it was made with (those of an older checkpoint are not known).
  now.min_count = f.resume.empty() ? std::optional(f.min_count) : s.saved.min_count;
  now.max_vocab = f.resume.empty() ? std::optional(f.max_vocab) : s.saved.max_vocab;
  o.checkpoint_metadata = checkpoint_metadata(s.m, s.vocab, now);
  return o;
}

// A resumed run continues the saved one only with its rate and its updates (-threads with more than one worker,
// -policy even with one: atomic adds round otherwise than racy stores): a warning for each that differs.
void warn_if_changed(const W2vFlags& f, const RunInfo& saved, const RunInfo& now) {
  const auto text = [](const auto& value) { return nlohmann::json(as_text(value)); };
  nlohmann::json before = nlohmann::json::object(), after = nlohmann::json::object();
  if (saved.alpha > 0) before["-alpha"] = text(saved.alpha), after["-alpha"] = text(now.alpha);
  if (saved.threads > 0) before["-threads"] = text(saved.threads), after["-threads"] = text(now.threads);
  if (!saved.policy.empty()) before["-policy"] = saved.policy, after["-policy"] = now.policy;
  if (!saved.tau.empty()) before["-tau"] = saved.tau, after["-tau"] = now.tau;
  warn_options_changed("w2v", f.resume, before, after, {"-alpha", "-threads", "-policy", "-tau"});
}

// word2vec.c's progress line, on a terminal.
ProgressCallback progress_line(double words_per_sentence, std::size_t threads) {
  return [words_per_sentence, threads](const Progress& p) {
    const double wps = p.examples_per_second * words_per_sentence;
    std::fprintf(stderr, "\rAlpha: %f  Progress: %.2f%%  Words/thread/sec: %.2fk  Loss: %.4f  ETA: %s   ",
                 static_cast<double>(p.learning_rate), 100.0 * p.fraction, wps / static_cast<double>(threads) / 1000.0,
                 p.loss, human_duration(p.eta_seconds).c_str());
    std::fflush(stderr);
    return true;
  };
}

int run_w2v(const W2vFlags& f, Distributed& dist) {
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const bool show_progress = !f.quiet && stderr_is_terminal() && dist.root();
  check_io(f, dist);
  // Before the corpus is read: the flags that need parsing (a resume without them takes the run's).
  Start s{.consistency = parse_flag("-policy", [&] { return parse_consistency(f.policy); }),
          .tau = parse_flag("-tau", [&] { return parse_tau(f.tau); }),
          .threads = f.threads};
  if (f.alpha) check_alpha(*f.alpha);
  if (!f.resume.empty()) {
    resume_from(f, s);
  } else {
    s.m = model_options(f);
  }
  const bool resuming = !f.resume.empty();
  // -resume without -iter finishes the checkpointed run's epochs (on its schedule), as -alpha defaults to its rate.
  const std::uint64_t epochs = resuming && !f.given.count("iter") && s.saved.iter > 0 ? s.saved.iter : f.iter;
  // Before the parameters are allocated: a checkpoint whose metadata does not describe its own parameters
  // (forged, or from another build) must not size them.
  if (resuming && s.resumed.layout.hash() != Word2Vec::layout_for(s.vocab.size(), s.m).hash()) {
    throw InputError(fmt::format("{}: its layout does not match the model", f.resume));
  }
  if (dist.active()) {
    // Before a rank can take the path below and return: one that did while the others trained would leave
    // them waiting forever for its first round.
    const std::uint64_t plan[] = {resuming, resuming ? s.resumed.state.epoch : 0, epochs};
    dist.same_on_all_ranks(plan, "-resume (1: given)/epochs done/epochs in all (every rank needs the same -resume "
                                 "and -iter)");
  }
  if (resuming && s.resumed.state.epoch > epochs) {
    throw InputError(fmt::format("-iter {}: {} holds {} epochs already; -iter is the run's total (give more, or "
                                 "leave it out to finish the run)",
                                 epochs, f.resume, s.resumed.state.epoch));
  }
  if (resuming && s.resumed.state.epoch == epochs) {
    if (dist.root()) write_finished(f, s);
    return 0;
  }
  if (f.train.empty()) throw InputError("w2v: -train FILE is required to continue training");
  std::uint64_t corpus_words = 0;
  std::string notes;
  const EncodedCorpus corpus = read_corpus(f, s, dist, corpus_words, notes);
  if (show_progress) {
    fmt::print(stderr, "asgd w2v: {} tokens, {} lines, vocabulary {} words, {} words in training\n",
               corpus.stats.tokens, corpus.stats.lines, s.vocab.size(), corpus.stats.kept_tokens);
  }
  if (resuming && s.saved.corpus_tokens != 0 && s.saved.corpus_tokens != corpus_words && dist.root()) {
    fmt::print(stderr,
               "asgd w2v: warning: the checkpoint was trained on {} words per epoch, -train has {}; the rate "
               "schedule assumes the same corpus\n",
               s.saved.corpus_tokens, corpus_words);
  }
  const Word2Vec model(corpus, s.vocab, s.m);
  const double words_per_sentence = model.words_per_example();
  const StopOnSignal on_signal(!dist.active());
  TrainingRunOptions ro;  // the run: the parameters, the stop request, progress, checkpoints, the resumed one
  ro.checkpoint = f.checkpoint;
  if (resuming) {
    ro.resume = f.resume;
    ro.resumed = std::move(s.resumed);  // read once, above
  }
  ro.stop = on_signal.flag();
  if (show_progress) ro.on_progress = progress_line(words_per_sentence, s.threads);
  TrainingRun run(model.layout(), std::move(ro));
  ParamStore& store = run.store();
  RunInfo now;
  TrainerOptions o = trainer_options(f, s, model, epochs, corpus_words, now);
  if (resuming && dist.root()) warn_if_changed(f, s.saved, now);
  if (show_progress) o.progress_interval_seconds = 0.25;
  run.configure(o);
  dist.prepare(o);
  Trainer trainer(store, o);
  if (resuming) {
    run.load_resumed(trainer);
  } else {
    model.initialize(store, f.seed);
  }
  const double prep = seconds();
  dist.start(trainer, store);
  const TrainReport report = run_averaged(dist, trainer, model, o.epochs);
  if (show_progress) std::fputc('\n', stderr);
  if (report.stopped) {
    print_interrupted({.command = "w2v",
                       .epochs = o.epochs,
                       .checkpoint = f.checkpoint,
                       .resumed_from = f.resume,
                       .dashes = "-"},
                      report);
    return interrupted_exit_code();
  }
  if (dist.active()) {
    if (!dist.root()) return 0;  // every rank holds the same vectors; rank 0 reports and writes them
    fmt::print(stderr, "asgd w2v: mpi: {}; {}; rank 0's numbers follow\n", dist.describe(), dist.traffic());
  }
  const ModelOptions& m = s.m;
  const double words = static_cast<double>(report.examples) * words_per_sentence;
  const double wps = report.seconds > 0 ? words / report.seconds : 0;
  fmt::print(stderr,
             "asgd w2v: {} {} dim {} window {} negative {} epochs {}-{}: {:.0f} words in {:.2f} s ({:.0f} words/s, "
             "{:.0f} words/s/thread, {} threads, {}), loss {:.4f}; vocabulary {} words; reading {:.2f} s{}\n",
             m.cbow ? "cbow" : "skip-gram", m.hs ? "hs" : "ns", m.dim, m.window, m.negative,
             report.epochs.front().epoch, report.epochs.back().epoch, words, report.seconds, wps,
             wps / static_cast<double>(s.threads), s.threads, rows::simd_level(), report.epochs.back().loss,
             s.vocab.size(), prep, notes);
  write_vectors(f, s, store.layout(), std::as_const(store).data());
  return 0;
}

}  // namespace

void add_w2v_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("w2v", "Train word vectors (word2vec.c flags: -train FILE -output FILE ...)");
  cmd->prefix_command();
  cmd->set_help_flag();  // -help / --help handled below, word2vec style
  cmd->callback([cmd, &exit_code] {
    std::vector<std::string> args = cmd->remaining();
    if (args.empty() || args[0] == "-help" || args[0] == "--help" || args[0] == "-h") {
      std::fputs(kUsage, stdout);
      exit_code = args.empty() ? kExitInput : 0;
      return;
    }
    exit_code = run_guarded([&] {
      const W2vFlags flags = parse_flags(args);
      return run_distributed(flags.dist, [&](Distributed& d) { return run_w2v(flags, d); });
    });
  });
}

}  // namespace asgd::cli
