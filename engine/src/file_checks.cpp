#include "asgd/engine/file_checks.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd {

void check_output(std::string_view what, const std::string& path) {
  if (path.empty()) return;
  try {
    AtomicFile::check(path);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", what, e.what()));
  }
}

namespace {
// Whether two paths name one regular file: the same inode when both exist, else the same canonical path.
bool same_regular_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  const auto status_a = std::filesystem::status(a, ec), status_b = std::filesystem::status(b, ec);
  const bool a_there = std::filesystem::exists(status_a), b_there = std::filesystem::exists(status_b);
  if (a_there && b_there) {
    return std::filesystem::is_regular_file(status_a) && std::filesystem::is_regular_file(status_b) &&
           std::filesystem::equivalent(a, b, ec) && !ec;
  }
  if (a_there || b_there) return false;
  // Absolute first: weakly_canonical keeps a relative path whose first part does not exist as it is ("m"),
  // while "./m" resolves through "." (the same file, two answers).
  const auto ca = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ec), ec);
  if (ec) return false;
  const auto cb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, ec), ec);
  return !ec && ca == cb;
}
}  // namespace

void check_distinct(std::string_view what, const std::string& path,
                    std::initializer_list<std::pair<std::string_view, std::string_view>> others) {
  if (path.empty() || path == "-") return;
  for (const auto& [other_what, other] : others) {
    if (other.empty() || other == "-") continue;
    if (same_regular_file(path, std::filesystem::path(other))) {
      throw InputError(fmt::format("{}: {} is also {}'s file (give each its own)", what, path, other_what));
    }
  }
}

void check_one_on_stdout(std::initializer_list<std::pair<std::string_view, std::string_view>> outputs) {
  std::string_view first;
  for (const auto& [what, path] : outputs) {
    if (path.empty() || !AtomicFile::writes_to(std::filesystem::path(path), STDOUT_FILENO)) continue;
    if (!first.empty())
      throw InputError(fmt::format("{}: stdout is {}'s already (the two would run into one another)", what, first));
    first = what;
  }
}

bool reads_stdin(std::string_view path) noexcept { return path == "-" || path == "/dev/stdin"; }

void check_one_stdin(std::initializer_list<std::pair<std::string_view, std::string_view>> inputs) {
  const std::pair<std::string_view, std::string_view>* first = nullptr;
  for (const auto& input : inputs) {
    if (!reads_stdin(input.second)) continue;
    if (first != nullptr) {
      throw InputError(fmt::format("{} {} and {} {}: only one of them can read standard input", first->first,
                                   first->second, input.first, input.second));
    }
    first = &input;
  }
}

void check_rewritten_output(std::string_view what, const std::string& path) {
  check_output(what, path);
  if (!path.empty() && !AtomicFile::replaces(path))
    throw InputError(fmt::format("{}: {}: rewritten during the run, so it must be a file (not stdout, a pipe or a "
                                 "device, where each write would follow the last)",
                                 what, path));
}

}  // namespace asgd
