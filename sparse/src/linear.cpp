#include "asgd/sparse/linear.hpp"

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>
#include <tbb/partitioner.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "asgd/engine/available_memory.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::sparse {
namespace {

// Fixed chunks + deterministic reduce: the summation order depends only on
// the size, so objective values are bit-identical across runs and thread
// counts (L-BFGS line searches and benchmark reports rely on that).
constexpr std::size_t kGrain = 2048;

template <class Body>
double deterministic_sum(std::size_t n, Body body) {
  return tbb::parallel_deterministic_reduce(
      tbb::blocked_range<std::size_t>(0, n, kGrain), 0.0,
      [&](const tbb::blocked_range<std::size_t>& r, double acc) {
        for (std::size_t i = r.begin(); i != r.end(); ++i) acc += body(i);
        return acc;
      },
      [](double a, double b) { return a + b; }, tbb::simple_partitioner());
}

template <class T>
double margin_of(const SparseDataset& data, std::size_t i, std::span<const T> w) {
  double m = 0.0;
  for (std::uint64_t k = data.row_ptr[i]; k < data.row_ptr[i + 1]; ++k) {
    m += static_cast<double>(w[data.index[k]]) * data.value[k];
  }
  return m;
}

template <class T>
double squared_norm(std::span<const T> w) {
  return deterministic_sum(w.size(), [&](std::size_t u) {
    const auto x = static_cast<double>(w[u]);
    return x * x;
  });
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

}  // namespace

LinearLoss parse_linear_loss(std::string_view name) {
  if (name == "logistic") return LinearLoss::logistic;
  if (name == "squared-hinge") return LinearLoss::squared_hinge;
  if (name == "hinge") return LinearLoss::hinge;
  throw InputError(fmt::format("loss '{}': expected logistic, squared-hinge or hinge", name));
}

std::string_view to_string(LinearLoss loss) noexcept {
  switch (loss) {
    case LinearLoss::squared_hinge: return "squared-hinge";
    case LinearLoss::hinge: return "hinge";
    case LinearLoss::logistic: break;
  }
  return "logistic";
}

void require_examples(const SparseDataset& data, std::string_view where, std::string_view purpose) {
  if (data.rows() == 0) throw InputError(fmt::format("{}: no examples to {}", where, purpose));
}

LinearProblem::FeatureCounts LinearProblem::count_features(const SparseDataset& data) {
  // 4-byte counts (saturating: a feature in more than 2^32 - 1 examples has a regulariser weight of n l2 / 2^32,
  // next to nothing either way).
  FeatureCounts c{data.rows(), std::vector<std::uint32_t>(data.num_features, 0)};
  for (const auto u : data.index) c.per_feature[u] += c.per_feature[u] != std::numeric_limits<std::uint32_t>::max();
  return c;
}

void LinearProblem::check_l2_and_rows() const {
  if (!std::isfinite(l2_) || l2_ < 0.0) {
    throw InputError(fmt::format("linear model: l2 must be finite and >= 0, got {}", l2_));
  }
  data_->validate();
  if (data_->rows() == 0) throw InputError("linear model: the dataset has no examples");
  if (data_->num_features == 0) throw InputError("linear model: the dataset has no features");
  // The regulariser's weights and the counts they are made from, before they are allocated.
  require_memory(std::uint64_t{data_->num_features} * 8,
                 fmt::format("linear model: the regulariser of {} features (8 bytes a feature)", data_->num_features));
}

void LinearProblem::weigh_regulariser(const FeatureCounts& whole) {
  regulariser_.assign(whole.per_feature.size(), 0.0f);
  const double n_l2 = static_cast<double>(whole.examples) * l2_;
  for (std::size_t u = 0; u < whole.per_feature.size(); ++u) {
    if (whole.per_feature[u] > 0) regulariser_[u] = static_cast<float>(n_l2 / static_cast<double>(whole.per_feature[u]));
  }
}

LinearProblem::LinearProblem(const SparseDataset& data, double l2, LinearLoss loss)
    : data_(&data), l2_(l2), loss_(loss) {
  check_l2_and_rows();
  // The counts are freed before the problem is used: 8 bytes per feature at the peak here.
  weigh_regulariser(count_features(data));
}

LinearProblem::LinearProblem(const SparseDataset& shard, double l2, LinearLoss loss, const FeatureCounts& whole)
    : data_(&shard), l2_(l2), loss_(loss) {
  check_l2_and_rows();
  if (whole.per_feature.size() != shard.num_features || whole.examples < shard.rows()) {
    throw InputError(fmt::format("linear model: counts of {} features over {} examples for a shard of {} features "
                                 "and {} examples",
                                 whole.per_feature.size(), whole.examples, shard.num_features, shard.rows()));
  }
  weigh_regulariser(whole);
}

LinearProblem::LinearProblem(const SparseDataset& shard, const LinearProblem& whole)
    : data_(&shard), l2_(whole.l2_), loss_(whole.loss_), regulariser_(whole.regulariser_) {
  shard.validate();
  if (shard.rows() == 0) throw InputError("linear model: the dataset has no examples");
  if (shard.num_features != whole.num_features()) {
    throw InputError(fmt::format("linear model: a shard of {} features of a set of {}", shard.num_features,
                                 whole.num_features()));
  }
}

Layout LinearProblem::layout() const {
  Layout layout;
  layout.add("weights", {data_->num_features});
  return layout;
}

void LinearProblem::check_width(std::size_t size, const char* what) const {
  if (size < data_->num_features) {
    throw InputError(fmt::format("linear model: {} has {} entries, expected at least num_features {}",
                                 what, size, data_->num_features));
  }
}

template <class T>
double LinearProblem::objective_impl(std::span<const T> w) const {
  check_width(w.size(), "the weight vector");
  const SparseDataset& data = *data_;
  const std::size_t n = data.rows();
  const double loss = deterministic_sum(n, [&](std::size_t i) {
    return loss_at(loss_, static_cast<double>(data.label[i]) * margin_of(data, i, w)).loss;
  });
  return loss / static_cast<double>(n) + 0.5 * l2_ * squared_norm(w.first(data.num_features));
}

double LinearProblem::objective(std::span<const float> w) const { return objective_impl(w); }
double LinearProblem::objective(std::span<const double> w) const { return objective_impl(w); }

double LinearProblem::accuracy(std::span<const float> w) const {
  check_width(w.size(), "the weight vector");
  const SparseDataset& data = *data_;
  const double correct = deterministic_sum(data.rows(), [&](std::size_t i) {
    const double predicted = margin_of(data, i, w) >= 0.0 ? 1.0 : -1.0;
    return predicted == static_cast<double>(data.label[i]) ? 1.0 : 0.0;
  });
  return correct / static_cast<double>(data.rows());
}

double LinearProblem::objective_and_gradient(std::span<const double> w, std::span<double> grad) const {
  check_width(w.size(), "the weight vector");
  check_width(grad.size(), "the gradient");
  const SparseDataset& data = *data_;
  const std::size_t n = data.rows();
  const std::size_t d = data.num_features;

  // Per-example slopes in parallel; the scatter into grad is serial so that
  // no two threads add to one feature and the sum order is fixed.
  std::vector<double> slope(n);
  const double loss = deterministic_sum(n, [&](std::size_t i) {
    const double y = data.label[i];
    const LossAt at = loss_at(loss_, y * margin_of(data, i, w));
    slope[i] = y * at.slope;
    return at.loss;
  });
  std::fill(grad.begin(), grad.begin() + static_cast<std::ptrdiff_t>(d), 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::uint64_t k = data.row_ptr[i]; k < data.row_ptr[i + 1]; ++k) {
      grad[data.index[k]] += slope[i] * data.value[k];
    }
  }
  const double inv_n = 1.0 / static_cast<double>(n);
  for (std::size_t u = 0; u < d; ++u) grad[u] = grad[u] * inv_n + l2_ * w[u];
  return loss * inv_n + 0.5 * l2_ * squared_norm(w.first(d));
}

