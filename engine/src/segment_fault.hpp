// A segment truncated under a process that has it mapped: the next touch of a
// page past the new end raises SIGBUS, which would kill the process with no
// word of why. Every mapping of a segment is registered here; a SIGBUS inside
// one prints a message naming the segment and ends the process (exit status
// 1). Internal to the engine.
//
// Why end the process rather than recover: the fault lands on whatever
// instruction touched the page, in a worker's hot loop or a reader's scoring
// loop, with no state to unwind to. siglongjmp out of it would skip
// destructors and leave locks and half-made updates behind; mapping zero pages
// over the hole would let the run go on with parameters that no other
// process sees, and a reader serve zeros. And checking the size before each
// access (fstat) would cost a system call per step. A segment can shrink only
// at the hands of its owner or root (attach refuses any other user's), so
// this is a failure to report clearly, not a path to keep running on.
#pragma once

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cstddef>
#include <string>

namespace asgd::segment {

// While it lives, a SIGBUS at an address in [base, base + bytes) is reported as
// segment `name` truncated, and ends the process. A bus error anywhere else goes
// to the handler that was there before (the default: the process dies of it).
// Up to kMaxGuarded mappings at once; past that a mapping is not guarded.
class FaultGuard {
 public:
  static constexpr std::size_t kMaxGuarded = 256;
  FaultGuard() = default;
  FaultGuard(const void* base, std::size_t bytes, const std::string& name);
  FaultGuard(FaultGuard&& other) noexcept;
  FaultGuard& operator=(FaultGuard&& other) noexcept;
  FaultGuard(const FaultGuard&) = delete;
  FaultGuard& operator=(const FaultGuard&) = delete;
  ~FaultGuard() { release(); }
  void release() noexcept;

 private:
  int slot_ = -1;
};

// A mapping of a segment, guarded while it is mapped.
class MappedSegment {
 public:
  MappedSegment() = default;
  MappedSegment(const MappedSegment&) = delete;
  MappedSegment& operator=(const MappedSegment&) = delete;
  // Maps `bytes` from the start of `shm` (the caller has checked that the object holds them).
  void map(const boost::interprocess::shared_memory_object& shm, boost::interprocess::mode_t mode, std::size_t bytes,
           const std::string& name);
  void unmap() noexcept;
  void* address() const noexcept { return region_.get_address(); }
  std::size_t size() const noexcept { return region_.get_size(); }

 private:
  boost::interprocess::mapped_region region_;
  FaultGuard guard_;  // declared after region_: unregistered before the region unmaps
};

}  // namespace asgd::segment
