// The staleness sweeps of `asgd bench staleness`: the runs their options
// list, the CSV they write, the plot, and the convergence they measure.
#include "staleness.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "staleness_experiment.hpp"
#include "staleness_options.hpp"
#include "staleness_plot.hpp"

namespace asgd::bench {
namespace {

std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("asgd-staleness-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::vector<std::string> lines_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(StalenessGrid, NestsPoliciesThenWorkersThenTaus) {
  const Consistency policies[] = {Consistency::racy, Consistency::locked};
  const std::size_t workers[] = {1, 4};
  const std::uint64_t taus[] = {0, kUnbounded};
  const auto grid = setting_grid(policies, workers, taus);
  ASSERT_EQ(grid.size(), 8u);
  EXPECT_EQ(grid[1].tau, kUnbounded);
  EXPECT_EQ(grid[2].workers, 4u);
  EXPECT_EQ(grid[4].policy, Consistency::locked);
}

TEST(CsvLog, RefusesAFolderItCannotWriteBeforeAnyData) {
  EXPECT_THROW(CsvLog("/nonexistent-asgd-dir/sweep.csv", "a,b"), InputError);
}

TEST(CsvLog, KeepsThePreviousFileUntilBegin) {
  const auto path = scratch("keep.csv");
  std::ofstream(path) << "old\n";
  CsvLog csv(path, "a,b");
  EXPECT_EQ(lines_of(path), std::vector<std::string>{"old"});
  csv.begin();
  csv.row("1,2\n");
  csv.close();
  EXPECT_EQ(lines_of(path), (std::vector<std::string>{"a,b", "1,2"}));
}

// One worker is the serial SGD run: it must close in on the L-BFGS optimum, one CSV row per epoch.
TEST(LinearSweep, OneWorkerApproachesTheOptimumEpochByEpoch) {
  sparse::GeneratorOptions gen;
  gen.examples = 2000;
  gen.features = 500;
  gen.nnz_per_example = 10;
  const LinearSweep sweep(gen, 1e-3);
  const auto path = scratch("linear.csv");
  CsvLog csv(path, LinearSweep::csv_header());
  csv.begin();
  const SettingResult r = sweep.run({Consistency::racy, 1, kUnbounded}, 20, 64, csv);
  csv.close();
  EXPECT_LT(r.gap, 1e-2);
  EXPECT_GE(r.gap, -1e-6);  // never below the optimum
  EXPECT_EQ(lines_of(path).size(), 21u);
}

TEST(MfSweep, RefusesRatingsTooFewToSplit) {
  sparse::mf::RatingsGeneratorOptions g;
  g.users = 3;
  g.items = 3;
  g.ratings = 2;
  EXPECT_THROW(MfSweep(sparse::mf::generate_ratings(g), "tiny"), InputError);
}

TEST(MfSweep, MoreEpochsLowerTheTestErrorUnderEitherSchedule) {
  sparse::mf::RatingsGeneratorOptions g;
  g.users = 300;
  g.items = 200;
  g.ratings = 20000;
  g.rank = 4;
  const MfSweep sweep(sparse::mf::generate_ratings(g), "generated");
  const auto path = scratch("mf.csv");
  CsvLog csv(path, MfSweep::csv_header());
  csv.begin();
  const Setting two_workers{Consistency::racy, 2, kUnbounded};
  const SettingResult one = sweep.run(two_workers, false, 1, 4096, csv);
  const SettingResult hogwild = sweep.run(two_workers, false, 10, 4096, csv);
  const SettingResult blocks = sweep.run(two_workers, true, 10, 4096, csv);
  csv.close();
  EXPECT_LT(hogwild.test_rmse, one.test_rmse);
  EXPECT_LT(blocks.test_rmse, one.test_rmse);
  EXPECT_EQ(lines_of(path).size(), 22u);
}

using asgd::testing::message_of;
using asgd::testing::ScratchDir;

StalenessOptions options_for(StalenessProblem problem) {
  StalenessOptions o;
  o.problem = problem;
  if (problem == StalenessProblem::w2v) o.corpus = "corpus.txt";  // not read until load()
  return o;
}

TEST(StalenessOptions, ProblemsByName) {
  EXPECT_EQ(parse_problem("mf"), StalenessProblem::mf);
  EXPECT_EQ(to_string(parse_problem("cnn")), "cnn");
  EXPECT_EQ(message_of([] { parse_problem("LINEAR"); }),
            "StalenessOptions::problem 'LINEAR': expected one of linear, w2v, mf, cnn");
}

// Left empty, the lists are the problem's defaults: linear 3 policies x 4 workers x 4 taus; mf's hogwild grid
// and its block schedule once per worker count; cnn's taus plain, and compensated at its bounded taus > 0.
TEST(StalenessOptions, EmptyListsAreTheProblemsDefaults) {
  EXPECT_EQ(staleness_runs(options_for(StalenessProblem::linear)).size(), 48u);
  EXPECT_EQ(staleness_runs(options_for(StalenessProblem::w2v)).size(), 9u);
  EXPECT_EQ(staleness_runs(options_for(StalenessProblem::mf)).size(), 12u + 3u);
  EXPECT_EQ(staleness_runs(options_for(StalenessProblem::cnn)).size(), 5u + 3u);
  EXPECT_EQ(staleness_defaults(StalenessProblem::mf).epochs, 20u);
  EXPECT_EQ(staleness_defaults(StalenessProblem::linear).step_examples, 256u);
}

TEST(StalenessOptions, ListsSkipEmptyItemsAndKeepTheirOrder) {
  StalenessOptions o;
  o.policies = "locked,,racy";
  o.workers = "4,1,";
  o.taus = "inf,0";
  const auto runs = staleness_runs(o);
  ASSERT_EQ(runs.size(), 8u);
  EXPECT_EQ(runs[0].setting.policy, Consistency::locked);
  EXPECT_EQ(runs[0].setting.workers, 4u);
  EXPECT_EQ(runs[0].setting.tau, kUnbounded);
  EXPECT_EQ(runs[1].setting.tau, 0u);
  EXPECT_EQ(runs[2].setting.workers, 1u);
  EXPECT_EQ(runs[4].setting.policy, Consistency::racy);
}

// A value that is not understood is refused with the option's name, before anything runs.
TEST(StalenessOptions, ListErrorsNameTheOption) {
  const std::pair<std::string StalenessOptions::*, std::pair<std::string, std::string>> cases[] = {
      {&StalenessOptions::workers, {"1,0", "StalenessOptions::workers: '0': expected 1 to 1024"}},
      {&StalenessOptions::workers, {"2x", "StalenessOptions::workers: '2x': expected 1 to 1024"}},
      {&StalenessOptions::workers, {",", "StalenessOptions::workers: expected a comma-separated list"}},
      {&StalenessOptions::policies, {"racy,bogus", "StalenessOptions::policies: consistency 'bogus'"}},
      {&StalenessOptions::taus, {"0,x", "StalenessOptions::taus: tau 'x': expected a non-negative integer or inf"}},
      {&StalenessOptions::schedules, {"hogwild,foo", "StalenessOptions::schedules: 'foo': expected hogwild or blocks"}},
  };
  for (const auto& [member, value_and_message] : cases) {
    StalenessOptions o = options_for(StalenessProblem::mf);
    o.*member = value_and_message.first;
    const std::string message = message_of([&] { staleness_runs(o); });
    EXPECT_EQ(message.rfind(value_and_message.second, 0), 0u) << message;
  }
  StalenessOptions cnn = options_for(StalenessProblem::cnn);
  cnn.compensation = "off,maybe";
  EXPECT_EQ(message_of([&] { staleness_runs(cnn); }), "StalenessOptions::compensation: 'maybe': expected off or on");
}

// An option set for another problem would do nothing: refused, naming the problems it is for.
TEST(StalenessOptions, OptionsOfAnotherProblemAndZeroCountsAreRefused) {
  StalenessOptions o = options_for(StalenessProblem::mf);
  o.given = {"l2"};
  EXPECT_EQ(message_of([&] { check_options(o); }),
            "StalenessOptions::l2: does nothing with StalenessOptions::problem mf (it is for linear)");
  o = options_for(StalenessProblem::cnn);
  o.given = {"policies"};
  EXPECT_EQ(message_of([&] { check_options(o); }),
            "StalenessOptions::policies: does nothing with StalenessOptions::problem cnn (it is for linear, mf, w2v)");
  o = options_for(StalenessProblem::linear);
  o.given = {"epochs", "step_examples", "gen.features"};  // 0 set is not "the default"
  EXPECT_EQ(message_of([&] { check_options(o); }), "StalenessOptions::epochs 0: expected 1 to 1000000");
  o.epochs = 3;
  EXPECT_EQ(message_of([&] { check_options(o); }), "StalenessOptions::step_examples 0: expected at least 1 example");
  o.step_examples = 10;
  EXPECT_NO_THROW(check_options(o));
  o = options_for(StalenessProblem::w2v);
  o.corpus.clear();
  EXPECT_NE(message_of([&] { staleness_runs(o); }).find("needs StalenessOptions::corpus"), std::string::npos);
}

// The block schedule has no delay to bound: one run per (workers, policy) whatever the taus, in each schedule
// listed.
TEST(StalenessOptions, BlocksRunOncePerWorkersAndPolicy) {
  StalenessOptions o = options_for(StalenessProblem::mf);
  o.policies = "racy,atomic";
  o.workers = "1,2";
  o.taus = "0,1,inf";
  const auto runs = staleness_runs(o);
  ASSERT_EQ(runs.size(), 12u + 4u);
  for (std::size_t i = 0; i < 12; ++i) EXPECT_FALSE(runs[i].blocks) << i;
  const std::pair<Consistency, std::size_t> blocks[] = {
      {Consistency::racy, 1}, {Consistency::racy, 2}, {Consistency::atomic, 1}, {Consistency::atomic, 2}};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(runs[12 + i].blocks);
    EXPECT_EQ(runs[12 + i].setting.policy, blocks[i].first);
    EXPECT_EQ(runs[12 + i].setting.workers, blocks[i].second);
  }
  o.schedules = "blocks,blocks";
  EXPECT_EQ(staleness_runs(o).size(), 8u);
}

// Compensation acts on a view's age: tau 0 and inf run plain only; a sweep left with nothing is refused.
TEST(StalenessOptions, CnnCompensatesBoundedTausAboveZeroOnly) {
  StalenessOptions o = options_for(StalenessProblem::cnn);
  o.taus = "0,1,4,inf";
  const auto runs = staleness_runs(o);
  const std::pair<std::uint64_t, bool> expected[] = {{0, false}, {1, false}, {1, true},
                                                     {4, false}, {4, true},  {kUnbounded, false}};
  ASSERT_EQ(runs.size(), std::size(expected));
  for (std::size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].setting.tau, expected[i].first) << i;
    EXPECT_EQ(runs[i].compensate, expected[i].second) << i;
  }
  o.compensation = "on";
  EXPECT_EQ(staleness_runs(o).size(), 2u);
  o.taus = "0,inf";
  EXPECT_NE(message_of([&] { staleness_runs(o); }).find("StalenessOptions::taus has none: nothing to run"),
            std::string::npos);
}

