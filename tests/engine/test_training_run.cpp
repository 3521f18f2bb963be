// TrainingRun: a run on the heap or in a shared segment (removed when the run
// fails before training, kept once it started, refused when it holds NaN),
// stopped from another thread, resumed from its checkpoint with the options
// that changed said, its run id, and one EpochSummary per epoch from either
// engine loop.
#include "asgd/engine/training_run.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/options_record.hpp"
#include "asgd/engine/trainer.hpp"
#include "toy_problems.hpp"

namespace asgd {
namespace {

using asgd::testing::message_of;
using asgd::testing::SharedQuadratic;

// Options built field by field: GCC 12 warns falsely (maybe-uninitialized) on some designated initializers of them.
TrainingRunOptions in_segment(const std::string& name) {
  TrainingRunOptions o;
  o.shm = name;
  return o;
}
TrainingRunOptions checkpointed(const std::filesystem::path& path) {
  TrainingRunOptions o;
  o.checkpoint = path;
  return o;
}
TrainingRunOptions resuming(const std::filesystem::path& path) {
  TrainingRunOptions o;
  o.resume = path;
  return o;
}

TrainerOptions engine_options_for(std::uint64_t epochs) {
  TrainerOptions o;
  o.workers = 2;
  o.epochs = epochs;
  o.step_examples = 8;
  o.schedule.kind = ScheduleKind::constant;
  o.schedule.lr = 0.05f;
  return o;
}

class TrainingRunShm : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = "asgd-run-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ParamStore::remove_shared(name_);
  }
  void TearDown() override { ParamStore::remove_shared(name_); }
  bool exists() const {
    try {
      ParamStore::inspect_shared(name_);
      return true;
    } catch (const InputError&) {
      return false;
    }
  }
  std::string name_;
};

TEST(TrainingRun, TrainsOnTheHeapWithOneEpochSummaryPerEpochAndCheckpoints) {
  const asgd::testing::ScratchDir dir;
  SharedQuadratic problem{200, 3};
  std::vector<EpochSummary> epochs;
  TrainingRunOptions ro = checkpointed(dir / "ck");
  ro.on_epoch = [&](const EpochSummary& e) { epochs.push_back(e); };
  // Started far from the optimum (the mean target), so that the first epoch's loss is well above the last's.
  TrainingRun run(problem.layout(), std::move(ro), [](ParamStore& s) {
    for (std::size_t i = 0; i < s.size(); ++i) s.store(i, 50.0f);
  });
  EXPECT_TRUE(run.created());
  TrainerOptions o = engine_options_for(4);
  run.configure(o);
  EXPECT_EQ(o.checkpoint_path, dir / "ck");
  Trainer trainer(run.store(), o);
  run.started();
  const TrainReport report = trainer.run(problem);
  run.report(report);
  ASSERT_EQ(epochs.size(), 4u);
  double seconds = 0;  // each epoch's own time, not the run's so far: they add up to the last epoch's end
  for (std::size_t e = 0; e < 4; ++e) {
    EXPECT_EQ(epochs[e].epoch, e + 1);
    EXPECT_EQ(epochs[e].examples, 200u);
    EXPECT_GE(epochs[e].seconds, 0.0);
    seconds += epochs[e].seconds;
  }
  EXPECT_NEAR(seconds, report.epochs.back().seconds, 1e-9);
  EXPECT_LT(epochs[3].loss, epochs[0].loss / 10);
  EXPECT_EQ(read_checkpoint(dir / "ck").state.epoch, 4u);
}

TEST(TrainingRun, StopsWhenAskedFromAnotherThread) {
  SharedQuadratic problem{20000, 8};
  TrainingRun run(problem.layout(), {});
  TrainerOptions o = engine_options_for(1000);
  run.configure(o);
  Trainer trainer(run.store(), o);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    run.request_stop();
  });
  const TrainReport report = trainer.run(problem);
  stopper.join();
  EXPECT_TRUE(report.stopped);
  EXPECT_TRUE(run.stop_requested());
  EXPECT_LT(trainer.state().epoch, 1000u);
}

