// The memory this process may still allocate: what an allocation sized by input (a feature id, a header's
// count, a pipe that never ends) is checked against before it is made, so that it ends in a message naming the
// input and the bytes, not in std::bad_alloc or the OOM killer.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace asgd {

struct AvailableMemory {
  std::uint64_t bytes = std::numeric_limits<std::uint64_t>::max();  // the max: nothing says
  std::string_view source = "no limit found";                      // what sets it, for messages
};

// The least of: the kernel's estimate of what can be allocated without swapping (MemAvailable in /proc/meminfo,
// or sysconf's available physical pages without /proc), the cgroup's memory limit less its usage (v2 memory.max,
// v1 memory.limit_in_bytes), and RLIMIT_AS / RLIMIT_DATA less what the process holds of them. It reads a few small
// files (about 20 us): ask it per decision to allocate, not per item read.
AvailableMemory available_memory();

// "8.6 GB", "512 MB", "3.1 kB", "17 bytes": decimal units, as `free -h --si` and `df -H` print them.
std::string format_bytes(std::uint64_t bytes);

// InputError "WHAT needs SIZE (N bytes), more than the FREE of memory available (SOURCE)" when `bytes` is more
// than `available` holds. `what` names the input (file and line, or the option) and what it would allocate.
void require_memory(std::uint64_t bytes, std::string_view what, const AvailableMemory& available);
// The message require_memory throws (for a caller that adds it to its own, such as a reader's "FILE:LINE: ").
std::string memory_shortfall(std::uint64_t bytes, std::string_view what, const AvailableMemory& available);
// The same against available_memory().
void require_memory(std::uint64_t bytes, std::string_view what);

// a * b, or the max of std::uint64_t when the product would overflow (a size that large fits in no memory).
constexpr std::uint64_t saturating_product(std::uint64_t a, std::uint64_t b) noexcept {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::numeric_limits<std::uint64_t>::max();
  return a * b;
}

}  // namespace asgd
