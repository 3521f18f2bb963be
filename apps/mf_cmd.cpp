// `asgd mf train|predict|eval|recommend|generate`: biased matrix factorization with LIBMF's positional forms and
// flags (-k factors, -t epochs, -l2, -r rate, -s threads, -v validation file), trained by mf::fit.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "asgd/engine/checkpoint_lock.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/engine/training_store.hpp"
#include "asgd/sparse/mf/fit.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "asgd/sparse/mf/model_file.hpp"
#include "asgd/sparse/mf/popular_baseline.hpp"
#include "asgd/sparse/mf/predictions_file.hpp"
#include "asgd/sparse/mf/ratings.hpp"
#include "asgd/sparse/mf/top_k_lists.hpp"
#include "cli_common.hpp"
#include "distributed.hpp"

namespace asgd::cli {
namespace {

using namespace asgd::sparse::mf;

struct MfTrainFlags {
  DistributedFlags dist;
  FitOptions fit;      // the flags that are its options as they are (-k, --l2, --positive, --shm, ...)
  EngineFlags engine;  // -s, -t, -r, --seed, --policy, --tau, --adagrad
  std::string train_file, model_file, validation_file, format = "detect";
  std::string schedule = "auto";
  std::string lr_schedule;  // default: constant (squared), linear (bpr)
  std::string loss = "squared";
  bool no_biases = false, no_mean = false, head_first = false, row_adagrad = false, quiet = false;
  bool schedule_given = false;  // bpr refuses --schedule even at its default

