// A model kept in memory writes the file `asgd mf train` writes for it: fit's model file, byte for byte, for
// either loss; a file read and written back is the same file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/sparse/mf/fit.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "asgd/sparse/mf/saved_model.hpp"

using namespace asgd::sparse::mf;

namespace {

std::string bytes_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Ratings ratings() {
  RatingsGeneratorOptions g;
  g.users = 80;
  g.items = 40;
  g.ratings = 1500;
  return generate_ratings(g);
}

void expect_fit_file_rewritten(FitOptions o, const asgd::testing::ScratchDir& dir) {
  o.model_file = dir / "fit.model";
  FitReport report = fit(ratings(), o);
  ASSERT_TRUE(report.model_written);
  write_saved_model(dir / "saved.model", saved_model(std::move(report)));
  const std::string fitted = bytes_of(dir / "fit.model");
  ASSERT_FALSE(fitted.empty());
  EXPECT_EQ(bytes_of(dir / "saved.model"), fitted);
  write_saved_model(dir / "again.model", read_saved_model(dir / "fit.model"));
  EXPECT_EQ(bytes_of(dir / "again.model"), fitted);
}

TEST(SavedModel, SquaredIsFitsModelFile) {
  asgd::testing::ScratchDir dir;
  FitOptions o;
  o.model.factors = 5;
  o.model.l2 = 0.07f;
  o.model.bias_l2 = 0.03f;
  o.trainer.epochs = 3;
  o.trainer.seed = 9;
  o.test_fraction = 0.1;  // test ids the training part lacks: cold rows in the metadata
  expect_fit_file_rewritten(o, dir);
}

TEST(SavedModel, BprIsFitsModelFile) {
  asgd::testing::ScratchDir dir;
  FitOptions o;
  o.loss = Loss::bpr;
  o.positive = 3.5f;
  o.model.factors = 4;
  o.trainer.epochs = 2;
  expect_fit_file_rewritten(o, dir);
}

TEST(SavedModel, AStoppedFitHoldsNoModel) {
  FitReport stopped;
  EXPECT_NE(asgd::testing::message_of([&] { saved_model(std::move(stopped)); }).find("no model"),
            std::string::npos);
}

}  // namespace
