#include "asgd/dense/fit.hpp"

#include <fmt/format.h>

#include <span>
#include <string_view>
#include <utility>

#include "asgd/dense/epoch_log.hpp"
#include "asgd/dense/lenet_file.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::dense {

namespace {

std::string value_of(const OptionsRecord& record, std::string_view key) {
  const auto it = record.find(key);
  return it == record.end() ? std::string() : it->second;
}

template <class T>
std::string as_text(const T& value) {
  return fmt::format("{}", value);
}

// The run's: the checkpoint rank 0 writes, locked against a second run on the path for as long as this one lasts.
TrainingRunOptions run_options(const FitOptions& options, const RankGroup& group) {
  TrainingRunOptions ro;
  ro.checkpoint = options.checkpoint;
  ro.lock_checkpoint = group.root();
  return ro;
}

}  // namespace

void FitOptions::validate() const {
  train.validate();
  const std::size_t done = resumed ? resumed->state.epoch : 0;
  if (resumed) {
    if (seed && *seed != resumed->state.seed)
      throw InputError(fmt::format("FitOptions::seed {}: {} was trained with seed {}, and a resumed run keeps it",
                                   *seed, resume.string(), resumed->state.seed));
    if (done >= train.epochs)
      throw InputError(fmt::format("FitOptions::resume {}: {} epochs are done already; TrainOptions::epochs is the "
                                   "run's total (give more)",
                                   resume.string(), done));
  }
  if (until_epoch > train.epochs)
    throw InputError(fmt::format("FitOptions::until_epoch {}: past TrainOptions::epochs {}", until_epoch, train.epochs));
  if (until_epoch != 0 && until_epoch <= done)
    throw InputError(fmt::format("FitOptions::until_epoch {}: {} has {} epochs done already", until_epoch,
                                 resume.string(), done));
}

void FitOptions::resume_from(const std::filesystem::path& path, const Network& net, bool its_epochs) {
  resume = path;
  resumed = read_lenet(path, net);
  if (its_epochs) train.epochs = recorded_epochs(path, resumed->metadata).value_or(train.epochs);
}

ResumeChanges resume_changes(const std::string& metadata, OptionsRecord now) {
  const auto before = saved_options(metadata);
  if (before && value_of(now, "lr-schedule") != "cosine" && value_of(*before, "lr-schedule") != "cosine")
    now.erase("epochs");
  return asgd::resume_changes(before, std::move(now), "train-data", "train-images");
}

Fit::Fit(const Network& net, const Dataset& train, const Dataset* test, FitOptions options)
    : Fit(net, train, test, std::move(options), own_group_) {}

Fit::Fit(const Network& net, const Dataset& train, const Dataset* test, FitOptions options, RankGroup& group)
    : net_(net), train_(train), test_(test), options_(std::move(options)), group_(group),
      run_(net.layout(), run_options(options_, group)) {
  if (!options_.resumed && !options_.resume.empty()) options_.resumed = read_lenet(options_.resume, net);
  options_.validate();
  auto& resumed = options_.resumed;
  done_ = resumed ? resumed->state.epoch : 0;
  stop_ = options_.until_epoch != 0 ? options_.until_epoch : options_.train.epochs;
  seed_ = resumed ? resumed->state.seed : options_.seed.value_or(1);
  const OptionsRecord record = make_record();
  metadata_ = lenet_metadata(record);
  ParamStore& store = run_.store();
  if (!resumed) {
    std::vector<float> init(store.size());
    net.initialize(init, seed_);
    store.assign(init);
  } else {
    // Under a job of several ranks every rank reads the file: their parameters and momentum were averaged.
    store.assign(resumed->params);
    momentum_ = std::move(resumed->optimizer_state);  // empty: zeros
    resumed_ = true;
    resumed_state_ = resumed->state;
    changes_ = resume_changes(resumed->metadata, record);
    resumed.reset();
  }
  // Averaging every K updates is a blocking collective, so every rank must make the same updates in an epoch:
  // the ranks then train equal shards.
  rows_ = group_.shard(train.size(), "training images", group_.every_steps() != 0);
}

// What the files record: the options that decide which minibatches a run visits and how it steps, keyed and
// written as the asgd command's flags.
OptionsRecord Fit::make_record() const {
  const TrainOptions& o = options_.train;
  OptionsRecord r;
  group_.add_to_record(r);  // how several ranks average
  r["epochs"] = as_text(o.epochs);
  r["batch"] = as_text(o.batch);
  r["workers"] = as_text(o.workers);
  r["tau"] = tau_to_string(o.tau);
  r["lr"] = as_text(o.lr);
  r["lr-schedule"] = o.schedule == TrainOptions::Schedule::cosine ? "cosine" : "constant";
  r["momentum"] = as_text(o.momentum);
  r["weight-decay"] = as_text(o.weight_decay);
  r["compensate"] = o.compensate ? "on" : "off";
  r["device"] = options_.device;
  r["train-images"] = as_text(train_.size());
  r["train-data"] = fmt::format("{:016x}", train_.checksum());
  r["ranks"] = as_text(group_.size());
  // A worker's GEMMs on more threads sum in another order, which rounds otherwise.
  if (options_.device == "cpu") r["threads-per-worker"] = as_text(o.gemm_threads);
  return r;
}

