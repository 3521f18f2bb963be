#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>
#include <cfenv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>

#include "../common/message_of.hpp"
#include "asgd/engine/denormals.hpp"
#include "asgd/engine/options_record.hpp"
#include "asgd/engine/trainer.hpp"
#include "toy_problems.hpp"

namespace fs = std::filesystem;
using asgd::Consistency;
using asgd::kUnbounded;
using asgd::ParamStore;
using asgd::Trainer;
using asgd::TrainerOptions;
using asgd::testing::DisjointQuadratic;
using asgd::testing::FailingProblem;
using asgd::testing::SharedQuadratic;

static_assert(asgd::Problem<DisjointQuadratic>);
static_assert(asgd::Problem<SharedQuadratic>);
static_assert(!asgd::Problem<int>);

namespace {

TrainerOptions options(std::size_t workers, Consistency c, std::uint64_t tau, std::uint64_t epochs = 3) {
  TrainerOptions o;
  o.workers = workers;
  o.consistency = c;
  o.tau = tau;
  o.epochs = epochs;
  o.seed = 11;
  o.step_examples = 7;
  o.schedule.lr = 0.3f;
  return o;
}

std::vector<float> train(auto& problem, const TrainerOptions& o, asgd::TrainReport* report = nullptr) {
  auto store = ParamStore::on_heap(problem.layout());
  Trainer trainer(store, o);
  auto r = trainer.run(problem);
  if (report) *report = r;
  return store.snapshot();
}

}  // namespace

// ensmallen's Hogwild test, made exact: disjoint updates give the serial
// result bit for bit under any worker count, policy and tau.
TEST(Trainer, DisjointUpdatesEqualTheSerialResultExactly) {
  DisjointQuadratic p{1000, 5};
  const auto serial = train(p, options(1, Consistency::racy, kUnbounded));
  for (auto c : {Consistency::racy, Consistency::atomic, Consistency::locked}) {
    for (std::size_t w : {2u, 4u, 8u}) {
      for (std::uint64_t tau : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{8}, kUnbounded}) {
        EXPECT_EQ(train(p, options(w, c, tau)), serial)
            << to_string(c) << " workers " << w << " tau " << asgd::tau_to_string(tau);
      }
    }
  }
}

namespace {
// A problem whose gradient counts the examples computed with subnormals flushed (and a subnormal product that
// comes out 0 only then): what each worker's arithmetic does, seen from inside the run.
struct DenormalProbe {
  std::atomic<std::size_t>* flushed;
  std::atomic<std::size_t>* zero_products;
  asgd::Layout layout() const {
    asgd::Layout l;
    l.add("w", {1});
    return l;
  }
  std::size_t num_examples() const { return 400; }
  template <class Sink>
  double gradient(std::size_t, Sink&) const {
    if (asgd::FlushDenormals::active()) flushed->fetch_add(1);
    volatile float tiny = 1e-30f;  // volatile: computed at run time, in this thread's mode
    if (tiny * tiny == 0.0f) zero_products->fetch_add(1);  // 1e-60 underflows; 1e-30 * 1e-10 would be subnormal
    volatile float half_min = 1e-38f;
    if (half_min * 0.5f == 0.0f) zero_products->fetch_add(1);  // subnormal unless flushed
    return 0.0;
  }
};
}  // namespace

TEST(Trainer, WorkersFlushSubnormalsUnlessToldNotToAndTheCallerKeepsItsMode) {
  for (const bool flush : {true, false}) {
    std::atomic<std::size_t> flushed{0}, zero_products{0};
    DenormalProbe p{&flushed, &zero_products};
    auto store = ParamStore::on_heap(p.layout());
    TrainerOptions o;
    o.workers = 3;
    o.epochs = 1;
    o.flush_denormals = flush;
    const bool before = asgd::FlushDenormals::active();
    Trainer(store, o).run(p);
    EXPECT_EQ(asgd::FlushDenormals::active(), before);
    EXPECT_EQ(flushed.load(), flush ? 400u : 0u) << flush;
    // Every example's 1e-60 is 0 either way; 0.5e-38 is 0 only when flushed.
    EXPECT_EQ(zero_products.load(), flush ? 800u : 400u) << flush;
  }
}

TEST(Trainer, FlushingSubnormalsKeepsTheExceptionFlagsRaisedMeanwhile) {
  std::feclearexcept(FE_ALL_EXCEPT);
  {
    const asgd::FlushDenormals subnormals;
    volatile float big = 3e38f;
    volatile float product = big * big;  // overflow
    (void)product;
    EXPECT_NE(std::fetestexcept(FE_OVERFLOW), 0);
  }
  EXPECT_NE(std::fetestexcept(FE_OVERFLOW), 0);  // still raised: only the two mode bits are restored
  std::feclearexcept(FE_ALL_EXCEPT);
}

TEST(Trainer, OneWorkerWithASeedIsReproducibleAndSeedsMatter) {
  SharedQuadratic p{500, 8};
  auto o = options(1, Consistency::racy, kUnbounded);
  o.schedule.kind = asgd::ScheduleKind::linear;
  o.schedule.lr = 0.05f;
  const auto a = train(p, o), b = train(p, o);
  EXPECT_EQ(a, b);
  o.seed = 12;
  EXPECT_NE(train(p, o), a);
}

TEST(Trainer, CollidingWorkersConvergeUnderEveryPolicy) {
  // With a rate falling linearly from a to 0 over N steps, the final iterate's
  // spread is about sqrt(0.44 var(t) sqrt(a / N)) ~ 0.03 here; 0.15 is 5 sigma.
  SharedQuadratic p{20000, 4};
  const auto opt = p.optimum();
  for (auto c : {Consistency::racy, Consistency::atomic, Consistency::locked}) {
    for (std::size_t w : {1u, 4u}) {
      auto o = options(w, c, kUnbounded, 10);
      o.schedule.kind = asgd::ScheduleKind::linear;
      o.schedule.lr = 0.01f;
      o.schedule.floor = 0.0f;
      const auto v = train(p, o);
      for (std::size_t k = 0; k < p.dims; ++k) EXPECT_NEAR(v[k], opt[k], 0.15) << to_string(c) << " w" << w;
    }
  }
}

