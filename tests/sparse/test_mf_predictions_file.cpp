// A model file's predictions written one per line: as many as the ratings, inside the training range, and the
// errors returned are those of the lines written.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "../common/scratch_dir.hpp"
#include "asgd/sparse/mf/fit.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "asgd/sparse/mf/predictions_file.hpp"

using namespace asgd::sparse::mf;

namespace {

TEST(PredictionsFile, OneLinePerRatingWithTheErrorsOfThoseLines) {
  asgd::testing::ScratchDir dir;
  RatingsGeneratorOptions g;
  g.users = 100;
  g.items = 50;
  g.ratings = 2000;
  const Split split = random_split(generate_ratings(g), 0.2, 3);
  FitOptions o;
  o.model.factors = 4;
  o.trainer.epochs = 5;
  o.model_file = dir / "model";
  ASSERT_TRUE(fit(split.train, o).model_written);
  const LoadedModel m = load_model(o.model_file);
  Ratings test = split.test;
  test.timestamp.clear();
  test.add("stranger", "i0", 3.0f);  // an unknown user: the mean and the item's bias
  const ErrorMetrics e = write_predictions(m, test, dir / "out.txt");
  EXPECT_EQ(e.count, test.size());
  EXPECT_LT(e.known, test.size());

  std::ifstream in(dir / "out.txt");
  std::vector<float> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::stof(line));
  ASSERT_EQ(lines.size(), test.size());
  double squared = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_GE(lines[i], m.range.lo);
    EXPECT_LE(lines[i], m.range.hi);
    squared += (lines[i] - test.rating[i]) * (lines[i] - test.rating[i]);
  }
  EXPECT_NEAR(std::sqrt(squared / static_cast<double>(lines.size())), e.rmse, 1e-4);
}

}  // namespace
