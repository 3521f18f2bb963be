#include "asgd/dense/lenet_file.hpp"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/json_metadata.hpp"

namespace asgd::dense {

std::string lenet_metadata(const OptionsRecord& options) {
  return nlohmann::json{{"model", kLenetModelKind}, {"options", options}}.dump();
}

CheckpointData read_lenet(const std::filesystem::path& path, const Network& net) {
  CheckpointData ck = read_checkpoint(path);
  const auto j = JsonMetadata::parse(ck.metadata, path.string());
  const bool ours = ck.metadata == kLenetModelKind || (j && j->holds("model", kLenetModelKind));
  if (!ours || !(ck.layout == net.layout()))
    throw InputError(fmt::format("{}: not a LeNet-5 model written by asgd cnn train", path.string()));
  if (!ck.optimizer_state.empty() && ck.optimizer_state.size() != ck.params.size())
    throw InputError(fmt::format("{}: {} momentum values for {} parameters", path.string(),
                                 ck.optimizer_state.size(), ck.params.size()));
  return ck;
}

std::optional<std::size_t> recorded_epochs(const std::filesystem::path& path, const std::string& metadata) {
  const auto saved = saved_options(metadata);
  const auto it = saved ? saved->find("epochs") : OptionsRecord::const_iterator{};
  if (!saved || it == saved->end()) return std::nullopt;
  const std::string& text = it->second;
  std::size_t epochs = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), epochs);
  if (ec != std::errc() || end != text.data() + text.size() || epochs == 0)
    throw InputError(fmt::format("{}: its recorded TrainOptions::epochs '{}' is not a count", path.string(), text));
  return epochs;
}

}  // namespace asgd::dense
