// A model file's predictions for a ratings file, LIBMF's mf-predict: one predicted rating per line, in the
// ratings' order, written atomically, and their errors against the ratings given.
#pragma once

#include <filesystem>

#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/mf/model_file.hpp"
#include "asgd/sparse/mf/ratings.hpp"

namespace asgd::sparse::mf {

// `test` read with the model's ids (extended or not). Each line is the prediction ("{:.6g}") clipped into the
// training ratings' range; a pair with an unknown or cold side predicts from the mean and the known side's bias.
// The errors are evaluate_errors' of the same predictions.
ErrorMetrics write_predictions(const LoadedModel& model, const Ratings& test, const std::filesystem::path& path);

}  // namespace asgd::sparse::mf
