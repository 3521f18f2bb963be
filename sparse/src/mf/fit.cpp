#include "asgd/sparse/mf/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>
#include <vector>

#include "asgd/engine/block_scheduler.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/file_checks.hpp"
#include "asgd/engine/training_run.hpp"
#include "asgd/sparse/mf/bpr.hpp"
#include "asgd/sparse/mf/model_file.hpp"
#include "asgd/sparse/mf/resume_check.hpp"

namespace asgd::sparse::mf {

Loss parse_loss(std::string_view name) {
  if (name == "squared") return Loss::squared;
  if (name == "bpr") return Loss::bpr;
  throw InputError(fmt::format("loss '{}': expected squared or bpr", name));
}

void FitOptions::validate() const {
  model.validate();
  for (const auto& [name, value] : {std::pair{"test_fraction", test_fraction},
                                    std::pair{"validation_fraction", validation_fraction}}) {
    if (!(value >= 0 && value < 1)) throw InputError(fmt::format("FitOptions::{} {}: expected 0 <= F < 1", name, value));
  }
  if (loss == Loss::bpr && !std::isfinite(positive)) {
    throw InputError(fmt::format("FitOptions::positive {}: expected a finite rating", positive));
  }
  // An option of the other loss or schedule would be ignored: refused, so that nobody believes it applied.
  const auto only = [](bool set, std::string_view option, std::string_view with) {
    if (set) throw InputError(fmt::format("{}: only with {}", option, with));
  };
  const bool bpr = loss == Loss::bpr;
  for (const auto& [set, option] : {std::pair{validation_fraction != 0, "FitOptions::validation_fraction"},
                                    std::pair{model.bins != 0, "MfOptions::bins"},
                                    std::pair{!model.biases, "MfOptions::biases"},
                                    std::pair{!model.center, "MfOptions::center"},
                                    std::pair{model.scale_ratings, "MfOptions::scale_ratings"},
                                    std::pair{model.head_first != 0, "MfOptions::head_first"},
                                    std::pair{order == Order::blocks, "FitOptions::order blocks"}})
    only(bpr && set, option, "Loss::squared");
  only(!bpr && positive != kDefaultPositive, "FitOptions::positive", "Loss::bpr");
  only(!bpr && sampled_eval, "FitOptions::sampled_eval", "Loss::bpr");
  if (trainer.blocks) throw InputError("TrainerOptions::blocks: fit sets it from FitOptions::order (give blocks)");
  if (order == Order::blocks && trainer.tau != kUnbounded) {
    throw InputError("TrainerOptions::tau: only without FitOptions::order blocks (the block schedule's workers share "
                     "no row or column: there is no delay to bound)");
  }
  only(!bpr && model.bins != 0 && !block_order(*this, false, 0), "MfOptions::bins",
       "FitOptions::order blocks, or automatic without a bounded TrainerOptions::tau");
  only(model.head_first != 0 && !trainer.schedule.row_adagrad, "MfOptions::head_first",
       "Schedule::row_adagrad (LIBMF's rule)");
  if (checkpoint_every == 0) throw InputError("FitOptions::checkpoint_every 0: expected at least 1 epoch");
  if (initial != nullptr && !resume.empty())
    throw InputError("FitOptions::initial: not with FitOptions::resume (the checkpoint holds the factors)");
  check_distinct("FitOptions::checkpoint", checkpoint.string(), {{"FitOptions::model_file", model_file.string()}});
  trainer.validate();
}

std::string_view to_string(Order order) noexcept {
  return order == Order::automatic ? "auto" : order == Order::blocks ? "blocks" : "hogwild";
}

Order parse_order(std::string_view name) {
  if (name == "auto" || name == "automatic") return Order::automatic;
  if (name == "hogwild") return Order::hogwild;
  if (name == "blocks") return Order::blocks;
  throw InputError(fmt::format("FitOptions::order '{}': expected auto, hogwild or blocks", name));
}

bool block_order(const FitOptions& o, bool several_ranks, std::size_t ratings) noexcept {
  if (o.loss != Loss::squared) return false;
  if (o.order != Order::automatic) return o.order == Order::blocks;
  if (o.trainer.tau != kUnbounded) return false;
  return o.model.bins != 0 || (!several_ranks && ratings > BiasedMf::kReshuffleBelow);
}

std::string objective_settings(const FitOptions& o) {
  const MfOptions& m = o.model;
  if (o.loss == Loss::bpr) {
    return fmt::format("--loss bpr --l2 {} --bias-l2 {} --positive {}", m.l2, m.bias_l2, o.positive);
  }
  // Without biases --bias-l2 has nothing to weigh.
  std::string text = fmt::format("--loss squared --l2 {}", m.l2);
  text += m.biases ? fmt::format(" --bias-l2 {}", m.bias_l2) : std::string(" --no-biases on");
  if (!m.center) text += " --no-mean on";
  if (m.scale_ratings) text += " --scale-ratings on";
  return text;
}

BlockGrid block_grid(std::size_t asked, std::size_t workers, std::size_t users, std::size_t items) {
  BlockGrid g;
  g.bins = asked ? asked : std::min(2 * workers + 1, BlockScheduler::kMostBins);
  // More bins than users or items leaves rows or columns of the grid empty: blocks to schedule and nothing in
  // them (4096 bins on 100 users took seconds an epoch for 1000 ratings).
  const std::size_t fewest = std::max<std::size_t>(1, std::min(users, items));
  g.cut = g.bins > fewest;
  if (g.cut) g.bins = fewest;
  // A worker needs a row and a column of blocks that no other holds. With as many workers as bins, one that
  // puts its block back finds none free (LIBMF refuses it: bins > workers); near that, few blocks are free at a
  // time, so workers mostly wait and each pick searches a sparse grid (ml-100k's 943 bins with this scheduler:
  // 943 workers took 321 s an epoch; with no work per block, 942 workers 21 s, 471 workers 1.3 s). So bins >
  // workers always, and where the bins were cut to the users or items, bins > 2 x workers, as the default.
  const std::size_t most = g.cut ? (g.bins - 1) / 2 : g.bins - 1;
  g.workers = std::max<std::size_t>(1, std::min(workers, most));
  return g;
}

RatingSets split_sets(Ratings all, double test_fraction, double validation_fraction, std::uint64_t seed,
                      std::optional<Ratings> validation) {
  RatingSets s;
  if (test_fraction > 0) {
    Split split = random_split(all, test_fraction, seed);
    s.train = std::move(split.train);
    s.test = std::move(split.test);
    s.have_test = true;
  } else {
    s.train = std::move(all);
  }
  if (validation_fraction > 0) {
    if (validation) throw InputError("FitOptions::validation_fraction: not with a validation set given");
    Split split = random_split(s.train, validation_fraction, seed + 1);
    s.train = std::move(split.train);
    s.validation = std::move(split.test);
    s.have_validation = true;
  }
  if (validation) {
    s.validation = std::move(*validation);
    check_model_ids(FactorLayout::make(s.train.users.size(), s.train.items.size(), 1, false, s.train.id_maps_tag()),
                    s.validation, "validation set");
    // Ids first seen in the validation set get rows too (never trained).
    s.train.users = s.validation.users;
    s.train.items = s.validation.items;
    if (s.have_test) {
      s.test.users = s.train.users;
      s.test.items = s.train.items;
    }
    s.have_validation = true;
  }
  return s;
}

namespace {

// MfOptions::scale_ratings divides the L2 weights by the ratings' deviation (`sd`, floored): ratings nearly all
// alike make them so large that the shrinking alone overshoots (every factor changes sign and grows), and the
// run diverges. Such a step is refused.
void check_scaled_step(const FitOptions& o, float sd, const Ratings& train) {
  const float l2 = std::max(o.model.l2, o.model.biases ? o.model.bias_l2 : 0.0f);
  const float rate = o.trainer.schedule.lr;
  if (rate * l2 / sd < 1.0f) return;
  // The scale is the deviation floored at 1e-4 (LIBMF's floor): say which it was.
  const float deviation = static_cast<float>(train.deviation());
  throw InputError(fmt::format("MfOptions::scale_ratings: the ratings' standard deviation is {:.3g}{}, which makes "
                               "the L2 weight {:.3g}, and a step at Schedule::lr {} overshoots it; lower Schedule::lr "
                               "or MfOptions::l2, or leave the ratings unscaled",
                               deviation, deviation < sd ? fmt::format(" (scaled by the floor, {:.3g})", sd) : "",
                               l2 / sd, rate));
}

// The checkpoint to resume, read before the problem is made (its ratings are shuffled with the resumed run's
// seed): the file the group reads for this rank (RankGroup::resume_checkpoint), or FitOptions::resume itself.
// A checkpoint already at TrainerOptions::epochs is refused: the run would train nothing and rewrite the model.
std::optional<RankGroup::Resumed> read_resume(const FitOptions& o, RankGroup& group) {
  if (o.resume.empty()) return std::nullopt;
  std::optional<RankGroup::Resumed> resumed = group.resume_checkpoint(o.resume, o.trainer);
  if (!resumed) resumed = RankGroup::Resumed{read_checkpoint(o.resume), o.resume};
  if (resumed->data.state.epoch >= o.trainer.epochs) {
    throw InputError(fmt::format("FitOptions::resume {}: {} epochs are done already; TrainerOptions::epochs {} is the "
                                 "run's total (give more)",
                                 o.resume.string(), resumed->data.state.epoch, o.trainer.epochs));
  }
  return resumed;
}

// The seed a run trains with: a resumed run's own (its shuffles and draws go on as they were).
std::uint64_t run_seed(const FitOptions& o, const std::optional<RankGroup::Resumed>& resumed) {
  return resumed ? resumed->data.state.seed : o.trainer.seed;
}

// Where the model trains (the heap or a segment), its factors initialised when new (a new segment before another
// process may attach it; ids without a rating in `trained` start as zero rows).
// The root alone holds the checkpoint's lock (the ranks of a job share the path).
TrainingRun open_run(const FitOptions& o, const Layout& layout, const Ratings& trained, RankGroup& group,
                     std::optional<RankGroup::Resumed> resumed) {
  TrainingRunOptions ro;  // field by field: GCC 12 warns falsely on a designated initializer here
  ro.shm = o.shm;
  ro.attach.recover_stale = o.shm_recover;
  ro.attach.settings = objective_settings(o);
  ro.stop = o.stop;
  ro.on_progress = o.on_progress;
  ro.checkpoint = o.checkpoint;
  ro.checkpoint_every = o.checkpoint_every;
  ro.lock_checkpoint = o.lock_checkpoint && group.root();
  if (resumed) {
    ro.resume = std::move(resumed->file);
    ro.resumed = std::move(resumed->data);
  }
  return TrainingRun(layout, std::move(ro), [&](ParamStore& s) {
    initialize_factors(s, o.trainer.seed, o.model.init_scale, &trained);
    if (o.initial != nullptr) copy_factor_rows(*o.initial, s);
  });
}

// The run's record: the engine's options and the objective (a resume says which of them changed).
// Under AdaGrad on several ranks each rank checkpoints its own sums: the record says how many ranks wrote them (a
// group of another number cuts them again first, net::MultiRank::recut_checkpoints; check_mf_resume refuses a
// group that does not).
void record_run(TrainingRun& run, const TrainerOptions& to, const FitOptions& o, const RankGroup& group) {
  OptionsRecord record = engine_options(to);
  // The order as asked: auto resolves by the ranks and the data, so a job resumed under mpirun from one that
  // auto gave blocks takes hogwild without the user changing a flag (the run's line says which it trains).
  // The engine's "schedule" is the rates'.
  record["order"] = std::string(to_string(o.order));
  if (to.schedule.has_adagrad() && group.active()) record["ranks"] = std::to_string(group.size());
  run.set_record(std::move(record), to.seed, objective_settings(o));
}

// Training begins: the model file written first with a segment (the ids and the scale a server needs while the
// factors train), on_start told, the group's common start. The Trainer was made after run.configure and
// group.prepare.
// The checkpoint resumed, if any, checked against this run's model and loaded into the trainer.
void resume(TrainingRun& run, Trainer& trainer, FitSetup& setup) {
  if (!run.resumed()) return;
  check_mf_resume(*run.resumed(), run.options().resume, trainer.options().checkpoint_metadata);
  setup.changes = run.changes_since_resumed();
  run.load_resumed(trainer);
  setup.resumed = true;
  setup.resumed_epoch = trainer.state().epoch;
}

void start_training(const FitOptions& o, Trainer& trainer, TrainingRun& run, RankGroup& group,
                    const FitEvents& events, FitSetup& setup) {
  resume(run, trainer, setup);
  if (!o.shm.empty() && !o.model_file.empty()) trainer.save_model(o.model_file);
  setup.created = run.created();
  if (events.on_start) events.on_start(setup);
  group.start(trainer, run.store());
  run.started();  // from here on the segment holds training: kept whatever happens next
}

// The parameters as the last finished epoch left them (FitOptions::keep_last_epoch): copied after every epoch,
// when run_averaged's epoch loop has no worker running, and put back when a stop ends the run mid-epoch.
class LastEpoch {
 public:
  explicit LastEpoch(bool keep) : keep_(keep) {}
  void take(const ParamStore& store) {
    if (keep_) params_.assign(store.data(), store.data() + store.size());
  }
  // Whether an epoch finished; if so, `store` holds its parameters again.
  bool restore(ParamStore& store) const {
    if (params_.empty()) return false;
    store.assign(params_);
    return true;
  }

