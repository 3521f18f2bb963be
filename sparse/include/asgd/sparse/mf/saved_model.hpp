// An mf model held in memory with everything its model file holds, so that a program that trains or loads one
// (the Python module's fit, load and save) writes it back as `asgd mf train` writes it, byte for byte.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/sparse/mf/fit.hpp"
#include "asgd/sparse/mf/model_file.hpp"

namespace asgd::sparse::mf {

struct SavedModel {
  LoadedModel model;   // the factors (on the heap) and what predicting and serving need beside them
  std::string metadata;  // model_metadata's text, as the file holds it
  TrainState state;      // epochs, examples and seed of the run that trained it
  // A loaded file's optimizer state, written back as read. A model from fit has none: fit does not return its
  // AdaGrad sums (so a resume of an AdaGrad run needs its own model file or checkpoint, FitOptions::resume).
  std::vector<float> optimizer_state;
  OptimizerKind optimizer_kind = OptimizerKind::unrecorded;
  std::uint32_t row_head = 0;
};

// The model of a finished fit (report.model, on the heap: not trained into a shared segment) with the metadata
// and state its model file holds (FitReport::metadata). InputError when the report holds no model (a stopped
// run).
SavedModel saved_model(FitReport report);

// A model file, as load_model reads it (its InputErrors), kept whole for writing back.
SavedModel read_saved_model(const std::filesystem::path& path);

// Writes `m` atomically to `path` (save_checkpoint's errors).
void write_saved_model(const std::filesystem::path& path, const SavedModel& m);

}  // namespace asgd::sparse::mf
