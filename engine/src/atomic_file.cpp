#include "asgd/engine/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "asgd/engine/errors.hpp"

namespace asgd {
namespace {

constexpr std::size_t kFlushAt = std::size_t{1} << 20;

std::filesystem::path folder_of(const std::filesystem::path& p) {
  return p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
}

// What the temp file's name starts with: PATH itself, or for a name too near the file system's 255-byte limit
// to take the suffix, a short name in the same folder.
std::filesystem::path temp_base(const std::filesystem::path& path) {
  if (path.filename().string().size() > 200) return folder_of(path) / ".asgd-long-name";
  return path;
}

// BASE.tmp.PID.N (digits only, exactly) of processes that no longer run; any other name is the user's.
void remove_stale_temporaries(const std::filesystem::path& base) {
  std::error_code ec;
  const std::string prefix = base.filename().string() + ".tmp.";
  for (const auto& entry : std::filesystem::directory_iterator(folder_of(base), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string_view rest = std::string_view(name).substr(prefix.size());
    const auto dot = rest.find('.');
    const auto digits = [](std::string_view v) {
      return !v.empty() && v.size() <= 18 && v.find_first_not_of("0123456789") == std::string_view::npos;
    };
    if (dot == std::string_view::npos || !digits(rest.substr(0, dot)) || !digits(rest.substr(dot + 1))) continue;
    const long long pid = std::atoll(std::string(rest.substr(0, dot)).c_str());
    if (pid > 0 && pid <= INT32_MAX && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      std::filesystem::remove(entry.path(), ec);
  }
}

// The descriptor a name for one of this process's open files stands for:
// "-" and /dev/stdout 1, /dev/stderr 2, /dev/fd/N and /proc/self/fd/N N;
// -1 for any other path. Written through a copy of the descriptor, such
// output goes where the shell sent it (appended with >>, into a pipe),
// rather than replacing the file the descriptor has open.
int standard_descriptor(const std::filesystem::path& p) {
  const std::string s = p.string();
  if (s == "-" || s == "/dev/stdout") return STDOUT_FILENO;
  if (s == "/dev/stderr") return STDERR_FILENO;
  for (const std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (s.size() <= prefix.size() || s.compare(0, prefix.size(), prefix) != 0) continue;
    int fd = 0;
    for (std::size_t i = prefix.size(); i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9' || fd > 100000000) return -1;
      fd = fd * 10 + (s[i] - '0');
    }
    return fd;
  }
  return -1;
}

// The descriptor `p` writes to: standard_descriptor of the name itself, or
// of the first name along its chain of symlinks that is a descriptor's
// (a link to /dev/stdout writes where stdout goes, as /dev/stdout does,
// rather than replacing the file stdout has open, and whatever stdout is:
// a file, a pipe, a socket). Each name is taken lexically normalised, so a
// relative link ../../dev/fd/1 counts; "-" is stdout only as the name given
// (./- and a link to - name a file "-"). -1 when the chain ends elsewhere
// (or loops: the caller reports that).
// What the link `link` points at, as a path from here (a relative target is
// relative to the link's folder); `ec` says why not.
std::filesystem::path link_target(const std::filesystem::path& link, std::error_code& ec) {
  const std::filesystem::path target = std::filesystem::read_symlink(link, ec);
  return target.is_absolute() ? target : link.parent_path() / target;
}

int descriptor_behind(std::filesystem::path p) {
  if (p == "-") return STDOUT_FILENO;
  for (int hops = 0; hops <= 40; ++hops) {
    const std::filesystem::path name = p.lexically_normal();
    if (const int fd = name.is_absolute() ? standard_descriptor(name) : -1; fd >= 0) return fd;
    std::error_code ec;
    if (!std::filesystem::is_symlink(p, ec)) return -1;
    p = link_target(p, ec);
    if (ec) return -1;
  }
  return -1;
}

}  // namespace

void AtomicFile::write_to_descriptor(int fd, const std::filesystem::path& given) {
  in_place_ = true;
  fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (fd_ < 0) throw InputError(fmt::format("{}: cannot write: {}", given.string(), std::strerror(errno)));
}

AtomicFile::AtomicFile(std::filesystem::path path) : path_(std::move(path)) {
  buffer_.reserve(kFlushAt);
  if (const int fd = descriptor_behind(path_); fd >= 0) {
    write_to_descriptor(fd, path_);
    return;
  }
  std::error_code ec;
  // What the path names, links followed. A link to something written in
  // place (a device, a FIFO) is opened through the link: only a link to a
  // file, or to nothing yet, is resolved, so that the rename replaces its
  // target.
  const auto status = std::filesystem::status(path_, ec);
  if (std::filesystem::is_directory(status)) {
    throw InputError(fmt::format("{}: is a directory, expected a file name to write", path_.string()));
  }
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    in_place_ = true;
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw InputError(fmt::format("{}: cannot write: {}", path_.string(), std::strerror(errno)));
    return;
  }
  // A chain of links is followed to its end, which may not exist yet (a
  // dangling link gets its target created).
  if (std::filesystem::is_symlink(path_, ec)) {
    const std::filesystem::path given = path_;
    for (int hops = 0; std::filesystem::is_symlink(path_, ec); ++hops) {
      if (hops == 40) throw InputError(fmt::format("{}: too many levels of symbolic links", given.string()));
      path_ = link_target(path_, ec);
      if (ec) throw InputError(fmt::format("{}: {}", given.string(), ec.message()));
    }
    std::filesystem::path resolved = std::filesystem::weakly_canonical(path_, ec);
    if (ec || resolved.empty()) throw InputError(fmt::format("{}: {}", given.string(), ec.message()));
    path_ = std::move(resolved);
  }
  remove_stale_temporaries(temp_base(path_));
  static std::atomic<unsigned> serial{0};
  temp_ = temp_base(path_);
  temp_ += fmt::format(".tmp.{}.{}", ::getpid(), serial.fetch_add(1));
  // O_EXCL: never follow or clobber something already at the temp name.
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError(fmt::format("{}: cannot write here: {}", path_.string(), std::strerror(errno)));
  // A file replaced keeps its permissions (a private model stays private); a new one has the umask's.
  struct stat existing {};
  if (::stat(path_.c_str(), &existing) == 0 && S_ISREG(existing.st_mode)) ::fchmod(fd_, existing.st_mode & 0777);
}

void AtomicFile::check(const std::filesystem::path& path) {
  if (const int fd = descriptor_behind(path); fd >= 0) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0) throw InputError(fmt::format("{}: cannot write: {}", path.string(), std::strerror(errno)));
    if ((flags & O_ACCMODE) == O_RDONLY)
      throw InputError(fmt::format("{}: cannot write: the descriptor is open for reading only", path.string()));
    return;
  }
  std::error_code ec;
  if (!replaces(path) && !std::filesystem::is_directory(path, ec)) return;  // a FIFO or device, written in place
  AtomicFile probe(path);  // creates the temp file; its destructor removes it
}