// Several ranks: one objective and one plan on every rank, a common start,
// and the averages in the trainer's hooks. Each rank trains its shard and,
// after each epoch, the ranks average their parameters and momentum, so one
// trainer (its views and staleness estimate) runs the whole job and every
// rank ends an epoch in the state rank 0's checkpoint holds. Averaging every
// K updates is a blocking round between updates; at K = 1 and tau 0 that is
// synchronous data-parallel SGD (the update is linear in the gradient and the momentum).
void Fit::average_across_ranks(TrainOptions& o, const Dataset& shard) {
  const std::pair<std::string_view, std::string> settings[] = {
      {"BlockTrainOptions::weight_decay", as_text(o.weight_decay)},
      {"the training images", fmt::format("{} images, digest {:016x}", train_.size(), train_.checksum())}};
  group_.same_settings(settings);
  const std::uint64_t every = group_.every_steps();
  const std::size_t batches = (shard.size() + o.batch - 1) / o.batch;
  const std::uint64_t per_epoch = every == 0 ? 0 : BlockTrainer::updates_per_epoch(batches, o);
  const std::uint64_t plan[] = {done_, stop_, every, per_epoch};
  group_.same_on_all_ranks(
      plan, "epochs done/last epoch/K of RankGroup::every_steps (0: epoch)/updates per epoch (every rank needs the "
            "same FitOptions::resume, TrainOptions::epochs, FitOptions::until_epoch, RankGroup::every_steps and, "
            "with RankGroup::every_steps K, TrainOptions::batch, BlockTrainOptions::workers and "
            "BlockTrainOptions::tau)");
  ParamStore& store = run_.store();
  group_.start(std::span<float>(store.data(), store.size()), store.layout());
  o.after_epoch = [this, n = shard.size()] {
    group_.average(static_cast<double>(n));
    // Every rank's momentum the same at an epoch's end, as an uninterrupted job's is at a resume; under
    // compressed rounds (not resumed exactly anyway) each rank keeps its own, as in local SGD.
    if (group_.exact_rounds()) group_.mean_of_ranks(momentum_);
  };
  if (every != 0) {
    o.every_updates = every;
    o.after_updates = [this] { group_.average(1.0); };
  }
}

FitReport Fit::run(const std::function<void(const EpochReport&)>& on_epoch) {
  std::optional<EpochLog> log;
  if (!options_.csv.empty() && group_.root())
    log.emplace(options_.csv, resumed_ ? std::optional<std::size_t>(done_) : std::nullopt);
  TrainOptions o = options_.train;
  o.first_epoch = done_;
  o.epochs = stop_ - done_;
  o.total_epochs = options_.train.epochs;
  o.seed = seed_;
  Dataset shard;
  if (group_.active()) {
    shard = train_.subset(rows_);
    average_across_ranks(o, shard);
  }
  run_.configure(o);
  FitReport report;
  report.epochs_at_start = done_;
  report.last_epoch = stop_;
  const auto each = [&](const EpochReport& r) {
    report.seconds += r.seconds;
    if (on_epoch) on_epoch(r);
    if (log) log->write(r, o, report.seconds);
    if (!options_.checkpoint.empty() && group_.root()) save(options_.checkpoint, r.epoch);
  };
  const Dataset& data = group_.active() ? shard : train_;
  const Dataset* test = group_.root() ? test_ : nullptr;
  const TrainFunction& trainer = options_.trainer ? options_.trainer : TrainFunction(dense::train);
  report.history = trainer(net_, run_.store(), momentum_, data, test, o, each);
  // While the parameters live: a parameter server's last round writes them (every rank's the same after it).
  if (group_.active()) group_.finish();
  if (log) log->close();
  report.stopped = report.history.size() < o.epochs;
  report.images = images_per_epoch() * report.history.size();
  return report;
}

void Fit::save(const std::filesystem::path& path, std::size_t epoch) const {
  TrainState state;
  state.epoch = epoch;
  state.examples = resumed_state_.examples + images_per_epoch() * (epoch - done_);
  state.seed = seed_;
  save_checkpoint(path, run_.store(), state, momentum_, metadata_);
}

}  // namespace asgd::dense
