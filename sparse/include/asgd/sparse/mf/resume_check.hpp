// Whether an mf fit can go on from a checkpoint (or from a model file, which is one): the same loss, factors, L2
// weights, rating scale and id maps, so that the rows it holds are this run's users and items.
#pragma once

#include <filesystem>
#include <string_view>

#include "asgd/engine/checkpoint.hpp"

namespace asgd::sparse::mf {

// `saved` was read from `file`; `metadata` is this run's model_metadata. The options record ("options") is left
// out: what changed there is told (TrainingRun::changes_since_resumed), not refused. InputError naming
// FitOptions::resume and what differs otherwise.
void check_mf_resume(const CheckpointData& saved, const std::filesystem::path& file, std::string_view metadata);

}  // namespace asgd::sparse::mf
