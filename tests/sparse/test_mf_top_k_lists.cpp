// Every user's top-k list written to a file part by part: the same lists, in the same order and with the same
// scores, as recommend_for gives one user at a time; seen items left out; k 0 refused.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <string>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/sparse/mf/fit.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "asgd/sparse/mf/top_k_lists.hpp"

using namespace asgd::sparse::mf;

namespace {

TEST(TopKLists, TheFileHoldsEachUsersListAsRecommendForGivesIt) {
  asgd::testing::ScratchDir dir;
  RatingsGeneratorOptions g;
  g.users = 150;
  g.items = 60;
  g.ratings = 3000;
  const Ratings ratings = generate_ratings(g);
  FitOptions o;
  o.model.factors = 4;
  o.trainer.epochs = 2;
  o.model_file = dir / "model";
  ASSERT_TRUE(fit(ratings, o).model_written);
  const LoadedModel m = load_model(o.model_file);
  const SeenItems seen(ratings, m.users.size());
  const TopKListsReport r = write_top_k_lists(m, &seen, 5, dir / "lists.tsv");
  EXPECT_EQ(r.users, m.users.size());

  std::ifstream in(dir / "lists.tsv");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::vector<std::string> expected;
  for (std::uint32_t u = 0; u < m.users.size(); ++u) {
    const auto list = recommend_for(m, &seen, u, 5);
    ASSERT_EQ(list.size(), 5u);
    for (std::size_t rank = 0; rank < list.size(); ++rank) {
      EXPECT_FALSE(seen.contains(u, list[rank].item));
      expected.push_back(fmt::format("{}\t{}\t{}\t{:.4f}", m.users.name(u), rank + 1, m.items.name(list[rank].item),
                                     list[rank].score));
    }
  }
  EXPECT_EQ(lines, expected);
  EXPECT_NE(asgd::testing::message_of([&] { write_top_k_lists(m, nullptr, 0, dir / "none.tsv"); }).find("k 0"),
            std::string::npos);
}

}  // namespace
