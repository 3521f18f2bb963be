// The multi-rank run (net::MultiRank) with ranks as threads: averaged ranks
// end with one model, at the whole data's optimum; a job whose ranks' AdaGrad
// checkpoints are a generation apart resumes at the oldest common epoch and
// goes on exactly as the uninterrupted job; checkpoints with no epoch in
// common, or of different runs, and ranks given different options are
// refused on every rank.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/on_ranks.hpp"
#include "../common/scratch_dir.hpp"
#include "../common/sharded_quadratic.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/net/job.hpp"
#include "asgd/net/multi_rank.hpp"
#include "asgd/net/transport.hpp"

namespace asgd::net {
namespace {

using asgd::testing::message_of;
using asgd::testing::on_ranks;

using asgd::testing::ShardedQuadratic;


constexpr std::size_t kExamples = 60;

TrainerOptions options_for(std::uint64_t epochs, bool adagrad) {
  TrainerOptions o;
  o.workers = 1;  // one worker a rank: the run is the same bit for bit every time
  o.epochs = epochs;
  o.seed = 7;
  o.step_examples = 4;
  o.schedule.kind = adagrad ? ScheduleKind::constant : ScheduleKind::linear;  // linear: decays to near 0
  o.schedule.lr = adagrad ? 0.5f : 0.05f;
  o.schedule.adagrad = adagrad;
  o.checkpoint_metadata = R"({"options":{"run":"00000000ab"}})";
  return o;
}

// One rank's part of a job: trains until `until` (resuming from `resume` when given) and returns its parameters.
std::vector<float> train_rank(Transport& t, MultiRankOptions mo, std::uint64_t epochs, std::uint64_t until,
                              const std::filesystem::path& checkpoint, const std::filesystem::path& resume,
                              bool adagrad, std::filesystem::path* resumed_file = nullptr) {
  MultiRank group(t, std::move(mo));
  group.agree_on_options();
  ShardedQuadratic problem{group.shard(kExamples, "examples"), 4};
  ParamStore store = ParamStore::on_heap(problem.layout());
  for (std::size_t k = 0; k < 4; ++k) store.store(k, static_cast<float>(group.rank() * 10 + 1));  // unlike on every rank
  TrainerOptions o = options_for(epochs, adagrad);
  o.checkpoint_path = checkpoint;
  std::optional<MultiRank::Resumed> resumed;
  if (!resume.empty()) resumed = group.resume_own_checkpoint(resume, o);
  group.prepare(o);
  Trainer trainer(store, o);
  if (resumed) {
    if (resumed_file != nullptr) *resumed_file = resumed->file;
    trainer.load_checkpoint(std::move(resumed->data), resumed->file);
  }
  group.start(trainer, store);
  const TrainReport report = run_averaged(group, trainer, problem, until);
  EXPECT_FALSE(report.stopped);
  EXPECT_EQ(trainer.state().epoch, until);
  return store.snapshot();
}

TEST(MultiRank, AveragedRanksEndWithOneModelAtTheWholeDataOptimum) {
  std::vector<double> optimum(4, 0.0);
  for (std::size_t i = 0; i < kExamples; ++i)
    for (std::size_t k = 0; k < 4; ++k) optimum[k] += ShardedQuadratic::target(i, k) / double{kExamples};
  for (const std::uint64_t every : {std::uint64_t{0}, std::uint64_t{3}}) {
    for (const Algorithm algorithm : {Algorithm::ring, Algorithm::tree}) {
      const int P = 3;
      std::vector<std::vector<float>> params(P);
      MultiRankOptions mo{.allreduce = algorithm, .average_every = every};
      const auto errors = on_ranks(P, [&](Transport& t, int r) {
        params[static_cast<std::size_t>(r)] = train_rank(t, mo, 30, 30, {}, {}, false);
      });
      for (int r = 0; r < P; ++r) ASSERT_EQ(errors[static_cast<std::size_t>(r)], "(no exception)") << "rank " << r;
      for (int r = 1; r < P; ++r)
        for (std::size_t k = 0; k < 4; ++k)
          EXPECT_EQ(std::bit_cast<std::uint32_t>(params[static_cast<std::size_t>(r)][k]),
                    std::bit_cast<std::uint32_t>(params[0][k]))
              << "rank " << r << " every " << every;
      // Each rank's shard alone has another mean: only the average of the ranks reaches the whole set's.
      for (std::size_t k = 0; k < 4; ++k) EXPECT_NEAR(params[0][k], optimum[k], 0.05) << "k " << k << " every " << every;
    }
  }
}

TEST(MultiRank, OneProcessIsTheSingleNodeRun) {
  MultiRank group(MultiRankOptions{});
  EXPECT_FALSE(group.active());
  EXPECT_EQ(group.shard(5, "examples").size(), 5u);
  const std::uint64_t values[] = {1, 2};
  group.same_on_all_ranks(values, "anything");  // nothing to compare with
  EXPECT_EQ(group.rounds(), 0u);
}

// A job killed between the ranks' writes of epoch 3: rank 1's file still holds epoch 2.
TEST(MultiRank, ResumesAtTheOldestCommonEpochAsTheUninterruptedJob) {
  const asgd::testing::ScratchDir dir;
  const auto ck = dir / "ck", whole = dir / "whole";
  const MultiRankOptions mo{.allreduce = Algorithm::ring};
  std::vector<std::vector<float>> uninterrupted(2), resumed(2);
  std::vector<std::filesystem::path> files(2);
  ASSERT_EQ(on_ranks(2, [&](Transport& t, int r) { uninterrupted[static_cast<std::size_t>(r)] = train_rank(t, mo, 5, 5, whole, {}, true); }),
            std::vector<std::string>(2, "(no exception)"));
  ASSERT_EQ(on_ranks(2, [&](Transport& t, int) { train_rank(t, mo, 5, 3, ck, {}, true); }),
            std::vector<std::string>(2, "(no exception)"));
  const auto rank1 = dir / "ck.rank1", rank1_prev = dir / "ck.rank1.prev";
  ASSERT_TRUE(std::filesystem::exists(rank1_prev));
  std::filesystem::rename(rank1_prev, rank1);  // rank 1 never wrote epoch 3
  ASSERT_EQ(read_checkpoint(rank1).state.epoch, 2u);
  ASSERT_EQ(read_checkpoint(ck).state.epoch, 3u);
  const auto errors = on_ranks(2, [&](Transport& t, int r) {
    const auto at = static_cast<std::size_t>(r);
    resumed[at] = train_rank(t, mo, 5, 5, ck, ck, true, &files[at]);
  });
  ASSERT_EQ(errors, std::vector<std::string>(2, "(no exception)"));
  EXPECT_EQ(files[0], dir / "ck.prev");  // rank 0, ahead, went back a generation
  EXPECT_EQ(files[1], rank1);
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t k = 0; k < 4; ++k)
      EXPECT_EQ(std::bit_cast<std::uint32_t>(resumed[r][k]), std::bit_cast<std::uint32_t>(uninterrupted[r][k]))
          << "rank " << r << " k " << k;
}

TEST(MultiRank, RefusesCheckpointsWithNoEpochInCommonOrOfOtherRuns) {
  const asgd::testing::ScratchDir dir;
  const auto ck = dir / "ck";
  const MultiRankOptions mo{.allreduce = Algorithm::tree};
  ASSERT_EQ(on_ranks(2, [&](Transport& t, int) { train_rank(t, mo, 5, 1, ck, {}, true); }),
            std::vector<std::string>(2, "(no exception)"));
  std::filesystem::copy_file(dir / "ck.rank1", dir / "epoch1.rank1");
  ASSERT_EQ(on_ranks(2, [&](Transport& t, int) { train_rank(t, mo, 5, 3, ck, ck, true); }),
            std::vector<std::string>(2, "(no exception)"));
  // Rank 1 back at epoch 1 with no .prev; rank 0 at 3, .prev 2.
  std::filesystem::remove(dir / "ck.rank1.prev");
  std::filesystem::copy_file(dir / "epoch1.rank1", dir / "ck.rank1", std::filesystem::copy_options::overwrite_existing);
  const auto before = std::filesystem::last_write_time(ck);
  auto errors = on_ranks(2, [&](Transport& t, int) { train_rank(t, mo, 5, 5, ck, ck, true); });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("no epoch in common (rank 0: epoch 3 (.prev: epoch 2), rank 1: epoch 1 (no .prev))"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("the checkpoint resumed"), std::string::npos) << e;  // the library's name, not a flag
  }
  EXPECT_EQ(std::filesystem::last_write_time(ck), before);  // a refusal changes nothing on disk

