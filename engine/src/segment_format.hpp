// The layout of a shared parameter segment (ParamStore::create_shared): a
// header of kHeaderBytes, then the parameters as floats. Internal to the
// engine; the tests include it to forge headers a real run can leave behind.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace asgd::segment {

// "ASGDPARM" read as a little-endian integer. Written last, with release
// order, so an attacher that sees it sees a complete header.
constexpr std::uint64_t kMagic = 0x4d52415044475341ULL;
// 2: each writer slot and the creator record their process's start time
// (version 1 had pids only, so a dead writer's reused pid looked alive).
// 3: the creator's training settings, compared by every writer that
// attaches (a segment of version 2 is refused: made by an older asgd).
constexpr std::uint32_t kFormatVersion = 3;
constexpr std::size_t kMaxWriters = 64;
constexpr std::size_t kHeaderBytes = 16384;  // data starts here: page- and cache-aligned
constexpr std::uint32_t kStateInitialising = 0;
constexpr std::uint32_t kStateReady = 1;

// Lives at the start of the segment. Fields written by several processes are
// touched only through std::atomic_ref (lock-free, so valid across processes).
// A start time is /proc/PID/stat's (clock ticks since boot); 0 when unknown.
struct SegmentHeader {
  std::uint64_t magic;
  std::uint32_t format_version;
  std::uint32_t header_bytes;
  std::uint64_t layout_hash;
  std::uint64_t elements;
  std::uint64_t layout_text_bytes;
  std::uint64_t settings_bytes;  // the creator's settings, right after the layout text
  std::int32_t creator_pid;
  std::uint32_t state;
  std::uint64_t creator_start;
  std::int32_t writers[kMaxWriters];          // 0: free
  std::uint64_t writer_starts[kMaxWriters];  // each set after its pid, cleared before it
  char layout_text[1];  // layout_text_bytes, then settings_bytes; together up to the end of the header
};
constexpr std::size_t kLayoutTextMax = kHeaderBytes - offsetof(SegmentHeader, layout_text);
static_assert(std::atomic_ref<std::int32_t>::is_always_lock_free);
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);

}  // namespace asgd::segment
