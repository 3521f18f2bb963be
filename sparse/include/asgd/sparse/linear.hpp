// L2-regularised logistic regression on a SparseDataset as an asgd Problem,
// plus exact full-data evaluation and an L-BFGS solver for its reference optimum.
//
// Objective, with labels y_i in {+1, -1}:
//   f(w) = (1/n) sum_i log(1 + exp(-y_i w.x_i)) + (l2/2) ||w||^2.
// Parameter index == feature id (one tensor "weights" of num_features floats
// at offset 0), so the model takes 4 bytes x num_features.
//
// Per-example split for Hogwild! (Niu et al. 2011, sec. 5): a per-example
// gradient may touch only that example's features, so the regulariser is
// spread over the examples that contain each feature,
//   f_i(w) = loss_i(w) + (n l2 / 2) sum_{u in x_i} w_u^2 / d_u,
// d_u = number of examples containing u. Then (1/n) sum_i f_i(w) = f(w)
// exactly for every w that is 0 on features that never occur; those features
// get no gradient, stay at their initial value and should start at 0, their
// optimum.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "asgd/engine/layout.hpp"
#include "asgd/engine/problem.hpp"
#include "asgd/sparse/libsvm.hpp"

namespace asgd::sparse {

// log(1 + exp(z)) without overflow for large z or loss of precision for very negative z.
inline double log1p_exp(double z) noexcept {
  return z > 0.0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
}

// 1 / (1 + exp(-z)) without overflow for either sign of z.
inline double sigmoid(double z) noexcept {
  if (z >= 0.0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}

class LogisticProblem {
 public:
  // Keeps a reference to `data`, which must outlive the problem. Validates the
  // data (SparseDataset::validate; at least one example and one feature) and
  // l2 (finite, >= 0); throws InputError naming what is wrong.
  LogisticProblem(const SparseDataset& data, double l2);
  // A temporary dataset would dangle.
  LogisticProblem(SparseDataset&& data, double l2) = delete;

  // One tensor "weights" of num_features floats.
  Layout layout() const;
  std::size_t num_examples() const noexcept { return data_->rows(); }
  std::uint32_t num_features() const noexcept { return data_->num_features; }
  double l2() const noexcept { return l2_; }
  const SparseDataset& data() const noexcept { return *data_; }

  // Adds the gradient of f_i (see the top of this file) at the sink's current
  // weights and returns loss_i = log(1 + exp(-y_i w.x_i)) (the logistic part
  // only, so that averages over an epoch read as the data loss). Reads each
  // weight of the example twice (margin, then regulariser): under Hogwild!
  // the two reads may differ, which is part of the bargain. Safe to call
  // concurrently; allocates nothing.
  template <class Sink>
  double gradient(std::size_t i, Sink& sink) const {
    const std::uint64_t begin = data_->row_ptr[i];
    const std::uint64_t end = data_->row_ptr[i + 1];
    const std::uint32_t* ids = data_->index.data();
    const float* values = data_->value.data();
    const double y = data_->label[i];

    double margin = 0.0;
    for (std::uint64_t k = begin; k < end; ++k) {
      margin += static_cast<double>(sink.read(ids[k])) * values[k];
    }
    const double y_margin = y * margin;
    // d/dm log(1 + exp(-y m)) = -y sigmoid(-y m)
    const double slope = -y * sigmoid(-y_margin);
    const float* reg = regulariser_.data();
    for (std::uint64_t k = begin; k < end; ++k) {
      const std::uint32_t u = ids[k];
      const double g = slope * values[k] + static_cast<double>(reg[u]) * sink.read(u);
      sink.add_gradient(u, static_cast<float>(g));
    }
    return log1p_exp(-y_margin);
  }

  // Exact f(w), in double, parallel and deterministic (the same w gives the
  // same bits whatever the thread count). `w` may be longer than
  // num_features (a padded parameter buffer); the rest is ignored. Throws
  // InputError when it is shorter.
  double objective(std::span<const float> w) const;
  double objective(std::span<const double> w) const;
  // Fraction of examples whose sign of w.x (0 counts as +1) equals the label.
  double accuracy(std::span<const float> w) const;
  // grad = gradient of f at w, over num_features entries (w as above).
  void full_gradient(std::span<const double> w, std::span<double> grad) const;
  // f(w) and its gradient in one pass over the data (what L-BFGS needs).
  double objective_and_gradient(std::span<const double> w, std::span<double> grad) const;

  // n l2 / d_u for each feature (0 where d_u = 0): the per-example weight of
  // the regulariser in gradient().
  std::span<const float> regulariser_per_feature() const noexcept { return regulariser_; }

 private:
  template <class T>
  double objective_impl(std::span<const T> w) const;
  void check_width(std::size_t size, const char* what) const;

  const SparseDataset* data_;
  double l2_;
  std::vector<float> regulariser_;
};

static_assert(Problem<LogisticProblem>);

struct LbfgsResult {
  std::vector<double> weights;  // num_features entries
  double objective = 0.0;
  double gradient_norm = 0.0;   // Euclidean norm of the full gradient at `weights`
  int iterations = 0;
  bool converged = false;       // gradient_norm <= the tolerance asked for
};

// The reference optimum: L-BFGS (memory 10) from w = 0 with a backtracking
// Armijo line search, all in double. Stops when the gradient norm is at most
// `gradient_tolerance`, after `max_iterations`, or when no step decreases f
// any more (round-off; `converged` then says whether the tolerance was met).
// With l2 > 0 the optimum is unique. Throws InputError for a negative or
// non-finite tolerance or negative max_iterations.
LbfgsResult solve_lbfgs(const LogisticProblem& problem, double gradient_tolerance = 1e-10,
                        int max_iterations = 2000);

}  // namespace asgd::sparse