// A missing script fails the plot: false, and neither a PNG nor the temp file is left.
TEST(StalenessPlot, AMissingScriptFailsWithoutLeavingFiles) {
  const ScratchDir dir;
  const auto csv = dir.file("s.csv", "problem,policy,workers,tau,epoch,seconds,loss\nw2v,racy,1,inf,1,0.1,2.0\n");
  EXPECT_FALSE(plot_csv(csv, dir / "s.png", "title", dir / "no-such-script.py"));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"s.csv"});
  EXPECT_TRUE(std::filesystem::exists(plot_script())) << plot_script();  // the build tree's, beside the sources
}

TEST(StalenessPlot, PlotsACsvWithMatplotlib) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") != 0) GTEST_SKIP() << "no matplotlib";
  const ScratchDir dir;
  const auto csv = dir.file("s.csv", "problem,policy,workers,tau,epoch,seconds,loss\nw2v,racy,1,inf,1,0.1,2.0\n"
                                     "w2v,racy,1,inf,2,0.2,1.5\n");
  EXPECT_TRUE(plot_csv(csv, dir / "s.png", "title"));
  EXPECT_GT(std::filesystem::file_size(dir / "s.png"), 1000u);
  EXPECT_EQ(dir.entries().size(), 2u);
}

// A whole linear sweep: made (the CSV checked but kept), loaded, begun, run (each run reported), then the
// summary; a setting that cannot reach the optimum in one epoch counts as missed.
TEST(LinearExperiment, RunsEverySettingAndCountsTheMissed) {
  const ScratchDir dir;
  StalenessOptions o;
  o.gen.examples = 2000;
  o.gen.features = 500;
  o.gen.nnz_per_example = 10;
  o.l2 = 1e-3;
  o.policies = "racy";
  o.workers = "1";
  o.taus = "0,inf";
  o.epochs = 20;
  o.step_examples = 64;
  o.out = (dir / "out").string();
  std::filesystem::create_directories(o.out);
  std::ofstream(dir / "out/staleness_linear.csv") << "old\n";
  LinearExperiment sweep(o);
  EXPECT_EQ(sweep.png_path(), dir / "out/staleness_linear.png");
  EXPECT_EQ(lines_of(sweep.csv_path()), std::vector<std::string>{"old"});
  sweep.load();
  sweep.begin();
  std::vector<std::uint64_t> taus;
  const SweepSummary summary = sweep.run([&](const SweepRun& run, const SettingResult& r) {
    taus.push_back(run.setting.tau);
    EXPECT_FALSE(r.missed_optimum) << r.gap;
  });
  EXPECT_EQ(taus, (std::vector<std::uint64_t>{0, kUnbounded}));
  EXPECT_EQ(summary.runs, 2u);
  EXPECT_EQ(summary.missed_optimum, 0u);
  EXPECT_EQ(lines_of(sweep.csv_path()).size(), 1u + 2 * 20);

  o.epochs = 1;
  o.taus = "inf";
  LinearExperiment short_sweep(o);
  short_sweep.load();
  short_sweep.begin();
  EXPECT_EQ(short_sweep.run([](const SweepRun&, const SettingResult&) {}).missed_optimum, 1u);
}