  // Rank 1's file of another job (another run id), at the same epoch as rank 0's.
  const CheckpointData data = read_checkpoint(ck);
  ParamStore store = ParamStore::on_heap(data.layout);
  for (std::size_t k = 0; k < data.params.size(); ++k) store.store(k, data.params[k]);
  save_checkpoint(dir / "ck.rank1", store, data.state, data.optimizer_state, R"({"options":{"run":"00000000cd"}})",
                  data.optimizer_kind);
  errors = on_ranks(2, [&](Transport& t, int) { train_rank(t, mo, 5, 5, ck, ck, true); });
  for (const auto& e : errors)
    EXPECT_NE(e.find("the ranks' checkpoints are of different runs (run ids rank 0: 00000000ab, rank 1: 00000000cd)"),
              std::string::npos)
        << e;
}

// An AdaGrad job's files resumed by another number of ranks (elastic): every rank takes rank 0's values and the
// ranks' sums added and divided by its own job's number of ranks, and the metadata records that number.
TEST(MultiRank, AdaGradSumsOfTwoRanksAreCutAgainForOneOrThree) {
  const asgd::testing::ScratchDir dir;
  const auto ck = dir / "ck";
  const MultiRankOptions mo{.allreduce = Algorithm::ring};
  ASSERT_EQ(on_ranks(2, [&](Transport& t, int) { train_rank(t, mo, 5, 3, ck, {}, true); }),
            std::vector<std::string>(2, "(no exception)"));
  // Each rank's file says that 2 ranks' files hold the sums (MultiRank::prepare records it).
  const CheckpointData zero = read_checkpoint(ck), one = read_checkpoint(dir / "ck.rank1");
  ASSERT_EQ(rank_files_of(zero.metadata, "ck"), 2);
  ASSERT_EQ(rank_files_of(one.metadata, "ck.rank1"), 2);
  ASSERT_FALSE(zero.optimizer_state.empty());
  ASSERT_NE(zero.optimizer_state, one.optimizer_state);  // each rank's sums are of its own examples

  for (const int P : {1, 3}) {
    std::vector<std::optional<MultiRank::Resumed>> got(static_cast<std::size_t>(P));
    const auto errors = on_ranks(P, [&](Transport& t, int r) {
      MultiRank group(t, mo);
      got[static_cast<std::size_t>(r)] = group.resume_checkpoint(ck, options_for(5, true));
    });
    ASSERT_EQ(errors, std::vector<std::string>(static_cast<std::size_t>(P), "(no exception)")) << P << " ranks";
    for (const auto& resumed : got) {
      ASSERT_TRUE(resumed.has_value());
      EXPECT_EQ(resumed->file, ck);
      EXPECT_EQ(resumed->data.state.epoch, 3u);
      EXPECT_EQ(resumed->data.params, zero.params);
      EXPECT_EQ(rank_files_of(resumed->data.metadata, "resumed"), P);
      ASSERT_EQ(resumed->data.optimizer_state.size(), zero.optimizer_state.size());
      for (std::size_t i = 0; i < zero.optimizer_state.size(); ++i) {
        const double sum = static_cast<double>(zero.optimizer_state[i]) + one.optimizer_state[i];
        EXPECT_EQ(resumed->data.optimizer_state[i], static_cast<float>(sum / P)) << P << " ranks, sum " << i;
      }
    }
  }

  std::filesystem::remove(dir / "ck.rank1");
  const auto errors = on_ranks(3, [&](Transport& t, int) {
    MultiRank group(t, mo);
    group.resume_checkpoint(ck, options_for(5, true));
  });
  for (const auto& e : errors) {
    EXPECT_EQ(e, fmt::format("the checkpoint resumed {}: written by 2 ranks, each with its own AdaGrad sums, and "
                             "rank 1's ({}) is missing",
                             ck.string(), (dir / "ck.rank1").string()));
  }
}