TEST(Trainer, ReportHasLossCurveAndStalenessWithinTau) {
  SharedQuadratic p{3000, 4};
  for (std::uint64_t tau : {std::uint64_t{0}, std::uint64_t{2}}) {
    auto o = options(4, Consistency::racy, tau, 4);
    o.schedule.lr = 2e-4f;
    auto store = ParamStore::on_heap(p.layout());
    store.fill(10.0f);  // far from the optimum (near 0): the loss must fall
    Trainer trainer(store, o);
    const auto r = trainer.run(p);
    ASSERT_EQ(r.epochs.size(), 4u);
    EXPECT_LT(r.epochs.back().loss, r.epochs.front().loss);
    EXPECT_EQ(r.examples, 4u * 3000);
    EXPECT_LE(r.max_lead, tau);
    for (const auto& e : r.epochs) EXPECT_LE(e.max_lead, tau);
    // A step of worker w at clock c sees the others' steps c - tau .. c + tau land at most.
    EXPECT_LE(r.staleness.max(), 3 * (2 * tau + 1));
    EXPECT_EQ(r.staleness.count(), 4u * 4 * ((3000 / 4 + 6) / 7));  // every step: 4 shards x 4 epochs
    EXPECT_GT(r.examples_per_second, 0.0);
    EXPECT_EQ(r.state.epoch, 4u);
  }
}

// The workers that wait for an epoch's checkpoint are paused in the gate; they must all count again as the
// barrier lets them go, or the one that wrote the checkpoint runs ahead of the others, unbounded, until they wake
// (a library user measured a lead of 51 steps at tau 1). Counted here from outside the engine, per worker, in
// on_step: a worker's steps done minus the other's may exceed tau by the step in flight and this count's lag.
TEST(Trainer, CheckpointBarriersKeepTheTauBound) {
  SharedQuadratic p{600, 2};
  const fs::path ckpt = fs::temp_directory_path() / ("asgd-tau-ckpt-" + std::to_string(::getpid()));
  for (std::uint64_t tau : {std::uint64_t{0}, std::uint64_t{1}}) {
    auto o = options(2, Consistency::racy, tau, 30);
    o.step_examples = 3;
    o.schedule.lr = 1e-3f;
    o.checkpoint_path = ckpt;
    std::array<std::atomic<std::int64_t>, 2> steps{};
    std::atomic<int> next_id{0};
    std::atomic<std::int64_t> worst{0};
    static std::atomic<int> runs{0};
    const int this_run = ++runs;
    o.on_step = [&, this_run](std::uint64_t) {
      thread_local int id = -1;
      thread_local int run_of = 0;  // a thread may have served an earlier run(): its id was of that run
      if (run_of != this_run) {
        id = next_id.fetch_add(1);
        run_of = this_run;
      }
      const std::int64_t mine = steps[id].fetch_add(1) + 1, other = steps[1 - id].load();
      std::int64_t seen = worst.load();
      while (mine - other > seen && !worst.compare_exchange_weak(seen, mine - other)) {
      }
    };
    auto store = ParamStore::on_heap(p.layout());
    Trainer t(store, o);
    const auto r = t.run(p);
    EXPECT_EQ(next_id.load(), 2);
    EXPECT_LE(worst.load(), static_cast<std::int64_t>(tau) + 2) << "tau " << tau;
    EXPECT_LE(r.staleness.max(), 2 * tau + 1) << "tau " << tau;
    fs::remove(ckpt);
  }
}

TEST(Trainer, MoreWorkersThanCoresWithTauZeroDoNotDeadlock) {
  DisjointQuadratic p{4000, 2};
  asgd::TrainReport r;
  train(p, options(16, Consistency::racy, 0, 2), &r);
  EXPECT_EQ(r.examples, 8000u);
  EXPECT_EQ(r.max_lead, 0u);
  EXPECT_LE(r.staleness.max(), 15u);  // one step of each other worker at most
}

TEST(Trainer, NonFiniteLossStopsWithAClearMessage) {
  FailingProblem p{5000, 3210, false};
  asgd::Layout l;
  l.add("w", {1});
  auto store = ParamStore::on_heap(l);
  for (std::size_t w : {1u, 4u}) {
    Trainer t(store, options(w, Consistency::racy, 1));
    try {
      t.run(p);
      FAIL() << "expected the NaN guard to stop the run";
    } catch (const asgd::RuntimeError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("diverged"), std::string::npos) << msg;
      EXPECT_NE(msg.find("example 3210"), std::string::npos) << msg;
    }
  }
}

TEST(Trainer, FirstErrorWinsAndStopsTheOthers) {
  FailingProblem p{200000, 17, true};
  asgd::Layout l;
  l.add("w", {1});
  auto store = ParamStore::on_heap(l);
  Trainer t(store, options(4, Consistency::racy, 0, 50));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(
      {
        try {
          t.run(p);
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "bad example 17");
          throw;
        }
      },
      std::runtime_error);
  // 50 epochs of 200k examples would take far longer than stopping does.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

TEST(Trainer, ProgressEventsAndStopFromTheCallback) {
  SharedQuadratic p{20000, 4};
  auto store = ParamStore::on_heap(p.layout());
  auto o = options(2, Consistency::racy, kUnbounded, 1000);
  o.schedule.lr = 0.001f;
  o.progress_interval_seconds = 0.01;
  std::atomic<int> events{0};
  double last_fraction = -1;
  bool monotone = true;
  o.on_progress = [&](const asgd::Progress& pr) {
    monotone = monotone && pr.fraction >= last_fraction && pr.examples_per_second > 0 && pr.eta_seconds >= 0;
    last_fraction = pr.fraction;
    return ++events < 5;
  };
  Trainer t(store, o);
  const auto r = t.run(p);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(events.load(), 5);
  EXPECT_TRUE(monotone);
  EXPECT_LT(r.state.epoch, 1000u);
}

