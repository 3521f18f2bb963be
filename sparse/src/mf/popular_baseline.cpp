#include "asgd/sparse/mf/popular_baseline.hpp"

#include <vector>

#include "asgd/sparse/mf/bpr.hpp"

namespace asgd::sparse::mf {

AgainstPopular rank_against_popular(const ParamStore& store, const SeenItems& seen, const Ratings& train,
                                    const Ratings& test, std::size_t items, std::size_t k,
                                    std::span<const std::uint32_t> never) {
  const auto popularity = popularity_scores(train, items);
  return {evaluate_ranking(store, 0.0f, seen, test, k, never),
          evaluate_ranking_with(popularity_scorer(popularity), items, seen, test, k, never)};
}

ModelRanking rank_model_against_popular(const LoadedModel& model, const Ratings& test, const Ratings& train,
                                        std::size_t k) {
  const FactorLayout layout = FactorLayout::of(model.store->layout());
  // Of users and items the model has: both rankings score the same users, over the same items.
  const Ratings test_all = positives_of(test, model.positive);
  std::vector<std::size_t> known;
  for (std::size_t i = 0; i < test_all.size(); ++i) {
    if (test_all.user[i] < layout.users && test_all.item[i] < layout.items) known.push_back(i);
  }
  ModelRanking r;
  r.positives = known.size();
  r.unknown = test_all.size() - known.size();
  r.items = layout.items;
  if (known.empty()) return r;
  const Ratings positives = test_all.subset(known);
  const Ratings trained = positives_of(train, model.positive);
  r.ranked = rank_against_popular(*model.store, SeenItems(trained, layout.users), trained, positives, layout.items,
                                  k, model.cold.items);
  return r;
}

SampledAgainstPopular sampled_against_popular(const Ratings& positives, const MfOptions& model,
                                              const TrainerOptions& options, std::uint64_t seed,
                                              std::size_t negatives, std::size_t k) {
  SampledAgainstPopular r;
  r.by_time = positives.has_timestamps();
  const Split loo = leave_k_out(positives, 1);
  const BprMf problem(loo.train, model, options.seed);
  auto store = ParamStore::on_heap(problem.layout());
  initialize_factors(store, options.seed, model.init_scale);
  if (Trainer(store, options).run(problem).stopped) {
    r.stopped = true;
    return r;
  }
  const std::size_t items = positives.items.size();
  const SeenItems all_seen(positives, positives.users.size());
  r.ours = evaluate_sampled(store, loo.test, all_seen, negatives, k, seed);
  const auto popularity = popularity_scores(loo.train, items);
  r.popular = evaluate_sampled_with(popularity_scorer(popularity), items, loo.test, all_seen, negatives, k, seed);
  return r;
}

}  // namespace asgd::sparse::mf
