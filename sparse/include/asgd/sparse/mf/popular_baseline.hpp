// A ranking model scored beside the most-popular baseline on the same test positives: by full ranking (after
// training, or of a model file) and by NCF's sampled leave-one-out protocol.
#pragma once

#include <cstdint>
#include <span>

#include "asgd/engine/param_store.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/sparse/mf/metrics.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/mf/model_file.hpp"
#include "asgd/sparse/mf/ratings.hpp"
#include "asgd/sparse/mf/recommend.hpp"

namespace asgd::sparse::mf {

struct AgainstPopular {
  RankingMetrics ours, popular;
};

// Full-ranking metrics at k of a factor model and of most-popular (counted over `train`) on the same test
// positives, each user's `seen` items and the `never` items (sorted) left out of both rankings.
AgainstPopular rank_against_popular(const ParamStore& store, const SeenItems& seen, const Ratings& train,
                                    const Ratings& test, std::size_t items, std::size_t k,
                                    std::span<const std::uint32_t> never);

// A BPR model file ranking the positives of `test` (read with the model's ids) at k, the positives of `train`
// left out of each user's list and counted by most-popular; the model's cold items never ranked (misses). Test
// positives of users or items the model lacks are counted in `unknown`, not ranked; with none left, `ranked`
// holds nothing.
struct ModelRanking {
  std::size_t positives = 0, unknown = 0, items = 0;
  AgainstPopular ranked;
};
ModelRanking rank_model_against_popular(const LoadedModel& model, const Ratings& test, const Ratings& train,
                                        std::size_t k);

// NCF's protocol (He et al. 2017): a second BPR model, trained as `options` say on `positives` with each user's
// latest positive left out (by timestamp; file order without), ranks that positive against `negatives` sampled
// unseen items, at k, as most-popular does (Krichene & Rendle 2020: sampled metrics can mislead; for comparison
// with published numbers). `stopped`: the training was stopped (options.stop), nothing scored.
struct SampledAgainstPopular : AgainstPopular {
  bool stopped = false;
  bool by_time = false;  // the positives have timestamps
};
SampledAgainstPopular sampled_against_popular(const Ratings& positives, const MfOptions& model,
                                              const TrainerOptions& options, std::uint64_t seed,
                                              std::size_t negatives = 99, std::size_t k = 10);

}  // namespace asgd::sparse::mf
