// Whether a linear fit can go on from a checkpoint: the same kind of model,
// width, loss and L2, AdaGrad sums of as many ranks, the same seed, and an
// epoch left to train. What differs is an InputError naming the option.
#pragma once

#include <cstdint>
#include <filesystem>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/sparse/linear_fit.hpp"

namespace asgd::sparse {

// `saved` was read from `read_from` (this rank's file of options.run.resume) for a fit of `features` features on
// `ranks` ranks with `options`. Throws the InputError that says what keeps it from being continued.
void check_linear_resume(const CheckpointData& saved, const std::filesystem::path& read_from,
                         const LinearFitOptions& options, std::uint64_t features, int ranks);

}  // namespace asgd::sparse
