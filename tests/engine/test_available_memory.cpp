// What an allocation sized by input is checked against: the memory available, as the process's own limits lower
// it, and the message that names the input and the bytes.
#include "asgd/engine/available_memory.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "../common/limited_child.hpp"
#include "../common/message_of.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd {
namespace {

using asgd::testing::message_of;

TEST(AvailableMemory, BytesPrintInDecimalUnits) {
  EXPECT_EQ(format_bytes(0), "0 bytes");
  EXPECT_EQ(format_bytes(999), "999 bytes");
  EXPECT_EQ(format_bytes(1000), "1.0 kB");
  EXPECT_EQ(format_bytes(8589934592), "8.6 GB");
  EXPECT_EQ(format_bytes(25769803764), "25.8 GB");
  EXPECT_EQ(format_bytes(536870912), "537 MB");
  EXPECT_EQ(format_bytes(999999999), "1.0 GB");
  EXPECT_EQ(format_bytes(UINT64_MAX), "18.4 EB");
}

TEST(AvailableMemory, RequireMemoryNamesTheInputAndTheBytes) {
  const AvailableMemory some{2000000000, "MemAvailable in /proc/meminfo"};
  EXPECT_NO_THROW(require_memory(2000000000, "x", some));
  EXPECT_EQ(message_of([&] { require_memory(8589934592, "a.svm:1:9: feature id 2147483647", some); }),
            "a.svm:1:9: feature id 2147483647 needs 8.6 GB (8589934592 bytes), more than the 2.0 GB of memory "
            "available (MemAvailable in /proc/meminfo)");
  EXPECT_THROW(require_memory(2000000001, "x", some), InputError);
  EXPECT_EQ(saturating_product(1u << 31, 12), 25769803776u);
  EXPECT_EQ(saturating_product(UINT64_MAX / 2, 3), UINT64_MAX);
}

// The machine's figure is there (Linux has /proc/meminfo), and a limit the process was given lowers it: what a
// `ulimit -v` user, or a cgroup, can allocate is what counts. Checked in a child, whose limit ends with it.
TEST(AvailableMemory, TheProcesssAddressSpaceLimitLowersIt) {
  const AvailableMemory machine = available_memory();
  EXPECT_LT(machine.bytes, UINT64_MAX);
  EXPECT_GT(machine.bytes, 0u);
  const std::string seen = asgd::testing::message_in_limited_child(std::uint64_t{256} << 20, [] {
    const AvailableMemory m = available_memory();
    throw InputError(std::to_string(m.bytes) + " " + std::string(m.source));
  });
  const auto space = seen.find(' ');
  ASSERT_NE(space, std::string::npos) << seen;
  EXPECT_LE(std::stoull(seen.substr(0, space)), std::uint64_t{256} << 20) << seen;
  EXPECT_GT(std::stoull(seen.substr(0, space)), std::uint64_t{128} << 20) << seen;
  EXPECT_EQ(seen.substr(space + 1), "RLIMIT_AS, ulimit -v");
  // As much as that limit leaves is refused there, with the limit named.
  const std::string refused = asgd::testing::message_in_limited_child(
      std::uint64_t{256} << 20, [] { require_memory(std::uint64_t{300} << 20, "a test's 300 MiB"); });
  EXPECT_EQ(refused.rfind("a test's 300 MiB needs 315 MB (314572800 bytes), more than the ", 0), 0u) << refused;
  EXPECT_NE(refused.find("of memory available (RLIMIT_AS, ulimit -v)"), std::string::npos) << refused;
}

}  // namespace
}  // namespace asgd
