// BPR-MF (Rendle et al. 2009) for implicit feedback as an asgd Problem: one
// example per positive (u, i); each gradient call samples a negative item j
// the user has not interacted with and takes an SGD step on
//   loss = -log sigmoid(x_uij) + lambda/2 (|p_u|^2 + |q_i|^2 + |q_j|^2) + lambda_b/2 (b_i^2 + b_j^2),
//   x_uij = (b_i - b_j) + p_u . (q_i - q_j).
// Parameters: FactorLayout::make(users, items, k, /*user_bias=*/false), i.e.
// "P", "Q", "item_bias" (no user bias and no mean: they do not change a
// user's ranking).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "asgd/engine/layout.hpp"
#include "asgd/engine/problem.hpp"
#include "asgd/engine/row_ops.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/mf/ratings.hpp"
#include "asgd/sparse/mf/recommend.hpp"
#include "asgd/engine/random.hpp"

namespace asgd::sparse::mf {

class BprMf {
 public:
  // Every entry of `positives` is a positive (the rating value is ignored);
  // they are packed in a random order (`seed`). `train_rows`, when given,
  // are the positives this process trains (a rank's shard under mpirun);
  // negatives are still drawn against all of `positives`. InputError when
  // there are none to train, a row is out of range, or `options` is invalid.
  BprMf(const Ratings& positives, MfOptions options, std::uint64_t seed = 1,
        const std::vector<std::size_t>* train_rows = nullptr);

  Layout layout() const;
  std::size_t num_examples() const noexcept { return entries_.size(); }
  // Shuffled once at construction; workers walk their shards in order (see
  // BiasedMf::shuffle for why).
  template <class Rng>
  void shuffle(std::span<std::uint64_t>, Rng&) const noexcept {}
  const MfOptions& options() const noexcept { return options_; }
  // The positives per user, sorted: what negatives are drawn against.
  const SeenItems& seen() const noexcept { return seen_; }

  // Draws rejection samples until an item the user has not interacted with
  // comes up; after kNegativeTries misses (a user who has seen nearly every
  // item) the example is skipped and contributes loss 0.
  template <class Sink>
  double gradient(std::size_t i, Sink& sink) const {
    const Entry& e = entries_[i];
    const std::span<const std::uint32_t> seen = seen_.of(e.user);
    if (seen.size() >= items_) return 0.0;
    FastRng rng(FastRng::mix(sink.seed(), sink.epoch(), i));
    std::uint32_t j = 0;
    bool found = false;
    for (int t = 0; t < kNegativeTries && !found; ++t) {
      j = rng.below(static_cast<std::uint32_t>(items_));
      found = !std::binary_search(seen.begin(), seen.end(), j);
    }
    if (!found) return 0.0;

    const std::size_t k = options_.factors;
    float p[kMaxFactors], qi[kMaxFactors], qj[kMaxFactors], gp[kMaxFactors], gqi[kMaxFactors], gqj[kMaxFactors];
    const std::size_t pu = f_.p + e.user * f_.stride;
    const std::size_t qio = f_.q + e.item * f_.stride;
    const std::size_t qjo = f_.q + j * f_.stride;
    sink.read(pu, p, k);
    sink.read(qio, qi, k);
    sink.read(qjo, qj, k);
    const std::size_t bio = f_.item_bias + e.item, bjo = f_.item_bias + j;
    const float b_i = sink.read(bio), b_j = sink.read(bjo);
    const float x = (b_i - b_j) + rows::dot(p, qi, k) - rows::dot(p, qj, k);
    // d loss / d x = -sigmoid(-x) = -s
    const float s = 1.0f / (1.0f + std::exp(x));
    const float l2 = options_.l2;
    for (std::size_t d = 0; d < k; ++d) {
      gp[d] = -s * (qi[d] - qj[d]) + l2 * p[d];
      gqi[d] = -s * p[d] + l2 * qi[d];
      gqj[d] = s * p[d] + l2 * qj[d];
    }
    sink.add_gradient(pu, gp, k);
    sink.add_gradient(qio, gqi, k);
    sink.add_gradient(qjo, gqj, k);
    sink.add_gradient(bio, -s + options_.bias_l2 * b_i);
    sink.add_gradient(bjo, s + options_.bias_l2 * b_j);
    // -log sigmoid(x) = softplus(-x), computed stably.
    const double nx = -static_cast<double>(x);
    return nx > 0 ? nx + std::log1p(std::exp(-nx)) : std::log1p(std::exp(nx));
  }

  static constexpr std::size_t kMaxFactors = BiasedMf::kMaxFactors;
  static constexpr int kNegativeTries = 64;

 private:
  struct Entry {
    std::uint32_t user, item;
  };
  std::vector<Entry> entries_;
  SeenItems seen_;
  std::size_t users_, items_;
  std::string ids_;  // the layout's tag
  MfOptions options_;
  FactorLayout f_;
};

static_assert(Problem<BprMf>);

}  // namespace asgd::sparse::mf