// The report's text, as `asgd bench staleness` prints it: the problem before and after load, the table's header
// and a row per run, from the experiment make_experiment picks for the options' problem.
TEST(StalenessExperiment, SaysTheProblemAndARowPerRun) {
  const ScratchDir dir;
  StalenessOptions o;
  o.gen.examples = 500;
  o.gen.features = 100;
  o.gen.nnz_per_example = 5;
  o.policies = "atomic";
  o.workers = "1";
  o.taus = "inf";
  o.epochs = 1;
  o.out = dir.path().string();
  const auto sweep = make_experiment(o);
  ASSERT_NE(dynamic_cast<LinearExperiment*>(sweep.get()), nullptr);
  EXPECT_EQ(sweep->about_options(), "problem: logistic regression, 500 examples x 100 features, 5 non-zeros each, "
                                    "l2 1e-05\n");
  sweep->load();
  EXPECT_EQ(sweep->about_data().rfind("optimum (L-BFGS): 0.", 0), 0u) << sweep->about_data();
  EXPECT_EQ(sweep->table_header(), "policy  workers  tau    seconds    objective        gap     stale  lead <=1e-3\n");
  sweep->begin();
  std::string row;
  sweep->run([&](const SweepRun& run, const SettingResult& r) { row = sweep->table_row(run, r); });
  EXPECT_EQ(row.rfind("atomic        1  inf ", 0), 0u) << row;
  EXPECT_EQ(row.substr(row.size() - 8), "     NO\n") << row;  // one epoch does not reach the optimum
  o.policies.clear();  // each problem's own
  o.taus.clear();
  o.problem = StalenessProblem::mf;
  EXPECT_NE(dynamic_cast<MfExperiment*>(make_experiment(o).get()), nullptr);
  o.problem = StalenessProblem::cnn;
  o.data = (dir / "no-mnist").string();
  const auto cnn = make_experiment(o);
  EXPECT_EQ(cnn->about_options(), "");
  EXPECT_THROW(cnn->load(), InputError);  // options().data is the folder read
}