// TrainerOptions::stop (what Ctrl-C sets in the commands): once it holds true every worker stops at its next
// step, at any tau and with checkpoint barriers, without waiting for a clock or an epoch slot of a worker that
// left; the report says stopped, and the epoch under way is neither counted nor checkpointed.
TEST(Trainer, AStopRequestEndsTheRunAtTheNextStep) {
  const fs::path ckpt = fs::temp_directory_path() / ("asgd-stop-" + std::to_string(::getpid()));
  SharedQuadratic p{2000, 4};
  struct Case {
    std::size_t workers;
    std::uint64_t tau;
    bool checkpoints;
  };
  for (const Case c : {Case{1, kUnbounded, false}, Case{4, 0, false}, Case{4, 2, true}, Case{4, kUnbounded, true},
                       Case{3, kUnbounded, false}}) {
    SCOPED_TRACE(::testing::Message() << c.workers << " workers, tau " << c.tau << (c.checkpoints ? ", checkpoints" : ""));
    fs::remove(ckpt);
    for (const std::uint64_t stop_after : {0u, 1u, 150u, 1001u}) {  // steps: 286 an epoch (2000 / 7)
      SCOPED_TRACE(::testing::Message() << "stop after " << stop_after << " steps");
      auto store = ParamStore::on_heap(p.layout());
      auto o = options(c.workers, Consistency::racy, c.tau, 1000);
      o.schedule.lr = 0.001f;
      if (c.checkpoints) o.checkpoint_path = ckpt;
      std::atomic<bool> stop{stop_after == 0};
      std::atomic<std::uint64_t> steps{0};
      o.stop = &stop;
      o.on_step = [&](std::uint64_t) {
        if (steps.fetch_add(1) + 1 == stop_after) stop.store(true);
      };
      Trainer t(store, o);
      const auto start = std::chrono::steady_clock::now();
      const auto r = t.run(p);
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
      EXPECT_TRUE(r.stopped);
      EXPECT_EQ(r.stop_reason, "stop requested");
      // Each worker finishes the step it is in: no more than one step each after the request.
      EXPECT_LE(steps.load(), stop_after + c.workers - 1);
      const std::uint64_t whole_epochs = steps.load() / 286;
      EXPECT_LE(r.state.epoch, whole_epochs);
      EXPECT_EQ(r.epochs.size(), r.state.epoch);
      EXPECT_EQ(t.state().epoch, r.state.epoch);
      if (stop_after == 0) {
        EXPECT_EQ(r.examples, 0u);
      }
      if (c.checkpoints && r.state.epoch > 0) {
        const auto saved = asgd::read_checkpoint(ckpt);
        EXPECT_EQ(saved.state.epoch, r.state.epoch) << "the last epoch finished, not the one stopped";
        EXPECT_EQ(saved.state.examples, saved.state.epoch * p.examples);
      }
    }
  }
  fs::remove(ckpt);
}

// Once the callback returns false it is not asked again: the other workers still finish the step they are in
// (every step reports here) and used to call it once or twice more.
TEST(Trainer, AfterTheCallbackSaysStopItIsNotCalledAgain) {
  SharedQuadratic p{4000, 4};
  for (int trial = 0; trial < 20; ++trial) {
    auto store = ParamStore::on_heap(p.layout());
    auto o = options(4, Consistency::racy, kUnbounded, 100);
    o.schedule.lr = 0.001f;
    o.step_examples = 1;
    o.progress_interval_seconds = 1e-9;
    int calls = 0, after = 0;  // never two calls at once
    bool said_stop = false;
    o.on_progress = [&](const asgd::Progress&) {
      if (said_stop) ++after;
      said_stop = ++calls >= 30;
      return !said_stop;
    };
    Trainer t(store, o);
    const auto r = t.run(p);
    EXPECT_TRUE(r.stopped);
    EXPECT_EQ(after, 0) << "trial " << trial;
  }
}

// False from the closing event comes after the last epoch: the run finished, and its report says so.
TEST(Trainer, FalseFromTheClosingEventLeavesAFinishedRunFinished) {
  SharedQuadratic p{2000, 4};
  auto store = ParamStore::on_heap(p.layout());
  auto o = options(2, Consistency::racy, kUnbounded, 3);
  o.progress_interval_seconds = 1000;  // the closing event only
  o.on_progress = [](const asgd::Progress& pr) { return !pr.last; };
  Trainer t(store, o);
  const auto r = t.run(p);
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.state.epoch, 3u);
  EXPECT_EQ(r.epochs.size(), 3u);
}

// Each worker keeps two epochs' sums (it is at most one ahead), folded and cleared as each epoch closes: every
// epoch of a longer run still counts its own examples and steps, with and without checkpoint barriers.
TEST(Trainer, EveryEpochCountsItsOwnExamples) {
  SharedQuadratic p{900, 4};
  const fs::path ck = fs::temp_directory_path() / ("asgd_epoch_sums_" + std::to_string(::getpid()) + ".ck");
  for (const bool barriers : {false, true}) {
    auto o = options(3, Consistency::racy, 1, 9);
    o.schedule.lr = 1e-3f;
    if (barriers) o.checkpoint_path = ck;
    asgd::TrainReport r;
    train(p, o, &r);
    ASSERT_EQ(r.epochs.size(), 9u);
    std::uint64_t examples = 0;
    double sum_of_means = 0;
    for (std::size_t e = 0; e < 9; ++e) {
      EXPECT_EQ(r.epochs[e].epoch, e + 1);
      EXPECT_EQ(r.epochs[e].examples, 900u) << "epoch " << e + 1;
      EXPECT_LE(r.epochs[e].max_lead, 1u);
      EXPECT_LE(r.epochs[e].seconds, r.seconds);
      if (e > 0) {
        EXPECT_GE(r.epochs[e].seconds, r.epochs[e - 1].seconds);
      }
      examples += r.epochs[e].examples;
      sum_of_means += r.epochs[e].mean_staleness;
    }
    EXPECT_EQ(examples, r.examples);
    // Each epoch has the same number of steps, so the mean of the epochs' means is the run's mean.
    EXPECT_NEAR(sum_of_means / 9, r.staleness.mean(), 1e-9);
  }
  fs::remove(ck);
}