TEST(TrainingRun, ResumesItsCheckpointAndSaysWhichOptionsChanged) {
  const asgd::testing::ScratchDir dir;
  SharedQuadratic problem{100, 3};
  TrainerOptions o = engine_options_for(4);
  std::uint64_t first_id = 0;
  {
    TrainingRun run(problem.layout(), checkpointed(dir / "ck"));
    run.set_record(engine_options(o), o.seed, "quadratic 100x3");
    first_id = run.run_id();
    o.checkpoint_metadata = R"({"options":)" + options_json(run.record()) + "}";
    run.configure(o);
    Trainer trainer(run.store(), o);
    trainer.run(problem, 2);
  }
  TrainerOptions again = engine_options_for(4);
  again.schedule.lr = 0.01f;
  TrainingRun run(problem.layout(), resuming(dir / "ck"));
  ASSERT_TRUE(run.resumed().has_value());
  EXPECT_EQ(run.resumed()->state.epoch, 2u);
  run.set_record(engine_options(again), again.seed + 5, "quadratic 100x3");  // a resume keeps the run's seed
  const auto changes = run.changes_since_resumed();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, "lr");
  EXPECT_EQ(changes[0].now, "0.01");
  EXPECT_EQ(changes[0].before, "0.05");
  EXPECT_NE(run.run_id(), first_id);  // other options, another run
  run.configure(again);
  Trainer trainer(run.store(), again);
  run.load_resumed(trainer);
  EXPECT_EQ(trainer.state().epoch, 2u);
  EXPECT_EQ(run.changes_since_resumed().size(), 1u);  // still known once loaded
  EXPECT_EQ(trainer.run(problem).epochs.size(), 2u);
}

TEST(ResumeChanges, OtherDataOfTheSameSizeIsToldAndItsDigestIsNoOptionChange) {
  const OptionsRecord before = {{"data", "00aa"}, {"examples", "100"}, {"lr", "0.1"}};
  OptionsRecord now = {{"data", "00bb"}, {"examples", "100"}, {"lr", "0.2"}};
  ResumeChanges c = resume_changes(before, now, "data", "examples");
  EXPECT_TRUE(c.data_differs);
  ASSERT_EQ(c.options.size(), 1u);
  EXPECT_EQ(c.options[0].key, "lr");
  now["examples"] = "120";  // another size: said as the size's change, not as other data
  c = resume_changes(before, now, "data", "examples");
  EXPECT_FALSE(c.data_differs);
  EXPECT_EQ(c.options.size(), 2u);
  EXPECT_FALSE(resume_changes(std::nullopt, now, "data", "examples").data_differs);  // nothing recorded
  EXPECT_TRUE(resume_changes(std::nullopt, now, "data", "examples").options.empty());
  EXPECT_FALSE(resume_changes(before, before, "data", "examples").data_differs);
}

TEST(TrainingRun, TheRunIdIsTheSameForTheSameSettingsOnly) {
  const Layout layout = SharedQuadratic{10, 2}.layout();
  const TrainerOptions o = engine_options_for(3);
  TrainingRun a(layout, {}), b(layout, {}), c(layout, {});
  a.set_record(engine_options(o), 1, "x");
  b.set_record(engine_options(o), 1, "x");
  c.set_record(engine_options(o), 2, "x");
  EXPECT_EQ(a.run_id(), b.run_id());
  EXPECT_NE(a.run_id(), c.run_id());
  EXPECT_EQ(a.record().at("run"), run_id_text(a.run_id()));
  EXPECT_EQ(run_id_text(a.run_id()).size(), 10u);
}

TEST_F(TrainingRunShm, ASegmentMadeForARunThatFailsBeforeTrainingIsRemoved) {
  const Layout layout = SharedQuadratic{10, 4}.layout();
  EXPECT_THROW(
      {
        TrainingRun run(layout, in_segment(name_));
        EXPECT_TRUE(run.created());
        throw std::runtime_error("the data could not be read");
      },
      std::runtime_error);
  EXPECT_FALSE(exists());
  {
    TrainingRun run(layout, in_segment(name_), [](ParamStore& s) { s.store(0, 3.0f); });
    run.started();
  }
  EXPECT_TRUE(exists());  // a run that started keeps its segment, for serving
  TrainingRun again(layout, in_segment(name_));
  EXPECT_FALSE(again.created());
  EXPECT_EQ(again.store().load(0), 3.0f);  // training continues from the parameters in it
}

TEST_F(TrainingRunShm, ASegmentHoldingNaNIsRefused) {
  const Layout layout = SharedQuadratic{10, 4}.layout();
  {
    TrainingRun run(layout, in_segment(name_));
    run.store().store(2, std::numeric_limits<float>::quiet_NaN());
    run.started();
  }
  const std::string message = message_of([&] { TrainingRun run(layout, in_segment(name_)); });
  EXPECT_NE(message.find("segment '" + name_ + "': parameter 2 is nan"), std::string::npos) << message;
  EXPECT_TRUE(exists());  // not ours to remove
}

TEST(TrainingRun, AMissingResumeIsRefusedBeforeAnythingIsMade) {
  const asgd::testing::ScratchDir dir;
  const std::string message =
      message_of([&] { TrainingRun run(SharedQuadratic{10, 2}.layout(), resuming(dir / "nothing")); });
  EXPECT_NE(message.find("nothing"), std::string::npos) << message;
  TrainingRunOptions never;
  never.checkpoint_every = 0;
  EXPECT_EQ(message_of([&] { TrainingRun run(Layout{}, never); }),
            "TrainingRunOptions::checkpoint_every: expected at least 1");
}