// A job of 3 ranks resumed by 2, stopped after rank 0's first write and before rank 1's: rank 0's newest file is
// of 2 ranks, the epoch the files share of 3. Refused, saying how to put it right; once rank 0's .prev is back,
// the 3 ranks' sums are cut again.
TEST(MultiRank, AResumeWithOtherRanksStoppedBetweenItsFirstWritesIsToldApart) {
  const asgd::testing::ScratchDir dir;
  const auto ck = dir / "ck";
  const MultiRankOptions mo{.allreduce = Algorithm::ring};
  ASSERT_EQ(on_ranks(3, [&](Transport& t, int) { train_rank(t, mo, 5, 3, ck, {}, true); }),
            std::vector<std::string>(3, "(no exception)"));
  std::filesystem::copy_file(ck, dir / "ck.prev", std::filesystem::copy_options::overwrite_existing);
  CheckpointData newer = read_checkpoint(ck);
  ParamStore store = ParamStore::on_heap(newer.layout);
  for (std::size_t k = 0; k < newer.params.size(); ++k) store.store(k, newer.params[k]);
  newer.state.epoch = 4;
  save_checkpoint(ck, store, newer.state, newer.optimizer_state, with_rank_files(newer.metadata, 2),
                  newer.optimizer_kind);
  const auto resume_on = [&](int P) {
    return on_ranks(P, [&](Transport& t, int) {
      MultiRank group(t, mo);
      group.resume_checkpoint(ck, options_for(5, true));
    });
  };
  for (const int P : {2, 3}) {
    for (const auto& e : resume_on(P)) {
      EXPECT_EQ(e, fmt::format("the checkpoint resumed {}: the epoch the ranks' files share (3) is of a job of 3 "
                               "rank(s), and rank 0's newest file of a job of 2: a job that resumed them with another "
                               "number of ranks was stopped before every rank wrote its file; move {} back over {} "
                               "and resume again",
                               ck.string(), (dir / "ck.prev").string(), ck.string()))
          << P << " ranks";
    }
  }
  std::filesystem::rename(dir / "ck.prev", ck);
  EXPECT_EQ(resume_on(2), std::vector<std::string>(2, "(no exception)"));
}

