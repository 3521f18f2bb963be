// Matrix factorization as asgd Problems.
//
// Explicit ratings: biased MF (Koren et al. 2009) trained by SGD with L2,
//   r_hat(u, i) = mu + b_u + b_i + p_u . q_i,
//   loss = 1/2 (r - r_hat)^2 + lambda/2 (|p_u|^2 + |q_i|^2) + lambda_b/2 (b_u^2 + b_i^2),
// one example per rating (LIBMF's per-update regularisation).
// Implicit feedback: BPR-MF (Rendle et al. 2009), one example per positive
// (u, i) with a sampled negative j the user has not interacted with:
//   loss = -log sigmoid(x_ui - x_uj) + lambda/2 (|p_u|^2 + |q_i|^2 + |q_j|^2) + lambda_b/2 (b_i^2 + b_j^2),
//   x_ui = b_i + p_u . q_i.
//
// Parameters (one Layout; rows padded to cache lines):
//   "P" [users x k], "Q" [items x k], "user_bias" [users] (explicit only), "item_bias" [items]
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "asgd/engine/huge_pages.hpp"
#include "asgd/engine/layout.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/problem.hpp"
#include "asgd/engine/random.hpp"
#include "asgd/engine/row_ops.hpp"
#include "asgd/sparse/mf/ratings.hpp"

