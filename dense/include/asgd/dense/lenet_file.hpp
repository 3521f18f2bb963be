// LeNet-5 model and checkpoint files as dense::fit writes them: an engine
// checkpoint whose metadata names the model and records the run's options.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

#include "asgd/dense/network.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/options_record.hpp"

namespace asgd::dense {

// Metadata: JSON {"model": kLenetModelKind, "options": {...}}; files from
// before the options were recorded hold the bare kind.
inline constexpr const char* kLenetModelKind = "asgd-cnn lenet5 v1";

// The metadata of a file whose run recorded `options`.
std::string lenet_metadata(const OptionsRecord& options);

// A LeNet-5 model or checkpoint for `net`, or an InputError saying what
// `path` is not (another kind of file, another layout, a momentum buffer of
// the wrong size).
CheckpointData read_lenet(const std::filesystem::path& path, const Network& net);

// The run's total epochs that `metadata` (of the file `path`) recorded; none
// when it recorded none. InputError when the record is not a count.
std::optional<std::size_t> recorded_epochs(const std::filesystem::path& path, const std::string& metadata);

}  // namespace asgd::dense