bool AtomicFile::writes_to(const std::filesystem::path& path, int fd) {
  struct stat target {}, open_file {};
  if (::fstat(fd, &open_file) != 0) return false;
  const int named = descriptor_behind(path);
  if (named >= 0 ? ::fstat(named, &target) != 0 : ::stat(path.c_str(), &target) != 0) return false;
  return target.st_dev == open_file.st_dev && target.st_ino == open_file.st_ino;
}

bool AtomicFile::replaces(const std::filesystem::path& path) {
  if (descriptor_behind(path) >= 0) return false;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  return !std::filesystem::exists(status) || std::filesystem::is_regular_file(status);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !in_place_) {
    std::error_code ignored;
    std::filesystem::remove(temp_, ignored);
  }
}

void AtomicFile::fail(const char* what, int err) const {
  throw RuntimeError(fmt::format("{}: {}: {}", path_.string(), what, std::strerror(err)));
}

void AtomicFile::flush() {
  const char* p = buffer_.data();
  std::size_t n = buffer_.size();
  while (n > 0) {
    const ssize_t k = ::write(fd_, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) fail("write failed", errno);
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  buffer_.clear();
}

void AtomicFile::write(const void* data, std::size_t n) {
  if (buffer_.size() + n > kFlushAt) flush();
  if (n >= kFlushAt) {
    buffer_.assign(static_cast<const char*>(data), n);
    flush();
    return;
  }
  buffer_.append(static_cast<const char*>(data), n);
}

void AtomicFile::commit() {
  flush();
  if (in_place_) {
    const int fd = fd_;
    fd_ = -1;
    committed_ = true;
    if (::close(fd) != 0) fail("cannot close", errno);
    return;
  }
  if (::fsync(fd_) != 0) fail("cannot fsync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot close", errno);
  std::error_code ec;
  std::filesystem::rename(temp_, path_, ec);
  if (ec) throw RuntimeError(fmt::format("{}: cannot replace with the new file: {}", path_.string(), ec.message()));
  committed_ = true;
  // The rename is durable only once the folder is synced.
  const int dir = ::open(folder_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int rc = dir < 0 ? -1 : ::fsync(dir);
  const int err = errno;
  if (dir >= 0) ::close(dir);
  if (rc != 0) fail("written, but syncing its folder failed", err);
}

}  // namespace asgd
