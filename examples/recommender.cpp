// A recommender pipeline on asgd's library alone: read ratings, train biased
// MF into a shared-memory segment with a checkpoint after every epoch, stop
// the run part-way and resume it from its checkpoint, write the model file,
// and recommend for a user from a second process that attaches the live
// segment read-only (as a serving process would).
//   recommender [WORK_DIR]    (default: the current directory)
#include <sys/wait.h>
#include <unistd.h>

#include <asgd/engine/checkpoint.hpp>
#include <asgd/engine/param_store.hpp>
#include <asgd/engine/trainer.hpp>
#include <asgd/engine/training_run.hpp>
#include <asgd/sparse/mf/generator.hpp>
#include <asgd/sparse/mf/model.hpp>
#include <asgd/sparse/mf/model_file.hpp>
#include <asgd/sparse/mf/ratings.hpp>
#include <asgd/sparse/mf/recommend.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

namespace mf = asgd::sparse::mf;

namespace {

constexpr std::uint64_t kEpochs = 12, kStopAfter = 4;

asgd::TrainerOptions engine_options() {
  asgd::TrainerOptions o;
  o.workers = 2;
  o.epochs = kEpochs;
  o.schedule.kind = asgd::ScheduleKind::linear;
  o.schedule.lr = 0.05f;
  return o;
}

// Trains `problem` in segment `shm` up to epoch `until`, resuming from `checkpoint` when `resume`; stops itself
// once kStopAfter epochs are done when `stop_early` (as Ctrl-C or another thread would: request_stop()).
asgd::TrainReport train(mf::BiasedMf& problem, const std::string& shm, const std::filesystem::path& checkpoint,
                        bool resume, bool stop_early, const mf::Ratings& train_set, const std::string& metadata) {
  asgd::TrainingRunOptions where;
  where.shm = shm;  // created by the first run, attached by the second: training goes on from its parameters
  where.checkpoint = checkpoint;
  if (resume) where.resume = checkpoint;
  asgd::TrainingRun* self = nullptr;
  where.on_progress = [&](const asgd::Progress& p) {
    if (stop_early && p.epoch >= kStopAfter) self->request_stop();
    return true;
  };
  asgd::TrainingRun run(problem.layout(), std::move(where),
                        [&](asgd::ParamStore& s) { mf::initialize_factors(s, 1, 0.1f, &train_set); });
  self = &run;
  asgd::TrainerOptions options = engine_options();
  options.checkpoint_metadata = metadata;
  options.progress_interval_seconds = 1e-3;  // an epoch here takes milliseconds
  run.configure(options);
  asgd::Trainer trainer(run.store(), options);
  run.load_resumed(trainer);
  if (resume) std::printf("resumed from %s at epoch %llu\n", checkpoint.filename().c_str(),
                          static_cast<unsigned long long>(trainer.state().epoch));
  run.started();
  return trainer.run(problem);
}

// The second process: attaches the segment read-only and ranks the unseen items of user `name`.
int serve(const std::string& shm, const std::filesystem::path& model_file, const std::string& name) try {
  const asgd::CheckpointData file = asgd::read_checkpoint(model_file);  // ids and scale; factors from the segment
  const mf::ModelInfo info = mf::read_model_info(file, model_file);
  const asgd::ParamStore live = asgd::ParamStore::attach_shared(shm, file.layout, asgd::Access::read_only);
  const std::uint32_t user = info.users.find(name).value();
  const auto lists = mf::recommend(live, info.scale, nullptr, std::span(&user, 1), 5);
  std::printf("served from segment (pid %d): top 5 for %s:", static_cast<int>(::getpid()), name.c_str());
  for (const auto& r : lists[0]) std::printf(" %s (%.2f)", info.items.name(r.item).c_str(), r.score);
  std::printf("\n");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "recommender (serving): %s\n", e.what());
  return 1;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::filesystem::path dir = argc > 1 ? argv[1] : ".";
  const std::string shm = "asgd-example-recommender-" + std::to_string(::getpid());
  // Ratings as a pipeline gets them: a file (here generated: 2,000 users x 1,000 items, noise 0.5).
  mf::write_ratings(dir / "ratings.tsv", mf::generate_ratings({.users = 2000, .items = 1000, .ratings = 60000}));
  const mf::Ratings all = mf::read_ratings(dir / "ratings.tsv");
  const mf::Split split = mf::random_split(all, 0.1, 7);
  const mf::MfOptions model{.factors = 16, .l2 = 0.05f};
  mf::BiasedMf problem(split.train, model);
  const std::string metadata =
      mf::model_metadata(split.train, mf::cold_ids(all.users.size(), all.items.size(), split.train),
                         problem.rating_scale(), model, "squared");
  const auto checkpoint = dir / "mf.ckpt";

  const asgd::TrainReport first = train(problem, shm, checkpoint, false, true, split.train, metadata);
  std::printf("stopped: %s after epoch %llu of %llu\n", first.stopped ? "yes" : "no",
              static_cast<unsigned long long>(first.state.epoch), static_cast<unsigned long long>(kEpochs));
  const asgd::TrainReport rest = train(problem, shm, checkpoint, true, false, split.train, metadata);

  asgd::ParamStore live = asgd::ParamStore::attach_shared(shm, problem.layout(), asgd::Access::read_only);
  const mf::ErrorMetrics test = mf::evaluate_errors(live, problem.rating_scale(), split.test);
  std::printf("trained to epoch %llu: test RMSE %.4f on %zu ratings (the noise floor is 0.5)\n",
              static_cast<unsigned long long>(rest.state.epoch), test.rmse, split.test.size());
  asgd::save_checkpoint(dir / "mf.model", live, rest.state, {}, metadata);

  std::fflush(stdout);
  const pid_t child = ::fork();
  if (child == 0) {  // the serving process; _Exit: the parent's copies of objects are not its own to clean up
    const int rc = serve(shm, dir / "mf.model", "u7");
    std::fflush(stdout);
    std::_Exit(rc);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  asgd::ParamStore::remove_shared(shm);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 && test.rmse < 1.0 && first.stopped ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "recommender: %s\n", e.what());
  return 1;
}
