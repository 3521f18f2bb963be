// `asgd mf train|predict|eval`: biased matrix factorization with LIBMF's
// positional forms and flags (-k factors, -t epochs, -l2, -r rate, -s threads,
// -v validation file), trained by the engine.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/block_scheduler.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/sparse/mf/bpr.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "asgd/sparse/mf/metrics.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/mf/model_file.hpp"
#include "asgd/sparse/mf/recommend.hpp"
#include "asgd/sparse/mf/ratings.hpp"
#include "cli_common.hpp"
#include "distributed.hpp"

namespace asgd::cli {
namespace {

using namespace asgd::sparse::mf;

struct MfTrainFlags {
  DistributedFlags dist;
  std::string train_file, model_file, validation_file, format = "detect", policy = "racy", tau = "inf";
  std::string schedule = "hogwild";
  std::string lr_schedule;  // default: constant (squared), linear (bpr)
  std::string shm;  // train in this shared segment (live model for serving)
  std::string loss = "squared";
  float positive_threshold = 4.0f;
  std::size_t bins = 0;  // 0: 2 x threads + 1 (LIBMF's choice)
  std::size_t factors = 32, threads = 2;
  std::uint64_t epochs = 20, seed = 1, split_seed = 42;
  float l2 = 0.05f, bias_l2 = 0.05f, rate = 0.02f;
  float init_scale = MfOptions{}.init_scale;
  double test_fraction = 0, validation_fraction = 0;
  bool no_biases = false, no_mean = false, scale_ratings = false, head_first = false;
  bool shm_recover = false;  // take over a segment whose writer was killed
  bool adagrad = false, row_adagrad = false, quiet = false, sampled_eval = false;
  // The options on the command line: each one's first name ("--bins") and all of them ("-n,--bins").
  std::vector<std::pair<std::string, std::string>> given;
};

// mf::load_model, with the CLI's warnings and refusals: writers of the segment that died, a segment that holds
// NaN or inf, a file from a run into shared memory that did not finish.
LoadedModel load_model(const std::string& path, const std::string& shm = {}) {
  LoadedModel m = sparse::mf::load_model(path, shm);
  if (!shm.empty()) {
    warn_if_writers_died(shm);
    refuse_diverged_segment(shm, *m.store);
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

// A ratings file mapped with the model's ids (ids it has never seen are appended).
Ratings read_with_ids_of(const LoadedModel& m, const std::string& path, const std::string& format) {
  Ratings with_maps;
  with_maps.users = m.users;
  with_maps.items = m.items;
  return read_ratings(path, format_flag(format), &with_maps);
}

// --head-first: LIBMF 2's head of a factor row, its first SIMD block of 8 floats.
constexpr std::size_t kLibmfHead = 8;

// The engine options both losses train with.
// `default_schedule` is the loss's rate schedule unless --lr-schedule names one.
TrainerOptions trainer_options(const MfTrainFlags& f, const char* default_schedule, float floor) {
  const std::string schedule = f.lr_schedule.empty() ? default_schedule : f.lr_schedule;
  EngineFlags ef;
  ef.workers = f.threads;
  ef.epochs = f.epochs;
  ef.seed = f.seed;
  ef.policy = f.policy;
  ef.tau = f.tau;
  ef.schedule = schedule;
  ef.lr = f.rate;
  ef.lr_floor = floor;
  ef.adagrad = f.adagrad;
  ef.names = {"-s", "-t", "-r", "--lr-schedule"};
  TrainerOptions o = to_trainer_options(ef);
  o.schedule.row_adagrad = f.row_adagrad;
  if (f.head_first && !f.row_adagrad) throw InputError("--head-first: only with --row-adagrad (LIBMF's rule)");
  o.schedule.row_head = f.head_first ? kLibmfHead : 0;
  o.schedule.validate();
  o.step_examples = 4096;
  return o;
}

// The run: where the model trains (the heap or --shm), its factors initialised when new (a new segment before
// another process may attach it; ids without a rating in `trained` start as zero rows), the stop request and
// progress.
TrainingRun open_run(std::FILE* out, const MfTrainFlags& f, const Layout& layout, float init_scale,
                     const Ratings& trained, std::atomic<bool>* stop) {
  // The objective, which every process training the segment must share (the rates and step rules may differ).
  const bool bpr = f.loss == "bpr";
  std::vector<std::pair<std::string_view, std::string>> objective = {{"--loss", bpr ? "bpr" : "squared"},
                                                                     {"--l2", as_text(f.l2)}};
  if (bpr) {
    objective.insert(objective.end(), {{"--bias-l2", as_text(f.bias_l2)}, {"--positive", as_text(f.positive_threshold)}});
  } else {
    if (f.no_biases) {
      objective.emplace_back("--no-biases", "on");  // --bias-l2 then has nothing to weigh
    } else {
      objective.emplace_back("--bias-l2", as_text(f.bias_l2));
    }
    if (f.no_mean) objective.emplace_back("--no-mean", "on");
    if (f.scale_ratings) objective.emplace_back("--scale-ratings", "on");
  }
  TrainingRunOptions ro;  // field by field: GCC 12 warns falsely on a designated initializer here
  ro.shm = f.shm;
  ro.attach = {.recover_stale = f.shm_recover, .settings = settings_text(objective)};
  ro.stop = stop;
  ro.on_progress = progress_printer(f.loss == "bpr" ? "bpr" : "mf", f.quiet);
  TrainingRun run = open_training_run(layout, std::move(ro), [&](ParamStore& s) {
    initialize_factors(s, f.seed, init_scale, &trained);
  });
  if (!f.shm.empty()) {
    fmt::print(out, "mf: {} shared segment '{}' (serve it with: asgd mf recommend MODEL_FILE --shm {})\n",
               run.created() ? "created" : "training into existing", f.shm, f.shm);
  }
  return run;
}

// A run stopped by Ctrl-C or SIGTERM (StopOnSignal): says so, and the exit code. mf keeps no checkpoints.
int interrupted(const MfTrainFlags& f, const TrainReport& report) {
  print_interrupted({.command = "mf train", .epochs = f.epochs, .shm = f.shm}, report);
  return interrupted_exit_code();
}

MfOptions model_options(const MfTrainFlags& f) {
  MfOptions mo;
  mo.factors = f.factors;
  mo.l2 = f.l2;
  mo.bias_l2 = f.bias_l2;
  mo.init_scale = f.init_scale;
  mo.biases = !f.no_biases;
  mo.center = !f.no_mean;
  mo.scale_ratings = f.scale_ratings;
  mo.head_first = f.head_first ? kLibmfHead : 0;
  return mo;
}

// Full-ranking metrics at k of a factor model and of most-popular (counted over `train`) on the same test
// positives, each user's training items and the `never` items left out of both rankings.
struct RankedAgainstPopular {
  RankingMetrics ours, popular;
};
RankedAgainstPopular rank_against_popular(const ParamStore& store, const SeenItems& seen, const Ratings& train,
                                          const Ratings& test, std::size_t items, std::size_t k,
                                          std::span<const std::uint32_t> never) {
  const auto popularity = popularity_scores(train, items);
  return {evaluate_ranking(store, 0.0f, seen, test, k, never),
          evaluate_ranking_with(popularity_scorer(popularity), items, seen, test, k, never)};
}

// "precision@K p recall@K r NDCG@K n MAP@K m HR@K h", as both rankings print.
std::string metrics_text(const RankingMetrics& m, std::size_t k) {
  return fmt::format("precision@{} {:.4f} recall@{} {:.4f} NDCG@{} {:.4f} MAP@{} {:.4f} HR@{} {:.4f}", k, m.precision,
                     k, m.recall, k, m.ndcg, k, m.map, k, m.hit_rate);
}

// Implicit feedback: ratings >= the threshold are positives, trained with
// BPR-MF on all of them, or on a per-user random split when --test-fraction
// is given (then full-ranking precision/recall/NDCG/MAP/HR@10 on the held-out
// part, against most-popular). --sampled-eval adds NCF's protocol: a second
// model trained with each user's latest positive left out, ranked against 99
// sampled negatives (Krichene & Rendle 2020: sampled metrics can mislead;
// this is for comparison with published numbers).
int train_bpr(std::FILE* out, const MfTrainFlags& f, Distributed& dist) {
  // The options from the flags alone, made (and so checked) before any data is read: see train.
  const MfOptions mo = model_options(f);
  mo.validate();
  TrainerOptions o = trainer_options(f, "linear", 0.0f);
  if (!std::isfinite(f.positive_threshold)) {
    throw InputError(fmt::format("--positive {}: expected a finite rating", f.positive_threshold));
  }
  const Ratings all = read_ratings(f.train_file, format_flag(f.format));
  const Ratings positives = positives_of(all, f.positive_threshold);
  if (positives.size() == 0) throw InputError(fmt::format("no rating >= {} (--positive)", f.positive_threshold));
  const std::size_t items = positives.items.size();
  // The model has a row for every id of the file; fewer have a positive to learn from.
  std::vector<char> user_has(positives.users.size(), 0), item_has(items, 0);
  for (std::size_t i = 0; i < positives.size(); ++i) user_has[positives.user[i]] = item_has[positives.item[i]] = 1;
  fmt::print(out, "bpr: {} positives (rating >= {}) of {} ratings; {} users, {} items ({} and {} with a positive)\n",
             positives.size(), f.positive_threshold, all.size(), positives.users.size(), items,
             std::count(user_has.begin(), user_has.end(), 1), std::count(item_has.begin(), item_has.end(), 1));

  Split split;
  if (f.test_fraction > 0) {
    split = random_split_per_user(positives, f.test_fraction, f.split_seed);
  } else {
    split.train = positives;
  }
  // Under mpirun each rank trains every P-th training positive, drawing
  // negatives against all of them; the split is the same on every rank.
  std::optional<std::vector<std::size_t>> shard;
  if (dist.active()) shard = dist.shard(split.train.size(), "training positives");
  const BprMf problem(split.train, mo, f.seed, shard ? &*shard : nullptr);
  const StopOnSignal on_signal(!dist.active());  // before the segment opens: see linear train
  TrainingRun run = open_run(out, f, problem.layout(), mo.init_scale, split.train, on_signal.flag());
  ParamStore& store = run.store();
  // Items with no training positive (all of theirs held out): zero rows, never recommended nor ranked.
  const ColdIds cold = cold_ids(positives.users.size(), items, split.train);
  o.checkpoint_metadata = model_metadata(split.train, cold, RatingScale(0.0f), mo, "bpr", f.positive_threshold);
  run.configure(o);
  dist.prepare(o);
  Trainer trainer(store, o);
  if (!f.shm.empty() && !f.model_file.empty()) trainer.save_checkpoint(f.model_file);
  if (dist.active()) {
    fmt::print(out, "mpi: {}; rank 0 trains {} of {} positives\n", dist.describe(), problem.num_examples(),
               split.train.size());
  }
  dist.start(trainer, store);
  run.started();  // from here on the segment holds training: kept whatever happens next
  const auto report = run_averaged(dist, trainer, problem, f.epochs);
  if (report.stopped) return interrupted(f, report);
  fmt::print(out, "bpr: {} in {:.2f} s of SGD ({:.3g} updates/s, {})\n", counted(report.epochs.size(), "epoch"),
             report.seconds, static_cast<double>(report.examples) / report.seconds, counted(f.threads, "worker"));
  if (dist.active()) {
    fmt::print(out, "mpi: {}\n", dist.traffic());
    if (!dist.root()) return 0;  // every rank holds the same model; rank 0 reports and writes it
  }
  if (f.test_fraction > 0) {
    // The cold items are never ranked, by either: misses, as in `mf recommend` and `mf eval`.
    const RankedAgainstPopular r = rank_against_popular(store, problem.seen(), split.train, split.test, items, 10,
                                                        cold.items);
    // What was held out, not only what was asked: a user with two or more positives gives up at least one.
    fmt::print(out, "held out: {} of {} positives ({:.2f}%; --test-fraction {:g} per user, at least one of each user "
               "with two or more)\n",
               split.test.size(), positives.size(), 100.0 * static_cast<double>(split.test.size()) /
               static_cast<double>(positives.size()), f.test_fraction);
    fmt::print(out, "full ranking, {} users, {} items never ranked (no training positive): BPR {}\n", r.ours.users,
               cold.items.size(), metrics_text(r.ours, 10));
    fmt::print(out, "                                        most-popular {}\n", metrics_text(r.popular, 10));
  }
  if (!f.model_file.empty()) {
    trainer.save_checkpoint(f.model_file);
    fmt::print(out, "model written to {}\n", f.model_file);
  }
  if (f.sampled_eval) {
    const Split loo = leave_k_out(positives, 1);
    const BprMf loo_problem(loo.train, mo, f.seed);
    auto loo_model = ParamStore::on_heap(loo_problem.layout());
    initialize_factors(loo_model, f.seed, mo.init_scale);
    TrainerOptions lo = trainer_options(f, "linear", 0.0f);
    lo.stop = on_signal.flag();
    if (Trainer(loo_model, lo).run(loo_problem).stopped) {
      fmt::print(stderr, "asgd mf train: interrupted in the training of --sampled-eval{}\n",
                 f.model_file.empty() ? "" : fmt::format(" (the model was written to {})", f.model_file));
      return interrupted_exit_code();
    }
    const SeenItems all_seen(positives, positives.users.size());
    const auto sampled = evaluate_sampled(loo_model, loo.test, all_seen, 99, 10, f.split_seed);
    const auto loo_popularity = popularity_scores(loo.train, items);
    const auto sampled_pop =
        evaluate_sampled_with(popularity_scorer(loo_popularity), items, loo.test, all_seen, 99, 10, f.split_seed);
    std::string short_lists;
    if (sampled.short_lists != 0)
      short_lists += fmt::format(" ({} with fewer unseen items, ranked against all of them)", sampled.short_lists);
    if (sampled.no_negatives != 0)
      short_lists += fmt::format(" (left out: {} who have seen every other item)", sampled.no_negatives);
    fmt::print(out, "leave-one-out by {} vs 99 sampled negatives, {} users{}: BPR HR@10 {:.4f} NDCG@10 {:.4f}; "
               "most-popular HR@10 {:.4f} NDCG@10 {:.4f}\n",
               positives.has_timestamps() ? "time" : "file order (no timestamps)", sampled.users, short_lists,
               sampled.hit_rate, sampled.ndcg, sampled_pop.hit_rate, sampled_pop.ndcg);
  }
  return 0;
}

// The ratings a run trains on and evaluates: the file, split into a test part (--test-fraction) and a validation
// part (--validation-fraction, or -v FILE, whose new ids get rows too, never trained).
struct MfSets {
  Ratings train, test, validation;
  bool have_test = false, have_validation = false;
  double load_seconds = 0;
};
MfSets read_sets(const MfTrainFlags& f) {
  MfSets sets;
  Ratings& train_set = sets.train;
  Ratings& test_set = sets.test;
  Ratings& validation_set = sets.validation;
  bool& have_test = sets.have_test;
  bool& have_validation = sets.have_validation;
  const auto start = std::chrono::steady_clock::now();
  Ratings all = read_ratings(f.train_file, format_flag(f.format));
  if (f.test_fraction > 0) {
    auto split = random_split(all, f.test_fraction, f.split_seed);
    train_set = std::move(split.train);
    test_set = std::move(split.test);
    have_test = true;
  } else {
    train_set = std::move(all);
  }
  // A validation set (for choosing hyperparameters without looking at the
  // test set): held out of the training part, or read from -v.
  if (f.validation_fraction > 0) {
    if (!f.validation_file.empty()) throw InputError("give -v FILE or --validation-fraction, not both");
    auto split = random_split(train_set, f.validation_fraction, f.split_seed + 1);
    train_set = std::move(split.train);
    validation_set = std::move(split.test);
    have_validation = true;
  }
  if (!f.validation_file.empty()) {
    validation_set = read_ratings(f.validation_file, format_flag(f.format), &train_set);
    // Ids first seen in the validation file get rows too (never trained).
    train_set.users = validation_set.users;
    train_set.items = validation_set.items;
    if (have_test) {
      test_set.users = train_set.users;
      test_set.items = train_set.items;
    }
    have_validation = true;
  }
  sets.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sets;
}

// --schedule blocks: the grid's bins (-n, or 2 x threads + 1, cut to the users or items) in mo.bins, and the
// workers that can share it.
std::size_t block_schedule(const MfTrainFlags& f, MfOptions& mo, const Ratings& train_set, bool root) {
  constexpr std::size_t kMostBins = BlockScheduler::kMostBins;
  std::size_t workers = f.threads;
  mo.bins = f.bins ? f.bins : std::min(2 * f.threads + 1, kMostBins);
  // More bins than users or items leaves rows or columns of the grid empty: blocks to schedule and nothing in
  // them (4096 bins on 100 users took seconds an epoch for 1000 ratings).
  const std::size_t fewest =
      std::max<std::size_t>(1, std::min(train_set.users.size(), train_set.items.size()));
  const bool cut = mo.bins > fewest;
  if (cut) {
    if (f.bins && root)
      fmt::print(stderr, "asgd mf: note: -n/--bins {}: {} (as many as the {} users or items)\n", f.bins, fewest,
                 fewest);
    mo.bins = fewest;
  }
  // A worker needs a row and a column of blocks that no other holds. With as many workers as bins, one that
  // puts its block back finds none free (LIBMF refuses it: bins > workers); near that, few blocks are free at a
  // time, so workers mostly wait and each pick searches a sparse grid (ml-100k's 943 bins with this scheduler:
  // 943 workers took 321 s an epoch; with no work per block, 942 workers 21 s, 471 workers 1.3 s). So bins >
  // workers always (-n as given), and where the bins were cut to the users or items, bins > 2 x workers, as
  // the default 2 x threads + 1.
  const std::size_t most = cut ? (mo.bins - 1) / 2 : mo.bins - 1;
  workers = std::max<std::size_t>(1, std::min(f.threads, most));
  if (workers < f.threads && root) {
    fmt::print(stderr, "asgd mf: note: -s {}: {} with --schedule blocks on {} bins ({})\n", f.threads,
               counted(workers, "worker"), mo.bins,
               cut ? "bins cut to the users or items, more than 2 x workers" : "more bins than workers");
  }
  return workers;
}

// --scale-ratings divides the L2 weights by the ratings' deviation (`sd`, floored): a step that overshoots them
// is refused.
void check_scaled_step(const MfTrainFlags& f, float sd, const Ratings& train_set) {
  // The L2 weights are divided by the deviation too: ratings nearly all alike make them so large that the
  // shrinking alone overshoots (every factor changes sign and grows), and the run diverges.
  const float l2 = std::max(f.l2, f.no_biases ? 0.0f : f.bias_l2);
  if (f.rate * l2 / sd >= 1.0f) {
    // The scale is the deviation floored at 1e-4 (LIBMF's floor): say which it was.
    const float deviation = static_cast<float>(train_set.deviation());
    throw InputError(fmt::format("--scale-ratings: the ratings' standard deviation is {:.3g}{}, which makes the "
                                 "L2 weight {:.3g}, and a step at -r {} overshoots it; lower -r or -l2, or leave "
                                 "the ratings unscaled",
                                 deviation, deviation < sd ? fmt::format(" (scaled by the floor, {:.3g})", sd) : "",
                                 l2 / sd, f.rate));
  }
}

// A flag given that only applies with `setting` (another loss or schedule) would be ignored: refused, so that
// nobody believes it was applied.
void refuse_unless(const MfTrainFlags& f, std::string_view setting, std::initializer_list<std::string_view> flags) {
  for (const auto& flag : flags)
    for (const auto& [first, all] : f.given) {
      if (first != flag) continue;
      std::string names = all;  // as the user may have typed any of them
      std::replace(names.begin(), names.end(), ',', '/');
      throw InputError(fmt::format("{}: only with {}", names, setting));
    }
}

void print_errors(std::FILE* out, const char* name, const ErrorMetrics& m) {
  if (m.count == 0)
    fmt::print(out, "{}: no ratings (the fraction held out is too small for this file)\n", name);
  else
    fmt::print(out, "{}: {} ratings, RMSE {:.4f}, MAE {:.4f}\n", name, m.count, m.rmse, m.mae);
}

int train_squared(std::FILE* out, const MfTrainFlags& f, Distributed& dist);

int train(const MfTrainFlags& f, Distributed& dist) {
  check_one_stdin({{"TRAIN_FILE", f.train_file}, {"-v", f.validation_file}});
  for (const auto& [flag, value] : {std::pair{"--test-fraction", f.test_fraction},
                                    std::pair{"--validation-fraction", f.validation_fraction}}) {
    if (!(value >= 0 && value < 1)) throw InputError(fmt::format("{} {}: expected 0 <= F < 1", flag, value));
  }
  // The report goes to stderr when the model goes to stdout (MODEL_FILE -).
  std::FILE* const out = report_stream({f.model_file});
  if (dist.active() && !f.shm.empty()) throw InputError("--shm: not with mpirun (each rank keeps its model)");
  // What the ranks' models are averaged over: one objective, and one split of the ratings (each rank splits the
  // whole file, then trains its share of the training part).
  const std::pair<std::string_view, std::string> settings[] = {
      {"--loss", f.loss},
      {"--l2", as_text(f.l2)},
      {"--bias-l2", as_text(f.bias_l2)},
      {"--positive", as_text(f.positive_threshold)},
      {"--test-fraction", as_text(f.test_fraction)},
      {"--validation-fraction", as_text(f.validation_fraction)},
      {"--split-seed", as_text(f.split_seed)}};
  dist.same_settings(settings);
  if (dist.root()) {
    // With --shm the model file is written before training too (a server reads its ids), and again at the end.
    if (f.shm.empty())
      check_output("MODEL_FILE", f.model_file);
    else
      check_rewritten_output("MODEL_FILE (with --shm)", f.model_file);
    check_distinct("MODEL_FILE", f.model_file, {{"TRAIN_FILE", f.train_file}, {"-v", f.validation_file}});
  }
  // A flag of the other loss or schedule would be ignored: refused, so that nobody believes it was applied.
  const auto only_with = [&](std::string_view setting, std::initializer_list<std::string_view> flags) {
    refuse_unless(f, setting, flags);
  };
  if (f.loss == "bpr") {
    only_with("--loss squared",
              {"-v", "--validation-fraction", "--schedule", "--bins", "--no-biases", "--no-mean", "--scale-ratings",
               "--head-first"});
    return train_bpr(out, f, dist);
  }
  only_with("--loss bpr", {"--positive", "--sampled-eval"});
  if (f.loss != "squared") throw InputError(fmt::format("--loss {}: expected squared or bpr", f.loss));
  if (f.schedule == "blocks") {
    only_with("--schedule hogwild (the block schedule's workers share no row or column: there is no delay to bound)",
              {"--tau"});
  } else {
    only_with("--schedule blocks", {"--bins"});
  }
  return train_squared(out, f, dist);
}

// Explicit ratings: biased MF by SGD, Hogwild or LIBMF's block schedule, with validation and test errors.
int train_squared(std::FILE* out, const MfTrainFlags& f, Distributed& dist) {
  // The options from the flags alone, made (and so checked) before any data is read: a 217 MB ratings file was
  // read, 2 s, before "-k 0" or "--l2 -1" was said, and reading scales with the file.
  MfOptions mo = model_options(f);
  mo.bins = f.bins;  // as given (MfOptions checks it); the grid's count is set below, once the ids are known
  mo.validate();
  TrainerOptions o = trainer_options(f, "constant", 0.0f);
  if (f.schedule != "hogwild" && f.schedule != "blocks") {
    throw InputError(fmt::format("--schedule {}: expected hogwild or blocks", f.schedule));
  }
  MfSets sets = read_sets(f);
  Ratings& train_set = sets.train;
  const Ratings &test_set = sets.test, &validation_set = sets.validation;
  const bool have_test = sets.have_test, have_validation = sets.have_validation;

  const bool blocks = f.schedule == "blocks";
  const std::size_t workers = blocks ? block_schedule(f, mo, train_set, dist.root()) : f.threads;
  // Under mpirun each rank trains every P-th rating, around the whole
  // training set's mean and deviation; ids and evaluation sets are the same on all ranks.
  mo.mean = static_cast<float>(train_set.mean());
  mo.deviation = static_cast<float>(train_set.deviation());
  std::optional<Ratings> shard;
  if (dist.active()) shard = train_set.subset(dist.shard(train_set.size(), "training ratings"));
  const BiasedMf problem(shard ? *shard : train_set, mo, f.seed);
  if (f.scale_ratings) check_scaled_step(f, problem.rating_scale().scale, train_set);
  const RatingRange range = RatingRange::of(train_set);
  const StopOnSignal on_signal(!dist.active());  // before the segment opens: see linear train
  TrainingRun run = open_run(out, f, problem.layout(), mo.init_scale, train_set, on_signal.flag());
  ParamStore& store = run.store();

  o.blocks = blocks;
  o.workers = workers;
  // Ids first seen in a validation or test file: zero rows, predicted as unknown ids are.
  const ColdIds cold = cold_ids(train_set.users.size(), train_set.items.size(), train_set);
  const RatingScale& scale = problem.rating_scale();
  o.checkpoint_metadata = model_metadata(train_set, cold, scale, mo, "squared");
  run.configure(o);
  dist.prepare(o);
  Trainer trainer(store, o);
  if (!f.shm.empty() && !f.model_file.empty()) {
    // The ids and the mean a server needs, written before training starts:
    // `mf recommend MODEL_FILE --shm NAME` reads them here and the factors live.
    trainer.save_checkpoint(f.model_file);
  }
  fmt::print(out, "mf: {} ratings, {} users, {} items, mean {:.4f}; loaded in {:.2f} s\n", train_set.size(),
             train_set.users.size(), train_set.items.size(), problem.global_mean(), sets.load_seconds);
  if (dist.active()) {
    fmt::print(out, "mpi: {}; rank 0 trains {} of {} ratings\n", dist.describe(), problem.num_examples(),
               train_set.size());
  }
  dist.start(trainer, store);
  run.started();  // from here on the segment holds training: kept whatever happens next
  double sgd_seconds = 0;
  const TrainReport report = run_averaged(dist, trainer, problem, f.epochs, [&](const TrainReport& r) {
    sgd_seconds += r.seconds;
    if (f.quiet || !dist.root()) return;
    std::string line = fmt::format("epoch {:3}: train loss {:.4f}", r.epochs.back().epoch, 2.0 * r.epochs.back().loss);
    if (have_validation && validation_set.size() > 0) {
      line += fmt::format("  validation RMSE {:.4f}",
                          evaluate_errors(store, scale, validation_set, range.lo, range.hi, &cold).rmse);
    }
    if (have_test && test_set.size() > 0) {
      line += fmt::format("  test RMSE {:.4f}",
                          evaluate_errors(store, scale, test_set, range.lo, range.hi, &cold).rmse);
    }
    fmt::print(out, "{}  ({:.2f} s)\n", line, sgd_seconds);
  });
  if (report.stopped) return interrupted(f, report);
  if (dist.active()) {
    fmt::print(out, "mpi: {}\n", dist.traffic());
    if (!dist.root()) return 0;  // every rank holds the same model; rank 0 reports and writes it
  }
  const double updates = static_cast<double>(report.examples);
  fmt::print(out, "mf: {} in {:.2f} s of SGD ({:.3g} rating updates/s, {}, {}, {})\n",
             counted(report.epochs.size(), "epoch"), sgd_seconds, updates / sgd_seconds, counted(workers, "worker"),
             f.policy,
             blocks ? fmt::format("blocks {}x{}", mo.bins, mo.bins) : std::string("hogwild"));
  for (const auto& [name, set, have] : {std::tuple{"validation", &validation_set, have_validation},
                                        std::tuple{"test", &test_set, have_test}}) {
    if (have) print_errors(out, name, evaluate_errors(store, scale, *set, range.lo, range.hi, &cold));
  }
  if (!f.model_file.empty()) {
    trainer.save_checkpoint(f.model_file);
    fmt::print(out, "model written to {}\n", f.model_file);
  }
  return 0;
}

struct MfPredictFlags {
  std::string test_file, model_file, output_file, format = "detect";
};

int predict(const MfPredictFlags& f) {
  check_output("output_file", f.output_file);
  check_distinct("output_file", f.output_file, {{"test_file", f.test_file}, {"model_file", f.model_file}});
  LoadedModel m = load_model(f.model_file);
  const Ratings test = read_with_ids_of(m, f.test_file, f.format);
  const FactorLayout layout = FactorLayout::of(m.store->layout());
  // Not centred: unknown ids predict from the mean biases of the trained rows.
  const RatingScale scale = with_bias_means(m.scale, *m.store, &m.cold);
  std::string out;
  for (std::size_t i = 0; i < test.size(); ++i) {
    // Unknown users or items: the global mean plus the bias of the side that is known.
    const float r = m.range.clip(predict_or_fallback(*m.store, layout, scale, test.user[i], test.item[i], &m.cold));
    out += fmt::format("{:.6g}\n", r);
  }
  AtomicFile file(f.output_file);
  file.write(out);
  file.commit();
  const auto metrics = evaluate_errors(*m.store, m.scale, test, m.range.lo, m.range.hi, &m.cold);
  fmt::print(stderr, "predicted {} ratings ({} with a known user and item); RMSE {:.4f} MAE {:.4f}\n", test.size(),
             metrics.known, metrics.rmse, metrics.mae);
  return 0;
}

struct MfEvalFlags {
  std::string test_file, model_file, exclude, format = "detect";
  std::size_t k = 10;
  bool k_given = false;
};

// A BPR model ranks: full-ranking metrics at k on the test file's positives,
// the training positives (--exclude) left out of each user's list as in
// `mf train --loss bpr --test-fraction`, against most-popular by the same file.
int eval_ranking(const MfEvalFlags& f, const LoadedModel& m) {
  if (f.k == 0) throw InputError("-k 0: expected at least 1 (metrics at k)");
  if (f.exclude.empty()) {
    throw InputError("a bpr model is scored by ranking: give --exclude TRAIN_FILE (its positives are not ranked "
                     "again, and most-popular counts them)");
  }
  const FactorLayout layout = FactorLayout::of(m.store->layout());
  // Test positives of users and items the model has: both rankings score the same users, over the same items.
  const Ratings test_all = positives_of(read_with_ids_of(m, f.test_file, f.format), m.positive);
  std::vector<std::size_t> known;
  for (std::size_t i = 0; i < test_all.size(); ++i) {
    if (test_all.user[i] < layout.users && test_all.item[i] < layout.items) known.push_back(i);
  }
  const Ratings test = test_all.subset(known);
  const Ratings train = positives_of(read_with_ids_of(m, f.exclude, f.format), m.positive);
  if (test.size() == 0) {
    throw InputError(fmt::format("{}: no rating >= {} (the model's positives) of a user and item the model has",
                                 f.test_file, m.positive));
  }
  // The model's cold items (no training positive, zero rows) are never ranked, by either: misses.
  const RankedAgainstPopular r = rank_against_popular(*m.store, SeenItems(train, layout.users), train, test,
                                                      layout.items, f.k, m.cold.items);
  fmt::print("eval: {} test positives (rating >= {}; {} more of users or items the model lacks), {} users ranked "
             "over {} items; BPR {}\n",
             test.size(), m.positive, test_all.size() - test.size(), r.ours.users, layout.items,
             metrics_text(r.ours, f.k));
  fmt::print("      most-popular {}\n", metrics_text(r.popular, f.k));
  return 0;
}

int eval(const MfEvalFlags& f) {
  check_one_stdin({{"test_file", f.test_file}, {"--exclude", f.exclude}});
  LoadedModel m = load_model(f.model_file);
  if (m.loss == "bpr") return eval_ranking(f, m);
  if (!f.exclude.empty()) throw InputError("--exclude: only for a bpr model (a squared model is scored by RMSE)");
  if (f.k_given) throw InputError("-k: only for a bpr model (a squared model is scored by RMSE, not at k)");
  const Ratings test = read_with_ids_of(m, f.test_file, f.format);
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

int recommend_cmd(const MfRecommendFlags& f) {
  std::FILE* const report = report_stream({f.all_users});
  if (f.user.empty() == f.all_users.empty()) throw InputError("recommend: give exactly one of --user U or --all-users FILE");
  if (f.k == 0) throw InputError("-k 0: expected at least 1 item per user");
  constexpr std::size_t kBatch = 128;  // users scored in one product
  // Before anything is read: the lists must not replace the model or the ratings they exclude.
  check_distinct("--all-users", f.all_users, {{"model_file", f.model_file}, {"--exclude", f.exclude}});
  check_output("--all-users", f.all_users);
  LoadedModel m = load_model(f.model_file, f.shm);
  const FactorLayout layout = FactorLayout::of(m.store->layout());
  std::optional<SeenItems> seen;
  if (!f.exclude.empty()) {
    seen.emplace(read_with_ids_of(m, f.exclude, f.format), layout.users);
  }
  std::vector<std::uint32_t> users;
  if (!f.user.empty()) {
    const auto id = m.users.find(f.user);
    if (!id || *id >= layout.users) throw InputError(fmt::format("--user {}: not a user of this model", f.user));
    if (m.cold.has_user(*id)) {
      fmt::print(stderr, "--user {}: no training ratings; ranked by item biases alone\n", f.user);
    }
    users.push_back(*id);
  } else {
    for (std::uint32_t u = 0; u < layout.users; ++u) users.push_back(u);
  }
  // Items without a training rating have no learnt factors: never recommended. Users without one score each item
  // as an unknown user does (the mean and the item's bias).
  double seconds = 0;
  const auto lists_of = [&](std::span<const std::uint32_t> some) {
    const auto start = std::chrono::steady_clock::now();
    auto lists = recommend(*m.store, m.scale, seen ? &*seen : nullptr, some, f.k, kBatch, m.cold.items, m.cold.users);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return lists;
  };
  // Ranked by the raw score; printed as `mf predict` would say it (clipped
  // into the training ratings' range; BPR scores have none).
  if (!f.user.empty()) {
    const auto lists = lists_of(users);  // (a range-for over lists_of(users)[0] would outlive the lists)
    for (const auto& r : lists[0]) fmt::print("{}\t{:.4f}\n", m.items.name(r.item), m.range.clip(r.score));
    return 0;
  }
  // Scored and written a part of the users at a time, about 2^24 recommendations each: all the lists at once held
  // 5.5 GB for -k 10000 over 70,000 users (17 GB of output).
  const std::size_t part = std::max<std::size_t>(kBatch, (std::size_t{1} << 24) / f.k / kBatch * kBatch);
  AtomicFile out(f.all_users);
  std::string line;
  for (std::size_t first = 0; first < users.size(); first += part) {
    const std::span<const std::uint32_t> some(users.data() + first, std::min(part, users.size() - first));
    const auto lists = lists_of(some);
    for (std::size_t j = 0; j < some.size(); ++j) {
      for (std::size_t rank = 0; rank < lists[j].size(); ++rank) {
        line = fmt::format("{}\t{}\t{}\t{:.4f}\n", m.users.name(some[j]), rank + 1, m.items.name(lists[j][rank].item),
                           m.range.clip(lists[j][rank].score));
        out.write(line);
      }
    }
  }
  out.commit();
  fmt::print(report, "top-{} for {} users in {:.3f} s (scoring and ranking) written to {}\n", f.k, users.size(), seconds,
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

}  // namespace

void add_mf_commands(CLI::App& app, int& exit_code) {
  auto* mf = app.add_subcommand("mf", "Matrix factorization (LIBMF-style flags)");
  mf->require_subcommand(1);

  auto t = std::make_shared<MfTrainFlags>();
  auto* train_cmd = mf->add_subcommand("train", "asgd mf train [options] TRAIN_FILE [MODEL_FILE]");
  train_cmd->add_option("train_file", t->train_file, "Ratings (u.data, ratings.dat, ratings.csv or LIBMF text; gzipped or not)")
      ->required();
  train_cmd->add_option("model_file", t->model_file, "Write the model here");
  train_cmd->add_option("-k", t->factors, "Factors")->capture_default_str();
  train_cmd->add_option("-t", t->epochs, "Epochs")->capture_default_str();
  train_cmd->add_option("--l2", t->l2, "L2 on P and Q (-l2 as in LIBMF)")->capture_default_str();
  train_cmd->add_option("--bias-l2", t->bias_l2, "L2 on the biases")->capture_default_str();
  train_cmd->add_option("-r", t->rate, "Learning rate")->capture_default_str();
  train_cmd->add_option("--lr-schedule", t->lr_schedule,
                        "constant, linear (to 0 at the end) or inverse-sqrt (default: constant; bpr: linear)");
  train_cmd->add_option("--init", t->init_scale, "P and Q start uniform in [0, INIT / sqrt(k))")->capture_default_str();
  train_cmd->add_option("-s", t->threads, "Threads (workers)")->capture_default_str();
  train_cmd->add_option("-v,-p", t->validation_file, "Validation file: RMSE after every epoch (-p: LIBMF's spelling)");
  train_cmd->add_option("--test-fraction", t->test_fraction,
                        "Hold out this fraction at random as a test set (bpr: per user)");
  train_cmd->add_option("--validation-fraction", t->validation_fraction,
                        "Hold out this fraction of the training part as a validation set (for tuning)");
  train_cmd->add_flag("--sampled-eval", t->sampled_eval,
                      "bpr: also leave-one-out by time vs 99 sampled negatives (NCF's protocol)");
  train_cmd->add_option("--split-seed", t->split_seed, "Seed of the random split")->capture_default_str();
  train_cmd->add_option("--format", t->format, "detect, udata, dat, csv, libmf")->capture_default_str();
  train_cmd->add_option("--seed", t->seed, "Seed for initialisation and shuffles")->capture_default_str();
  train_cmd->add_option("--policy", t->policy, "racy (Hogwild!), atomic, locked")->capture_default_str();
  train_cmd->add_option("--tau", t->tau, "Bounded delay in steps (inf = async)")->capture_default_str();
  train_cmd->add_flag("--adagrad", t->adagrad, "Per-parameter AdaGrad steps");
  train_cmd->add_flag("--no-biases", t->no_biases, "squared: learn no user and item biases (as LIBMF)");
  train_cmd->add_flag("--no-mean", t->no_mean,
                      "squared: predict biases + p . q, not centred on the mean (as LIBMF; unknown ids still get the mean)");
  train_cmd->add_flag("--scale-ratings", t->scale_ratings,
                      "squared: fit ratings divided by their standard deviation, the L2 weights too (as LIBMF)");
  train_cmd->add_flag("--row-adagrad", t->row_adagrad, "Per-row AdaGrad steps: lr / sqrt(1 + G_row), as LIBMF 2");
  train_cmd->add_flag("--head-first", t->head_first,
                      "row AdaGrad as LIBMF 2 runs it: the first 8 factors keep their own sum and train alone in epoch 1");
  train_cmd->add_option("--schedule", t->schedule, "hogwild (racy updates anywhere) or blocks (LIBMF's grid)")
      ->capture_default_str();
  train_cmd->add_option("--shm", t->shm, "Train in shared segment NAME; with MODEL_FILE, ids are written first for serving");
  train_cmd->add_flag("--shm-recover", t->shm_recover, "Take over a segment whose writer was killed");
  train_cmd->add_option("--loss", t->loss, "squared (explicit ratings) or bpr (implicit: ratings >= --positive)")
      ->capture_default_str();
  train_cmd->add_option("--positive", t->positive_threshold, "bpr: ratings at or above this are positives")
      ->capture_default_str();
  train_cmd->add_option("--bins,-n", t->bins,
                        "blocks: users and items split into this many groups, at most 4096 (default 2 x threads + 1); "
                        "fewer workers than bins (lowered, with a note)");
  train_cmd->add_flag("--quiet,-q", t->quiet, "No per-epoch lines");
  add_distributed_flags(*train_cmd, t->dist);
  train_cmd->callback([t, train_cmd, &exit_code] {
    // BPR under mpirun sums the ranks' updates unless told otherwise: the
    // mean divides every rank's step by the number of ranks, and on the
    // data of tests/net/mpi_apps.sh (2 ranks, 50 epochs) it reached NDCG@10
    // 0.175 against the sum's 0.224 and one process's 0.231 (bench/RESULTS.md).
    if (t->loss == "bpr") sum_unless_chosen(t->dist, train_cmd->count("--combine") > 0);
    for (const CLI::Option* o : train_cmd->get_options())
      if (o->count() > 0) t->given.emplace_back(o->get_name(), o->get_name(false, true));
    exit_code = run_guarded([&] { return run_distributed(t->dist, [&](Distributed& d) { return train(*t, d); }); });
  });

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
