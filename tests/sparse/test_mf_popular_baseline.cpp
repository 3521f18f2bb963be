// A BPR model scored beside most-popular: a model file's ranking counts the positives it cannot rank and agrees
// with the ranking of its store, and a stopped sampled evaluation scores nothing.
#include <gtest/gtest.h>

#include <atomic>

#include "../common/scratch_dir.hpp"
#include "asgd/sparse/mf/fit.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "asgd/sparse/mf/popular_baseline.hpp"

using namespace asgd::sparse::mf;

namespace {

Ratings implicit_ratings() {
  RatingsGeneratorOptions g;
  g.users = 200;
  g.items = 100;
  g.ratings = 8000;
  g.rank = 4;
  g.noise = 0.3;
  return generate_ratings(g);
}

FitOptions bpr_options() {
  FitOptions o;
  o.loss = Loss::bpr;
  o.model.factors = 8;
  o.trainer.workers = 2;
  o.trainer.epochs = 5;
  o.trainer.schedule.lr = 0.05f;
  return o;
}

TEST(PopularBaseline, AModelFileRanksTheTestPositivesItKnows) {
  asgd::testing::ScratchDir dir;
  const Ratings all = implicit_ratings();
  const Split split = random_split(all, 0.2, 7);
  FitOptions o = bpr_options();
  o.model_file = dir / "bpr.model";
  ASSERT_TRUE(fit(split.train, o).model_written);
  const LoadedModel m = load_model(o.model_file);
  Ratings test = split.test;
  test.timestamp.clear();
  test.add("stranger", "i0", 5);  // a user the model lacks: counted, not ranked
  const ModelRanking r = rank_model_against_popular(m, test, split.train, 10);
  EXPECT_EQ(r.unknown, 1u);
  EXPECT_EQ(r.positives, positives_of(split.test, 4.0f).size());
  EXPECT_EQ(r.items, all.items.size());
  EXPECT_GT(r.ranked.ours.users, 0u);
  EXPECT_EQ(r.ranked.ours.users, r.ranked.popular.users);
  const Ratings trained = positives_of(split.train, 4.0f);
  const AgainstPopular direct = rank_against_popular(*m.store, SeenItems(trained, m.users.size()), trained,
                                                     positives_of(split.test, 4.0f), m.items.size(), 10, m.cold.items);
  EXPECT_DOUBLE_EQ(r.ranked.ours.ndcg, direct.ours.ndcg);
  EXPECT_DOUBLE_EQ(r.ranked.popular.ndcg, direct.popular.ndcg);

  Ratings none;
  none.users = m.users;
  none.items = m.items;
  none.add("stranger", "i0", 5);
  EXPECT_EQ(rank_model_against_popular(m, none, split.train, 10).positives, 0u);
}

TEST(PopularBaseline, AStoppedSampledEvaluationScoresNothing) {
  const Ratings positives = positives_of(implicit_ratings(), 4.0f);
  std::atomic<bool> stop{true};
  asgd::TrainerOptions t = bpr_options().trainer;
  t.stop = &stop;
  const SampledAgainstPopular s = sampled_against_popular(positives, bpr_options().model, t, 3);
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.ours.users, 0u);
  stop = false;
  const SampledAgainstPopular done = sampled_against_popular(positives, bpr_options().model, t, 3);
  EXPECT_FALSE(done.stopped);
  EXPECT_GT(done.ours.users, 100u);
  EXPECT_LE(done.ours.hit_rate, 1.0);
}

}  // namespace
