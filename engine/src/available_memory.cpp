#include "asgd/engine/available_memory.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <optional>
#include <string>

#include "asgd/engine/errors.hpp"

namespace asgd {
namespace {

// The first line of a small file, or nullopt when it cannot be read.
std::optional<std::string> first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<std::uint64_t> number_in(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  return value;
}

// MemAvailable in /proc/meminfo (kB there).
std::optional<std::uint64_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("MemAvailable:")) continue;
    const auto kb = number_in(std::string_view(line).substr(13));
    if (kb) return saturating_product(*kb, 1024);
  }
  return std::nullopt;
}

// The cgroup's limit less its usage: v2's unified hierarchy ("0::/path"), else v1's memory controller.
std::optional<std::uint64_t> cgroup_room() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    std::string limit_file, usage_file;
    if (line.starts_with("0::")) {
      limit_file = "/sys/fs/cgroup" + path + "/memory.max";
      usage_file = "/sys/fs/cgroup" + path + "/memory.current";
    } else if (controllers.find("memory") != std::string::npos) {  // v1: "4:memory:/path", or joined with others
      limit_file = "/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes";
      usage_file = "/sys/fs/cgroup/memory" + path + "/memory.usage_in_bytes";
    } else {
      continue;
    }
    const auto limit_text = first_line(limit_file);
    if (!limit_text || *limit_text == "max") continue;  // no file at this level (a namespace's root), or no limit
    const auto limit = number_in(*limit_text);
    const auto usage_text = first_line(usage_file);
    const auto usage = usage_text ? number_in(*usage_text) : std::nullopt;
    if (limit) return *limit - std::min(*limit, usage.value_or(0));
  }
  return std::nullopt;
}

// A field of /proc/self/statm (pages): 0 the address space, 5 data and stack.
std::optional<std::uint64_t> statm_bytes(int field) {
  std::ifstream in("/proc/self/statm");
  std::uint64_t value = 0;
  for (int k = 0; k <= field; ++k) {
    if (!(in >> value)) return std::nullopt;
  }
  return saturating_product(value, static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)));
}

// A resource limit less what the process holds of it, when the limit is set.
std::optional<std::uint64_t> rlimit_room(int resource, int statm_field) {
  rlimit limit{};
  if (::getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  const auto cap = static_cast<std::uint64_t>(limit.rlim_cur);
  return cap - std::min(cap, statm_bytes(statm_field).value_or(0));
}

}  // namespace

AvailableMemory available_memory() {
  AvailableMemory m;
  auto consider = [&m](std::optional<std::uint64_t> bytes, std::string_view source) {
    if (bytes && *bytes < m.bytes) m = {*bytes, source};
  };
  if (const auto kernel = mem_available()) {
    consider(kernel, "MemAvailable in /proc/meminfo");
  } else {
    const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
      consider(saturating_product(static_cast<std::uint64_t>(pages), static_cast<std::uint64_t>(page)),
               "free physical memory");
  }
  consider(cgroup_room(), "the cgroup's memory limit");
  consider(rlimit_room(RLIMIT_AS, 0), "RLIMIT_AS, ulimit -v");
  consider(rlimit_room(RLIMIT_DATA, 5), "RLIMIT_DATA, ulimit -d");
  return m;
}

std::string format_bytes(std::uint64_t bytes) {
  if (bytes < 1000) return fmt::format("{} bytes", bytes);
  constexpr std::array<const char*, 6> kUnits = {"kB", "MB", "GB", "TB", "PB", "EB"};
  auto value = static_cast<double>(bytes) / 1000.0;
  std::size_t unit = 0;
  while (value >= 999.95 && unit + 1 < kUnits.size()) {
    value /= 1000.0;
    ++unit;
  }
  return value < 99.95 ? fmt::format("{:.1f} {}", value, kUnits[unit]) : fmt::format("{:.0f} {}", value, kUnits[unit]);
}

std::string memory_shortfall(std::uint64_t bytes, std::string_view what, const AvailableMemory& available) {
  return fmt::format("{} needs {} ({} bytes), more than the {} of memory available ({})", what, format_bytes(bytes),
                     bytes, format_bytes(available.bytes), available.source);
}

void require_memory(std::uint64_t bytes, std::string_view what, const AvailableMemory& available) {
  if (bytes > available.bytes) throw InputError(memory_shortfall(bytes, what, available));
}

void require_memory(std::uint64_t bytes, std::string_view what) { require_memory(bytes, what, available_memory()); }

}  // namespace asgd
