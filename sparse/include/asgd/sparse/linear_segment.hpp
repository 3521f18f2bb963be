// A linear model in a shared segment: the objective the segment keeps for
// the processes that train it (AttachOptions::settings), and its weights read.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "asgd/engine/param_store.hpp"

#include "asgd/sparse/linear.hpp"
#include "asgd/sparse/linear_quality.hpp"

namespace asgd::sparse {

// The objective a shared segment keeps for the processes that train it ("--loss L --l2 X", the words of the first
// segments), and read back: either may be missing (a segment made by another program).
std::string linear_segment_settings(LinearLoss loss, double l2);
struct LinearSegmentObjective {
  std::optional<LinearLoss> loss;
  std::optional<double> l2;
};
// `given` with what it lacks taken from a segment's settings (only those are read: InputError naming segment
// `name` when one is malformed).
LinearSegmentObjective linear_segment_objective(const std::string& settings, const std::string& name,
                                                LinearSegmentObjective given = {});

// A segment's linear model as a reader scores it: a snapshot of its weights and its objective.
struct LinearSegmentModel {
  std::vector<float> weights;
  LinearSegmentObjective objective;
};
// The model in `store`, segment `name` (attached by the caller): InputError when it holds no "weights".
LinearSegmentModel linear_segment_model(const ParamStore& store, const std::string& name,
                                        const LinearSegmentObjective& given = {});

// Reads `options.data`, then scores the weights live in segment `name` (attached read-only; a trainer may be
// writing it; refused when diverged) with the objective the options give, else the segment's. A segment that
// keeps no L2 weight (made by another program: parameters only) is scored with 1e-4, the training default
// (`l2_assumed`), and one that keeps no loss with logistic.
struct LinearSegmentEval {
  LinearQuality quality;
  double l2 = 0;
  bool l2_assumed = false;
};
LinearSegmentEval evaluate_linear_segment(const std::string& name, const LinearEvalOptions& options);

}  // namespace asgd::sparse
