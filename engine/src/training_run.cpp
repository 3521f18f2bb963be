#include "asgd/engine/training_run.hpp"

#include <fmt/format.h>

#include <utility>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/fingerprint.hpp"

namespace asgd {

EpochSummary summarize(const EpochStats& e, double seconds_before) {
  return {.epoch = e.epoch,
          .loss = e.loss,
          .seconds = e.seconds - seconds_before,
          .examples = e.examples,
          .mean_staleness = e.mean_staleness,
          .max_staleness = e.max_staleness,
          .stopped = false};
}

EpochSummary summarize(const BlockEpochStats& e, std::uint64_t epoch_number) {
  return {.epoch = epoch_number,
          .loss = e.mean_loss,
          .seconds = e.seconds,
          .examples = 0,
          .mean_staleness = e.mean_staleness,
          .max_staleness = e.max_staleness,
          .stopped = e.stopped};
}

std::string run_id_text(std::uint64_t id) { return fmt::format("{:010x}", id & kRunIdMask); }

namespace {
TrainingRunOptions checked(TrainingRunOptions o) {
  if (o.checkpoint_every == 0) throw InputError("TrainingRunOptions::checkpoint_every: expected at least 1");
  return o;
}
// The attach's options, with the run's stop request: a wait for another process to finish making the segment ends
// when it is set.
AttachOptions attach_options(const TrainingRunOptions& o) {
  AttachOptions a = o.attach;
  if (a.stop == nullptr) a.stop = o.stop;
  return a;
}
std::optional<CheckpointData> read_if_given(TrainingRunOptions& o) {
  if (o.resumed) return std::exchange(o.resumed, std::nullopt);
  if (o.resume.empty()) return std::nullopt;
  return read_checkpoint(o.resume);
}
}  // namespace

TrainingRun::TrainingRun(Layout layout, TrainingRunOptions options,
                         const std::function<void(ParamStore&)>& initialize)
    : options_(checked(std::move(options))),
      checkpoint_lock_(options_.lock_checkpoint ? CheckpointLock(options_.checkpoint) : CheckpointLock()),
      resumed_(read_if_given(options_)),
      resumed_options_(resumed_ ? saved_options(resumed_->metadata) : std::nullopt),
      store_(open_training_store(options_.shm, std::move(layout), attach_options(options_), initialize)) {
  if (options_.stop != nullptr) stop_ = options_.stop;
  if (resumed_) resumed_seed_ = resumed_->state.seed;
  if (store_.created) return;
  dead_writers_ = ParamStore::inspect_shared(options_.shm).dead_writers;
  // Training would go on from a diverged run's values and diverge again at its first step.
  refuse_diverged(store_.store, options_.shm);
}

void TrainingRun::set_record(OptionsRecord record, std::uint64_t seed, std::string_view settings) {
  record_ = std::move(record);
  record_.erase("run");
  const std::string text =
      fmt::format("{} {} {}", options_.resume.empty() ? seed : resumed_seed_, settings, options_json(record_));
  run_id_ = fnv1a(kFnv1aStart, text) & kRunIdMask;
  record_["run"] = run_id_text(run_id_);
}

std::vector<OptionChange> TrainingRun::changes_since_resumed() const {
  if (!resumed_options_) return {};  // a fresh run, or a checkpoint that recorded no options
  OptionsRecord now = record_;
  now.erase("run");  // a digest of the settings: those that differ are said one by one
  return changed_options(*resumed_options_, now);
}

void TrainingRun::configure(TrainerOptions& options) const {
  options.stop = stop_;
  options.on_progress = options_.on_progress;
  options.checkpoint_path = options_.checkpoint;
  options.checkpoint_every = options_.checkpoint_every;
}

void TrainingRun::configure(BlockTrainOptions& options) const { options.stop = stop_; }

void TrainingRun::load_resumed(Trainer& trainer) {
  if (resumed_) trainer.load_checkpoint(std::move(*resumed_), options_.resume);
  resumed_.reset();
}

void TrainingRun::report(const TrainReport& r) const {
  if (!options_.on_epoch) return;
  double before = 0;
  for (const EpochStats& e : r.epochs) {
    options_.on_epoch(summarize(e, before));
    before = e.seconds;
  }
}

void TrainingRun::report(const EpochSummary& epoch) const {
  if (options_.on_epoch) options_.on_epoch(epoch);
}

}  // namespace asgd