namespace asgd::sparse::mf {

struct MfOptions {
  std::size_t factors = 32;       // k
  float l2 = 0.05f;               // lambda on P and Q
  float bias_l2 = 0.05f;          // lambda_b on the biases
  float init_scale = 0.1f;        // P, Q start uniform in [0, init_scale / sqrt(k)): initialize_factors' scale
  bool biases = true;             // explicit: learn b_u, b_i
  // > 0: group the ratings into bins x bins blocks (users and items each
  // split into `bins` random groups) for the LIBMF-style block schedule.
  std::size_t bins = 0;
  // How ratings map to the model (RatingScale): centred on the mean (the
  // default) or not (LIBMF: p . q alone), and divided by their standard
  // deviation or not (LIBMF divides them and the L2 weights by it).
  bool center = true;
  bool scale_ratings = false;
  // > 0: the first epoch updates only each factor row's first head_first
  // factors (the prediction uses them all). LIBMF 2 does so with 8, and with
  // per-row AdaGrad sums of its own for those (Schedule::row_head): the rest
  // start their steps at the full rate in the second epoch.
  std::size_t head_first = 0;
  // mu and the standard deviation: the training ratings' unless given (shards
  // of one model, as under mpirun, pass the whole training set's).
  std::optional<float> mean, deviation;
  void validate() const;          // InputError naming the flag
};

// Shapes and offsets shared by both models.
struct FactorLayout {
  std::size_t users = 0, items = 0, factors = 0, stride = 0;
  std::size_t p = 0, q = 0, user_bias = 0, item_bias = 0;
  bool has_user_bias = false;  // BPR has none (user_bias is then 0)
  static FactorLayout of(const Layout& l);
  // `tag`: the layout's (Ratings::id_maps_tag of the model's id maps).
  static Layout make(std::size_t users, std::size_t items, std::size_t factors, bool user_bias,
                     std::string tag = {});
};

// Fills P and Q with small random values (biases 0), from `seed`: a new
// model needs it before training (all-zero factors stay zero: their
// gradients are zero), with `scale` its MfOptions::init_scale. With
// `trained`, the rows of users and items without a rating in it (ids first
// seen in a validation or test file) are zero instead, so that they predict
// from the mean and the biases that are known, as an unknown id does (LIBMF
// marks such rows NaN and predicts its global mean for them); the random
// values of the other rows are the same either way; `trained` must have the
// model's id maps (check_model_ids).
void initialize_factors(ParamStore& store, std::uint64_t seed, float scale, const Ratings* trained = nullptr);

// Copies the factor rows and biases of `from` (a model trained before) into the same rows of `to`, a model of
// as many factors and the same biases with at least as many users and items (its rows past `from`'s are left
// as they are): more training from where `from` stopped, on ratings that may add ids. InputError otherwise.
void copy_factor_rows(const ParamStore& from, ParamStore& to);

// Of users 0..users-1 and items 0..items-1, those with no rating in `trained`, sorted.
struct ColdIds {
  std::vector<std::uint32_t> users, items;
  bool has_user(std::uint32_t u) const noexcept { return std::binary_search(users.begin(), users.end(), u); }
  bool has_item(std::uint32_t i) const noexcept { return std::binary_search(items.begin(), items.end(), i); }
};
ColdIds cold_ids(std::size_t users, std::size_t items, const Ratings& trained);

// Whether `users` and `items` are the id maps the model of `layout` was trained with, extended or not: its tag
// is id_maps_tag of their first rows. True for a layout without an id-maps tag (nothing to compare).
bool has_model_ids(const Layout& layout, const IdMap& users, const IdMap& items);
// InputError starting "WHAT: " when `ratings`' id maps are not the model's (has_model_ids): their dense ids would
// name other users and items.
void check_model_ids(const Layout& layout, const Ratings& ratings, std::string_view what);

// rs.rating(b_u + b_i + p_u . q_i) from a store (any thread, racy reads). InputError for a user or item outside
// the model (predict_or_fallback predicts those).
float predict(const ParamStore& store, const FactorLayout& f, const RatingScale& rs, std::uint32_t user,
              std::uint32_t item);
// The same for any ids: a user or item outside the model, or one of `cold`
// (sorted; zero rows), is unknown, and a pair with an unknown side predicts
// rs.unknown(the biases of the sides that are known).
// `rs` for predicting from `store` when it is not centred: with the mean
// biases of the users and items that have a training rating (not among the
// sorted `cold_users`, `cold_items`), which RatingScale::unknown measures a
// known side's bias from; a centred `rs` as it is. predict_or_fallback needs
// it so; evaluate_errors and recommend make it themselves.
RatingScale with_bias_means(RatingScale rs, const ParamStore& store, std::span<const std::uint32_t> cold_users = {},
                            std::span<const std::uint32_t> cold_items = {});
inline RatingScale with_bias_means(const RatingScale& rs, const ParamStore& store, const ColdIds* cold) {
  return cold ? with_bias_means(rs, store, cold->users, cold->items) : with_bias_means(rs, store);
}
float predict_or_fallback(const ParamStore& store, const FactorLayout& f, const RatingScale& rs, std::uint32_t user,
                          std::uint32_t item, const ColdIds* cold = nullptr);

class BiasedMf {
 public:
  // Copies `train` into one packed array in a random order (`seed`). The model has a row for every id in
  // `train`'s maps; InputError for ratings Ratings::check refuses.
  BiasedMf(const Ratings& train, MfOptions options, std::uint64_t seed = 1);

  Layout layout() const;
  std::size_t num_examples() const noexcept { return entries_.size(); }
  // The ratings are shuffled once, at construction, and each worker then
  // walks its shard in order (as LIBMF): on large sets reshuffling indices
  // every epoch turns every rating read into a cache miss (measured: 10x
  // slower on 9M ratings, 2.4x on 900k). Sets small enough for the cache
  // (kReshuffleBelow ratings, 3 MB) are visited in a new order each epoch:
  // there it costs little and the fixed order cost accuracy (ml-100k test
  // RMSE 0.9020 -> 0.9010, median of 5 seeds).
  template <class Rng>
  void shuffle(std::span<std::uint64_t> order, Rng& rng) const noexcept {
    if (entries_.size() > kReshuffleBelow) return;
    shuffle_in_place(order, rng);
  }
  static constexpr std::size_t kReshuffleBelow = std::size_t{1} << 18;

