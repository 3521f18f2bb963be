#include "asgd/sparse/linear_model_file.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::sparse {

namespace {
// A value of the wrong kind in the metadata is bad input, said as such (not as the JSON library's exception).
template <class F>
auto from_metadata(F&& read) {
  try {
    return read();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("a model file's metadata is malformed: {}", e.what()));
  }
}
}  // namespace

std::string linear_model_metadata(double l2, std::uint32_t features, LinearLoss loss, int ranks,
                                  const OptionsRecord& options) {
  nlohmann::json j = loss == LinearLoss::logistic
                         ? nlohmann::json{{"model", "logistic"}, {"l2", l2}, {"features", features}}
                         : nlohmann::json{{"model", "linear"}, {"loss", to_string(loss)}, {"l2", l2},
                                          {"features", features}};
  if (ranks > 0) j["ranks"] = ranks;
  if (!options.empty()) j["options"] = options;
  return j.dump();
}

int linear_model_ranks(const std::string& metadata) {
  const auto j = nlohmann::json::parse(metadata, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ranks")) return 1;
  // An integer from 1 up (a float or a huge number is no rank count: get<int> would convert it undefined).
  const auto& ranks = j["ranks"];
  if (!ranks.is_number_integer() || ranks.get<std::int64_t>() < 1 || ranks.get<std::int64_t>() > (1 << 24)) {
    throw InputError(fmt::format("the model's rank count is {}, not a number of ranks", ranks.dump()));
  }
  return static_cast<int>(ranks.get<std::int64_t>());
}

LinearLoss linear_model_loss(const std::string& metadata) {
  const auto j = nlohmann::json::parse(metadata, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("loss")) return LinearLoss::logistic;
  if (!j["loss"].is_string()) throw InputError("the model's loss is not a name");
  return parse_linear_loss(j["loss"].get<std::string>());
}

std::optional<double> linear_model_l2(const std::string& metadata) {
  const auto j = nlohmann::json::parse(metadata, nullptr, false);
  if (j.is_discarded() || !j.contains("l2")) return std::nullopt;
  return from_metadata([&] { return j["l2"].get<double>(); });
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
  return model;
}

}  // namespace asgd::sparse
