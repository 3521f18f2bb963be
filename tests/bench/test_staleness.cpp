// The staleness sweeps of `asgd bench staleness`: the CSV they write and the
// convergence they measure.
#include "staleness.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "asgd/engine/errors.hpp"
#include "asgd/sparse/mf/generator.hpp"

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

}  // namespace
}  // namespace asgd::bench
