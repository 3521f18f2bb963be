#include "asgd/sparse/linear_model_file.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/json_metadata.hpp"

namespace asgd::sparse {

std::string linear_model_metadata(double l2, std::uint32_t features, LinearLoss loss,
                                  const OptionsRecord& options) {
  nlohmann::json j = loss == LinearLoss::logistic
                         ? nlohmann::json{{"model", "logistic"}, {"l2", l2}, {"features", features}}
                         : nlohmann::json{{"model", "linear"}, {"loss", to_string(loss)}, {"l2", l2},
                                          {"features", features}};
  if (!options.empty()) j["options"] = options;
  return j.dump();
}

// Metadata that is no JSON object records nothing: the defaults (a file of an older asgd held the bare kind).
LinearLoss linear_model_loss(const std::string& metadata, const std::string& where) {
  const auto j = JsonMetadata::parse(metadata, where);
  if (!j || !j->has("loss")) return LinearLoss::logistic;
  const std::string name = j->text("loss");
  try {
    return parse_linear_loss(name);
  } catch (const InputError&) {
    j->refuse("loss", "expected logistic, squared-hinge or hinge");
  }
}

std::optional<double> linear_model_l2(const std::string& metadata, const std::string& where) {
  const auto j = JsonMetadata::parse(metadata, where);
  if (!j || !j->has("l2")) return std::nullopt;
  const double l2 = j->number("l2");
  if (!(l2 >= 0) || !std::isfinite(l2)) j->refuse("l2", "expected a finite number >= 0");
  return l2;
}

LinearModelFile read_linear_model(const std::filesystem::path& path) {
  CheckpointData d = read_checkpoint(path);
  if (!d.layout.contains("weights")) throw InputError(fmt::format("{}: not a linear model", path.string()));
  LinearModelFile model;
  const Tensor& weights = d.layout["weights"];  // the weights alone, whatever else a layout holds
  // Row by row, as ParamStore::snapshot reads a segment: a layout may pad its rows.
  for (std::size_t r = 0; r < weights.rows; ++r) {
    const auto row = d.params.begin() + static_cast<std::ptrdiff_t>(weights.at(r));
    model.weights.insert(model.weights.end(), row, row + static_cast<std::ptrdiff_t>(weights.cols));
  }
  model.metadata = std::move(d.metadata);
  model.path = path;
  return model;
}

}  // namespace asgd::sparse