TEST(MultiRank, RanksGivenDifferentOptionsOrSettingsAreRefusedOnEveryRank) {
  auto errors = on_ranks(3, [](Transport& t, int r) {
    MultiRank group(t, MultiRankOptions{.average_every = r == 2 ? 5u : 0u});
    group.agree_on_options();
  });
  for (const auto& e : errors)
    EXPECT_EQ(e, "the ranks were given different MultiRankOptions::average_every: rank 0 epoch, rank 1 epoch, rank "
                 "2 5; every rank needs the same");
  errors = on_ranks(2, [](Transport& t, int r) {
    MultiRank group(t, MultiRankOptions{});
    const std::pair<std::string_view, std::string> settings[] = {{"l2", r == 0 ? "0.1" : "0.2"}};
    group.same_settings(settings);
  });
  EXPECT_EQ(errors[1], "the ranks differ in l2 (rank 1 differs from rank 0; here 0.2); every rank needs the same "
                       "(their models are averaged)");
  EXPECT_EQ(message_of([] { MultiRank(MultiRankOptions{.average_weighted = true, .combine = Combine::sum}); }),
            "MultiRankOptions::average_weighted weights the mean; it does not apply to MultiRankOptions::combine sum");
  // The flush is a collective round: ranks that would not all make it are refused at the start.
  errors = on_ranks(2, [](Transport& t, int r) {
    MultiRank group(t, MultiRankOptions{.average_rank = 2, .average_flush = r == 1});
    group.agree_on_options();
  });
  for (const auto& e : errors)
    EXPECT_EQ(e, "the ranks were given different MultiRankOptions::average_flush: rank 0 off, rank 1 on; every rank "
                 "needs the same");
  EXPECT_EQ(message_of([] { MultiRank(MultiRankOptions{.average_flush = true}); }),
            "MultiRankOptions::average_flush sends what low-rank rounds left out; it needs "
            "MultiRankOptions::average_rank 1 or more");
}