TEST(Trainer, ProgressCountsTheTimeLeftToUntilEpoch) {
  // Epoch 2 of 8 (run(p, 2) after run(p, 1)): the ETA is the examples left before epoch 2 ends at the rate so
  // far, not those of all 8 epochs.
  SharedQuadratic p{20000, 4};
  auto store = ParamStore::on_heap(p.layout());
  auto o = options(2, Consistency::racy, kUnbounded, 8);
  o.step_examples = 100;
  o.progress_interval_seconds = 1e-6;
  std::vector<asgd::Progress> events;
  o.on_progress = [&](const asgd::Progress& pr) {
    events.push_back(pr);
    return true;
  };
  Trainer t(store, o);
  t.run(p, 1);
  events.clear();
  t.run(p, 2);
  ASSERT_GE(events.size(), 2u);
  for (const auto& pr : events) {
    if (pr.examples_per_second <= 0) continue;
    const double left = pr.eta_seconds * pr.examples_per_second;
    EXPECT_NEAR(left, 20000.0 - static_cast<double>(pr.examples), 1e-6 * 20000.0) << pr.examples;
    EXPECT_LE(pr.fraction, 2.0 / 8.0 + 1e-12);
  }
  EXPECT_TRUE(events.back().last);
  EXPECT_EQ(events.back().eta_seconds, 0.0);
  EXPECT_EQ(events.back().epoch, 2u);
}

namespace {
// Trains with `o` plus a checkpoint at `ckpt` until a "crash" after epoch 3,
// then resumes a new trainer made with `resume` from that checkpoint and
// returns its final parameters.
std::vector<float> crash_and_resume(SharedQuadratic& p, const TrainerOptions& o, const TrainerOptions& resume,
                                    const fs::path& ckpt) {
  auto first = o;
  first.checkpoint_path = ckpt;
  first.on_progress = [](const asgd::Progress& pr) { return pr.epoch < 3; };
  first.progress_interval_seconds = 1e-6;
  {
    auto store = ParamStore::on_heap(p.layout());
    Trainer t(store, first);
    EXPECT_TRUE(t.run(p).stopped);
  }
  auto store = ParamStore::on_heap(p.layout());
  Trainer resumed(store, resume);
  resumed.load_checkpoint(ckpt);
  EXPECT_GE(resumed.state().epoch, 3u);
  EXPECT_LT(resumed.state().epoch, resume.epochs);
  resumed.run(p);
  return store.snapshot();
}

// One worker (a deterministic run), 6 epochs, the linear decay: a schedule whose rates depend on where a resumed
// run starts.
TrainerOptions decaying_over_six_epochs() {
  auto o = options(1, Consistency::racy, kUnbounded, 6);
  o.schedule.kind = asgd::ScheduleKind::linear;
  o.schedule.lr = 0.05f;
  return o;
}

// Trains `epochs` epochs of `p` with `o` from zeros and checkpoints them in `path`.
template <class P>
void checkpoint_after(P& p, const asgd::TrainerOptions& o, std::uint64_t epochs, const fs::path& path) {
  auto store = ParamStore::on_heap(p.layout());
  Trainer t(store, o);
  t.run(p, epochs);
  t.save_checkpoint(path);
}
}  // namespace

