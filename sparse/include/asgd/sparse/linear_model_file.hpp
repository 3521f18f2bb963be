// A linear model file, as `asgd linear train --model` writes it and `asgd
// linear eval` reads it: a checkpoint of the weights (engine/checkpoint.hpp)
// whose metadata says which objective they minimise (loss, L2, width) and the
// options of the run that wrote it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "asgd/engine/options_record.hpp"
#include "asgd/sparse/linear.hpp"

namespace asgd::sparse {

// The metadata stored with a linear model file ({"model": "logistic"} for
// the logistic loss, as before there was a choice; else "linear" and "loss").
// `options`, when not empty, is recorded as "options" (what a resume checks, and
// how many ranks' files hold AdaGrad's sums: options_record.hpp).
std::string linear_model_metadata(double l2, std::uint32_t features, LinearLoss loss,
                                  const OptionsRecord& options = {});
// What linear_model_metadata recorded; `where` names the file in errors ("m.bin", "TrainingRunOptions::resume
// ck"). Metadata that is no JSON object records nothing (the defaults). InputError naming `where` and the key for a
// value of another kind.
// l2, or none when absent. InputError unless finite and >= 0.
std::optional<double> linear_model_l2(const std::string& metadata, const std::string& where);
// The loss a model trained with (logistic when the metadata names none).
LinearLoss linear_model_loss(const std::string& metadata, const std::string& where);

// A model file read back: its weights (the "weights" tensor, row padding
// dropped) and the objective its metadata records (read when asked: a
// caller that sets the objective itself is not refused a malformed one).
struct LinearModelFile {
  std::vector<float> weights;
  std::string metadata;
  std::filesystem::path path;  // read from: its errors name it
  std::optional<double> l2() const { return linear_model_l2(metadata, path.string()); }  // none: the file does not say
  LinearLoss loss() const { return linear_model_loss(metadata, path.string()); }
};
// InputError naming `path` when it is no checkpoint or holds no linear model's weights.
LinearModelFile read_linear_model(const std::filesystem::path& path);

}  // namespace asgd::sparse