// A second run on a checkpoint path, in another process: refused at its start, told the first's pid, while the
// first runs; accepted once the first is killed with SIGKILL.
TEST(TrainingRun, ASecondRunWritingTheSameCheckpointIsRefusedWhileTheFirstRuns) {
  const asgd::testing::ScratchDir dir;
  const std::filesystem::path ck = dir / "ck";
  const Layout layout = SharedQuadratic{10, 2}.layout();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t first = ::fork();
  ASSERT_GE(first, 0);
  if (first == 0) {
    ::close(ready[0]);
    try {
      TrainingRun run(layout, checkpointed(ck));
      (void)!::write(ready[1], "y", 1);
      for (;;) ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(ready[1]);
  char ok = 'n';
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ::close(ready[0]);
  const std::string message = message_of([&] { TrainingRun second(layout, checkpointed(ck)); });
  EXPECT_NE(message.find("checkpoint " + ck.string() + ": another run is writing it (pid " + std::to_string(first) +
                         ")"),
            std::string::npos)
      << message;
  // Reading it, or writing another path, is no second writer.
  TrainingRun other(layout, checkpointed(dir / "other"));
  ::kill(first, SIGKILL);
  ::waitpid(first, nullptr, 0);
  TrainingRun after(layout, checkpointed(ck));
  TrainerOptions o = engine_options_for(1);
  after.configure(o);
  Trainer trainer(after.store(), o);
  SharedQuadratic problem{10, 2};
  trainer.run(problem);
  EXPECT_EQ(read_checkpoint(ck).state.epoch, 1u);
}

// The ranks of a job write one path: those that do not write it take no lock (rank 0 does), and one run may move.
TEST(TrainingRun, ARunThatDoesNotWriteTheCheckpointTakesNoLock) {
  const asgd::testing::ScratchDir dir;
  const Layout layout = SharedQuadratic{10, 2}.layout();
  TrainingRun root(layout, checkpointed(dir / "ck"));
  TrainingRunOptions other_rank = checkpointed(dir / "ck");
  other_rank.lock_checkpoint = false;
  TrainingRun rank1(layout, other_rank);
  TrainingRun moved = std::move(root);
  EXPECT_NE(message_of([&] { TrainingRun second(layout, checkpointed(dir / "ck")); }).find("another run"),
            std::string::npos);
}

// Metadata that is no JSON, or whose options are of other kinds, records no options: never the JSON library's
// exception (the engine reads only "options", leniently: a file of another program may hold anything).
TEST(TrainingRun, ResumedMetadataOfAnyShapeIsReadWithoutAJsonException) {
  const asgd::testing::ScratchDir dir;
  SharedQuadratic problem{10, 2};
  auto store = ParamStore::on_heap(problem.layout());
  for (const char* metadata : {"", "{", "[1]", R"({"options": 5})", R"({"options": {"run": 7, "lr": [1]}})",
                               R"({"options": {"run": "zz"}})", "\xff\xfe"}) {
    save_checkpoint(dir / "ck", store, {1, 10, 3}, {}, metadata);
    TrainingRun run(problem.layout(), resuming(dir / "ck"));
    run.set_record({{"lr", "0.1"}}, 3, "x");
    EXPECT_TRUE(run.changes_since_resumed().empty()) << metadata;
    EXPECT_EQ(run_id_of(metadata), 0u) << metadata;
  }
}

TEST(TrainingRun, BlockTrainerEpochsSpeakTheSameVocabulary) {
  BlockEpochStats stats;
  stats.mean_loss = 0.5;
  stats.seconds = 1.5;
  stats.max_staleness = 3;
  stats.stopped = true;
  const EpochSummary e = summarize(stats, 7);
  EXPECT_EQ(e.epoch, 7u);
  EXPECT_EQ(e.loss, 0.5);
  EXPECT_EQ(e.max_staleness, 3u);
  EXPECT_TRUE(e.stopped);
  TrainingRun run(SharedQuadratic{10, 2}.layout(), {});
  BlockTrainOptions bo;
  run.configure(bo);
  run.request_stop();
  EXPECT_TRUE(bo.stop_requested());
  // A flag made after the run (a signal handler installed once the data is read) takes over the stop request.
  TrainingRun later(SharedQuadratic{10, 2}.layout(), {});
  std::atomic<bool> signalled{false};
  later.use_stop_flag(&signalled);
  BlockTrainOptions lo;
  later.configure(lo);
  EXPECT_FALSE(lo.stop_requested());
  signalled = true;
  EXPECT_TRUE(lo.stop_requested());
  EXPECT_TRUE(later.stop_requested());
}

}  // namespace
}  // namespace asgd
