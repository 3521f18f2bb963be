#include "staleness_plot.hpp"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "asgd_build_paths.hpp"

extern char** environ;

namespace asgd::bench {

std::filesystem::path plot_script() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path() / ASGD_PLOT_SCRIPT_FROM_BINDIR;
    if (std::filesystem::exists(installed, ec)) return installed;
  }
  if (std::filesystem::exists(ASGD_PLOT_SCRIPT_SOURCE, ec)) return ASGD_PLOT_SCRIPT_SOURCE;
  return ASGD_PLOT_SCRIPT_INSTALLED;
}

// Debian's matplotlib lives under /usr/bin/python3, which may not be the python3 first on PATH. Spawned directly
// (no shell): any path is safe. The temp file's name ends in .png: matplotlib picks the format by it.
bool plot_csv(const std::filesystem::path& csv, const std::filesystem::path& png, const std::string& title,
              const std::filesystem::path& script) {
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::filesystem::path partial =
      png.parent_path() / fmt::format(".{}.tmp.{}.png", png.stem().string(), static_cast<long>(::getpid()));
  std::vector<std::string> args = {python, script.string(), csv.string(), partial.string(), title};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return false;
  int status = 0;
  const bool done = ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::error_code ec;
  if (done) std::filesystem::rename(partial, png, ec);
  if (!done || ec) {
    std::filesystem::remove(partial, ec);
    return false;
  }
  return true;
}

}  // namespace asgd::bench
