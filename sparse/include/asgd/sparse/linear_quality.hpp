// How well a linear model fits a set of examples: the objective and accuracy
// that `fit_linear` reports on its data and test set, the gap to L-BFGS's
// optimum, and the scoring of a saved model on any libsvm file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

#include "asgd/sparse/libsvm.hpp"
#include "asgd/sparse/linear.hpp"

namespace asgd::sparse {

struct LinearQuality {
  std::size_t examples = 0;
  double objective = 0;  // f(w) of linear.hpp, with the problem's l2 and loss
  double accuracy = 0;   // fraction of examples whose sign of w.x is their label
};
// `w` may be longer than the problem's width (a padded parameter buffer): the rest is ignored.
LinearQuality quality_of(const LinearProblem& problem, std::span<const float> w);

// The weights `w` against the problem's optimum, found by L-BFGS (smooth losses only: InputError otherwise).
struct ReferenceGap {
  int iterations = 0;
  double gradient_norm = 0;  // at the optimum found
  double optimum = 0;        // its objective
  double ours = 0;           // the objective at `w`
};
ReferenceGap reference_gap(const LinearProblem& problem, std::span<const float> w);

// w.x of every example of `data` into `margins` (rows() entries), in parallel: what a classifier's decision
// function is (its sign the predicted label, the logistic loss's sigmoid of it the probability of +1). InputError
// when `w` is narrower than the data or `margins` is not one a row.
void linear_margins(const SparseDataset& data, std::span<const float> w, std::span<double> margins);

// `weights` scored on `data` with objective (l2, loss): the features the
// model never saw are dropped from `data` first (narrow_to_weights).
LinearQuality score_linear(SparseDataset& data, std::vector<float> weights, double l2, LinearLoss loss);

// What `evaluate_linear_model` scores a model file on, and with which objective.
struct LinearEvalOptions {
  std::filesystem::path data;  // libsvm, gzipped or not
  UnsortedIds unsorted = UnsortedIds::sort;
  std::optional<double> l2;        // none: the model's (1e-4, the training default, when it records none)
  std::optional<LinearLoss> loss;  // none: the model's
};
// Reads the data, then the model file (read_linear_model), and scores it.
LinearQuality evaluate_linear_model(const std::filesystem::path& model, const LinearEvalOptions& options);

}  // namespace asgd::sparse
