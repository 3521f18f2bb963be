// L2-regularised linear classifiers on a SparseDataset as an asgd Problem:
// logistic regression, the L2-loss SVM (squared hinge) and the L1-loss SVM
// (hinge), plus exact full-data evaluation and an L-BFGS solver for the
// reference optimum of the smooth ones.
//
// Objective, with labels y_i in {+1, -1} and m_i = y_i w.x_i:
//   f(w) = (1/n) sum_i loss(m_i) + (l2/2) ||w||^2,
//   loss(m) = log(1 + exp(-m))   (logistic)
//           = max(0, 1 - m)^2    (squared hinge, LIBLINEAR's L2-loss SVM)
//           = max(0, 1 - m)      (hinge; SGD takes a subgradient, 0 at m = 1).
// Parameter index == feature id (one tensor "weights" of num_features floats
// at offset 0), so the model takes 4 bytes x num_features.
//
// Per-example split for Hogwild! (Niu et al. 2011, sec. 5): a per-example
// gradient may touch only that example's features, so the regulariser is
// spread over the examples that contain each feature,
//   f_i(w) = loss(m_i) + (n l2 / 2) sum_{u in x_i} w_u^2 / d_u,
// d_u = number of examples containing u. Then (1/n) sum_i f_i(w) = f(w)
// exactly for every w that is 0 on features that never occur; those features
// get no gradient, stay at their initial value and should start at 0, their
// optimum.
//
// The regulariser's weight r_u = n l2 / d_u is large on rare features (n l2
// = 10 at n = 100,000, l2 = 1e-4 for a feature seen once), and an explicit
// step w_u -= lr r_u w_u with lr r_u > 2 flips and grows w_u every time. So
// the regulariser is stepped implicitly (a proximal step, as in Bottou's and
// LIBLINEAR's solvers' treatment of the L2 part): with rate lr,
//   w_u <- (w_u - lr dloss/dw_u) / (1 + lr r_u),
// stable at any rate. As a gradient: (dloss/dw_u + r_u w_u) / (1 + lr r_u),
// a positive per-feature scaling of the plain one, so its fixed point (the
// optimum of f) is the same; at lr r_u << 1 it is the explicit step.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
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

enum class LinearLoss { logistic, squared_hinge, hinge };
// "logistic", "squared-hinge" or "hinge"; InputError otherwise.
LinearLoss parse_linear_loss(std::string_view name);
std::string_view to_string(LinearLoss loss) noexcept;

// loss(m) and its slope d loss / d m (for the hinge, the subgradient that is
// 0 at m = 1), m = y w.x.
struct LossAt {
  double loss, slope;
};
inline LossAt loss_at(LinearLoss loss, double m) noexcept {
  switch (loss) {
    case LinearLoss::squared_hinge: {
      const double gap = m < 1.0 ? 1.0 - m : 0.0;
      return {gap * gap, -2.0 * gap};
    }
    case LinearLoss::hinge: return m < 1.0 ? LossAt{1.0 - m, -1.0} : LossAt{0.0, 0.0};
    case LinearLoss::logistic: break;
  }
  // d/dm log(1 + exp(-m)) = -sigmoid(-m)
  return {log1p_exp(-m), -sigmoid(-m)};
}

// InputError "WHERE: no examples to PURPOSE" (where: "LinearFitOptions::test t.svm") when `data` has none: said by
// the caller that read the file, before a LinearProblem, which cannot name it, refuses the data.
void require_examples(const SparseDataset& data, std::string_view where, std::string_view purpose);