TEST(StalenessExperiment, RefusesAnOutputFolderItCannotMakeAndAnotherProblemsOptions) {
  const ScratchDir dir;
  StalenessOptions o;
  o.out = dir.file("a-file", "x").string() + "/sub";
  EXPECT_EQ(message_of([&] { LinearExperiment sweep(o); }).rfind("StalenessOptions::out " + o.out, 0), 0u);
  o.out = dir.path().string();
  o.problem = StalenessProblem::mf;
  EXPECT_THROW(LinearExperiment sweep(o), InputError);
}

// MNIST-shaped noise: enough for LeNet-5 to run, not to learn.
dense::TrainTest noise_images(std::size_t train, std::size_t test) {
  std::mt19937 rng(5);
  const auto make = [&](std::size_t n) {
    dense::Dataset d;
    d.rows = d.cols = 28;
    d.pixels.resize(n * 784);
    d.labels.resize(n);
    for (auto& p : d.pixels) p = static_cast<float>(rng() % 100) / 100.0f;
    for (auto& l : d.labels) l = static_cast<std::uint8_t>(rng() % 10);
    return d;
  };
  return {make(train), make(test)};
}

// cnn's runs as staleness_runs lists them, each in the CSV under its policy column (plain or compensated).
TEST(CnnExperiment, RunsEachTauPlainAndCompensatedWhereItApplies) {
  const ScratchDir dir;
  StalenessOptions o = options_for(StalenessProblem::cnn);
  o.workers = "1";
  o.taus = "0,2";
  o.epochs = 1;
  o.out = dir.path().string();
  CnnExperiment sweep(o);
  sweep.load(noise_images(128, 32));
  sweep.begin();
  std::vector<std::pair<std::uint64_t, bool>> seen;
  sweep.run([&](const SweepRun& run, const SettingResult&) { seen.emplace_back(run.setting.tau, run.compensate); });
  EXPECT_EQ(seen, (std::vector<std::pair<std::uint64_t, bool>>{{0, false}, {2, false}, {2, true}}));
  const auto lines = lines_of(sweep.csv_path());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1].rfind("cnn,plain,1,0,1,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[3].rfind("cnn,compensated,1,2,1,", 0), 0u) << lines[3];
}

}  // namespace
}  // namespace asgd::bench
