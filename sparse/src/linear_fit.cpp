#include "asgd/sparse/linear_fit.hpp"

#include <fmt/format.h>

#include <cmath>
#include <utility>
#include <vector>

#include "asgd/engine/available_memory.hpp"
#include "asgd/engine/checkpoint_lock.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/file_checks.hpp"
#include "asgd/engine/options_record.hpp"
#include "asgd/sparse/linear_model_file.hpp"
#include "asgd/sparse/linear_resume_check.hpp"
#include "asgd/sparse/linear_segment.hpp"
#include "asgd/sparse/linear_training_data.hpp"

namespace asgd::sparse {

namespace {

// The options that need no data, checked before it is read (a 1 GB file took 5.5 s before a bad l2 was said).
void check_l2(const LinearFitOptions& options) {
  if (!(options.l2 >= 0) || !std::isfinite(options.l2))
    throw InputError(fmt::format("LinearFitOptions::l2 {}: expected finite and >= 0", options.l2));
}

// A width asked for is checked before the data is read (and an id past it is refused at its line as it is read).
void check_features(const LinearFitOptions& options) {
  if (options.features == 0) return;
  const std::uint64_t per_feature = training_bytes_per_feature(options);
  require_memory(saturating_product(options.features, per_feature),
                 fmt::format("LinearFitOptions::features {}: a model of {} features ({} bytes a feature to train)",
                             options.features, options.features, per_feature));
}

void check_until_epoch(const LinearFitOptions& options) {
  if (options.until_epoch > options.trainer.epochs) {
    throw InputError(fmt::format("LinearFitOptions::until_epoch {}: past TrainerOptions::epochs {}",
                                 options.until_epoch, options.trainer.epochs));
  }
  if (options.until_epoch != 0 && options.run.checkpoint.empty() && options.model.empty())
    throw InputError("LinearFitOptions::until_epoch: give TrainingRunOptions::checkpoint FILE to resume from (or "
                     "LinearFitOptions::model), or the run is lost");
}

// The run's options: the checkpoint to resume read (by this rank's rule), the objective a segment keeps.
TrainingRunOptions run_options(const LinearFitOptions& options, RankGroup& group) {
  TrainingRunOptions ro = options.run;
  ro.lock_checkpoint = false;  // held since before the data was read (fit_linear)
  ro.attach.settings = linear_segment_settings(options.loss, options.l2);
  if (!options.run.resume.empty()) {
    if (auto resumed = group.resume_checkpoint(options.run.resume, options.trainer)) {
      ro.resume = std::move(resumed->file);
      ro.resumed = std::move(resumed->data);
    }
  }
  return ro;
}

TrainingRun open_run(const LinearFitOptions& options, Layout layout, TrainingRunOptions ro) {
  try {
    return TrainingRun(std::move(layout), std::move(ro));
  } catch (const LayoutMismatch& e) {
    if (options.features != 0) throw;
    throw LayoutMismatch(fmt::format("{}\n(without LinearFitOptions::features each process sizes the weights from "
                                     "the largest feature id in its own LinearFitOptions::data: give every process "
                                     "the same LinearFitOptions::features N)",
                                     e.what()));
  }
}

// The run's id and record: the objective every rank trains, the seed (a resume keeps the checkpoint's) and what
// this rank trains on, counted (a resume on other data can be told).
void record_run(TrainingRun& run, TrainerOptions& trainer, const LinearFitOptions& options,
                const LinearTrainingData& d, const RankGroup& group) {
  const LinearProblem& problem = d.problem();
  OptionsRecord record = engine_options(trainer);
  // Under AdaGrad on several ranks each checkpoints its own sums: the checkpoints say how many ranks wrote them,
  // and the count is in the run id, so that rank files of a job of another count are not taken for this one's.
  if (trainer.schedule.has_adagrad() && group.active()) record["ranks"] = std::to_string(group.size());
  run.set_record(std::move(record), trainer.seed,
                 fmt::format("{} {} {}", to_string(options.loss), options.l2, problem.num_features()));
  run.add_to_record("examples", fmt::format("{}", problem.num_examples()));
  run.add_to_record("nonzeros", fmt::format("{}", d.trained().nnz()));
  run.add_to_record("data", fmt::format("{:016x}", d.trained().checksum()));
  trainer.checkpoint_metadata = linear_model_metadata(options.l2, problem.num_features(), options.loss, run.record());
}

// Rank 0 after training: the figures and the model file. A shared segment may be trained on by other processes:
// its snapshot, so that every figure is of the same weights; the heap's weights are read in place (a copy is as
// large as the model).
void finish(LinearFitReport& report, const LinearFitOptions& options, const LinearTrainingData& d,
            std::optional<SparseDataset>& test, const TrainingRun& run, const Trainer& trainer,
            const LinearFitEvents& events) {
  const ParamStore& store = run.store();
  std::vector<float> copy;
  std::span<const float> w(store.data(), store.size());
  if (store.is_shared()) w = copy = store.snapshot();
  if (options.keep_weights) report.weights.assign(w.begin(), w.begin() + d.problem().num_features());
  report.train = quality_of(d.whole(), w);
  if (options.reference) report.reference = reference_gap(d.whole(), w);
  if (test) report.test = score_linear(*test, {w.begin(), w.end()}, options.l2, options.loss);
  if (events.scored) events.scored(report);
  if (options.model.empty()) return;
  trainer.save_model(options.model);  // one file that any number of ranks resumes
  report.model_written = true;
}

}  // namespace

std::uint64_t training_bytes_per_feature(const LinearFitOptions& options) {
  std::uint64_t bytes = 12;  // weights, regulariser weights, the counts they are made from
  if (options.trainer.schedule.has_adagrad()) bytes += 4;
  if (!options.test.empty()) bytes += 4;
  if (!options.run.shm.empty()) bytes += 4;
  if (options.reference) bytes += 25 * 8;
  return bytes;
}

namespace {
// The run on `d` (read from the file or handed over by the caller), with the checkpoint's lock held by the caller.
LinearFitReport fit_data(const LinearFitOptions& options, const LinearTrainingData& d, RankGroup& group,
                         const LinearFitEvents& events);

// The files, before any is read: standard input read once, and (rank 0 writes them) the outputs writable and none
// an input.
void check_files(const LinearFitOptions& o, const RankGroup& group) {
  check_one_stdin({{"LinearFitOptions::data", o.data}, {"LinearFitOptions::test", o.test}});
  if (!group.root()) return;
  check_output("LinearFitOptions::model", o.model);
  check_rewritten_output("TrainingRunOptions::checkpoint", o.run.checkpoint);
  for (const auto& [what, path] : {std::pair{"LinearFitOptions::model", &o.model},
                                   std::pair{"TrainingRunOptions::checkpoint", &o.run.checkpoint}})
    check_distinct(what, *path, {{"LinearFitOptions::data", o.data}, {"LinearFitOptions::test", o.test}});
}

}  // namespace

LinearFitReport fit_linear(const LinearFitOptions& options, RankGroup& group, const LinearFitEvents& events) {
  check_files(options, group);
  const std::string path = rank_data_path(options, group);
  check_l2(options);
  check_features(options);
  // Rank 0 writes the checkpoint (the ranks of a job share the path: TrainingRunOptions::lock_checkpoint): a second
  // run writing it is refused now, before the data is read, and this one holds it to the end.
  const CheckpointLock checkpoint_lock = group.root() ? CheckpointLock(options.run.checkpoint) : CheckpointLock();
  const LinearTrainingData d(options, path, group);
  return fit_data(options, d, group, events);
}

LinearFitReport fit_linear(SparseDataset data, const LinearFitOptions& options, RankGroup& group,
                           const LinearFitEvents& events) {
  if (options.data.find("{rank}") != std::string::npos)
    throw InputError("LinearFitOptions::data " + options.data + ": names data in memory, {rank} has no file to name");
  rank_data_path(options, group);  // the ranks' agreement on the options, as for a file
  check_l2(options);
  check_features(options);
  const CheckpointLock checkpoint_lock = group.root() ? CheckpointLock(options.run.checkpoint) : CheckpointLock();
  const LinearTrainingData d(options, std::move(data), group);
  return fit_data(options, d, group, events);
}

namespace {
LinearFitReport fit_data(const LinearFitOptions& options, const LinearTrainingData& d, RankGroup& group,
                         const LinearFitEvents& events) {
  const LinearProblem& problem = d.problem();
  // Before training, what solve_lbfgs would refuse after it.
  if (options.reference && !problem.smooth())
    throw InputError(fmt::format("LinearFitOptions::reference: not with LinearFitOptions::loss {} (not smooth: "
                                 "L-BFGS has no optimum to give; squared-hinge has)",
                                 to_string(options.loss)));
  // Read before training, so that a bad test file fails now rather than after the run.
  std::optional<SparseDataset> test;
  if (!options.test.empty() && group.root()) {
    test = read_libsvm(options.test, options.unsorted);
    require_examples(*test, "LinearFitOptions::test " + options.test, "score");
  }
  TrainingRunOptions ro = run_options(options, group);
  check_until_epoch(options);
  std::atomic<bool>* const stop = events.stop_from_here ? events.stop_from_here() : nullptr;
  if (stop != nullptr) ro.stop = stop;

  TrainingRun run = open_run(options, problem.layout(), std::move(ro));
  TrainerOptions trainer_options = options.trainer;
  record_run(run, trainer_options, options, d, group);
  if (events.opened) events.opened(run);
  run.configure(trainer_options);
  group.prepare(trainer_options);
  Trainer trainer(run.store(), trainer_options);
  LinearFitReady ready{.run = run, .examples = problem.num_examples(), .all_examples = d.all_examples()};
  if (run.resumed()) {
    check_linear_resume(*run.resumed(), run.options().resume, options, problem.num_features(), group.size());
    // Loaded before it is told: a step rule it refuses (AdaGrad on or off) is an error, not a warning and one.
    OptionsRecord now = run.record();
    now.erase("run");
    ready.changes = resume_changes(saved_options(run.resumed()->metadata), now, "data", "examples");
    ready.resumed = true;
    run.load_resumed(trainer);
  }
  ready.epoch = trainer.state().epoch;
  if (events.ready) events.ready(ready);
  group.start(trainer, run.store());
  run.started();  // from here on a segment holds training: kept whatever happens next
  LinearFitReport report;
  report.training = run_averaged(group, trainer, problem, options.until_epoch ? options.until_epoch
                                                                              : trainer_options.epochs);
  if (report.training.stopped) return report;
  if (events.trained) events.trained(report.training);
  // Every rank holds the same model: rank 0 scores and writes it.
  if (group.root()) finish(report, options, d, test, run, trainer, events);
  return report;
}

}  // namespace

}  // namespace asgd::sparse