class LinearProblem {
 public:
  // Keeps a reference to `data`, which must outlive the problem. Validates the
  // data (SparseDataset::validate; at least one example and one feature) and
  // l2 (finite, >= 0); throws InputError naming what is wrong.
  LinearProblem(const SparseDataset& data, double l2, LinearLoss loss = LinearLoss::logistic);
  // A temporary dataset would dangle.
  LinearProblem(SparseDataset&& data, double l2, LinearLoss loss = LinearLoss::logistic) = delete;
  // The examples of `shard` (a part of `whole`'s data, as wide) with `whole`'s
  // l2, loss and regulariser weights n l2 / d_u counted over the whole set:
  // what each rank under mpirun trains, so that the ranks' mean model has the
  // whole problem's optimum. (With its own counts a rank regularised a
  // feature only it holds by n_p l2 / d_u^p, and averaged with ranks that
  // leave it alone the feature ended regularised P times too little.)
  LinearProblem(const SparseDataset& shard, const LinearProblem& whole);
  LinearProblem(SparseDataset&& shard, const LinearProblem& whole) = delete;

  // How many of a set's examples hold each feature (saturating at 2^32 - 1),
  // and the set's size: what the regulariser weights n l2 / d_u are made of.
  struct FeatureCounts {
    std::uint64_t examples = 0;
    std::vector<std::uint32_t> per_feature;
  };
  static FeatureCounts count_features(const SparseDataset& data);
  // The examples of `shard` with regulariser weights from `whole`, the counts
  // of a set it is part of (as wide; at least as many examples): under
  // mpirun with one file per rank, the ranks' counts summed. InputError when
  // the widths differ or `whole` has fewer examples than the shard.
  LinearProblem(const SparseDataset& shard, double l2, LinearLoss loss, const FeatureCounts& whole);
  LinearProblem(SparseDataset&& shard, double l2, LinearLoss loss, const FeatureCounts& whole) = delete;

  // One tensor "weights" of num_features floats.
  Layout layout() const;
  std::size_t num_examples() const noexcept { return data_->rows(); }
  std::uint32_t num_features() const noexcept { return data_->num_features; }
  double l2() const noexcept { return l2_; }
  LinearLoss loss() const noexcept { return loss_; }
  // Whether f has a gradient everywhere (all but the hinge): what L-BFGS needs.
  bool smooth() const noexcept { return loss_ != LinearLoss::hinge; }
  const SparseDataset& data() const noexcept { return *data_; }

  // Adds the gradient of f_i (see the top of this file) at the sink's current
  // weights, with the regulariser's implicit scaling at the sink's learning
  // rate, and returns loss(m_i) (the data part only, so that averages over
  // an epoch read as the data loss). Reads each
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
    const LossAt at = loss_at(loss_, y * margin);
    const double slope = y * at.slope;  // d loss / d (w.x)
    const float* reg = regulariser_.data();
    const double lr = sink.learning_rate();
    for (std::uint64_t k = begin; k < end; ++k) {
      const std::uint32_t u = ids[k];
      const double r = reg[u];
      const double g = (slope * values[k] + r * sink.read(u)) / (1.0 + lr * r);
      sink.add_gradient(u, static_cast<float>(g));
    }
    return at.loss;
  }

  // Exact f(w), in double, parallel and deterministic (the same w gives the
  // same bits whatever the thread count). `w` may be longer than
  // num_features (a padded parameter buffer); the rest is ignored. Throws
  // InputError when it is shorter.
  double objective(std::span<const float> w) const;
  double objective(std::span<const double> w) const;
  // Fraction of examples whose sign of w.x (0 counts as +1) equals the label.
  double accuracy(std::span<const float> w) const;
  // grad = gradient of f at w (a subgradient for the hinge), over
  // num_features entries (w as above).
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
  LinearLoss loss_;
  std::vector<float> regulariser_;
  void check_l2_and_rows() const;
  void weigh_regulariser(const FeatureCounts& whole);
};

static_assert(Problem<LinearProblem>);

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
// non-finite tolerance, negative max_iterations, or the hinge loss (not
// smooth: L-BFGS's line search and curvature pairs assume a gradient).
LbfgsResult solve_lbfgs(const LinearProblem& problem, double gradient_tolerance = 1e-10,
                        int max_iterations = 2000);

}  // namespace asgd::sparse
