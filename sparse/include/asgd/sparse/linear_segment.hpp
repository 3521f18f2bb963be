// A linear model in a shared segment: the objective the segment keeps for
// the processes that train it (AttachOptions::settings), and its weights read.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "asgd/engine/param_store.hpp"

#include "asgd/sparse/linear.hpp"

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

}  // namespace asgd::sparse