  // The block schedule (options.bins > 0): ratings of user group r and item
  // group c are the examples [first, last) of block_range(r, c).
  std::size_t bins() const noexcept { return options_.bins; }
  std::pair<std::uint64_t, std::uint64_t> block_range(std::size_t r, std::size_t c) const noexcept {
    const std::size_t b = r * options_.bins + c;
    return {block_begin_[b], block_begin_[b + 1]};
  }
  float global_mean() const noexcept { return scale_.mean; }
  // How the model's sums map to ratings (what predict and evaluate need).
  const RatingScale& rating_scale() const noexcept { return scale_; }
  const MfOptions& options() const noexcept { return options_; }

  template <class Sink>
  double gradient(std::size_t i, Sink& sink) const {
    const std::size_t k = options_.factors;
    const Entry& r = entries_[i];
    if (i + kPrefetchAhead < entries_.size()) {
      // The rows of a rating a few examples on (each worker walks its range
      // in order): their cache misses overlap this update.
      const Entry& next = entries_[i + kPrefetchAhead];
      sink.prefetch(f_.p + next.user * f_.stride);
      sink.prefetch(f_.q + next.item * f_.stride);
    }
    const std::size_t pu = f_.p + r.user * f_.stride;
    const std::size_t qi = f_.q + r.item * f_.stride;
    float prediction = offset_ + sink.dot(pu, qi, k);
    const std::size_t bu = f_.user_bias + r.user, bi = f_.item_bias + r.item;
    float b_u = 0, b_i = 0;
    if (options_.biases) {
      b_u = sink.read(bu);
      b_i = sink.read(bi);
      prediction += b_u + b_i;
    }
    const float e = prediction - r.rating;
    const bool head_only = options_.head_first > 0 && sink.epoch() == 0;
    sink.add_bilinear_gradient(pu, qi, head_only ? std::min(k, options_.head_first) : k, e, l2_);
    if (options_.biases) {
      sink.add_gradient(bu, e + bias_l2_ * b_u);
      sink.add_gradient(bi, e + bias_l2_ * b_i);
    }
    return 0.5 * static_cast<double>(e) * e * loss_scale_;
  }

  static constexpr std::size_t kMaxFactors = 1024;
  static constexpr std::size_t kPrefetchAhead = 8;

 private:
  struct Entry {
    std::uint32_t user, item;
    float rating;
  };
  std::vector<Entry, LargeArrayAllocator<Entry>> entries_;  // one cache line holds five ratings
  std::vector<std::uint64_t> block_begin_;  // bins^2 + 1 offsets when blocked
  std::size_t users_, items_;
  std::string ids_;  // the layout's tag
  MfOptions options_;
  // Entries hold ratings in the model's units, r / scale: a prediction is
  // offset_ (the offset / scale) + the model's sum. The L2 weights are
  // divided by the scale too, and the loss is in squared rating units.
  RatingScale scale_;
  float offset_ = 0, l2_ = 0, bias_l2_ = 0;
  double loss_scale_ = 1;
  FactorLayout f_;
};

static_assert(Problem<BiasedMf>);
static_assert(BlockedProblem<BiasedMf>);

// RMSE and MAE of a store's predictions on all of `test` (parallel),
// predictions clipped to [lo, hi] when lo < hi; pairs with a user or item
// outside the model count too, predicted by predict_or_fallback (as LIBMF and
// Surprise score them), with `cold` (sorted: ids without a training rating,
// zero rows) as unknown. `known`: the pairs whose user and item are both in
// the model and neither is cold. count 0: no
// ratings, and rmse and mae are NaN. `test` must have the model's id maps,
// extended or not (check_model_ids): read it with the training set's
// (read_ratings' id_maps_from) or remap_ids it.
struct ErrorMetrics {
  double rmse = 0, mae = 0;
  std::size_t count = 0, known = 0;
};
ErrorMetrics evaluate_errors(const ParamStore& store, const RatingScale& rs, const Ratings& test, float lo = 0,
                             float hi = 0, const ColdIds* cold = nullptr);

}  // namespace asgd::sparse::mf