void LinearProblem::full_gradient(std::span<const double> w, std::span<double> grad) const {
  objective_and_gradient(w, grad);
}

LbfgsResult solve_lbfgs(const LinearProblem& problem, double gradient_tolerance, int max_iterations) {
  if (!std::isfinite(gradient_tolerance) || gradient_tolerance < 0.0) {
    throw InputError(fmt::format("L-BFGS: gradient tolerance must be finite and >= 0, got {}", gradient_tolerance));
  }
  if (max_iterations < 0) {
    throw InputError(fmt::format("L-BFGS: max_iterations must be >= 0, got {}", max_iterations));
  }
  if (!problem.smooth()) {
    throw InputError(fmt::format("L-BFGS: the {} loss is not smooth (no reference optimum; squared-hinge is)",
                                 to_string(problem.loss())));
  }
  constexpr std::size_t kMemory = 10;
  constexpr double kArmijo = 1e-4;
  constexpr int kMaxBacktracks = 60;
  const std::size_t d = problem.num_features();

  LbfgsResult result;
  std::vector<double>& x = result.weights;
  x.assign(d, 0.0);
  std::vector<double> g(d), x_new(d), g_new(d), direction(d);
  double f = problem.objective_and_gradient(x, g);
  double g_norm = std::sqrt(dot(g, g));

  // Ring of the last kMemory (s, y) pairs, oldest first from `oldest`.
  std::vector<std::vector<double>> s_hist(kMemory, std::vector<double>(d));
  std::vector<std::vector<double>> y_hist(kMemory, std::vector<double>(d));
  std::vector<double> rho(kMemory), alpha(kMemory);
  std::size_t stored = 0, oldest = 0;

  int iteration = 0;
  while (iteration < max_iterations && g_norm > gradient_tolerance) {
    // Two-loop recursion: direction = -H g.
    for (std::size_t k = 0; k < d; ++k) direction[k] = -g[k];
    for (std::size_t j = stored; j-- > 0;) {
      const std::size_t slot = (oldest + j) % kMemory;
      alpha[slot] = rho[slot] * dot(s_hist[slot], direction);
      for (std::size_t k = 0; k < d; ++k) direction[k] -= alpha[slot] * y_hist[slot][k];
    }
    if (stored > 0) {
      const std::size_t newest = (oldest + stored - 1) % kMemory;
      const double gamma = dot(s_hist[newest], y_hist[newest]) / dot(y_hist[newest], y_hist[newest]);
      for (auto& v : direction) v *= gamma;
    }
    for (std::size_t j = 0; j < stored; ++j) {
      const std::size_t slot = (oldest + j) % kMemory;
      const double beta = rho[slot] * dot(y_hist[slot], direction);
      for (std::size_t k = 0; k < d; ++k) direction[k] += (alpha[slot] - beta) * s_hist[slot][k];
    }
    double slope = dot(g, direction);
    if (!(slope < 0.0)) {  // not a descent direction (round-off): restart from steepest descent
      stored = 0;
      for (std::size_t k = 0; k < d; ++k) direction[k] = -g[k];
      slope = -g_norm * g_norm;
    }

    // The first step has no curvature estimate: keep it at unit length.
    double step = stored == 0 ? std::min(1.0, 1.0 / g_norm) : 1.0;
    bool accepted = false;
    double f_new = f, g_new_norm = g_norm;
    for (int b = 0; b < kMaxBacktracks; ++b) {
      for (std::size_t k = 0; k < d; ++k) x_new[k] = x[k] + step * direction[k];
      f_new = problem.objective_and_gradient(x_new, g_new);
      g_new_norm = std::sqrt(dot(g_new, g_new));
      // Near the optimum f changes by less than its round-off, and Armijo
      // cannot tell; a step that keeps f level within round-off and shrinks
      // the gradient is then progress too.
      const bool armijo = f_new <= f + kArmijo * step * slope;
      const bool level = f_new <= f + 8.0 * std::numeric_limits<double>::epsilon() * std::abs(f) &&
                         g_new_norm < g_norm;
      if (std::isfinite(f_new) && (armijo || level)) {
        accepted = true;
        break;
      }
      step *= 0.5;
    }
    if (!accepted) {
      if (stored == 0) break;  // not even steepest descent helps: round-off floor
      stored = 0;              // forget the curvature pairs and try once more
      continue;
    }

    double sy = 0.0;
    for (std::size_t k = 0; k < d; ++k) sy += (x_new[k] - x[k]) * (g_new[k] - g[k]);
    // Keep only pairs with positive curvature (always so for l2 > 0 unless
    // round-off), so that H stays positive definite.
    if (sy > 0.0) {
      const std::size_t slot = stored < kMemory ? (oldest + stored) % kMemory : oldest;
      for (std::size_t k = 0; k < d; ++k) {
        s_hist[slot][k] = x_new[k] - x[k];
        y_hist[slot][k] = g_new[k] - g[k];
      }
      rho[slot] = 1.0 / sy;
      if (stored < kMemory) {
        ++stored;
      } else {
        oldest = (oldest + 1) % kMemory;
      }
    }
    x.swap(x_new);
    g.swap(g_new);
    f = f_new;
    g_norm = g_new_norm;
    ++iteration;
  }
  result.objective = f;
  result.gradient_norm = g_norm;
  result.iterations = iteration;
  result.converged = g_norm <= gradient_tolerance;
  return result;
}

}  // namespace asgd::sparse