TEST(Trainer, APreviousGenerationIsKeptOnlyOfThisRunsOwnFile) {
  const fs::path dir = fs::temp_directory_path() / ("asgd-keep-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path ck = dir / "ck", prev = asgd::previous_checkpoint(ck);
  SharedQuadratic p{300, 4};
  auto o = decaying_over_six_epochs();
  o.checkpoint_keep_previous = true;
  o.checkpoint_path = ck;
  // Another run's files at the path: its .prev is no generation of this run. It is removed as this run first
  // writes there, not before (a run refused before training leaves it), and nothing is kept of the file it replaces.
  checkpoint_after(p, decaying_over_six_epochs(), 2, ck);
  fs::copy_file(ck, prev);
  auto store = ParamStore::on_heap(p.layout());
  {
    Trainer fresh(store, o);
    EXPECT_TRUE(fs::exists(prev));
    fresh.run(p, 1);
    EXPECT_FALSE(fs::exists(prev));
    fresh.run(p, 2);  // its own file now: the epoch-1 one is kept
    EXPECT_EQ(asgd::read_checkpoint(prev).state.epoch, 1u);
  }
  // Loaded as ./ck and written as ck: one file, so its generation is kept (paths are compared as files).
  {
    auto again = ParamStore::on_heap(p.layout());
    Trainer resumed(again, o);
    resumed.load_checkpoint(dir / "." / "ck");
    resumed.run(p, 3);
    EXPECT_EQ(asgd::read_checkpoint(prev).state.epoch, 2u);
  }
  // Loaded from the .prev (a rank resuming a generation back): the .prev already holds it, and the first write
  // replaces the file ahead without keeping it.
  {
    auto back = ParamStore::on_heap(p.layout());
    Trainer resumed(back, o);
    resumed.load_checkpoint(prev);  // epoch 2; ck holds 3
    resumed.run(p, 3);
    EXPECT_EQ(asgd::read_checkpoint(prev).state.epoch, 2u);
    EXPECT_EQ(asgd::read_checkpoint(ck).state.epoch, 3u);
    resumed.run(p, 4);
    EXPECT_EQ(asgd::read_checkpoint(prev).state.epoch, 3u);
  }
  fs::remove_all(dir);
}

TEST(Trainer, ResumingFromACheckpointGivesTheUninterruptedResult) {
  const fs::path ckpt = fs::temp_directory_path() / ("asgd-resume-" + std::to_string(::getpid()));
  SharedQuadratic p{3000, 6};
  auto o = decaying_over_six_epochs();
  o.schedule.adagrad = true;  // optimizer state must travel too
  const auto uninterrupted = train(p, o);
  EXPECT_EQ(crash_and_resume(p, o, o, ckpt), uninterrupted);
  fs::remove(ckpt);
}

// A resume keeps the checkpointed run's step rule: a checkpoint with AdaGrad
// sums is refused by a Trainer without AdaGrad (the sums would be dropped),
// one without them by a Trainer with AdaGrad (they would start from zero).
TEST(Trainer, AResumeKeepsTheStepRule) {
  const fs::path ckpt = fs::temp_directory_path() / ("asgd-rule-" + std::to_string(::getpid()));
  SharedQuadratic p{300, 6};
  auto adagrad = decaying_over_six_epochs();
  adagrad.schedule.adagrad = true;
  auto plain = decaying_over_six_epochs();
  for (const auto& [saved, resumed, why] :
       {std::tuple{adagrad, plain, "holds AdaGrad sums and this run does not use AdaGrad"},
        std::tuple{plain, adagrad, "holds no AdaGrad sums and this run uses AdaGrad"}}) {
    checkpoint_after(p, saved, 1, ckpt);
    auto store = ParamStore::on_heap(p.layout());
    Trainer t(store, resumed);
    const auto msg = asgd::testing::message_of([&] { t.load_checkpoint(ckpt); });
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
    EXPECT_EQ(store.snapshot(), std::vector<float>(store.size(), 0.0f));  // refused before anything was loaded
    Trainer same(store, saved);
    EXPECT_NO_THROW(same.load_checkpoint(ckpt));
  }
  // Per-row sums are not per-parameter ones: the kind is recorded and checked (before: either loaded the other's).
  {
    auto row = decaying_over_six_epochs();
    row.schedule.row_adagrad = true;
    checkpoint_after(p, row, 1, ckpt);
    EXPECT_EQ(asgd::read_checkpoint(ckpt).optimizer_kind, asgd::OptimizerKind::row_adagrad);
    auto store = ParamStore::on_heap(p.layout());
    Trainer t(store, adagrad);
    const auto msg = asgd::testing::message_of([&] { t.load_checkpoint(ckpt); });
    EXPECT_NE(msg.find("holds per-row AdaGrad sums and this run uses per-parameter AdaGrad"), std::string::npos)
        << msg;
    Trainer same(store, row);
    EXPECT_NO_THROW(same.load_checkpoint(ckpt));
    // Nor are sums split into a head and a tail (Schedule::row_head) one sum per row, or another head's: the head
    // is recorded and checked (before: loaded, and a sum read as the other split's).
    auto headed = row;
    headed.schedule.row_head = 2;
    checkpoint_after(p, headed, 1, ckpt);
    EXPECT_EQ(asgd::read_checkpoint(ckpt).row_head, 2u);
    for (const auto& [other, why] : {std::pair{row, "with a row head of 2 and this run uses one sum per row"},
                                     std::pair{[&] {
                                                 auto o = row;
                                                 o.schedule.row_head = 3;
                                                 return o;
                                               }(),
                                               "with a row head of 2 and this run uses a row head of 3"}}) {
      auto fresh = ParamStore::on_heap(p.layout());
      Trainer t2(fresh, other);
      const auto msg2 = asgd::testing::message_of([&] { t2.load_checkpoint(ckpt); });
      EXPECT_NE(msg2.find(why), std::string::npos) << msg2;
    }
    Trainer same_head(store, headed);
    EXPECT_NO_THROW(same_head.load_checkpoint(ckpt));
    // The checkpoints a run writes after its epochs (TrainerOptions::checkpoint_path) record it too: they said 0,
    // and the run's own resume was refused.
    {
      auto every_epoch = headed;
      every_epoch.checkpoint_path = ckpt;
      auto written = ParamStore::on_heap(p.layout());
      Trainer t3(written, every_epoch);
      t3.run(p, 1);
      EXPECT_EQ(asgd::read_checkpoint(ckpt).row_head, 2u);
      auto fresh = ParamStore::on_heap(p.layout());
      Trainer resumed(fresh, every_epoch);
      EXPECT_NO_THROW(resumed.load_checkpoint(ckpt));
    }
  }
  // An AdaGrad trainer's checkpoint from before its first run() holds its (zero) sums: another AdaGrad trainer
  // loads it (before: written without sums, and then refused as "holds no AdaGrad sums").
  {
    auto store = ParamStore::on_heap(p.layout());
    Trainer fresh(store, adagrad);
    fresh.save_checkpoint(ckpt);
    Trainer again(store, adagrad);
    EXPECT_NO_THROW(again.load_checkpoint(ckpt));
  }
  fs::remove(ckpt);
}

// A model file written by one of several ranks' trainers (options.ranks in the metadata, as MultiRank records
// it) stands for the job: its AdaGrad sums times the ranks, and no rank count, so that one process resumes it
// (before: "written by 2 ranks ... rank 1's file is missing"). On one rank it is the checkpoint itself.
TEST(Trainer, AModelFileOfOneOfSeveralRanksHoldsTheJobsSums) {
  const std::string pid = std::to_string(::getpid());
  const fs::path ckpt = fs::temp_directory_path() / ("asgd-ranks-ck-" + pid);
  const fs::path model = fs::temp_directory_path() / ("asgd-ranks-model-" + pid);
  SharedQuadratic p{300, 6};
  auto o = decaying_over_six_epochs();
  o.schedule.adagrad = true;
  for (const int ranks : {3, 1}) {
    o.checkpoint_metadata = ranks > 1 ? R"({"options":{"ranks":"3","seed":"1"}})" : R"({"options":{"seed":"1"}})";
    auto store = ParamStore::on_heap(p.layout());
    Trainer t(store, o);
    t.run(p, 1);
    t.save_checkpoint(ckpt);
    t.save_model(model);
    const auto c = asgd::read_checkpoint(ckpt), m = asgd::read_checkpoint(model);
    EXPECT_EQ(asgd::rank_files_of(c.metadata, "checkpoint"), ranks);
    EXPECT_EQ(asgd::rank_files_of(m.metadata, "model"), 1);
    EXPECT_NE(m.metadata.find(R"("seed":"1")"), std::string::npos) << m.metadata;
    EXPECT_EQ(t.model_metadata(), m.metadata);
    if (ranks == 1) {
      EXPECT_EQ(m.metadata, o.checkpoint_metadata);
    }
    EXPECT_EQ(m.params, c.params);
    ASSERT_EQ(m.optimizer_state.size(), c.optimizer_state.size());
    ASSERT_GT(c.optimizer_state.size(), 0u);
    for (std::size_t i = 0; i < c.optimizer_state.size(); ++i)
      ASSERT_EQ(m.optimizer_state[i], static_cast<float>(ranks) * c.optimizer_state[i]) << i;
    Trainer resumed(store, o);
    EXPECT_NO_THROW(resumed.load_checkpoint(model));
  }
  // Not a generation of the run's checkpoints: between two of them it leaves the previous one kept (before: the
  // run's lineage became the model file, and the next checkpoint removed its .prev instead of keeping one).
  o.checkpoint_keep_previous = true;
  const fs::path previous = fs::path(ckpt.string() + ".prev");
  for (const char* metadata : {R"({"options":{"ranks":"3"}})", R"({"options":{}})"}) {
    o.checkpoint_metadata = metadata;
    auto store = ParamStore::on_heap(p.layout());
    Trainer t(store, o);
    for (const std::uint64_t epoch : {1, 2, 3}) {
      t.run(p, epoch);
      if (epoch == 3) t.save_model(model);
      t.save_checkpoint(ckpt);
    }
    ASSERT_TRUE(fs::exists(previous)) << metadata;
    EXPECT_EQ(asgd::read_checkpoint(previous).state.epoch, 2u) << metadata;
    fs::remove(previous);
    fs::remove(ckpt);
  }
  fs::remove(model);
}

// What the progress callback throws on the closing event is rethrown, as a throw on any other event is (before:
// lost, and run() returned as if nothing had happened).
TEST(Trainer, AThrowFromTheClosingProgressEventIsRethrown) {
  SharedQuadratic p{2000, 4};
  auto store = ParamStore::on_heap(p.layout());
  auto o = options(2, Consistency::racy, kUnbounded, 2);
  o.progress_interval_seconds = 1000;  // the closing event only
  o.on_progress = [](const asgd::Progress& pr) -> bool {
    if (pr.last) throw std::runtime_error("closing event");
    return true;
  };
  Trainer t(store, o);
  EXPECT_EQ(asgd::testing::message_of([&] { t.run(p); }), "closing event");
}

// Under mpirun every rank resumes from rank 0's checkpoint, which counts rank
// 0's examples; a rank whose shard is one example shorter must still take
// the rates its uninterrupted run took. The schedule's position is the epochs
// done times this problem's examples per epoch, not the checkpoint's count.
TEST(Trainer, AResumedScheduleCountsThisProblemsEpochsNotTheCheckpointsExamples) {
  const fs::path ckpt = fs::temp_directory_path() / ("asgd-count-" + std::to_string(::getpid()));
  SharedQuadratic p{3000, 6};
  const auto o = decaying_over_six_epochs();
  const auto uninterrupted = train(p, o);
  // Three epochs, saved with `count` examples; resumed to the end, reporting progress.
  const auto resumed_with = [&](std::uint64_t count, asgd::Progress& last) {
    {
      auto store = ParamStore::on_heap(p.layout());
      Trainer t(store, o);
      t.run(p, 3);
      auto state = t.state();
      EXPECT_EQ(state.examples, 3u * 3000u);
      state.examples = count;
      asgd::save_checkpoint(ckpt, store, state, {});
    }
    auto store = ParamStore::on_heap(p.layout());
    auto with_progress = o;
    with_progress.on_progress = [&](const asgd::Progress& pr) {
      last = pr;
      return true;
    };
    Trainer resumed(store, with_progress);
    resumed.load_checkpoint(ckpt);
    resumed.run(p);
    return store.snapshot();
  };
  asgd::Progress last;
  // Another rank's count: its shard had one example more.
  EXPECT_EQ(resumed_with(3u * 3001u, last), uninterrupted);
  // Progress too counts from the epochs done: a checkpoint that counts none still ends at the whole run.
  EXPECT_EQ(resumed_with(0, last), uninterrupted);
  EXPECT_TRUE(last.last);
  EXPECT_EQ(last.fraction, 1.0);
  EXPECT_EQ(last.epoch, 6u);
  fs::remove(ckpt);
}

// Rank r of an mpirun job draws stream r. Rank 0 writes the job's checkpoint
// and every rank resumes from it, so the checkpoint must record the run's
// seed, not a stream, and a resumed process must go on drawing its own.
TEST(Trainer, AResumedTrainerKeepsItsRandomStream) {
  const fs::path ckpt = fs::temp_directory_path() / ("asgd-stream-" + std::to_string(::getpid()));
  SharedQuadratic p{3000, 6};
  auto o = options(1, Consistency::racy, kUnbounded, 6);
  o.schedule.lr = 0.05f;
  o.seed = 11;
  const auto stream0 = train(p, o);
  o.stream = 1;
  const auto stream1 = train(p, o);
  EXPECT_NE(stream1, stream0);  // the stream changes the shuffles
  auto other = o;
  other.seed = 99;  // the checkpoint's seed wins over the options'
  EXPECT_EQ(crash_and_resume(p, o, other, ckpt), stream1);
  EXPECT_EQ(asgd::read_checkpoint(ckpt).state.seed, 11u);
  fs::remove(ckpt);
}
namespace {
// Every example waits (up to 10 s) until all workers have started one:
// passes only if the workers really run at the same time.
struct Rendezvous {
  std::size_t workers;
  mutable std::atomic<std::size_t> arrived{0};
  std::uint64_t id = next_id();  // not the address: a later object may reuse it
  static std::uint64_t next_id() {
    static std::atomic<std::uint64_t> ids{1};
    return ids.fetch_add(1);
  }
  std::size_t num_examples() const { return 64; }
  template <class Sink>
  double gradient(std::size_t, Sink& sink) const {
    thread_local std::uint64_t seen = 0;
    if (seen != id) {
      seen = id;
      arrived.fetch_add(1);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (arrived.load() < workers && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    sink.add_gradient(0, 0.0f);
    return arrived.load() >= workers ? 0.0 : 1.0;  // loss 1 flags a serial run
  }
};
}  // namespace

TEST(Trainer, WorkersRunConcurrentlyEvenWhenTheyNeverBlock) {
  asgd::Layout l;
  l.add("w", {1});
  for (std::size_t w : {2u, 4u, 8u}) {
    auto store = ParamStore::on_heap(l);
    Rendezvous p{w};
    auto o = options(w, Consistency::racy, kUnbounded, 1);
    o.step_examples = 1;
    const auto r = Trainer(store, o).run(p);
    EXPECT_EQ(p.arrived.load(), w);
    EXPECT_EQ(r.epochs.at(0).loss, 0.0) << w << " workers did not all run at once";
  }
}

namespace {
// DisjointQuadratic that counts each example's visits per epoch and is slow
// (100 us an example) on every thread but the one that called run(), where
// worker 0 runs: the other workers are stragglers.
struct SlowElsewhere : DisjointQuadratic {
  std::thread::id fast = std::this_thread::get_id();
  std::uint64_t epochs;
  std::unique_ptr<std::atomic<int>[]> visits;
  std::unique_ptr<std::atomic<bool>[]> busy;  // an example in a step now
  mutable std::atomic<int> slow_visits{0}, overlaps{0};
  // Examples the fast worker visited at the schedule's full rate `full`, and the straggler below it.
  float full = 0.3f;
  mutable std::atomic<int> fast_visits{0}, fast_at_full{0}, slow_below_full{0};
  // With `overlap`, the fast worker starts once the straggler has (so that it takes steps at all), and the
  // straggler's first example waits until the fast worker has started 3 steps of 7 (so that at least 2 finish
  // during the straggler's first step), each wait for 5 s at most: staleness by construction, whatever the load.
  bool overlap = false;
  mutable std::atomic<bool> slow_started{false};
  static void wait_for(const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  SlowElsewhere(std::size_t n, std::uint64_t e)
      : DisjointQuadratic{n, 2},
        epochs(e),
        visits(std::make_unique<std::atomic<int>[]>(n * e)),
        busy(std::make_unique<std::atomic<bool>[]>(n)) {}
  template <class Sink>
  double gradient(std::size_t i, Sink& sink) const {
    visits[sink.epoch() * examples + i].fetch_add(1);
    if (busy[i].exchange(true)) overlaps.fetch_add(1);
    if (overlap && std::this_thread::get_id() == fast && fast_visits.load() == 0) {
      wait_for([&] { return slow_started.load(); });
    } else if (overlap && std::this_thread::get_id() != fast && !slow_started.exchange(true)) {
      wait_for([&] { return fast_visits.load() >= 3 * 7; });
    }
    if (std::this_thread::get_id() == fast) {
      fast_visits.fetch_add(1);
      if (sink.learning_rate() == full) fast_at_full.fetch_add(1);
    } else {
      if (sink.learning_rate() < full) slow_below_full.fetch_add(1);
      slow_visits.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    const double loss = DisjointQuadratic::gradient(i, sink);
    busy[i].store(false);
    return loss;
  }
  bool each_once() const {
    for (std::size_t k = 0; k < examples * epochs; ++k)
      if (visits[k].load() != 1) return false;
    return true;
  }
};
}  // namespace

// A straggler does fewer steps at tau inf; it does not trail behind with its
// part of the data. The fast worker takes the steps the slow one has not
// taken yet, every example is still visited once an epoch and in no two
// steps at once, at every tau, and with checkpoints (every worker waits at
// the epoch boundary) too. With one step per shard (14 examples in steps of
// 7) the fast worker reaches the straggler's shard of the next epoch while
// the straggler is still in its step of this one, every epoch: it waits.
TEST(Trainer, AStragglersStepsAreTakenByTheOthers) {
  const fs::path ckpt = fs::temp_directory_path() / ("asgd-straggler-" + std::to_string(::getpid()));
  for (const auto& [n, epochs] : {std::pair<std::size_t, std::uint64_t>{600, 3}, {14, 10}}) {
    DisjointQuadratic plain{n, 2};
    const auto serial = train(plain, options(1, Consistency::racy, kUnbounded, epochs));
    for (std::uint64_t tau : {std::uint64_t{0}, std::uint64_t{4}, kUnbounded}) {
      for (const bool checkpoints : {false, true}) {
        SlowElsewhere p(n, epochs);
        auto o = options(2, Consistency::racy, tau, epochs);
        if (checkpoints) o.checkpoint_path = ckpt;
        auto store = ParamStore::on_heap(p.layout());
        const asgd::TrainReport r = Trainer(store, o).run(p);
        const std::string what = std::to_string(n) + " examples, tau " + asgd::tau_to_string(tau) +
                                 (checkpoints ? ", checkpoints" : "");
        EXPECT_TRUE(p.each_once()) << what;
        EXPECT_EQ(p.overlaps.load(), 0) << what;
        EXPECT_EQ(store.snapshot(), serial) << what;
        ASSERT_EQ(r.epochs.size(), epochs) << what;
        for (const auto& e : r.epochs) EXPECT_EQ(e.examples, n) << what;
        // Its own shard is n / 2 examples an epoch at 100 us each; the fast worker needs about 1 us. At a finite
        // tau the gate keeps the two clocks together: no stealing (see Trainer::Run::EpochSlot). (With one step
        // per shard and a checkpoint every epoch, each worker takes its own step as the barrier lets it go: no
        // step is left to take.)
        if (tau == kUnbounded && !(checkpoints && n == 14)) {
          EXPECT_LT(p.slow_visits.load(), static_cast<int>(n / 2 * epochs)) << what;
        } else if (tau != kUnbounded) {
          EXPECT_EQ(p.slow_visits.load(), static_cast<int>(n / 2 * epochs)) << what;
        }
      }
    }
  }
  fs::remove(ckpt);
}

// A step's staleness is the count of the other workers' steps that finished while it ran. One worker: none. A
// straggler at tau 0 (steps of 700 us against 7 us): each of its steps sees at most the fast worker's step of the
// same clock land. At tau inf the fast worker takes most of the steps; the straggler's steps see many of them
// land, the fast worker's almost none, so a staleness-aware rate slows the straggler and not the fast worker (a
// rate divided by the clock gap, which taking steps pulls apart, fell to nothing for both).
TEST(Trainer, StalenessCountsTheUpdatesThatLandedDuringAStep) {
  {
    SlowElsewhere p(600, 3);
    asgd::TrainReport r;
    train(p, options(1, Consistency::racy, kUnbounded), &r);
    EXPECT_EQ(r.staleness.max(), 0u);
    EXPECT_EQ(r.max_lead, 0u);
  }
  {
    SlowElsewhere p(600, 3);
    asgd::TrainReport r;
    train(p, options(2, Consistency::racy, 0), &r);
    EXPECT_LE(r.staleness.max(), 1u);  // often 1; 0 when the fast worker's step ran before the straggler's read
    EXPECT_EQ(r.max_lead, 0u);
  }
  SlowElsewhere p(600, 3);
  p.overlap = true;
  auto o = options(2, Consistency::racy, kUnbounded);
  o.schedule.staleness_aware = true;
  ASSERT_EQ(o.schedule.lr, p.full);  // a constant schedule: below it is the staleness-aware division
  asgd::TrainReport r;
  train(p, o, &r);
  EXPECT_TRUE(p.each_once());
  EXPECT_EQ(p.overlaps.load(), 0);
  EXPECT_LT(p.slow_visits.load(), 900);  // the fast worker took the straggler's steps
  EXPECT_GE(r.staleness.max(), 2u);  // the straggler's first step
  EXPECT_GT(p.fast_at_full.load(), p.fast_visits.load() / 2);
  if (p.slow_visits.load() > 7) {
    EXPECT_GT(p.slow_below_full.load(), 0);  // it took a second step: below full
  }
}

TEST(Trainer, MultiWorkerCheckpointsAreConsistentSnapshots) {
  const fs::path ckpt = fs::temp_directory_path() / ("asgd-mw-" + std::to_string(::getpid()));
  SharedQuadratic p{5000, 8};
  auto store = ParamStore::on_heap(p.layout());
  auto o = options(4, Consistency::racy, kUnbounded, 6);
  o.schedule.adagrad = true;  // optimizer state is written while others run
  o.schedule.lr = 0.05f;
  o.checkpoint_path = ckpt;
  o.progress_interval_seconds = 1e-6;
  int reads = 0;
  o.on_progress = [&](const asgd::Progress&) {
    if (fs::exists(ckpt)) {
      const auto d = asgd::read_checkpoint(ckpt);  // never torn, never a bad checksum
      EXPECT_EQ(d.state.examples, d.state.epoch * p.examples) << "taken at the epoch boundary";
      EXPECT_EQ(d.optimizer_state.size(), store.size());
      ++reads;
    }
    return true;
  };
  Trainer(store, o).run(p);
  EXPECT_GT(reads, 0);
  EXPECT_EQ(asgd::read_checkpoint(ckpt).state.epoch, 6u);
  fs::remove(ckpt);
}

TEST(Trainer, RejectsAStoreOfAnotherLayout) {
  SharedQuadratic p{10, 2};
  asgd::Layout other;
  other.add("w", {3});
  auto store = ParamStore::on_heap(other);
  Trainer t(store, options(1, Consistency::racy, 0));
  EXPECT_THROW(t.run(p), asgd::InputError);
}

TEST(Trainer, RejectsBadOptions) {
  SharedQuadratic p{10, 2};
  auto store = ParamStore::on_heap(p.layout());
  auto o = options(0, Consistency::racy, 0);
  EXPECT_THROW(Trainer(store, o), asgd::InputError);
  o = options(1, Consistency::racy, 0);
  o.schedule.lr = -1;
  EXPECT_THROW(Trainer(store, o), asgd::InputError);
}

TEST(Trainer, EpochByEpochEqualsOneRun) {
  SharedQuadratic p{1000, 3};
  auto o = options(1, Consistency::racy, kUnbounded, 4);
  o.schedule.kind = asgd::ScheduleKind::linear;
  const auto whole = train(p, o);
  auto store = ParamStore::on_heap(p.layout());
  Trainer t(store, o);
  for (std::uint64_t e = 1; e <= 4; ++e) {
    const auto r = t.run(p, e);
    ASSERT_EQ(r.epochs.size(), 1u);
    EXPECT_EQ(r.epochs[0].epoch, e);
  }
  EXPECT_EQ(store.snapshot(), whole);
  EXPECT_THROW(t.run(p, 5), asgd::InputError);
}

// A run never goes back: a checkpoint of 4 epochs resumed with fewer asked for is refused (it used to record
// the smaller epoch, and the next resume trained the epochs in between again); as many as it holds is a run of
// nothing.
TEST(Trainer, ResumingPastTheEpochsAskedForIsRefused) {
  const fs::path ckpt = fs::temp_directory_path() / ("asgd-past-" + std::to_string(::getpid()));
  SharedQuadratic p{500, 4};
  auto o = decaying_over_six_epochs();
  checkpoint_after(p, o, 4, ckpt);
  auto store = ParamStore::on_heap(p.layout());
  Trainer resumed(store, o);
  resumed.load_checkpoint(ckpt);
  EXPECT_THROW(resumed.run(p, 3), asgd::InputError);
  EXPECT_EQ(resumed.state().epoch, 4u);
  const auto before = store.snapshot();
  EXPECT_EQ(resumed.run(p, 4).examples, 0u);
  EXPECT_EQ(store.snapshot(), before);
  o.epochs = 3;
  Trainer fewer(store, o);
  fewer.load_checkpoint(ckpt);
  EXPECT_THROW(fewer.run(p), asgd::InputError);
  fs::remove(ckpt);
}

// A checkpoint path that cannot be written is refused when the Trainer is made, not after the first epoch's work.
TEST(Trainer, ACheckpointPathThatCannotBeWrittenIsRefusedBeforeTraining) {
  SharedQuadratic p{300, 4};
  auto store = ParamStore::on_heap(p.layout());
  auto o = decaying_over_six_epochs();
  o.checkpoint_path = fs::temp_directory_path() / ("asgd-no-such-folder-" + std::to_string(::getpid())) / "ck";
  const auto msg = asgd::testing::message_of([&] { Trainer t(store, o); });
  EXPECT_NE(msg.find("cannot write here"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(o.checkpoint_path.parent_path()));
}
