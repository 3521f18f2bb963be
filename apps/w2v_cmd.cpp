// `asgd w2v`: word2vec with word2vec.c's flags and defaults, trained by the
// engine (Hogwild! by default). Flags are single-dash as in word2vec.c
// (`-train FILE -output FILE ...`); `--flag` works too.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/row_ops.hpp"
#include "asgd/engine/stop_signal.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/sparse/word2vec/training.hpp"
#include "cli_common.hpp"
#include "distributed.hpp"

namespace asgd::cli {
namespace {

namespace w2v = sparse::w2v;

// word2vec.c's flags as the library's options (unset: its defaults, or a resumed run's), plus the CLI's own.
struct W2vFlags {
  w2v::Word2VecOptions options;
  bool quiet = false;
  DistributedFlags dist;
  std::set<std::string> given;  // flags on the command line, against repeats
};

// The library's options as the flags that set them, for its errors.
constexpr std::pair<std::string_view, std::string_view> kNames[] = {
    {"Word2VecOptions::corpus: required to continue training", "w2v: -train FILE is required to continue training"},
    {"Word2VecOptions::corpus", "-train"}, {"Word2VecOptions::read_vocab", "-read-vocab"},
    {"Word2VecOptions::cbow", "-cbow"}, {"Word2VecOptions::hs", "-hs"}, {"Word2VecOptions::batch", "-batch"},
    {"Word2VecOptions::dim", "-size"}, {"Word2VecOptions::window", "-window"},
    {"Word2VecOptions::negative", "-negative"}, {"Word2VecOptions::sample", "-sample"},
    {"Word2VecOptions::min_count", "-min-count"}, {"Word2VecOptions::max_vocab", "-max-vocab"},
    {"Word2VecOptions::seed", "-seed"}, {"Word2VecOptions::workers", "-threads"},
    {"Word2VecOptions::epochs", "-iter"}, {"Word2VecOptions::alpha", "-alpha"},
    {"Word2VecOptions::policy", "-policy"}, {"Word2VecOptions::tau", "-tau"},
    {"Word2VecOptions::checkpoint", "-checkpoint"}, {"Word2VecOptions::resume", "-resume"},
    {"Word2VecOptions::save_vocab", "-save-vocab"}, {"Word2VecOptions::output", "-output"},
    {"Word2VecOptions::binary", "-binary"}, {"Word2VecOptions::classes", "-classes"},
    {"ModelOptions::dim", "-size"}, {"ModelOptions::window", "-window"}, {"ModelOptions::negative", "-negative"},
    {"ModelOptions::sample", "-sample"}, {"ModelOptions::batch", "-batch"}, {"ModelOptions::cbow", "-cbow"},
    {"ModelOptions::hs", "-hs"}, {"VocabOptions::min_count", "-min-count"}};

// A flag's value as a number of type T; negative values refused.
template <class T>
T number(const std::string& name, const std::string& text) {
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
  return value;
}

// An unsigned count or seed: the whole range (-seed 18446744073709551615 is a seed), then T's.
template <class T>
T count(const std::string& name, const std::string& text) {
  if (text.starts_with('-')) throw InputError(fmt::format("-{} {}: must not be negative", name, text));
  const auto v = number<std::uint64_t>(name, text);
  if (v > std::numeric_limits<T>::max()) throw InputError(fmt::format("-{} {}: too large", name, text));
  return static_cast<T>(v);
}

bool boolean(const std::string& name, const std::string& text) {
  if (text != "0" && text != "1") throw InputError(fmt::format("-{} '{}': expected 0 or 1", name, text));
  return text == "1";
}

// An option the flag sets: unset until given (a resume takes the run's own).
template <class T>
void set_count(std::optional<T>& out, const std::string& name, const std::string& text) {
  out = count<T>(name, text);
}

// One flag: its name, the word for its value and its help (the usage is made of these; no help: not listed), and
// what it sets.
struct W2vFlag {
  std::string_view name, value, help;
  void (*set)(W2vFlags& f, const std::string& name, const std::string& text);
};

// Continues a help text on the next line, under the first.
#define W2V_MORE "\n                     "

// In the order of the usage; the last four are for mpirun.
constexpr W2vFlag kFlags[] = {
    {"train", "FILE", "text, one sentence per line, whitespace-separated tokens (gzipped or not; - is stdin)",
     [](W2vFlags& f, auto&, auto& v) { f.options.corpus = v; }},
    {"output", "FILE", "word vectors (word2vec format; text unless -binary 1)",
     [](W2vFlags& f, auto&, auto& v) { f.options.output = v; }},
    {"size", "N", "vector dimension (100)", [](W2vFlags& f, auto& n, auto& v) { set_count(f.options.dim, n, v); }},
    {"window", "N", "context words each side, shrunk at random per word (5)",
     [](W2vFlags& f, auto& n, auto& v) { set_count(f.options.window, n, v); }},
    {"sample", "T", "subsample words with frequency above T (1e-3; 0 = off)",
     [](W2vFlags& f, auto& n, auto& v) { f.options.sample = number<double>(n, v); }},
    {"hs", "0|1", "hierarchical softmax (0)", [](W2vFlags& f, auto& n, auto& v) { f.options.hs = boolean(n, v); }},
    {"negative", "N", "negative samples (5; 0 = none)",
     [](W2vFlags& f, auto& n, auto& v) { set_count(f.options.negative, n, v); }},
    {"threads", "N", "workers (all cores)", [](W2vFlags& f, auto& n, auto& v) { set_count(f.options.workers, n, v); }},
    {"iter", "N", "epochs (5)", [](W2vFlags& f, auto& n, auto& v) { set_count(f.options.epochs, n, v); }},
    {"min-count", "N", "drop words seen fewer times (5)",
     [](W2vFlags& f, auto& n, auto& v) { set_count(f.options.min_count, n, v); }},
    {"max-vocab", "N", "keep only the N most frequent words (0 = all)",
     [](W2vFlags& f, auto& n, auto& v) { set_count(f.options.max_vocab, n, v); }},
    {"alpha", "A", "starting learning rate, decayed linearly (0.05 CBOW, 0.025 skip-gram)",
     [](W2vFlags& f, auto& n, auto& v) { f.options.alpha = number<float>(n, v); }},
    {"cbow", "0|1", "CBOW (1) or skip-gram (0)", [](W2vFlags& f, auto& n, auto& v) { f.options.cbow = boolean(n, v); }},
    {"binary", "0|1", "write vectors in binary (0)",
     [](W2vFlags& f, auto& n, auto& v) { f.options.binary = boolean(n, v); }},
    {"classes", "N",
     "write N word classes instead of the vectors: K-means over the vectors, \"word class\" lines" W2V_MORE
     "as word2vec.c writes them (0 = the vectors)",
     [](W2vFlags& f, auto& n, auto& v) { f.options.classes = count<std::size_t>(n, v); }},
    {"batch", "0|1", "HogBatch: skip-gram negatives shared across a window (1 where it applies:" W2V_MORE
     "skip-gram, -negative N, -hs 0; 0 updates per pair as word2vec.c)",
     [](W2vFlags& f, auto& n, auto& v) { f.options.batch = boolean(n, v); }},
    {"save-vocab", "FILE", "write the vocabulary (\"word count\" lines)",
     [](W2vFlags& f, auto&, auto& v) { f.options.save_vocab = v; }},
    {"read-vocab", "FILE", "use this vocabulary instead of counting (- reads stdin)",
     [](W2vFlags& f, auto&, auto& v) {
       if (!v.empty()) f.options.read_vocab = v;
     }},
    {"seed", "N", "seed for initialisation, subsampling, windows, negatives (1)",
     [](W2vFlags& f, auto& n, auto& v) { set_count(f.options.seed, n, v); }},
    {"policy", "P", "how updates land: racy (Hogwild!), atomic, locked (racy)",
     [](W2vFlags& f, auto&, auto& v) { f.options.policy = v; }},
    {"tau", "T", "bounded delay in steps of ~10,000 words (inf)", [](W2vFlags& f, auto&, auto& v) { f.options.tau = v; }},
    {"checkpoint", "FILE", "save parameters, vocabulary and epoch after every epoch",
     [](W2vFlags& f, auto&, auto& v) { f.options.checkpoint = v; }},
    {"resume", "FILE",
     "continue a checkpointed run up to -iter epochs; -iter, -threads, -policy, -tau" W2V_MORE
     "and -alpha default to the run's own (another value goes on, with a warning);" W2V_MORE
     "a finished run's vectors are written again without -train",
     [](W2vFlags& f, auto&, auto& v) { f.options.resume = v; }},
    {"quiet", "1", "no progress line (word2vec.c's -debug 0 is the same; -debug N > 0 is the default)",
     [](W2vFlags& f, auto& n, auto& v) { f.quiet = boolean(n, v); }},
    // word2vec.c's verbosity (2 by default): 0 is -quiet 1, more is asgd's usual report.
    {"debug", "N", "", [](W2vFlags& f, auto& n, auto& v) { f.quiet = count<std::uint64_t>(n, v) == 0; }},
    {"allreduce", "A", "tree, ring or native (ring)", [](W2vFlags& f, auto&, auto& v) { f.dist.allreduce = v; }},
    {"average-every", "E", "average the ranks' vectors every epoch or every E local steps (epoch)",
     [](W2vFlags& f, auto&, auto& v) { f.dist.average_every = v; }},
    {"average-weighted", "1", "weight ranks by the sentences they trained (0)",
     [](W2vFlags& f, auto& n, auto& v) { f.dist.weighted = boolean(n, v); }},
    {"combine", "C", "sum of the ranks' updates, or mean of their vectors (sum;" W2V_MORE "mean with -average-weighted 1)",
     [](W2vFlags& f, auto&, auto& v) { f.dist.combine = v; }},
    {"distributed", "D", "averaging, or ps: a parameter server (rows pushed and pulled every round) (averaging)",
     [](W2vFlags& f, auto&, auto& v) { f.dist.distributed = v; }},
    {"ps-tau", "T", "with -distributed ps: rounds a rank may run ahead of the slowest (0 BSP, N SSP, inf ASP) (0)",
     [](W2vFlags& f, auto&, auto& v) { f.dist.ps_tau = v; }},
    {"server-rule", "R", "with -distributed ps: mean, sum or adagrad on the servers (as -combine)",
     [](W2vFlags& f, auto&, auto& v) { f.dist.server_rule = v; }},
    {"server-lr", "L", "with -server-rule adagrad: the servers' step size (0.1)",
     [](W2vFlags& f, auto& n, auto& v) { f.dist.server_lr = number<float>(n, v); }},
    {"ps-push", "P", "with -distributed ps: floats, int8 or sign (floats)", [](W2vFlags& f, auto&, auto& v) { f.dist.push = v; }},
    {"ps-push-fraction", "F", "with -distributed ps: the changed rows pushed each round, largest first (1)",
     [](W2vFlags& f, auto& n, auto& v) { f.dist.push_fraction = number<float>(n, v); }},
    {"ps-error-feedback", "1", "with -distributed ps: keep what a compressed push leaves out (1)",
     [](W2vFlags& f, auto& n, auto& v) { f.dist.error_feedback = boolean(n, v); }},
    {"ps-warm-rounds", "N", "with -distributed ps: the first N rounds bulk-synchronous (0)",
     [](W2vFlags& f, auto& n, auto& v) { f.dist.warm_rounds = count<std::uint64_t>(n, v); }},
    {"ps-overlap", "1", "with -distributed ps: train on while a round is in flight (1), or wait for each (0)",
     [](W2vFlags& f, auto& n, auto& v) { f.dist.overlap = boolean(n, v); }},
    {"ps-transport", "T", "with -distributed ps: auto, messages or one-sided (MPI_Accumulate; mean or sum, floats) (auto)",
     [](W2vFlags& f, auto&, auto& v) { f.dist.ps_transport = v; }},
    {"servers", "S", "with -distributed ps: the last S ranks are dedicated servers that train nothing (0)",
     [](W2vFlags& f, auto& n, auto& v) { f.dist.servers = count<std::size_t>(n, v); }},
    {"ps-checkpoint", "PREFIX", "with -distributed ps: the servers write their shards as PREFIX.ps-* (none)",
     [](W2vFlags& f, auto&, auto& v) { f.dist.ps_checkpoint = v; }},
    {"ps-checkpoint-seconds", "N", "with -ps-checkpoint: seconds between the servers' generations (60)",
     [](W2vFlags& f, auto& n, auto& v) { f.dist.ps_checkpoint_seconds = number<double>(n, v); }},
    {"ps-resume", "PREFIX", "with -distributed ps: the servers start from the newest complete generation there",
     [](W2vFlags& f, auto&, auto& v) { f.dist.ps_resume = v; }},
    {"slow-rank", "R:F[:N]", "for benchmarks: rank R's threads F times slower (with N: each rank in turn, N steps each)", [](W2vFlags& f, auto&, auto& v) { f.dist.slow_rank = v; }},
};
#undef W2V_MORE

// `asgd w2v -help`: the flags above, word2vec.c's way.
std::string usage() {
  std::string text = "usage: asgd w2v -train FILE [options]   (FILE may be - for stdin)\n";
  for (const W2vFlag& flag : kFlags) {
    if (flag.name == "allreduce") text += "Under mpirun -np N (each rank trains 1/N of the sentences; rank 0 writes):\n";
    if (flag.help.empty()) continue;
    const std::string name = fmt::format("-{} {}", flag.name, flag.value);
    text += fmt::format("  {:<{}}{}\n", name, std::max<std::size_t>(19, name.size() + 2), flag.help);
  }
  return text + "With -threads 1 and a fixed -seed, output is the same byte for byte.\n";
}

W2vFlags parse_flags(const std::vector<std::string>& args) {
  W2vFlags f;
  f.dist.dashes = "-";
  f.dist.epochs_flag = "-iter";
  f.dist.names = kNames;
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
    const auto h = std::find_if(std::begin(kFlags), std::end(kFlags), [&](const W2vFlag& g) { return g.name == name; });
    if (h == std::end(kFlags)) throw InputError(fmt::format("w2v: unknown flag '{}'; see asgd w2v -help", args[i]));
    if (i + 1 >= args.size()) throw InputError(fmt::format("-{}: expects a value", name));
    // word2vec.c reads a flag's first value, a last-wins parser its last: neither is what a repeat meant.
    if (f.given.count(name)) throw InputError(fmt::format("-{}: given twice", name));
    if ((name == "debug" && f.given.count("quiet")) || (name == "quiet" && f.given.count("debug")))
      throw InputError("-debug and -quiet: give one of them");
    h->set(f, name, args[++i]);
    f.given.insert(name);
  }
  for (const char* flag : {"allreduce", "average-every", "average-weighted", "combine", "distributed", "ps-tau",
                           "server-rule", "server-lr", "ps-push", "ps-push-fraction", "ps-error-feedback", "slow-rank", "ps-warm-rounds", "ps-overlap", "ps-transport",
                           "servers", "ps-checkpoint", "ps-checkpoint-seconds", "ps-resume"})
    if (f.given.count(flag)) f.dist.given.emplace_back(flag);
  if (f.options.corpus.empty() && f.options.resume.empty())
    throw InputError("w2v: -train FILE is required (see asgd w2v -help)");
  f.options.validate();  // -threads, -classes with -binary or without -output, -iter
  // Under mpirun the ranks' updates add up unless asked otherwise
  // (text8-prefix, skip-gram, 2 ranks, 4 seeds: analogies 10.47 % summing
  // against 9.78 % averaging, WS-353 0.62 against 0.54 for seeds 1 and 2).
  sum_unless_chosen(f.dist, f.given.count("combine") > 0);
  return f;
}

// What is trained, before the first epoch (rank 0).
void print_start(const W2vFlags& f, const w2v::Word2VecStart& s, bool show_progress) {
  if (show_progress) {
    fmt::print(stderr, "asgd w2v: {} tokens, {} lines, vocabulary {} words, {} words in training\n", s.corpus.tokens,
               s.corpus.lines, s.vocabulary, s.corpus.kept_tokens);
  }
  if (!s.resumed) return;
  if (s.saved.corpus_tokens != 0 && s.saved.corpus_tokens != s.now.corpus_tokens) {
    fmt::print(stderr,
               "asgd w2v: warning: the checkpoint was trained on {} words per epoch, -train has {}; the rate "
               "schedule assumes the same corpus\n",
               s.saved.corpus_tokens, s.now.corpus_tokens);
  }
  warn_option_changes("w2v", f.options.resume, w2v::changed_settings(s.saved, s.now), {}, "-");
}

// word2vec.c's progress line, on a terminal.
ProgressCallback progress_line(const w2v::Word2VecStart& start) {
  return [&start](const Progress& p) {
    const double wps = p.examples_per_second * start.words_per_sentence;
    std::fprintf(stderr, "\rAlpha: %f  Progress: %.2f%%  Words/thread/sec: %.2fk  Loss: %.4f  ETA: %s   ",
                 static_cast<double>(p.learning_rate), 100.0 * p.fraction,
                 wps / static_cast<double>(start.workers) / 1000.0, p.loss, human_duration(p.eta_seconds).c_str());
    std::fflush(stderr);
    return true;
  };
}

void print_trained(const w2v::Word2VecReport& r) {
  const w2v::ModelOptions& m = r.model;
  const TrainReport& t = r.train;
  const double words = static_cast<double>(t.examples) * r.start.words_per_sentence;
  const double wps = t.seconds > 0 ? words / t.seconds : 0;
  fmt::print(stderr,
             "asgd w2v: {} {} dim {} window {} negative {} epochs {}-{}: {:.0f} words in {:.2f} s ({:.0f} words/s, "
             "{:.0f} words/s/thread, {} threads, {}), loss {:.4f}; vocabulary {} words; reading {:.2f} s{}\n",
             m.cbow ? "cbow" : "skip-gram", m.hs ? "hs" : m.batch ? "ns hogbatch" : "ns", m.dim, m.window, m.negative, t.epochs.front().epoch,
             t.epochs.back().epoch, words, t.seconds, wps, wps / static_cast<double>(r.workers), r.workers,
             rows::simd_level(), t.epochs.back().loss, r.vocabulary, r.prepare_seconds, cli_message(r.start.notes(), kNames));
}

// A resume of a finished run: its vectors as they were, with no corpus to read.
void print_finished(const W2vFlags& f, const w2v::Word2VecReport& r) {
  const w2v::Word2VecOptions& o = f.options;
  // Epochs given as the epochs done of a longer run: its vectors mid-schedule, the rate not decayed to its end.
  const std::string unfinished =
      r.resumed_run_epochs > r.resumed_epochs
          ? fmt::format("; its run has {} epochs (leave -iter out to finish it)", r.resumed_run_epochs)
          : "";
  fmt::print(stderr, "asgd w2v: {} holds all {} epochs: nothing left to train (give a larger -iter to go on){}{}{}\n",
             o.resume, r.resumed_epochs, unfinished,
             o.output.empty() ? "" : o.classes > 0 ? "; writing its word classes" : "; writing its vectors",
             r.checkpoint_copied ? fmt::format("; writing it to -checkpoint {}", o.checkpoint) : "");
}

void print_classes(const w2v::Word2VecReport& r, std::size_t classes) {
  const w2v::WordClasses& c = *r.classes;
  fmt::print(stderr, "asgd w2v: {} word classes by K-means over the vectors: {} round(s){}, {:.2f} s{}\n",
             classes, c.rounds,
             c.settled ? " (settled)" : "", r.classes_seconds,
             c.reseeded > 0 ? fmt::format("; {} round(s) refilled an empty class", c.reseeded) : "");
}

int run_w2v(const W2vFlags& f, Distributed& dist) {
  const w2v::Word2VecOptions& o = f.options;
  const bool show_progress = !f.quiet && stderr_is_terminal() && dist.root();
  // word2vec.c does not train without -output; we do (the loss and speed are reported), and say so.
  if (dist.root() && o.output.empty() && o.save_vocab.empty() && o.checkpoint.empty())
    fmt::print(stderr, "asgd w2v: note: no -output, -save-vocab or -checkpoint: the vectors will not be kept\n");
  std::optional<StopOnSignal> on_signal;  // once the corpus is read: reading stays interruptible
  w2v::Word2VecStart start;
  w2v::Word2VecEvents events;
  events.on_start = [&](const w2v::Word2VecStart& s, TrainingRun& run) {
    start = s;
    on_signal.emplace(!dist.active());
    run.use_stop_flag(on_signal->flag());
    if (dist.root()) print_start(f, s, show_progress);
  };
  if (show_progress) {
    events.on_progress = progress_line(start);
    events.progress_interval_seconds = 0.25;
  }
  events.on_trained = [&](const w2v::Word2VecReport& r) {
    if (r.already_finished) {
      if (dist.root()) print_finished(f, r);
      return;
    }
    if (show_progress) std::fputc('\n', stderr);
    if (r.train.stopped || !dist.root()) return;  // every rank holds the same vectors; rank 0 reports them
    if (dist.active()) fmt::print(stderr, "asgd w2v: mpi: {}; {}; rank 0's numbers follow\n", dist.describe(), dist.traffic());
    print_trained(r);
  };
  const w2v::Word2VecReport r = w2v::train_word2vec(o, dist, events);
  if (r.train.stopped) {
    print_interrupted({.command = "w2v", .epochs = r.epochs, .checkpoint = o.checkpoint, .resumed_from = o.resume,
                       .dashes = "-"},
                      r.train);
    return interrupted_exit_code();
  }
  if (r.classes) print_classes(r, o.classes);
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
      std::fputs(usage().c_str(), stdout);
      exit_code = args.empty() ? kExitInput : 0;
      return;
    }
    exit_code = run_guarded(
        [&] {
          const W2vFlags flags = parse_flags(args);
          return run_distributed(flags.dist, [&](Distributed& d) { return run_w2v(flags, d); });
        },
        kNames);
  });
}

}  // namespace asgd::cli
