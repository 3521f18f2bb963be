#include "asgd/sparse/mf/fold_in.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "asgd/engine/errors.hpp"
#include "asgd/sparse/mf/model.hpp"

namespace asgd::sparse::mf {

namespace {

// Row `row` of the store's factors from `first` (P or Q), as a float vector of the model's width.
Eigen::VectorXf factor_row(const ParamStore& store, const FactorLayout& f, std::size_t first, std::size_t row) {
  Eigen::VectorXf v(static_cast<Eigen::Index>(f.factors));
  for (std::size_t c = 0; c < f.factors; ++c) v[static_cast<Eigen::Index>(c)] = store.load(first + row * f.stride + c);
  return v;
}

}  // namespace

FoldedUser fold_in_user(const LoadedModel& model, std::span<const std::uint32_t> items,
                        std::span<const float> ratings, float l2) {
  if (items.size() != ratings.size()) {
    throw InputError(fmt::format("fold in: {} items and {} ratings", items.size(), ratings.size()));
  }
  if (!(l2 >= 0) || !std::isfinite(l2)) throw InputError(fmt::format("fold in: l2 {}: expected >= 0", l2));
  const ParamStore& store = *model.store;
  const FactorLayout f = FactorLayout::of(store.layout());
  const bool bpr = model.loss == "bpr";
  const bool bias = f.has_user_bias && !bpr;
  const auto width = static_cast<Eigen::Index>(f.factors + (bias ? 1 : 0));
  FoldedUser user;
  user.factors.assign(f.factors, 0.0f);
  if (items.empty()) return user;
  // The normal equations of the ridge problem, in double: the item rows (and a 1 for the bias) against t.
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(width, width);
  Eigen::VectorXd b = Eigen::VectorXd::Zero(width);
  for (std::size_t j = 0; j < items.size(); ++j) {
    if (items[j] >= f.items) {
      throw InputError(fmt::format("fold in: items[{}] = {}: the model has {} items", j, items[j], f.items));
    }
    if (!std::isfinite(ratings[j])) throw InputError(fmt::format("fold in: ratings[{}] = {}", j, ratings[j]));
    Eigen::VectorXd x(width);
    x.head(static_cast<Eigen::Index>(f.factors)) = factor_row(store, f, f.q, items[j]).cast<double>();
    if (bias) x[width - 1] = 1.0;
    const double item_bias = store.load(f.item_bias + items[j]);
    const double target = bpr ? 1.0 : (ratings[j] - model.scale.offset) / model.scale.scale;
    a.selfadjointView<Eigen::Lower>().rankUpdate(x);
    b += (target - item_bias) * x;
  }
  a = a.selfadjointView<Eigen::Lower>();
  a.diagonal().array() += static_cast<double>(l2) * static_cast<double>(items.size());
  const Eigen::VectorXd solution = a.ldlt().solve(b);
  for (std::size_t c = 0; c < f.factors; ++c) user.factors[c] = static_cast<float>(solution[static_cast<Eigen::Index>(c)]);
  if (bias) user.bias = static_cast<float>(solution[width - 1]);
  return user;
}

std::vector<Recommendation> recommend_folded(const LoadedModel& model, const FoldedUser& user,
                                             std::span<const std::uint32_t> exclude, std::size_t k) {
  if (k == 0) throw InputError("recommend: k 0: expected at least 1 item per user");
  const ParamStore& store = *model.store;
  const FactorLayout f = FactorLayout::of(store.layout());
  if (user.factors.size() != f.factors) {
    throw InputError(fmt::format("recommend: a user of {} factors for a model of {}", user.factors.size(), f.factors));
  }
  std::vector<char> left_out(f.items, 0);
  for (const std::uint32_t i : exclude)
    if (i < f.items) left_out[i] = 1;
  for (const std::uint32_t i : model.cold.items) left_out[i] = 1;
  std::vector<Recommendation> all;
  all.reserve(f.items);
  for (std::uint32_t i = 0; i < f.items; ++i) {
    if (left_out[i]) continue;
    float sum = store.load(f.item_bias + i) + user.bias;
    for (std::size_t c = 0; c < f.factors; ++c) sum += user.factors[c] * store.load(f.q + i * f.stride + c);
    all.push_back({i, model.range.clip(model.scale.offset + model.scale.scale * sum)});
  }
  const std::size_t n = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                    [](const Recommendation& x, const Recommendation& y) {
                      return x.score > y.score || (x.score == y.score && x.item < y.item);
                    });
  all.resize(n);
  return all;
}

}  // namespace asgd::sparse::mf