TEST(MultiRank, OptionsReadFromTextNameTheOptionWhenWrong) {
  MultiRankOptions o;
  o.set_average_every("epoch");
  EXPECT_EQ(o.average_every, 0u);
  o.set_average_every("250");
  EXPECT_EQ(o.average_every, 250u);
  o.set_combine("sum");
  EXPECT_EQ(o.combine, Combine::sum);
  o.set_combine("mean");
  EXPECT_EQ(o.combine, Combine::mean);
  for (const char* bad : {"0", "-1", "5x", "", "1099511627776"})
    EXPECT_EQ(message_of([&] { o.set_average_every(bad); }),
              fmt::format("MultiRankOptions::average_every '{}': expected epoch or a number of steps from 1 to 2^40 "
                          "- 1",
                          bad));
  EXPECT_EQ(message_of([&] { o.set_combine("median"); }), "MultiRankOptions::combine 'median': expected mean or sum");
  o.set_slow_rank("1:3");
  EXPECT_EQ(o.slow_rank, 1);
  EXPECT_EQ(o.slow_factor, 3.0);
  EXPECT_EQ(o.slow_turn_steps, 0u);
  o.set_slow_rank("0:2.5:100");
  EXPECT_EQ(o.slow_rank, 0);
  EXPECT_EQ(o.slow_factor, 2.5);
  EXPECT_EQ(o.slow_turn_steps, 100u);
  for (const char* bad : {"1", "1:", ":3", "1:0.5", "1:3:", "1:3:0", "1:3:x", "-1:3", "1:3:5:6", "1:1001"})
    EXPECT_EQ(message_of([&] { o.set_slow_rank(bad); }),
              fmt::format("MultiRankOptions::slow_rank '{}': expected RANK:FACTOR or RANK:FACTOR:STEPS, a rank, a "
                          "factor from 1 to 1000 and a number of steps from 1 to 2^40 (1:3 makes rank 1 three times "
                          "slower; 0:3:100 makes each rank in turn three times slower for 100 of its steps, rank 0 "
                          "first)",
                          bad))
        << bad;
  o.spell = [](std::string_view option) { return "-" + std::string(option); };
  EXPECT_EQ(message_of([&] { o.set_combine("avg"); }), "-combine 'avg': expected mean or sum");
}

TEST(MultiRank, SeveralRanksRecordHowTheyAverageOneProcessNothing) {
  OptionsRecord alone;
  MultiRank(MultiRankOptions{.average_every = 8}).add_to_record(alone);
  EXPECT_TRUE(alone.empty());
  auto errors = on_ranks(2, [](Transport& t, int r) {
    MultiRank group(t, MultiRankOptions{.average_every = 8, .combine = Combine::sum});
    OptionsRecord record;
    group.add_to_record(record);
    if (r == 0) {
      EXPECT_EQ(record, (OptionsRecord{{"average-every", "8"}, {"combine", "sum"}, {"average-weighted", "off"}}));
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "(no exception)");
}

TEST(Job, AProcessNotStartedByMpirunIsNoRankOfAJob) {
  // ctest starts this test plainly: no launcher's variables, no transport.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v) != nullptr) GTEST_SKIP() << v << " is set: started by a launcher";
  Job job;
  EXPECT_EQ(job.transport(), nullptr);
}

}  // namespace
}  // namespace asgd::net
