// One writer per checkpoint path: a run that writes checkpoints holds the
// path's lock from its start to its end, and a second run on the same path
// is refused at its start with the holder's pid. The lock is an advisory
// flock on a file beside the checkpoint (PATH.lock), not on the checkpoint,
// which every save replaces by a rename; the kernel releases it when the
// holder ends, however it ends (kill -9 too), so a killed run never blocks
// the next one. The holder removes the lock file when it lets go.
#pragma once

#include <filesystem>

namespace asgd {

class CheckpointLock {
 public:
  CheckpointLock() noexcept = default;  // holds nothing
  // Locks `checkpoint` for this object's lifetime. InputError naming the path
  // and the holder ("checkpoint ck.bin: another run is writing it (pid
  // 1234) ...") when another process holds it, or another lock in this one;
  // AtomicFile::check's InputError when the path cannot be written. Holds
  // nothing for a path that writes do not replace (a device, a pipe, "-"), or
  // on a file system without locks.
  explicit CheckpointLock(const std::filesystem::path& checkpoint);
  ~CheckpointLock();
  CheckpointLock(CheckpointLock&& other) noexcept;
  CheckpointLock& operator=(CheckpointLock&& other) noexcept;
  CheckpointLock(const CheckpointLock&) = delete;
  CheckpointLock& operator=(const CheckpointLock&) = delete;

  bool held() const noexcept { return fd_ >= 0; }
  // The lock file of `checkpoint`: beside the file its writes replace (a
  // link's target, as AtomicFile writes it), named PATH.lock (a short name
  // derived from it when PATH's name is too long to take the suffix).
  static std::filesystem::path file_for(const std::filesystem::path& checkpoint);

 private:
  void release() noexcept;

  int fd_ = -1;
  std::filesystem::path file_;
};

}  // namespace asgd
