#include "asgd/engine/checkpoint_lock.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/fingerprint.hpp"

namespace asgd {
namespace {

namespace fs = std::filesystem;

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Whether descriptor `fd` is still the file named `file`: its last holder may have removed it (or another run
// made a new one) between this process's open and its lock, and a lock on a removed file keeps no one out.
bool still_named(int fd, const fs::path& file) {
  struct stat open_file {}, named {};
  return ::fstat(fd, &open_file) == 0 && ::lstat(file.c_str(), &named) == 0 && open_file.st_dev == named.st_dev &&
         open_file.st_ino == named.st_ino;
}

// Who holds the lock, as its lock file says ("PID HOST\n", written once it was taken): "pid 1234", "pid 1234 on
// host h", or empty when the file says nothing usable (a holder that could not write it, or a pid that no longer
// runs here: the lock then belongs to a child that inherited it).
std::string holder_of(int fd) {
  char buffer[300] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  if (n <= 0) return {};
  const std::string_view text(buffer, static_cast<std::size_t>(n));
  long pid = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (ec != std::errc() || pid <= 0 || end == text.data() + text.size() || *end != ' ') return {};
  std::string_view host = text.substr(static_cast<std::size_t>(end + 1 - text.data()));
  host = host.substr(0, host.find('\n'));
  if (host != host_name()) return fmt::format("pid {} on host {}", pid, host);
  if (pid == ::getpid()) return fmt::format("pid {}, this process", pid);
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return {};
  return fmt::format("pid {}", pid);
}

// Opens `file`, creating it; read-only when it is another user's that this one may not write (a lock needs no
// more). -1 with errno when neither works. Never through a link (someone else's planted name).
int open_lock_file(const fs::path& file, bool& writable) {
  writable = true;
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd >= 0 || errno != EACCES) return fd;
  writable = false;
  return ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
}

}  // namespace

fs::path CheckpointLock::file_for(const fs::path& checkpoint) {
  fs::path p = checkpoint;
  std::error_code ec;
  for (int hops = 0; hops < 40 && fs::is_symlink(p, ec); ++hops) {
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) break;
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  std::string name = p.filename().string();
  // The file system's names end at 255 bytes: a long one is named by its digest instead.
  name = name.size() > 200 ? fmt::format(".asgd-lock-{:016x}", fnv1a(kFnv1aStart, name)) : name + ".lock";
  return p.parent_path() / name;
}

CheckpointLock::CheckpointLock(const fs::path& checkpoint) {
  if (checkpoint.empty() || !AtomicFile::replaces(checkpoint)) return;
  const fs::path file = file_for(checkpoint);
  bool writable = true;
  for (int attempt = 0; fd_ < 0; ++attempt) {
    const int fd = open_lock_file(file, writable);
    if (fd < 0) {
      const int err = errno;
      AtomicFile::check(checkpoint);  // its own words when the checkpoint itself cannot be written there
      throw InputError(fmt::format("checkpoint {}: cannot make its lock file {}: {}", checkpoint.string(),
                                   file.string(), std::strerror(err)));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string holder = err == EWOULDBLOCK ? holder_of(fd) : std::string();
      ::close(fd);
      if (err == EINTR) continue;
      if (err != EWOULDBLOCK) return;  // a file system without locks (ENOLCK): train unguarded, as before
      throw InputError(fmt::format("checkpoint {}: another run is writing it{}; wait for it to end, or give "
                                   "another checkpoint path (its lock: {})",
                                   checkpoint.string(), holder.empty() ? "" : " (" + holder + ")", file.string()));
    }
    if (still_named(fd, file)) {
      fd_ = fd;
    } else {
      ::close(fd);
      if (attempt == 100) throw RuntimeError(fmt::format("{}: cannot take the lock: the file keeps changing", file.string()));
    }
  }
  file_ = file;
  if (!writable) return;
  // Who holds it, for the message of the run refused: written over the last holder's line, then cut to length.
  const std::string line = fmt::format("{} {}\n", ::getpid(), host_name());
  if (::pwrite(fd_, line.data(), line.size(), 0) == static_cast<ssize_t>(line.size()))
    (void)::ftruncate(fd_, static_cast<off_t>(line.size()));
}

void CheckpointLock::release() noexcept {
  if (fd_ < 0) return;
  // Removed while still held, so that no run locks the file in between and takes a removed file for the lock.
  if (still_named(fd_, file_)) ::unlink(file_.c_str());
  ::close(fd_);
  fd_ = -1;
}

CheckpointLock::~CheckpointLock() { release(); }

CheckpointLock::CheckpointLock(CheckpointLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), file_(std::move(other.file_)) {}

CheckpointLock& CheckpointLock::operator=(CheckpointLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
    file_ = std::move(other.file_);
  }
  return *this;
}

}  // namespace asgd
