// End-to-end tests of `asgd mf` as a LIBMF user runs it.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/param_store.hpp"
#include "cli_harness.hpp"

namespace {

namespace fs = std::filesystem;

class MfCli : public asgd::testing::CliTest {};

}  // namespace

TEST_F(MfCli, GenerateTrainPredictEvalRecommend) {
  auto r = run({"mf", "generate", path("all.txt"), "--users", "400", "--items", "200", "--ratings", "20000", "--rank",
                "4", "--noise", "0.3"});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "train", "-k", "8", "-t", "15", "-s", "2", "--test-fraction", "0.1", path("all.txt"), path("m")});
  ASSERT_EQ(r.status, 0) << r.output;
  const double test_rmse = asgd::testing::number_after(r.output, "RMSE ");
  EXPECT_GT(test_rmse, 0.25);
  EXPECT_LT(test_rmse, 0.6) << r.output;
  r = run({"mf", "predict", path("all.txt"), path("m"), path("pred.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream pred(path("pred.txt"));
  std::size_t lines = 0;
  for (std::string line; std::getline(pred, line);) ++lines;
  EXPECT_EQ(lines, 20000u);  // one prediction per input pair
  r = run({"mf", "eval", path("all.txt"), path("m")});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "recommend", path("m"), "--user", "u7", "-k", "5", "--exclude", path("all.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  std::size_t rows = 0;
  for (char c : r.output) rows += c == '\n';
  EXPECT_EQ(rows, 5u) << r.output;
  // The lists of every user may not replace the model or the ratings they exclude.
  const std::string model_bytes = slurp("m"), ratings_bytes = slurp("all.txt");
  for (const auto& [victim, flag] : {std::pair{"m", "model_file"}, std::pair{"all.txt", "--exclude"}}) {
    r = run({"mf", "recommend", path("m"), "--all-users", path(victim), "--exclude", path("all.txt")});
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(std::string("--all-users: ") + path(victim) + " is also " + flag + "'s file"),
              std::string::npos)
        << r.output;
  }
  EXPECT_EQ(slurp("m"), model_bytes);
  EXPECT_EQ(slurp("all.txt"), ratings_bytes);
  // Errors: exit 2 and say what.
  r = run({"mf", "recommend", path("m"), "--user", "nobody"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--user nobody"), std::string::npos) << r.output;
  std::ofstream(path("bad.txt")) << "u1 i1 4\nu2 i2\n";
  r = run({"mf", "train", path("bad.txt")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("bad.txt:2: expected 3 fields"), std::string::npos) << r.output;
  r = run({"mf", "eval", path("all.txt"), path("bad.txt")});
  EXPECT_EQ(r.status, 2) << r.output;
}

TEST_F(MfCli, ServesTopKFromALiveSegmentWhileTrainingWritesIt) {
  auto r = run({"mf", "generate", path("all.txt"), "--users", "2000", "--items", "500", "--ratings", "200000"});
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string shm = "asgd-mf-serve-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  asgd::testing::Child trainer({"mf", "train", "-t", "100000", "-s", "1", "-q", "--shm", shm, path("all.txt"),
                                path("m")},
                               dir_ / "trainer.log");
  for (int i = 0; i < 500 && !fs::exists(path("m")); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(fs::exists(path("m")));
  int served_while_training = 0;
  for (int i = 0; i < 3; ++i) {
    r = run({"mf", "recommend", path("m"), "--shm", shm, "--user", "u3", "-k", "5", "--exclude", path("all.txt")});
    ASSERT_EQ(r.status, 0) << r.output;
    std::size_t rows = 0;
    for (char c : r.output) rows += c == '\n';
    EXPECT_EQ(rows, 5u) << r.output;
    if (::waitpid(trainer.pid(), nullptr, WNOHANG) == 0) ++served_while_training;
  }
  EXPECT_EQ(served_while_training, 3);
  // Ctrl-C: the trainer stops and detaches; the segment goes on serving, not stale.
  trainer.kill_now(SIGINT);
  r = trainer.wait();
  EXPECT_EQ(r.status, 128 + SIGINT) << r.output;
  EXPECT_NE(r.output.find("asgd mf train: interrupted (SIGINT)"), std::string::npos) << r.output;
  r = run({"shm", "info", shm});
  EXPECT_EQ(r.status, 0) << r.output;
  r = run({"mf", "recommend", path("m"), "--shm", shm, "--user", "u3", "-k", "5"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
  asgd::ParamStore::remove_shared(shm);
  // The stopped run's model file is the one written before training: read alone, it is said to hold the initial
  // factors (it was used without a word).
  r = run({"mf", "recommend", path("m"), "--user", "u3", "-k", "5"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("holds no trained epoch"), std::string::npos) << r.output;
}

// A segment's rows are users and items in the order the file that made it numbered them. The same ratings in
// another order number them differently: training or serving with those ids would read other users' rows.
// Processes that train one segment train one objective: mf with another --l2 or --loss is refused.
TEST_F(MfCli, ASegmentRefusesAWriterOfAnotherObjective) {
  auto r = run({"mf", "generate", path("all.txt"), "--users", "200", "--items", "100", "--ratings", "5000"});
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string shm = "asgd-mf-objective-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  r = run({"mf", "train", "-t", "1", "-q", "--l2", "0.05", "--shm", shm, path("all.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "train", "-t", "1", "-q", "--l2", "0.1", "--shm", shm, path("all.txt")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("is trained with --loss squared --l2 0.05 --bias-l2 0.05; this process would train it "
                          "with --loss squared --l2 0.1"),
            std::string::npos)
      << r.output;
  r = run({"mf", "train", "-t", "1", "-q", "-l2", "0.05", "--shm", shm, path("all.txt")});
  EXPECT_EQ(r.status, 0) << r.output;
  asgd::ParamStore::remove_shared(shm);
}

// A run that diverges stops (exit 1) but leaves its NaN in the segment: a reader refused it, and served +inf
// clipped to the top rating, or NaN, with exit 0; a trainer went on from it and diverged again at once.
TEST_F(MfCli, ADivergedSegmentIsRefusedByItsReadersAndTrainers) {
  auto r = run({"mf", "generate", path("all.txt"), "--users", "200", "--items", "100", "--ratings", "5000"});
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string shm = "asgd-mf-diverged-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  r = run({"mf", "train", "-t", "3", "-s", "1", "-q", "-r", "1e30", "--shm", shm, path("all.txt"), path("m")});
  ASSERT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("training diverged"), std::string::npos) << r.output;
  ASSERT_TRUE(asgd::ParamStore::exists_shared(shm));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"mf", "recommend", path("m"), "--shm", shm, "--all-users", path("all.tsv")},
        std::vector<std::string>{"mf", "train", "-t", "1", "-q", "--shm", shm, path("all.txt")}}) {
    r = run(args);
    EXPECT_EQ(r.status, 2) << args[1] << "\n" << r.output;
    EXPECT_NE(r.output.find("a run that trained into it diverged"), std::string::npos) << args[1] << "\n" << r.output;
    EXPECT_NE(r.output.find("asgd shm remove " + shm), std::string::npos) << r.output;
  }
  EXPECT_FALSE(fs::exists(path("all.tsv")));
  asgd::ParamStore::remove_shared(shm);
}

// --sampled-eval trains a second model after the first is written: a stop there ends that training too (before,
// it ran to its end and the command exited 0).
TEST_F(MfCli, AStopDuringTheSampledEvaluationEndsIt) {
  auto r = run({"mf", "generate", path("all.txt"), "--users", "300", "--items", "200", "--ratings", "20000"});
  ASSERT_EQ(r.status, 0) << r.output;
  asgd::testing::Child trainer({"mf", "train", "--loss", "bpr", "--positive", "3", "-t", "1000", "-s", "1", "-q",
                                "--sampled-eval", path("all.txt"), path("m")},
                               dir_ / "trainer.log");
  for (int i = 0; i < 3000 && !fs::exists(path("m")); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(fs::exists(path("m")));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  trainer.kill_now(SIGTERM);
  r = trainer.wait();
  EXPECT_EQ(r.status, 128 + SIGTERM) << r.output;
  EXPECT_NE(r.output.find("interrupted in the training of --sampled-eval (the model was written to " + path("m")),
            std::string::npos)
      << r.output;
}

// A stop that comes while the segment is being created and its factors drawn (here 120 MB of them) stops the run
// at its first step, which detaches: before, the handler came after, and the kill left the segment stale.
TEST_F(MfCli, AStopWhileTheSegmentIsMadeLeavesItDetached) {
  auto r = run({"mf", "generate", path("wide.txt"), "--users", "100000", "--items", "20000", "--ratings", "30000"});
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string shm = "asgd-mf-early-stop-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  asgd::testing::Child trainer({"mf", "train", "-k", "256", "-t", "1000", "-q", "--shm", shm, path("wide.txt")},
                               dir_ / "trainer.log");
  for (int i = 0; i < 20000 && !asgd::ParamStore::exists_shared(shm); ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  trainer.kill_now(SIGTERM);
  r = trainer.wait();
  EXPECT_EQ(r.status, 128 + SIGTERM) << r.output;
  EXPECT_NE(r.output.find("interrupted (SIGTERM) in epoch 1 of 1000"), std::string::npos) << r.output;
  r = run({"shm", "info", shm});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("DEAD"), std::string::npos) << r.output;
  asgd::ParamStore::remove_shared(shm);
}

TEST_F(MfCli, ASegmentOfOtherIdsIsRefused) {
  std::ofstream(path("a.txt")) << "u1 i1 4\nu2 i2 3\nu3 i1 5\nu1 i2 2\n";
  std::ofstream(path("b.txt")) << "u2 i2 3\nu1 i1 4\nu3 i1 5\nu1 i2 2\n";  // the same, u2 and i2 first
  const std::string shm = "asgd-mf-ids-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  auto r = run({"mf", "train", "-k", "2", "-t", "2", "-q", "--shm", shm, path("a.txt"), path("ma")});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "train", "-k", "2", "-t", "2", "-q", "--shm", shm, path("a.txt"), path("ma2")});
  EXPECT_EQ(r.status, 0) << r.output;  // the same ids: training goes on in it
  r = run({"mf", "train", "-k", "2", "-t", "2", "-q", "--shm", shm, path("b.txt"), path("mb")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("holds other parameters of the same shape"), std::string::npos) << r.output;
  r = run({"mf", "train", "-k", "2", "-t", "2", "-q", path("b.txt"), path("mb")});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "recommend", path("mb"), "--shm", shm, "--user", "u1", "-k", "1"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("holds other parameters of the same shape"), std::string::npos) << r.output;
  r = run({"mf", "recommend", path("ma"), "--shm", shm, "--user", "u1", "-k", "1"});
  EXPECT_EQ(r.status, 0) << r.output;
  asgd::ParamStore::remove_shared(shm);
}

// LIBMF's spellings (-l2 with one dash, -p validation file, -n bins), a
// validation set held out of the training part, and a BPR model that
// `recommend` serves.
TEST_F(MfCli, LibmfFlagsValidationSplitAndBprModels) {
  auto r = run({"mf", "generate", path("all.txt"), "--users", "300", "--items", "150", "--ratings", "12000", "--rank",
                "4", "--noise", "0.3"});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "generate", path("val.txt"), "--users", "300", "--items", "150", "--ratings", "1000", "--seed", "9"});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "train", "-l2", "0.07", "-k", "4", "-t", "3", "-p", path("val.txt"), "--schedule", "blocks", "-n",
           "4", path("all.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("blocks 4x4"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("validation: 1000 ratings"), std::string::npos) << r.output;
  // No more bins than items: the grid's other blocks would be empty (before: 4096 x 4096 blocks an epoch).
  r = run({"mf", "train", "-k", "4", "-t", "1", "--schedule", "blocks", "-n", "4096", "-q", path("all.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("note: -n/--bins 4096: 150"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("blocks 150x150"), std::string::npos) << r.output;
  // Fewer workers than bins: with as many, one that gives its block back finds none free (the new scheduler took
  // 321 s an epoch with 943 workers on ml-100k's 943 bins). Bins cut to the items (given or by default) keep
  // bins > 2 x workers, as the default 2 x threads + 1; bins given and kept, LIBMF's rule, bins > workers.
  for (const auto& bins : {std::vector<std::string>{}, std::vector<std::string>{"-n", "4096"}}) {
    std::vector<std::string> args = {"mf", "train", "-k", "4", "-t", "1", "-s", "200", "--schedule", "blocks", "-q"};
    args.insert(args.end(), bins.begin(), bins.end());
    args.push_back(path("all.txt"));
    r = run(args);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("note: -s 200: 74 workers train the blocks of 150 bins (bins cut to the users or "
                            "items, more than 2 x workers)"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("74 workers, racy, blocks 150x150"), std::string::npos) << r.output;
  }
  // The same whether --schedule blocks is given or auto takes the blocks (as -n makes it): the note does not
  // name a flag the user did not write.
  for (const bool given : {true, false}) {
    std::vector<std::string> args = {"mf", "train", "-k", "4", "-t", "1", "-s", "8", "-n", "8", "-q", path("all.txt")};
    if (given) args.insert(args.begin() + 8, {"--schedule", "blocks"});
    r = run(args);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("note: -s 8: 7 workers train the blocks of 8 bins (more bins than workers)"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("--schedule"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("7 workers, racy, blocks 8x8"), std::string::npos) << r.output;
  }
  // Nothing changed, nothing said (one worker is the least, whatever the bins).
  r = run({"mf", "train", "-k", "4", "-t", "1", "-s", "1", "-n", "1", "--schedule", "blocks", "-q", path("all.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("workers with --schedule blocks"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("worker with --schedule blocks"), std::string::npos) << r.output;

  r = run({"mf", "train", "-k", "4", "-t", "3", "--test-fraction", "0.1", "--validation-fraction", "0.2",
           path("all.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("mf: 8640 ratings"), std::string::npos) << r.output;  // 12000 * 0.9 * 0.8
  EXPECT_NE(r.output.find("validation: 2160 ratings"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("test: 1200 ratings"), std::string::npos) << r.output;
  // One line per epoch, each with both sets' RMSE after that epoch.
  for (const char* epoch : {"epoch   1: train loss", "epoch   2: train loss", "epoch   3: train loss"}) {
    const auto at = r.output.find(epoch);
    ASSERT_NE(at, std::string::npos) << r.output;
    const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    EXPECT_NE(line.find("validation RMSE"), std::string::npos) << line;
    EXPECT_NE(line.find("test RMSE"), std::string::npos) << line;
  }
  EXPECT_EQ(r.output.find("epoch   4:"), std::string::npos) << r.output;
  r = run({"mf", "train", "-t", "1", "-v", path("val.txt"), "--validation-fraction", "0.2", path("all.txt")});
  EXPECT_EQ(r.status, 2) << r.output;
  r = run({"mf", "train", "-k", "4", "-t", "5", "--no-biases", "--row-adagrad", "--init", "1", "-r", "0.1",
           "--test-fraction", "0.1", path("all.txt"), path("nb.model")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_LT(asgd::testing::number_after(r.output, "RMSE "), 1.0) << r.output;
  r = run({"mf", "train", "-t", "1", "--adagrad", "--row-adagrad", path("all.txt")});
  EXPECT_EQ(r.status, 2) << r.output;
  // A flag of the other loss or schedule is refused, not ignored (before: BPR read no -v file and took any
  // --schedule).
  for (const auto& [extra, why] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--loss", "bpr", "-p", path("all.txt")}, "-v/-p: only with --loss squared"},
           {{"--loss", "bpr", "--schedule", "nonsense"}, "--schedule: only with --loss squared"},
           {{"--loss", "bpr", "-n", "3"}, "-n/--bins: only with --loss squared"},
           {{"--loss", "bpr", "--validation-fraction", "0.5"}, "--validation-fraction: only with --loss squared"},
           {{"--loss", "bpr", "--no-biases"}, "--no-biases: only with --loss squared"},
           {{"--loss", "bpr", "--no-mean"}, "--no-mean: only with --loss squared"},
           {{"--loss", "bpr", "--scale-ratings"}, "--scale-ratings: only with --loss squared"},
           {{"--loss", "bpr", "--head-first"}, "--head-first: only with --loss squared"},
           {{"--sampled-eval"}, "--sampled-eval: only with --loss bpr"},
           {{"--positive", "3"}, "--positive: only with --loss bpr"},
           // And one of the other schedule (before: both ignored without a word).
           {{"--schedule", "blocks", "--tau", "2"}, "--tau: only without --schedule blocks"},
           {{"--schedule", "hogwild", "-n", "3"}, "-n/--bins: only with --schedule blocks, or automatic"},
           {{"--tau", "2", "-n", "3"}, "-n/--bins: only with --schedule blocks, or automatic without a bounded --tau"},
           {{"--schedule", "grid"}, "--schedule 'grid': expected auto, hogwild or blocks"}}) {
    std::vector<std::string> args{"mf", "train", "-t", "1", path("all.txt")};
    args.insert(args.end(), extra.begin(), extra.end());
    r = run(args);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(why), std::string::npos) << r.output;
  }

  r = run({"mf", "train", "--loss", "bpr", "--positive", "3", "-k", "8", "-t", "5", "--test-fraction", "0.2",
           path("all.txt"), path("bpr.model")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("NDCG@10"), std::string::npos) << r.output;
  r = run({"mf", "recommend", path("bpr.model"), "--user", "u5", "-k", "4", "--exclude", path("all.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  std::size_t rows = 0;
  for (char c : r.output) rows += c == '\n';
  EXPECT_EQ(rows, 4u) << r.output;
}

// LIBMF's whole rule (its form: no mean, ratings divided by their deviation): the model file says how to undo it,
// so that eval, predict and recommend say what training said, and ids without a training rating predict the
// mean, not 0 (a non-centred model's zero row).
TEST_F(MfCli, LibmfsFormIsUndoneByEveryCommandThatPredicts) {
  auto r = run({"mf", "generate", path("all.txt"), "--users", "300", "--items", "150", "--ratings", "12000", "--rank",
                "4", "--noise", "0.3"});
  ASSERT_EQ(r.status, 0) << r.output;
  std::ofstream(path("val.txt")) << "u1 i1 3\nu2 i3 4\nnewcomer i1 4\nnewcomer i2 3\nu3 newitem 5\n";
  r = run({"mf", "train", "-k", "8", "-t", "10", "--no-biases", "--row-adagrad", "--init", "1", "-r", "0.1", "-l2",
           "0.1", "--no-mean", "--scale-ratings", "-v", path("val.txt"), "--test-fraction", "0.1", path("all.txt"),
           path("m")});
  ASSERT_EQ(r.status, 0) << r.output;
  const double test_rmse = asgd::testing::number_after(r.output, "test: 1200 ratings, RMSE ");
  EXPECT_LT(test_rmse, 0.6) << r.output;
  const auto at = r.output.find("validation: 5 ratings");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string validation = r.output.substr(at, r.output.find('\n', at) - at);
  const asgd::CheckpointData d = asgd::read_checkpoint(path("m"));
  EXPECT_NE(d.metadata.find("\"offset\":0.0"), std::string::npos) << d.metadata;
  EXPECT_NE(d.metadata.find("\"scale\":"), std::string::npos) << d.metadata;
  // The same five ratings scored from the file: the same RMSE, to the digits printed.
  r = run({"mf", "eval", path("val.txt"), path("m")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(asgd::testing::number_after(r.output, "RMSE "), asgd::testing::number_after(validation, "RMSE "))
      << r.output << validation;
  // `mf predict` of val.txt's five pairs with `model`.
  const auto predictions = [&](const std::string& model) {
    const auto p = run({"mf", "predict", path("val.txt"), path(model), path(model + ".pred")});
    EXPECT_EQ(p.status, 0) << p.output;
    std::ifstream in(path(model + ".pred"));
    std::vector<double> out;
    for (double v; in >> v;) out.push_back(v);
    return out;
  };
  const std::vector<double> values = predictions("m");
  ASSERT_EQ(values.size(), 5u);
  for (std::size_t i : {2u, 3u, 4u}) EXPECT_GT(values[i], 2.5) << "cold pair " << i << " predicted " << values[i];
  EXPECT_NEAR(values[2], values[3], 1e-6);  // the cold user with either item: the mean alone (no biases)
  r = run({"mf", "recommend", path("m"), "--user", "u1", "-k", "3"});
  ASSERT_EQ(r.status, 0) << r.output;
  double first = 0;
  EXPECT_EQ(std::sscanf(r.output.c_str(), "%*s %lf", &first), 1) << r.output;
  EXPECT_GT(first, 2.0) << r.output;  // a rating, not a score in the model's units
  // A user without a training rating: the mean for every item (its zero row gave 0, printed as the lowest rating).
  r = run({"mf", "recommend", path("m"), "--user", "newcomer", "-k", "2"});
  ASSERT_EQ(r.status, 0) << r.output;
  const auto tab = r.output.find('\t');
  ASSERT_NE(tab, std::string::npos) << r.output;
  EXPECT_GT(std::stod(r.output.substr(tab + 1)), 2.5) << r.output;

  // Not centred but with biases: the biases hold the mean, so a known side's bias counts by its distance from its
  // side's mean bias (mean plus the bias counted the mean twice: 5.66 where the centred model said 3.69).
  r = run({"mf", "train", "-k", "8", "-t", "10", "--no-mean", "-v", path("val.txt"), path("all.txt"), path("b")});
  ASSERT_EQ(r.status, 0) << r.output;
  const double mean = asgd::testing::number_after(r.output, "items, mean ");
  const std::vector<double> with_biases = predictions("b");
  ASSERT_EQ(with_biases.size(), 5u);
  for (std::size_t i : {2u, 3u, 4u}) EXPECT_NEAR(with_biases[i], mean, 1.0) << "cold pair " << i;
  EXPECT_NE(with_biases[2], with_biases[3]) << "newcomer's two items differ by their biases";
  // A user without a training rating is ranked by the item biases (not every item at the mean, in id order).
  r = run({"mf", "recommend", path("b"), "--user", "newcomer", "-k", "3"});
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream lines(r.output);
  std::vector<double> scores;  // "item<TAB>score" lines (stderr's note has no tab)
  for (std::string line; std::getline(lines, line);)
    if (const auto tab = line.find('\t'); tab != std::string::npos) scores.push_back(std::stod(line.substr(tab + 1)));
  ASSERT_EQ(scores.size(), 3u) << r.output;
  EXPECT_GT(scores[0], scores[2]) << r.output;
  EXPECT_GT(scores[0], mean) << r.output;

  // LIBMF's head first (--head-first): only with --row-adagrad; it trains, and ratings all alike refuse
  // --scale-ratings up front (the L2 weight divided by LIBMF's floor of 1e-4 for the deviation diverged at epoch 1).
  r = run({"mf", "train", "-k", "16", "-t", "5", "--no-biases", "--row-adagrad", "--head-first", "--init", "1", "-r",
           "0.1", "-l2", "0.1", "--no-mean", "--scale-ratings", "--test-fraction", "0.1", path("all.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_LT(asgd::testing::number_after(r.output, "RMSE "), 0.7) << r.output;
  r = run({"mf", "train", "-t", "1", "--head-first", path("all.txt")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--head-first: only with --row-adagrad"), std::string::npos) << r.output;
  std::ofstream(path("flat.txt")) << "u1 i1 3\nu2 i2 3\nu3 i1 3\nu1 i2 3\n";
  r = run({"mf", "train", "-t", "1", "--scale-ratings", path("flat.txt")});
  EXPECT_EQ(r.status, 2) << r.output;
  // The deviation is 0; the scale is LIBMF's floor, and the message says which is which (it said 0.0001).
  EXPECT_NE(r.output.find("--scale-ratings: the ratings' standard deviation is 0 (scaled by the floor, 0.0001)"),
            std::string::npos)
      << r.output;
}

// Inputs a user may well have, each with a clear answer: ids in any bytes, an --exclude file that repeats pairs
// or names items the model lacks, and values or flags out of range refused up front (exit 2), never a hang.
TEST_F(MfCli, OddInputsTrainOrGetAClearRefusal) {
  const std::string cafe = "caf\xe9";  // Latin-1, not UTF-8
  std::ofstream(path("ids.txt")) << cafe << " apple 5\n" << cafe << " plum 1\nbob apple 4\nbob pear 2\nann plum 3\n"
                                 << "ann pear 5\nann fig 4\nbob fig 1\n";
  auto r = run({"mf", "train", "-k", "2", "-t", "5", path("ids.txt"), path("m")});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "recommend", path("m"), "--user", cafe, "-k", "4"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 4) << r.output;
  // Excluded: apple twice, and items the model never saw; plum, pear and fig remain.
  std::ofstream(path("exclude.txt")) << cafe << " apple 5\n" << cafe << " apple 5\n" << cafe << " ghost 1\n"
                                     << cafe << " ghost2 1\n";
  r = run({"mf", "recommend", path("m"), "--user", cafe, "-k", "10", "--exclude", path("exclude.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 3) << r.output;
  EXPECT_EQ(r.output.find("apple"), std::string::npos) << r.output;
  std::ofstream(path("huge.txt")) << "1 10 4\n1 11 1e39\n2 10 3\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"mf", "train", path("huge.txt")}, "huge.txt:2:"},
      {{"mf", "train", "--test-fraction", "-0.1", path("ids.txt")}, "--test-fraction -0.1"},
      {{"mf", "train", "--validation-fraction", "1", path("ids.txt")}, "--validation-fraction 1"},
      {{"mf", "train", "--schedule", "blocks", "-n", "4097", path("ids.txt")}, "--bins 4097: at most"},
      {{"mf", "recommend", path("m"), "--user", cafe, "-k", "0"}, "-k 0: expected at least 1"},
      {{"mf", "train", "--init", "0", path("ids.txt")}, "--init 0: expected > 0"},
      // Flags that need no data are refused before the file is read (here: before it is found missing).
      {{"mf", "train", "-k", "0", path("missing.txt")}, "-k 0: expected"},
      {{"mf", "train", "--l2", "-1", path("missing.txt")}, "-1: expected >= 0"},
      {{"mf", "train", "--schedule", "blocks", "-n", "4097", path("missing.txt")}, "--bins 4097: at most"},
      {{"mf", "train", "--loss", "bpr", "--positive", "nan", path("missing.txt")}, "--positive nan: expected"},
      {{"mf", "generate", path("g.txt"), "--users", "10", "--items", "1000", "--ratings", "5000", "--zipf", "4"},
       "--zipf 4"},
      // Every user and item gets a factor row: a bound, not a bad_alloc after seconds (2^32 users, one rating).
      {{"mf", "generate", path("g.txt"), "--users", "4294967296", "--items", "1", "--ratings", "1"},
       "--users 4294967296 and --items 1: at most 33554432 each"},
      {{"mf", "generate", path("g.txt"), "--users", "33554432", "--items", "33554432", "--rank", "1024", "--ratings",
        "1"},
       "(--users + --items) x --rank = 67108864 x 1024: at most 2147483648 factor values"},
      {{"mf", "generate", path("g.txt"), "--users", "33554432", "--items", "33554432", "--ratings", "100000000000000"},
       "--ratings 100000000000000: at most 1073741824"},
      // users x items / 2 said in full (it wrapped past 2^64).
      {{"mf", "generate", path("g.txt"), "--users", "33554432", "--items", "33554432", "--ratings", "0"},
       "half of users x items (562949953421312)"},
  };
  for (const auto& [args, expect] : refused) {
    r = run(args);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(expect), std::string::npos) << r.output;
  }
}

// What a LIBMF or implicit user gets beyond the happy path: a test file with users and items the model lacks is
// scored in full (the unknown from the mean and known biases), a held-out set too small to hold a rating says so,
// errors name mf's own flags, and `mf eval` ranks a BPR model against most-popular.
TEST_F(MfCli, EvalScoresEveryRatingAndRanksABprModel) {
  auto r = run({"mf", "generate", path("all.txt"), "--users", "200", "--items", "100", "--ratings", "8000", "--rank",
                "4", "--noise", "0.3"});
  ASSERT_EQ(r.status, 0) << r.output;
  std::ofstream(path("test.txt")) << "u1 i1 4\nu1 i2 3\nstranger i1 5\nu2 newcomer 2\nstranger newcomer 1\n";
  r = run({"mf", "train", "-k", "4", "-t", "5", path("all.txt"), path("m")});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "eval", path("test.txt"), path("m")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("eval: 5 ratings (2 with a known user and item"), std::string::npos) << r.output;
  // A validation file puts its new ids in the model's maps, as rows without a training rating: still not known
  // (before: counted as known, 5 of 5).
  r = run({"mf", "train", "-k", "4", "-t", "2", "-q", "-v", path("test.txt"), path("all.txt"), path("mv")});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "eval", path("test.txt"), path("mv")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("eval: 5 ratings (2 with a known user and item"), std::string::npos) << r.output;
  r = run_to(path("pred.txt"), {"mf", "predict", path("test.txt"), path("m"), "-"});
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(path("pred.txt"));
  std::vector<double> pred;
  for (double x; in >> x;) pred.push_back(x);
  ASSERT_EQ(pred.size(), 5u);
  const double mean = asgd::testing::number_after(
      run({"mf", "train", "-k", "4", "-t", "1", "-q", path("all.txt")}).output, "mean ");
  EXPECT_NEAR(pred[4], mean, 1e-3);  // neither known: the mean
  EXPECT_NE(pred[2], pred[4]);       // the item is known: its bias
  EXPECT_NE(pred[3], pred[4]);       // the user is known: its bias

  // Flags under mf's names; a held-out part with no rating in it.
  for (const auto& [args, expect] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"mf", "train", "-t", "0", path("all.txt")}, "-t 0:"},
           {{"mf", "train", "-s", "0", path("all.txt")}, "-s 0:"},
           {{"mf", "train", "-r", "0", path("all.txt")}, "-r 0:"},
           {{"mf", "train", "--lr-schedule", "cosine", path("all.txt")}, "--lr-schedule:"},
           {{"mf", "eval", path("test.txt"), path("m"), "--exclude", path("all.txt")}, "--exclude: only for a bpr"},
           {{"mf", "eval", path("test.txt"), path("m"), "-k", "5"}, "-k: only for a bpr"}}) {
    r = run(args);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(expect), std::string::npos) << r.output;
  }
  r = run({"mf", "train", "-t", "1", "--test-fraction", "0.00001", path("all.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("test: no ratings"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("RMSE 0.0000"), std::string::npos) << r.output;

  // A BPR model is scored by ranking, with the training file's positives left out of each list.
  std::ifstream all(path("all.txt"));
  std::ofstream train(path("train.txt")), held(path("held.txt"));
  std::size_t line_no = 0;
  for (std::string line; std::getline(all, line); ++line_no) (line_no % 5 == 0 ? held : train) << line << '\n';
  train.close();
  held.close();
  r = run({"mf", "train", "--loss", "bpr", "--positive", "3", "-k", "8", "-t", "20", path("train.txt"), path("b")});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "eval", path("held.txt"), path("b")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--exclude TRAIN_FILE"), std::string::npos) << r.output;
  r = run({"mf", "eval", path("held.txt"), path("b"), "--exclude", path("train.txt"), "-k", "5"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rating >= 3"), std::string::npos) << r.output;  // the model's threshold
  const double ours = asgd::testing::number_after(r.output, "BPR precision@5 ");
  const double popular = asgd::testing::number_after(r.output, "most-popular precision@5 ");
  EXPECT_GT(ours, 0.0) << r.output;
  EXPECT_GT(popular, 0.0) << r.output;
  EXPECT_LE(ours, 1.0) << r.output;
  r = run({"mf", "eval", path("held.txt"), path("b"), "--exclude", path("train.txt"), "-k", "0"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("-k 0:"), std::string::npos) << r.output;
  // Positives of users and items the model lacks are left out of both rankings alike: the same figures.
  {
    std::ifstream in(path("held.txt"));
    std::ofstream more(path("held-more.txt"));
    more << in.rdbuf() << "stranger i1 5\nstranger i2 5\nu1 newcomer 5\n";
  }
  const auto more = run({"mf", "eval", path("held-more.txt"), path("b"), "--exclude", path("train.txt"), "-k", "5"});
  ASSERT_EQ(more.status, 0) << more.output;
  EXPECT_NE(more.output.find("3 more of users or items the model lacks"), std::string::npos) << more.output;
  EXPECT_EQ(asgd::testing::number_after(more.output, "most-popular precision@5 "), popular) << more.output;
  EXPECT_EQ(asgd::testing::number_after(more.output, "BPR precision@5 "), ours) << more.output;
}

// `recommend` ranks by the model's raw score but prints what `predict` says for the pair: a rating clipped into
// the training ratings' range. Here the raw score of (a, z) is about 7: a rates only 5s and z was only rated 5.
TEST_F(MfCli, RecommendPrintsRatingsWithinTheTrainingRange) {
  std::ofstream(path("small.txt")) << "a x 5\na y 5\nb z 5\nc z 5\nb w 1\nc w 1\nd x 1\nd w 1\nd y 1\ne w 1\ne y 1\n";
  auto r = run({"mf", "train", "-k", "2", "-t", "200", "-q", path("small.txt"), path("m")});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "recommend", path("m"), "--user", "a", "-k", "2", "--exclude", path("small.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("z\t5.0000\n", 0), 0u) << r.output;  // first, at the top of the scale
  EXPECT_NE(r.output.find("\nw\t"), std::string::npos) << r.output;
  r = run({"mf", "recommend", path("m"), "--all-users", path("lists.tsv"), "--exclude", path("small.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream lists(path("lists.tsv"));
  std::size_t rows = 0;
  for (std::string user, item; lists >> user;) {
    int rank = 0;
    double score = 0;
    lists >> rank >> item >> score;
    EXPECT_GE(score, 1.0) << user << ' ' << item;
    EXPECT_LE(score, 5.0) << user << ' ' << item;
    ++rows;
  }
  EXPECT_GT(rows, 5u);
}

// --all-users scores and writes a part of the users at a time (about 2^24 recommendations each: 1,664 users at
// -k 10000), so that all the lists are never held at once; the parts write what one pass wrote, every user's list
// as --user gives it, in user order.
TEST_F(MfCli, AllUsersListsAreWrittenPartByPartAsOneUserGetsThem) {
  auto r = run({"mf", "generate", path("g.txt"), "--users", "2000", "--items", "40", "--ratings", "20000"});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "train", "-k", "4", "-t", "2", "-q", path("g.txt"), path("m")});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"mf", "recommend", path("m"), "--all-users", path("all.tsv"), "-k", "10000"});
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream all(path("all.tsv"));
  std::map<std::string, std::string> lists;  // user -> "item\tscore\n" lines, as --user prints them
  std::vector<std::string> order;
  for (std::string user, rank, item, score; all >> user >> rank >> item >> score;) {
    if (order.empty() || order.back() != user) order.push_back(user);
    lists[user] += item + "\t" + score + "\n";
  }
  ASSERT_EQ(order.size(), lists.size()) << "a user's lines are not together";
  ASSERT_GT(order.size(), 1664u) << "one part only";
  for (const std::string& user : {order.front(), order[1663], order[1664], order.back()}) {
    r = run({"mf", "recommend", path("m"), "--user", user, "-k", "10000"});
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output, lists[user]) << user;
  }
}

// The summary of `generate` counts the users and items that got a rating, not the ids it drew from.
TEST_F(MfCli, GenerateCountsTheUsersItWroteRatingsFor) {
  auto r = run({"mf", "generate", path("g.txt"), "--users", "1000", "--items", "50", "--ratings", "40"});
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(path("g.txt"));
  std::set<std::string> users, items;
  for (std::string u, i, v; in >> u >> i >> v;) {
    users.insert(u);
    items.insert(i);
  }
  EXPECT_NE(r.output.find("wrote 40 ratings (" + std::to_string(users.size()) + " users, " +
                          std::to_string(items.size()) + " items,"),
            std::string::npos)
      << r.output;
  EXPECT_LT(users.size(), 1000u);
}

// A model file whose parts disagree (a CRC and layout hash that fit, forged or from another build) is refused
// before its ids or rows are used: fewer ids than factor rows read past the id map (a crash), a short bias
// vector read past the parameters, more than 1024 factors overflowed a buffer on the stack.
TEST_F(MfCli, AModelWhosePartsDisagreeIsRefused) {
  std::ofstream(path("r.txt")) << "u1 i1 4\nu2 i2 3\nu3 i1 5\nu1 i2 2\nu2 i3 4\n";
  ASSERT_EQ(run({"mf", "train", path("r.txt"), path("m"), "-k", "4", "-t", "2", "-q"}).status, 0);
  const asgd::CheckpointData good = asgd::read_checkpoint(path("m"));
  const auto forge = [&](const std::string& name, asgd::Layout layout, std::string metadata) {
    auto store = asgd::ParamStore::on_heap(layout);
    store.fill(0.1f);
    asgd::save_checkpoint(path(name), store, good.state, {}, metadata);
    return path(name);
  };
  std::string fewer_users = good.metadata;
  const auto users_at = fewer_users.find("\"u1\",");
  ASSERT_NE(users_at, std::string::npos) << fewer_users;
  fewer_users.erase(users_at, 5);
  const auto shaped = [&](std::size_t factors, std::size_t item_biases) {
    asgd::Layout l;
    l.set_tag(good.layout.tag());
    l.add("P", {3, factors}, asgd::RowPadding::cache_line);
    l.add("Q", {3, factors}, asgd::RowPadding::cache_line);
    l.add("user_bias", {3});
    l.add("item_bias", {item_biases});
    return l;
  };
  const std::pair<std::string, std::string> cases[] = {
      {forge("ids.m", good.layout, fewer_users), "2 user and 3 item ids for 3 x 3 factor rows"},
      {forge("bias.m", shaped(4, 1), good.metadata), "1 item biases for 3 items"},
      {forge("wide.m", shaped(1025, 3), good.metadata), "1025 factors; expected 1 to 1024"},
  };
  // Metadata values that were converted unchecked: a mean of 1e300 became inf, 2^32 + 1 as a cold id wrapped to
  // 1, an unknown loss read as squared, sscanf's %2x took "+1" for a byte.
  const auto with = [&](const std::string& key, const std::string& value) {
    std::string m = good.metadata;
    const auto at = m.find("\"" + key + "\":");
    if (at == std::string::npos) return m.insert(m.size() - 1, ",\"" + key + "\":" + value);
    const auto from = at + key.size() + 3, to = m.find_first_of(",}", from);
    return m.replace(from, to - from, value);
  };
  const std::pair<std::string, std::string> metadata_cases[] = {
      {forge("mean.m", good.layout, with("mean", "1e300")), "mean is 1e+300, not a finite float"},
      {forge("offset.m", good.layout, with("offset", "\"3\"")), "offset is not a number"},
      {forge("scale.m", good.layout, with("scale", "0")), "scale 0, expected > 0"},
      {forge("range.m", good.layout, with("min_rating", "9")), "min_rating 9 above max_rating 5"},
      {forge("loss.m", good.layout, with("loss", "\"hinge\"")), "loss 'hinge', expected squared or bpr"},
      {forge("cold.m", good.layout, with("cold_users", "[4294967297]")), "cold_users holds 4294967297, not a row"},
      {forge("half.m", good.layout, with("cold_items", "[1.5]")), "cold_items holds 1.5, not a row"},
      {forge("one.m", good.layout, with("cold_users", "1")), "cold_users is 1, not a list"},
      {forge("hex.m", good.layout, with("users_hex", "[\"7531\",\"+1\",\"7533\"]")), "bad users ids: '+1' is not hex"},
      {forge("odd.m", good.layout, with("users_hex", "[\"7531\",\"753\",\"7533\"]")), "'753' is not whole bytes"},
  };
  for (const auto& [model, message] : metadata_cases) {
    const auto r = run({"mf", "recommend", model, "--user", "u2"});
    EXPECT_EQ(r.status, 2) << model << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }
  for (const auto& [model, message] : cases) {
    for (const std::vector<std::string>& cmd : {std::vector<std::string>{"mf", "recommend", model, "--user", "u2"},
                                               std::vector<std::string>{"mf", "eval", path("r.txt"), model}}) {
      const auto r = run(cmd);
      EXPECT_EQ(r.status, 2) << cmd[1] << " " << model << ": " << r.output;
      EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
    }
  }
}

// Binary or endless ratings are refused after a bounded amount, naming the file and line: before, /dev/zero or a pipe
// of it was read whole (std::bad_alloc), and a file with no newline was read to its end before being judged.
TEST_F(MfCli, BinaryOrEndlessRatingsAreRefusedNamingThem) {
  std::ofstream(path("nonl.txt")) << std::string(3 << 20, '7');
  const struct {
    std::vector<std::string> args;
    std::string input, expect;
  } cases[] = {
      {{"mf", "train", "/dev/zero"}, "/dev/null", "/dev/zero:1: byte 0 is NUL: this looks like a binary file"},
      {{"mf", "train", "-"}, "/dev/zero", "stdin:1: byte 0 is NUL: this looks like a binary file"},
      {{"mf", "train", "-"}, "/dev/urandom", "this looks like a binary file, not a ratings file"},
      {{"mf", "train", path("nonl.txt")}, "/dev/null",
       path("nonl.txt") + ":1: line longer than 1048576 bytes, the limit for a ratings file"},
  };
  for (const auto& c : cases) {
    const auto r = run(c.args, c.input);
    EXPECT_EQ(r.status, 2) << c.args.back() << ": " << r.output;
    EXPECT_NE(r.output.find("asgd: error: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << r.output;
  }
}

// --checkpoint writes a model file that --resume goes on from up to -t: the resume says where it starts and warns
// about an option changed since; another model is refused naming --resume; mf eval reads the checkpoint.
TEST_F(MfCli, ACheckpointResumesAndTellsWhatChanged) {
  auto r = run({"mf", "generate", path("all.txt"), "--users", "300", "--items", "200", "--ratings", "10000"});
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<std::string> train = {"mf", "train", "-k", "8", "-s", "1", "--test-fraction", "0.1", "-q",
                                          path("all.txt")};
  const auto with = [&](std::initializer_list<std::string> more) {
    std::vector<std::string> args = train;
    args.insert(args.end(), more);
    return args;
  };
  r = run(with({"-t", "3", "--checkpoint", path("ck")}));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run(with({"-t", "5", "-r", "0.03", "--resume", path("ck")}));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from " + path("ck") + " at epoch 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("warning: -r 0.03 now, 0.02 in the run " + path("ck") + " continues"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("mf: 2 epochs"), std::string::npos) << r.output;
  // The order is recorded as asked (auto), not as auto resolved, which the ranks and the data decide: only a
  // --schedule the user changed is warned about.
  EXPECT_EQ(r.output.find("--schedule"), std::string::npos) << r.output;
  std::filesystem::copy_file(path("ck"), path("ck-order"));
  r = run(with({"-t", "5", "--schedule", "hogwild", "--resume", path("ck-order")}));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: --schedule hogwild now, auto in the run " + path("ck-order") + " continues"),
            std::string::npos)
      << r.output;
  r = run({"mf", "train", "-k", "16", "-t", "5", "--test-fraction", "0.1", "--resume", path("ck"), path("all.txt")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--resume " + path("ck") + ": it was trained with factors 8, this run has 16"),
            std::string::npos)
      << r.output;
  r = run(with({"-t", "3", "--resume", path("ck")}));  // nothing left to train: refused, the checkpoint kept
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--resume " + path("ck") + ": 3 epochs are done already; -t 3 is the run's total (give "
                          "more)"),
            std::string::npos)
      << r.output;
  r = run({"mf", "eval", path("all.txt"), path("ck")});
  EXPECT_EQ(r.status, 0) << r.output;
}