  MfTrainFlags() {
    engine.workers = 2;
    engine.epochs = 20;
    engine.lr = 0.02f;
    engine.lr_floor = 0.0f;
    engine.names = {"-s", "-t", "-r", "--lr-schedule"};
  }
};

// mf::load_model, with the CLI's warnings: writers of the segment that died, a file from a run into shared memory
// that did not finish.
LoadedModel load_model(const std::string& path, const std::string& shm = {}) {
  LoadedModel m = sparse::mf::load_model(path, shm);
  if (!shm.empty()) {
    warn_if_writers_died(shm);
  } else if (m.epochs == 0) {
    // `mf train --shm` writes the model file before it trains (a server needs its ids meanwhile) and again at
    // the end: a file still at epoch 0 is from a run that did not finish, its factors the initial random ones.
    fmt::print(stderr,
               "asgd mf: warning: {} holds no trained epoch (written as training into shared memory began, by a "
               "run that did not finish): its factors are the initial ones; serve the segment with --shm NAME, "
               "or train again\n",
               path);
  }
  return m;
}

// --format's value; its error names the flag.
RatingsFormat format_flag(const std::string& name) {
  return parse_flag("--format", [&] { return parse_ratings_format(name); });
}


// --head-first: LIBMF 2's head of a factor row, its first SIMD block of 8 floats.
constexpr std::size_t kLibmfHead = 8;

// The engine options both losses train with.
// `default_schedule` is the loss's rate schedule unless --lr-schedule names one.
TrainerOptions trainer_options(const MfTrainFlags& f, const char* default_schedule) {
  EngineFlags ef = f.engine;
  ef.schedule = f.lr_schedule.empty() ? default_schedule : f.lr_schedule;
  TrainerOptions o = to_trainer_options(ef);
  o.schedule.row_adagrad = f.row_adagrad;
  o.schedule.row_head = f.head_first ? kLibmfHead : 0;
  o.step_examples = 4096;
  return o;
}

// The flags as fit's options, made (and so checked) before any data is read: a 217 MB ratings file was read, 2 s,
// before "-k 0" or "--l2 -1" was said, and reading scales with the file. FitOptions::validate refuses the options
// of the other loss or schedule.
FitOptions fit_options(const MfTrainFlags& f) {
  FitOptions o = f.fit;
  o.loss = parse_flag("--loss", [&] { return parse_loss(f.loss); });
  o.model.biases = !f.no_biases;
  o.model.center = !f.no_mean;
  o.model.head_first = f.head_first ? kLibmfHead : 0;
  o.trainer = trainer_options(f, o.loss == Loss::bpr ? "linear" : "constant");
  if (o.loss == Loss::squared) o.order = parse_order(f.schedule);  // its error names FitOptions::order: --schedule
  o.model_file = f.model_file;
  o.on_progress = progress_printer(o.loss == Loss::bpr ? "bpr" : "mf", f.quiet);
  o.validate();
  return o;
}

// The library's options as mf train spells them in errors ("--tau: only with --schedule hogwild").
constexpr std::pair<std::string_view, std::string_view> kTrainNames[] = {
    {"FitOptions::positive", "--positive"},          {"FitOptions::test_fraction", "--test-fraction"},
    {"FitOptions::validation_fraction", "--validation-fraction"}, {"MfOptions::scale_ratings", "--scale-ratings"},
    {"Schedule::lr", "-r"},                          {"MfOptions::l2", "-l2"},
    {"MfOptions::factors", "-k"}, {"MfOptions::bias_l2", "--bias-l2"}, {"MfOptions::init_scale", "--init"},
    {"MfOptions::bins", "-n/--bins"}, {"Schedule::adagrad", "--adagrad"}, {"Schedule::row_adagrad", "--row-adagrad"},
    {"MfOptions::biases", "--no-biases"}, {"MfOptions::center", "--no-mean"}, {"MfOptions::head_first", "--head-first"},
    {"FitOptions::sampled_eval", "--sampled-eval"}, {"TrainerOptions::tau", "--tau"},
    {"FitOptions::order", "--schedule"},
    {"Loss::squared", "--loss squared"}, {"Loss::bpr", "--loss bpr"}, {"FitOptions::resume", "--resume"},
    {"FitOptions::checkpoint_every", "--checkpoint-every"}, {"FitOptions::checkpoint", "--checkpoint"},
    {"FitOptions::model_file", "MODEL_FILE"}, {"FitOptions::split_seed", "--split-seed"},
    {"TrainingRunOptions::resume", "--resume"}, {"TrainerOptions::epochs", "-t"}};

// A resume's option changes as warnings, each named by mf train's flag (the record keeps the engine's names).
void warn_resume_changes(const std::string& path, std::vector<OptionChange> changes) {
  constexpr std::pair<std::string_view, std::string_view> kFlags[] = {
      {"workers", "-s"}, {"lr", "-r"}, {"epochs", "-t"}, {"schedule", "--lr-schedule"}, {"order", "--schedule"}};
  for (OptionChange& c : changes) {
    const auto* flag = std::find_if(std::begin(kFlags), std::end(kFlags), [&](const auto& p) { return p.first == c.key; });
    c.key = flag != std::end(kFlags) ? std::string(flag->second) : "--" + c.key;
  }
  warn_option_changes("mf train", path, changes, {}, "");
}

// What the run prints as it sets up and trains: the data, the grid's notes (stderr), the store, each epoch.
FitEvents train_events(std::FILE* out, const MfTrainFlags& f, Distributed& dist, double load_seconds) {
  FitEvents ev;
  ev.on_data = [out, &f, &dist](const FitSetup& s) {
    if (f.loss == "bpr") {
      fmt::print(out, "bpr: {} positives (rating >= {}) of {} ratings; {} users, {} items ({} and {} with a positive)\n",
                 s.positives, f.fit.positive, s.ratings, s.users, s.items, s.users_with_positive,
                 s.items_with_positive);
    }
    if (!s.grid || !dist.root()) return;
    if (s.grid->cut && f.fit.model.bins)
      fmt::print(stderr, "asgd mf: note: -n/--bins {}: {} (as many as the {} users or items)\n", f.fit.model.bins, s.grid->bins,
                 s.grid->bins);
    if (s.grid->workers < f.engine.workers) {
      // Blocks whether --schedule said so or auto chose them: the note names the order, not the flag.
      fmt::print(stderr, "asgd mf: note: -s {}: {} train the blocks of {} bins ({})\n", f.engine.workers,
                 counted(s.grid->workers, "worker"), s.grid->bins,
                 s.grid->cut ? "bins cut to the users or items, more than 2 x workers" : "more bins than workers");
    }
  };
  ev.on_start = [out, &f, &dist, load_seconds](const FitSetup& s) {
    if (!f.fit.shm.empty()) {
      fmt::print(out, "mf: {} shared segment '{}' (serve it with: asgd mf recommend MODEL_FILE --shm {})\n",
                 s.created ? "created" : "training into existing", f.fit.shm, f.fit.shm);
    }
    const bool bpr = f.loss == "bpr";
    if (!bpr) {
      fmt::print(out, "mf: {} ratings, {} users, {} items, mean {:.4f}; loaded in {:.2f} s\n", s.trained, s.users,
                 s.items, s.mean, load_seconds);
    }
    if (dist.active()) {
      fmt::print(out, "mpi: {}; rank 0 trains {} of {} {}\n", dist.describe(), s.examples, s.trained,
                 bpr ? "positives" : "ratings");
    }
    if (s.resumed && dist.root()) {
      warn_resume_changes(f.fit.resume.string(), s.changes);
      fmt::print(out, "resumed from {} at epoch {}\n", f.fit.resume.string(), s.resumed_epoch);
    }
  };
  if (f.quiet || f.loss == "bpr") return ev;
  ev.on_epoch = [out](const FitEpoch& e) {
    std::string line = fmt::format("epoch {:3}: train loss {:.4f}", e.epoch, e.squared_error);
    if (e.validation_rmse) line += fmt::format("  validation RMSE {:.4f}", *e.validation_rmse);
    if (e.test_rmse) line += fmt::format("  test RMSE {:.4f}", *e.test_rmse);
    fmt::print(out, "{}  ({:.2f} s)\n", line, e.seconds);
  };
  return ev;
}

void print_errors(std::FILE* out, const char* name, const ErrorMetrics& m) {
  if (m.count == 0)
    fmt::print(out, "{}: no ratings (the fraction held out is too small for this file)\n", name);
  else
    fmt::print(out, "{}: {} ratings, RMSE {:.4f}, MAE {:.4f}\n", name, m.count, m.rmse, m.mae);
}

void print_squared(std::FILE* out, const MfTrainFlags& f, const FitReport& r) {
  fmt::print(out, "mf: {} in {:.2f} s of SGD ({:.3g} rating updates/s, {}, {}, {})\n",
             counted(r.train.epochs.size(), "epoch"), r.train.seconds,
             static_cast<double>(r.train.examples) / r.train.seconds, counted(r.workers, "worker"), f.engine.policy,
             r.bins ? fmt::format("blocks {}x{}", r.bins, r.bins) : std::string("hogwild"));
  if (r.validation) print_errors(out, "validation", *r.validation);
  if (r.test) print_errors(out, "test", *r.test);
}

void print_ranking(std::FILE* out, const MfTrainFlags& f, const FitReport& r) {
  // What was held out, not only what was asked: a user with two or more positives gives up at least one.
  fmt::print(out, "held out: {} of {} positives ({:.2f}%; --test-fraction {:g} per user, at least one of each user "
             "with two or more)\n",
             r.held_out, r.positives, 100.0 * static_cast<double>(r.held_out) / static_cast<double>(r.positives),
             f.fit.test_fraction);
  fmt::print(out, "full ranking, {} users, {} items never ranked (no training positive): BPR {}\n",
             r.ranking->ours.users, r.cold_items, r.ranking->ours.text(10));
  fmt::print(out, "                                        most-popular {}\n", r.ranking->popular.text(10));
}

// --sampled-eval's line, or its interruption.
int print_sampled(std::FILE* out, const MfTrainFlags& f, const SampledAgainstPopular& s) {
  if (s.stopped) {
    fmt::print(stderr, "asgd mf train: interrupted in the training of --sampled-eval{}\n",
               f.model_file.empty() ? "" : fmt::format(" (the model was written to {})", f.model_file));
    return interrupted_exit_code();
  }
  std::string short_lists;
  if (s.ours.short_lists != 0)
    short_lists += fmt::format(" ({} with fewer unseen items, ranked against all of them)", s.ours.short_lists);
  if (s.ours.no_negatives != 0)
    short_lists += fmt::format(" (left out: {} who have seen every other item)", s.ours.no_negatives);
  fmt::print(out, "leave-one-out by {} vs 99 sampled negatives, {} users{}: BPR HR@10 {:.4f} NDCG@10 {:.4f}; "
             "most-popular HR@10 {:.4f} NDCG@10 {:.4f}\n",
             s.by_time ? "time" : "file order (no timestamps)", s.ours.users, short_lists, s.ours.hit_rate,
             s.ours.ndcg, s.popular.hit_rate, s.popular.ndcg);
  return 0;
}

// The report after training, in the order the run did it; rank 0 alone past the traffic.
int print_report(std::FILE* out, const MfTrainFlags& f, Distributed& dist, const FitReport& r) {
  const bool bpr = f.loss == "bpr";
  if (bpr) {
    fmt::print(out, "bpr: {} in {:.2f} s of SGD ({:.3g} updates/s, {})\n", counted(r.train.epochs.size(), "epoch"),
               r.train.seconds, static_cast<double>(r.train.examples) / r.train.seconds, counted(f.engine.workers, "worker"));
  }
  if (dist.active()) {
    fmt::print(out, "mpi: {}\n", dist.traffic());
    if (!dist.root()) return 0;  // every rank holds the same model; rank 0 reports and writes it
  }
  if (!bpr) print_squared(out, f, r);
  if (r.ranking) print_ranking(out, f, r);
  if (r.model_written) fmt::print(out, "model written to {}\n", f.model_file);
  return r.sampled ? print_sampled(out, f, *r.sampled) : 0;
}

// Refuses what these flags cannot train, before anything is read or written: ranks that disagree, outputs that
// cannot be written, the flags of squared that are no options of fit (the options' own: FitOptions::validate).
void check_train_flags(const MfTrainFlags& f, Distributed& dist) {
  check_one_stdin({{"TRAIN_FILE", f.train_file}, {"-v", f.validation_file}});
  if (dist.active() && !f.fit.shm.empty()) throw InputError("--shm: not with mpirun (each rank keeps its model)");
  // What the ranks' models are averaged over: one objective, and one split of the ratings.
  const std::pair<std::string_view, std::string> settings[] = {
      {"--loss", f.loss}, {"--l2", as_text(f.fit.model.l2)}, {"--bias-l2", as_text(f.fit.model.bias_l2)},
      {"--positive", as_text(f.fit.positive)}, {"--test-fraction", as_text(f.fit.test_fraction)},
      {"--validation-fraction", as_text(f.fit.validation_fraction)}, {"--split-seed", as_text(f.fit.split_seed)}};
  dist.same_settings(settings);
  if (dist.root()) {
    // With --shm the model file is written before training too (a server reads its ids), and again at the end.
    if (f.fit.shm.empty())
      check_output("MODEL_FILE", f.model_file);
    else
      check_rewritten_output("MODEL_FILE (with --shm)", f.model_file);
    check_distinct("MODEL_FILE", f.model_file, {{"TRAIN_FILE", f.train_file}, {"-v", f.validation_file}});
    check_rewritten_output("--checkpoint", f.fit.checkpoint.string());
    check_distinct("--checkpoint", f.fit.checkpoint.string(),
                   {{"TRAIN_FILE", f.train_file}, {"-v", f.validation_file}});
  }
  if (f.loss == "bpr" && (!f.validation_file.empty() || f.schedule_given))
    throw InputError(fmt::format("{}: only with --loss squared", f.validation_file.empty() ? "--schedule" : "-v/-p"));
}

// Explicit ratings (squared): biased MF, Hogwild or LIBMF's block schedule, with validation and test errors.
// Implicit feedback (bpr): ratings >= --positive trained with BPR-MF, ranked against most-popular on a per-user
// held-out part (--test-fraction) and by NCF's sampled protocol (--sampled-eval).
int train(const MfTrainFlags& f, Distributed& dist) {
  check_train_flags(f, dist);
  // The report goes to stderr when the model goes to stdout (MODEL_FILE -).
  std::FILE* const out = report_stream({f.model_file});
  FitOptions o = fit_options(f);
  if (f.fit.validation_fraction > 0 && !f.validation_file.empty())
    throw InputError("give -v FILE or --validation-fraction, not both");
  // Rank 0 writes the checkpoint: a second run on the path is refused now, before the ratings are read.
  const CheckpointLock checkpoint_lock = dist.root() ? CheckpointLock(o.checkpoint) : CheckpointLock();
  o.lock_checkpoint = false;
  const auto start = std::chrono::steady_clock::now();
  Ratings all = read_ratings(f.train_file, format_flag(f.format));
  std::optional<Ratings> validation;  // its new ids get rows too, never trained
  if (!f.validation_file.empty()) validation = read_ratings(f.validation_file, format_flag(f.format), &all);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const StopOnSignal on_signal(!dist.active());  // before the segment opens: see linear train
  o.stop = on_signal.flag();
  const FitReport r = fit(std::move(all), o, dist, train_events(out, f, dist, load_seconds), std::move(validation));
  if (r.train.stopped) {  // by Ctrl-C or SIGTERM
    print_interrupted({.command = "mf train",
                       .epochs = f.engine.epochs,
                       .checkpoint = f.fit.checkpoint.string(),
                       .resumed_from = f.fit.resume.string(),
                       .dashes = "--",
                       .shm = f.fit.shm},
                      r.train);
    return interrupted_exit_code();
  }
  return print_report(out, f, dist, r);
}

struct MfPredictFlags {
  std::string test_file, model_file, output_file, format = "detect";
};

int predict(const MfPredictFlags& f) {
  check_output("output_file", f.output_file);
  check_distinct("output_file", f.output_file, {{"test_file", f.test_file}, {"model_file", f.model_file}});
  LoadedModel m = load_model(f.model_file);
  const Ratings test = read_ratings_for(m, f.test_file, format_flag(f.format));
  const auto metrics = write_predictions(m, test, f.output_file);
  fmt::print(stderr, "predicted {} ratings ({} with a known user and item); RMSE {:.4f} MAE {:.4f}\n", test.size(),
             metrics.known, metrics.rmse, metrics.mae);
  return 0;
}

struct MfEvalFlags {
  std::string test_file, model_file, exclude, format = "detect";
  std::size_t k = 10;
  bool k_given = false;
};

// A BPR model ranks: full-ranking metrics at k on the test file's positives, the training positives (--exclude)
// left out of each user's list as in `mf train --loss bpr --test-fraction`, against most-popular by the same file.
int eval_ranking(const MfEvalFlags& f, const LoadedModel& m) {
  if (f.k == 0) throw InputError("-k 0: expected at least 1 (metrics at k)");
  if (f.exclude.empty()) {
    throw InputError("a bpr model is scored by ranking: give --exclude TRAIN_FILE (its positives are not ranked "
                     "again, and most-popular counts them)");
  }
  const Ratings test = read_ratings_for(m, f.test_file, format_flag(f.format));
  const Ratings exclude = read_ratings_for(m, f.exclude, format_flag(f.format));
  const ModelRanking r = rank_model_against_popular(m, test, exclude, f.k);
  if (r.positives == 0) {
    throw InputError(fmt::format("{}: no rating >= {} (the model's positives) of a user and item the model has",
                                 f.test_file, m.positive));
  }
  fmt::print("eval: {} test positives (rating >= {}; {} more of users or items the model lacks), {} users ranked "
             "over {} items; BPR {}\n",
             r.positives, m.positive, r.unknown, r.ranked.ours.users, r.items, r.ranked.ours.text(f.k));
  fmt::print("      most-popular {}\n", r.ranked.popular.text(f.k));
  return 0;
}

int eval(const MfEvalFlags& f) {
  check_one_stdin({{"test_file", f.test_file}, {"--exclude", f.exclude}});
  LoadedModel m = load_model(f.model_file);
  if (m.loss == "bpr") return eval_ranking(f, m);
  if (!f.exclude.empty()) throw InputError("--exclude: only for a bpr model (a squared model is scored by RMSE)");
  if (f.k_given) throw InputError("-k: only for a bpr model (a squared model is scored by RMSE, not at k)");
  const Ratings test = read_ratings_for(m, f.test_file, format_flag(f.format));
  const auto metrics = evaluate_errors(*m.store, m.scale, test, m.range.lo, m.range.hi, &m.cold);
  fmt::print("eval: {} ratings ({} with a known user and item; the rest from the mean and known biases), RMSE {:.4f}, "
             "MAE {:.4f}\n",
             test.size(), metrics.known, metrics.rmse, metrics.mae);
  return 0;
}

struct MfRecommendFlags {
  std::string model_file, user, exclude, all_users, format = "detect", shm;
  std::size_t k = 10;
};

// One user's list on stdout, or every user's to --all-users. Ranked by the raw score; printed as `mf predict`
// would say it (clipped into the training ratings' range; BPR scores have none).
int recommend_cmd(const MfRecommendFlags& f) {
  std::FILE* const report = report_stream({f.all_users});
  if (f.user.empty() == f.all_users.empty()) throw InputError("recommend: give exactly one of --user U or --all-users FILE");
  if (f.k == 0) throw InputError("-k 0: expected at least 1 item per user");
  // Before anything is read: the lists must not replace the model or the ratings they exclude.
  check_distinct("--all-users", f.all_users, {{"model_file", f.model_file}, {"--exclude", f.exclude}});
  check_output("--all-users", f.all_users);
  LoadedModel m = load_model(f.model_file, f.shm);
  const FactorLayout layout = FactorLayout::of(m.store->layout());
  std::optional<SeenItems> seen;
  if (!f.exclude.empty()) seen.emplace(read_ratings_for(m, f.exclude, format_flag(f.format)), layout.users);
  if (!f.user.empty()) {
    const auto id = m.users.find(f.user);
    if (!id || *id >= layout.users) throw InputError(fmt::format("--user {}: not a user of this model", f.user));
    if (m.cold.has_user(*id)) fmt::print(stderr, "--user {}: no training ratings; ranked by item biases alone\n", f.user);
    for (const auto& r : recommend_for(m, seen ? &*seen : nullptr, *id, f.k))
      fmt::print("{}\t{:.4f}\n", m.items.name(r.item), r.score);
    return 0;
  }
  const TopKListsReport r = write_top_k_lists(m, seen ? &*seen : nullptr, f.k, f.all_users);
  fmt::print(report, "top-{} for {} users in {:.3f} s (scoring and ranking) written to {}\n", f.k, r.users, r.seconds,
             f.all_users);
  return 0;
}

struct MfGenerateFlags {
  RatingsGeneratorOptions options;
  std::string out;
};

int generate(const MfGenerateFlags& f) {
  check_output("out", f.out);
  std::FILE* const out = report_stream({f.out});
  const Ratings r = generate_ratings(f.options);
  write_ratings(f.out, r);
  // The ids that got a rating (the file has no line for the others).
  const ColdIds unrated = cold_ids(r.users.size(), r.items.size(), r);
  fmt::print(out, "wrote {} ratings ({} users, {} items, rank {}, Zipf {}) to {}; noise floor (best possible RMSE) {}\n",
             r.size(), r.users.size() - unrated.users.size(), r.items.size() - unrated.items.size(), f.options.rank,
             f.options.zipf, f.out, f.options.noise);
  return 0;
}


void add_train_command(CLI::App& mf, int& exit_code) {
  auto t = std::make_shared<MfTrainFlags>();
  auto* train_cmd = mf.add_subcommand("train", "asgd mf train [options] TRAIN_FILE [MODEL_FILE]");
  train_cmd->add_option("train_file", t->train_file, "Ratings (u.data, ratings.dat, ratings.csv or LIBMF text; gzipped or not)")
      ->required();
  train_cmd->add_option("model_file", t->model_file, "Write the model here");
  train_cmd->add_option("-k", t->fit.model.factors, "Factors")->capture_default_str();
  train_cmd->add_option("-t", t->engine.epochs, "Epochs")->capture_default_str();
  train_cmd->add_option("--l2", t->fit.model.l2, "L2 on P and Q (-l2 as in LIBMF)")->capture_default_str();
  train_cmd->add_option("--bias-l2", t->fit.model.bias_l2, "L2 on the biases")->capture_default_str();
  train_cmd->add_option("-r", t->engine.lr, "Learning rate")->capture_default_str();
  train_cmd->add_option("--lr-schedule", t->lr_schedule,
                        "constant, linear (to 0 at the end) or inverse-sqrt (default: constant; bpr: linear)");
  train_cmd->add_option("--init", t->fit.model.init_scale, "P and Q start uniform in [0, INIT / sqrt(k))")->capture_default_str();
  train_cmd->add_option("-s", t->engine.workers, "Threads (workers)")->capture_default_str();
  train_cmd->add_option("-v,-p", t->validation_file, "Validation file: RMSE after every epoch (-p: LIBMF's spelling)");
  train_cmd->add_option("--test-fraction", t->fit.test_fraction,
                        "Hold out this fraction at random as a test set (bpr: per user)");
  train_cmd->add_option("--validation-fraction", t->fit.validation_fraction,
                        "Hold out this fraction of the training part as a validation set (for tuning)");
  train_cmd->add_flag("--sampled-eval", t->fit.sampled_eval,
                      "bpr: also leave-one-out by time vs 99 sampled negatives (NCF's protocol)");
  train_cmd->add_option("--split-seed", t->fit.split_seed, "Seed of the random split")->capture_default_str();
  train_cmd->add_option("--format", t->format, "detect, udata, dat, csv, libmf")->capture_default_str();
  train_cmd->add_option("--seed", t->engine.seed, "Seed for initialisation and shuffles")->capture_default_str();
  train_cmd->add_option("--policy", t->engine.policy, "racy (Hogwild!), atomic, locked")->capture_default_str();
  train_cmd->add_option("--tau", t->engine.tau, "Bounded delay in steps (inf = async)")->capture_default_str();
  train_cmd->add_flag("--adagrad", t->engine.adagrad, "Per-parameter AdaGrad steps");
  train_cmd->add_flag("--no-biases", t->no_biases, "squared: learn no user and item biases (as LIBMF)");
  train_cmd->add_flag("--no-mean", t->no_mean,
                      "squared: predict biases + p . q, not centred on the mean (as LIBMF; unknown ids still get the mean)");
  train_cmd->add_flag("--scale-ratings", t->fit.model.scale_ratings,
                      "squared: fit ratings divided by their standard deviation, the L2 weights too (as LIBMF)");
  train_cmd->add_flag("--row-adagrad", t->row_adagrad, "Per-row AdaGrad steps: lr / sqrt(1 + G_row), as LIBMF 2");
  train_cmd->add_flag("--head-first", t->head_first,
                      "row AdaGrad as LIBMF 2 runs it: the first 8 factors keep their own sum and train alone in epoch 1");
  train_cmd->add_option("--schedule", t->schedule,
                        "auto (blocks on over 262,144 training ratings or with -n, hogwild on fewer, with --tau or "
                        "under mpirun), hogwild (racy updates anywhere) or blocks (LIBMF's grid)")
      ->capture_default_str();
  train_cmd->add_option("--shm", t->fit.shm, "Train in shared segment NAME; with MODEL_FILE, ids are written first for serving");
  train_cmd->add_flag("--shm-recover", t->fit.shm_recover, "Take over a segment whose writer was killed");
  train_cmd->add_option("--loss", t->loss, "squared (explicit ratings) or bpr (implicit: ratings >= --positive)")
      ->capture_default_str();
  train_cmd->add_option("--positive", t->fit.positive, "bpr: ratings at or above this are positives")
      ->capture_default_str();
  train_cmd->add_option("--bins,-n", t->fit.model.bins,
                        "blocks: users and items split into this many groups, at most 4096 (default 2 x threads + 1; "
                        "given, it picks blocks under --schedule auto); fewer workers than bins (lowered, with a note)");
  train_cmd->add_option("--checkpoint", t->fit.checkpoint,
                        "Checkpoint here after every --checkpoint-every epochs (a model file that --resume goes on from)");
  train_cmd->add_option("--checkpoint-every", t->fit.checkpoint_every, "Epochs between checkpoints")
      ->capture_default_str();
  train_cmd->add_option("--resume", t->fit.resume,
                        "Go on from this checkpoint up to -t epochs (its factors, epoch and seed; the same ratings)");
  train_cmd->add_flag("--quiet,-q", t->quiet, "No per-epoch lines");
  add_distributed_flags(*train_cmd, t->dist);
  t->dist.names = kTrainNames;
  train_cmd->callback([t, train_cmd, &exit_code] {
    // BPR under mpirun sums the ranks' updates unless told otherwise: the
    // mean divides every rank's step by the number of ranks, and on the
    // data of tests/net/mpi_apps.sh (2 ranks, 50 epochs) it reached NDCG@10
    // 0.175 against the sum's 0.224 and one process's 0.231 (bench/RESULTS.md).
    if (t->loss == "bpr") sum_unless_chosen(t->dist, train_cmd->count("--combine") > 0);
    t->schedule_given = train_cmd->count("--schedule") > 0;
    exit_code = run_guarded([&] { return run_distributed(t->dist, [&](Distributed& d) { return train(*t, d); }); },
                            kTrainNames);
  });
}

}  // namespace

void add_mf_commands(CLI::App& app, int& exit_code) {
  auto* mf = app.add_subcommand("mf", "Matrix factorization (LIBMF-style flags)");
  mf->require_subcommand(1);
  add_train_command(*mf, exit_code);

  auto p = std::make_shared<MfPredictFlags>();
  auto* predict_cmd = mf->add_subcommand("predict", "asgd mf predict TEST_FILE MODEL_FILE OUTPUT_FILE");
  predict_cmd->add_option("test_file", p->test_file, "Pairs to predict (ratings file)")->required();
  predict_cmd->add_option("model_file", p->model_file, "Model from mf train")->required();
  predict_cmd->add_option("output_file", p->output_file, "One prediction per line (- for stdout)")->required();
  predict_cmd->add_option("--format", p->format, "detect, udata, dat, csv, libmf")->capture_default_str();
  predict_cmd->callback([p, &exit_code] { exit_code = run_guarded([&] { return predict(*p); }); });

  auto e = std::make_shared<MfEvalFlags>();
  auto* eval_cmd = mf->add_subcommand(
      "eval", "asgd mf eval TEST_FILE MODEL_FILE: RMSE and MAE (bpr: ranking metrics, with --exclude TRAIN_FILE)");
  eval_cmd->add_option("test_file", e->test_file, "Ratings to score")->required();
  eval_cmd->add_option("model_file", e->model_file, "Model from mf train")->required();
  eval_cmd->add_option("--exclude", e->exclude, "bpr: the training ratings (their positives are not ranked again)");
  eval_cmd->add_option("-k", e->k, "bpr: metrics at k")->capture_default_str()->each([e](const std::string&) {
    e->k_given = true;
  });
  eval_cmd->add_option("--format", e->format, "detect, udata, dat, csv, libmf")->capture_default_str();
  eval_cmd->callback([e, &exit_code] { exit_code = run_guarded([&] { return eval(*e); }); });

  auto rf = std::make_shared<MfRecommendFlags>();
  auto* rec_cmd = mf->add_subcommand("recommend", "asgd mf recommend MODEL_FILE --user U -k 10 | --all-users OUT.tsv");
  rec_cmd->add_option("model_file", rf->model_file, "Model from mf train")->required();
  rec_cmd->add_option("--user", rf->user, "The user (external id) to recommend for");
  rec_cmd->add_option("--all-users", rf->all_users, "Write user, rank, item, score for every user (TSV)");
  rec_cmd->add_option("-k", rf->k, "Items per user")->capture_default_str();
  rec_cmd->add_option("--exclude", rf->exclude, "Ratings whose items are not recommended again (e.g. the training file)");
  rec_cmd->add_option("--format", rf->format, "Format of --exclude")->capture_default_str();
  rec_cmd->add_option("--shm", rf->shm, "Score with the live factors of this segment (a trainer may be writing it)");
  rec_cmd->callback([rf, &exit_code] { exit_code = run_guarded([&] { return recommend_cmd(*rf); }); });

  auto g = std::make_shared<MfGenerateFlags>();
  auto* gen_cmd = mf->add_subcommand("generate", "Write ratings with a planted low-rank model and known noise");
  gen_cmd->add_option("out", g->out, "Output file (LIBMF text: user item rating)")->required();
  gen_cmd->add_option("--users", g->options.users, "Users")->capture_default_str();
  gen_cmd->add_option("--items", g->options.items, "Items")->capture_default_str();
  gen_cmd->add_option("--ratings", g->options.ratings, "Distinct ratings")->capture_default_str();
  gen_cmd->add_option("--rank", g->options.rank, "Rank of the planted model")->capture_default_str();
  gen_cmd->add_option("--noise", g->options.noise, "Noise standard deviation (= best RMSE)")->capture_default_str();
  gen_cmd->add_option("--zipf", g->options.zipf, "Item popularity exponent")->capture_default_str();
  gen_cmd->add_option("--seed", g->options.seed, "Seed")->capture_default_str();
  gen_cmd->callback([g, &exit_code] { exit_code = run_guarded([&] { return generate(*g); }); });
}

}  // namespace asgd::cli
