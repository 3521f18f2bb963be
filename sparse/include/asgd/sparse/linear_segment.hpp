// The objective a shared segment of a linear model keeps for the processes
// that train it and for its readers (AttachOptions::settings).
#pragma once

#include <optional>
#include <string>

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

}  // namespace asgd::sparse