 private:
  bool keep_;
  std::vector<float> params_;
};

// The model itself into the report (its store moved out of the run).
void keep_model(Trainer& trainer, TrainingRun& run, ModelInfo info, FitReport& report) {
  LoadedModel& model = report.model.emplace();
  static_cast<ModelInfo&>(model) = std::move(info);
  model.epochs = trainer.state().epoch;
  model.store.emplace(std::move(run.store()));
  report.metadata = trainer.model_metadata();  // as the model file has it
}

// The model file, if asked, then the model into the report.
void write_model(const FitOptions& o, Trainer& trainer, TrainingRun& run, ModelInfo info, FitReport& report) {
  if (!o.model_file.empty()) {
    trainer.save_model(o.model_file);  // one file, whatever the ranks: any number of ranks resumes it
    report.model_written = true;
  }
  keep_model(trainer, run, std::move(info), report);
}

ModelInfo model_info(const FitOptions& o, const Ratings& train, const ColdIds& cold, const RatingScale& scale,
                     const RatingRange& range) {
  ModelInfo info;
  info.loss = o.loss == Loss::bpr ? "bpr" : "squared";
  info.positive = o.positive;
  info.scale = scale;
  info.range = range;
  info.users = train.users;
  info.items = train.items;
  info.cold = cold;
  return info;
}

FitReport fit_squared(Ratings ratings, const FitOptions& o, RankGroup& group, const FitEvents& events,
                      std::optional<Ratings> validation) {
  FitSetup setup;
  setup.ratings = ratings.size();
  const RatingSets sets =
      split_sets(std::move(ratings), o.test_fraction, o.validation_fraction, o.split_seed, std::move(validation));
  const Ratings& train = sets.train;
  setup.trained = train.size();
  setup.users = train.users.size();
  setup.items = train.items.size();
  MfOptions mo = o.model;
  TrainerOptions to = o.trainer;
  to.blocks = block_order(o, group.active(), train.size());
  mo.bins = 0;
  if (to.blocks) {
    setup.grid = block_grid(o.model.bins, to.workers, setup.users, setup.items);
    mo.bins = setup.grid->bins;
    to.workers = setup.grid->workers;
  }
  if (events.on_data) events.on_data(setup);
  // Each rank trains every P-th rating around the whole training set's mean and deviation.
  mo.mean = static_cast<float>(train.mean());
  mo.deviation = static_cast<float>(train.deviation());
  std::optional<Ratings> shard;
  if (group.active()) shard = train.subset(group.shard(train.size(), "training ratings"));
  std::optional<RankGroup::Resumed> resumed = read_resume(o, group);
  to.seed = run_seed(o, resumed);
  const BiasedMf problem(shard ? *shard : train, mo, to.seed);
  const RatingScale& scale = problem.rating_scale();
  if (mo.scale_ratings) check_scaled_step(o, scale.scale, train);
  const RatingRange range = RatingRange::of(train);
  TrainingRun run = open_run(o, problem.layout(), train, group, std::move(resumed));
  // Ids first seen in a validation or test set: zero rows, predicted as unknown ids are.
  const ColdIds cold = cold_ids(train.users.size(), train.items.size(), train);
  record_run(run, to, o, group);
  to.checkpoint_metadata = model_metadata(train, cold, scale, mo, "squared", 0, run.record());
  setup.mean = problem.global_mean();
  setup.examples = problem.num_examples();
  run.configure(to);
  group.prepare(to);
  Trainer trainer(run.store(), to);
  start_training(o, trainer, run, group, events, setup);
  const auto errors = [&](const Ratings& set) {
    return evaluate_errors(run.store(), scale, set, range.lo, range.hi, &cold);
  };
  FitReport report;
  report.workers = to.workers;
  report.bins = mo.bins;
  double seconds = 0;  // of the epochs so far
  LastEpoch last(o.keep_last_epoch && group.root());
  report.train = run_averaged(group, trainer, problem, to.epochs, [&](const TrainReport& r) {
    seconds += r.seconds;
    last.take(run.store());
    if (!events.on_epoch || !group.root()) return;
    FitEpoch e;
    e.epoch = r.epochs.back().epoch;
    e.loss = r.epochs.back().loss;
    e.squared_error = 2.0 * r.epochs.back().loss;
    e.seconds = seconds;
    if (sets.have_validation && sets.validation.size() > 0) e.validation_rmse = errors(sets.validation).rmse;
    if (sets.have_test && sets.test.size() > 0) e.test_rmse = errors(sets.test).rmse;
    events.on_epoch(e);
  });
  if (report.train.stopped && last.restore(run.store()))
    keep_model(trainer, run, model_info(o, train, cold, scale, range), report);
  if (report.train.stopped || !group.root()) return report;
  if (sets.have_validation) report.validation = errors(sets.validation);
  if (sets.have_test) report.test = errors(sets.test);
  write_model(o, trainer, run, model_info(o, train, cold, scale, range), report);
  return report;
}

FitReport fit_bpr(const Ratings& ratings, const FitOptions& o, RankGroup& group, const FitEvents& events) {
  const Ratings positives = positives_of(ratings, o.positive);
  if (positives.size() == 0) throw InputError(fmt::format("no rating >= {} (FitOptions::positive)", o.positive));
  FitSetup setup;
  setup.ratings = ratings.size();
  setup.positives = positives.size();
  setup.users = positives.users.size();
  setup.items = positives.items.size();
  // The model has a row for every id; fewer have a positive to learn from.
  std::vector<char> user_has(setup.users, 0), item_has(setup.items, 0);
  for (std::size_t i = 0; i < positives.size(); ++i) user_has[positives.user[i]] = item_has[positives.item[i]] = 1;
  setup.users_with_positive = static_cast<std::size_t>(std::count(user_has.begin(), user_has.end(), 1));
  setup.items_with_positive = static_cast<std::size_t>(std::count(item_has.begin(), item_has.end(), 1));
  if (events.on_data) events.on_data(setup);
  Split split;
  if (o.test_fraction > 0) {
    split = random_split_per_user(positives, o.test_fraction, o.split_seed);
  } else {
    split.train = positives;
  }
  setup.trained = split.train.size();
  // Each rank trains every P-th training positive, drawing negatives against all of them.
  std::optional<std::vector<std::size_t>> shard;
  if (group.active()) shard = group.shard(split.train.size(), "training positives");
  std::optional<RankGroup::Resumed> resumed = read_resume(o, group);
  TrainerOptions to = o.trainer;
  to.seed = run_seed(o, resumed);
  const BprMf problem(split.train, o.model, to.seed, shard ? &*shard : nullptr);
  TrainingRun run = open_run(o, problem.layout(), split.train, group, std::move(resumed));
  // Items with no training positive (all of theirs held out): zero rows, never recommended nor ranked.
  const ColdIds cold = cold_ids(setup.users, setup.items, split.train);
  record_run(run, to, o, group);
  to.checkpoint_metadata =
      model_metadata(split.train, cold, RatingScale(0.0f), o.model, "bpr", o.positive, run.record());
  setup.examples = problem.num_examples();
  run.configure(to);
  group.prepare(to);
  Trainer trainer(run.store(), to);
  start_training(o, trainer, run, group, events, setup);
  FitReport report;
  report.workers = to.workers;
  double seconds = 0;  // of the epochs so far
  LastEpoch last(o.keep_last_epoch && group.root());
  report.train = run_averaged(group, trainer, problem, to.epochs, [&](const TrainReport& r) {
    seconds += r.seconds;
    last.take(run.store());
    if (!events.on_epoch || !group.root()) return;
    FitEpoch e;
    e.epoch = r.epochs.back().epoch;
    e.loss = r.epochs.back().loss;
    e.seconds = seconds;
    events.on_epoch(e);
  });
  if (report.train.stopped && last.restore(run.store()))
    keep_model(trainer, run, model_info(o, split.train, cold, RatingScale(0.0f), RatingRange{}), report);
  if (report.train.stopped || !group.root()) return report;
  report.positives = positives.size();
  report.held_out = split.test.size();
  report.cold_items = cold.items.size();
  if (o.test_fraction > 0) {
    // The cold items are never ranked, by either: misses, as in a model file's ranking.
    report.ranking = rank_against_popular(run.store(), problem.seen(), split.train, split.test, setup.items, 10,
                                          cold.items);
  }
  write_model(o, trainer, run, model_info(o, split.train, cold, RatingScale(0.0f), RatingRange{}), report);
  if (o.sampled_eval) {
    TrainerOptions lo = o.trainer;
    lo.stop = o.stop;
    report.sampled = sampled_against_popular(positives, o.model, lo, o.split_seed);
  }
  return report;
}

}  // namespace

FitReport fit(Ratings ratings, const FitOptions& options, RankGroup& group, const FitEvents& events,
              std::optional<Ratings> validation) {
  options.validate();
  if (options.loss == Loss::squared) return fit_squared(std::move(ratings), options, group, events, std::move(validation));
  if (validation) throw InputError("fit: a validation set is for Loss::squared only");
  return fit_bpr(ratings, options, group, events);
}

FitReport fit(Ratings ratings, const FitOptions& options) {
  RankGroup one_process;
  return fit(std::move(ratings), options, one_process);
}

}  // namespace asgd::sparse::mf
