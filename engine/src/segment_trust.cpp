#include "segment_trust.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "asgd/engine/param_store.hpp"

namespace asgd {

namespace {

// The user name of `uid`; empty when it has none (a container without that user, or no passwd entry).
std::string user_name(unsigned uid) {
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(size > 0 ? static_cast<std::size_t>(size) : 16384);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(static_cast<uid_t>(uid), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr)
    return {};
  return found->pw_name;
}

// What is wrong, and what to do, for a segment of this process's own user with a group or other permission bit.
std::string open_mode_message(const std::string& name, unsigned mode) {
  const bool writable = (mode & 022) != 0;
  return fmt::format(
      "shared segment '{}' has mode {:04o}: other users may {} it{} (asgd makes segments owner-only, 0600); if you "
      "made it so and trust what it holds, make it owner-only again (chmod 600 {}), else remove it "
      "(ParamStore::remove_shared(\"{}\"), which does not check that it is asgd's) or choose another name",
      name, mode, writable ? "write" : "read",
      writable ? ", so it may hold anything, and be truncated under this process" : "", segment::object_path(name),
      name);
}

std::string foreign_message(const std::string& name, unsigned uid, unsigned mode) {
  const auto me = static_cast<unsigned>(::geteuid());
  const std::string my_name = user_name(me);
  return fmt::format(
      "shared segment '{}' belongs to {}, not to this process's user {}(uid {}): another user's segment may hold "
      "anything, and be rewritten or truncated under this process; its owner (or root) may remove it "
      "(ParamStore::remove_shared(\"{}\"), which does not check that it is asgd's), or choose another name",
      name, UntrustedSegment::whose(uid, mode), my_name.empty() ? "" : my_name + " ", me, name);
}

std::string untrusted_message(const std::string& name, unsigned uid, unsigned mode) {
  return uid != static_cast<unsigned>(::geteuid()) ? foreign_message(name, uid, mode) : open_mode_message(name, mode);
}

}  // namespace

UntrustedSegment::UntrustedSegment(std::string name, unsigned uid, unsigned bits)
    : InputError(untrusted_message(name, uid, bits)), segment(std::move(name)), owner_uid(uid), mode(bits) {}

std::string UntrustedSegment::whose(unsigned uid, unsigned mode) {
  const std::string user = user_name(uid);
  return fmt::format("{} (uid {}, mode {:04o})", user.empty() ? "a user without a name" : "user " + user, uid, mode);
}

bool UntrustedSegment::foreign() const noexcept { return owner_uid != static_cast<unsigned>(::geteuid()); }

void ParamStore::check_removable_shared(const std::string& name) {
  struct stat object {}, dir {};
  const std::string path = segment::object_path(name);
  if (::stat(path.c_str(), &object) != 0) return;  // nothing there: the caller says so
  const std::string dir_path = path.substr(0, path.rfind('/'));
  if (::stat(dir_path.c_str(), &dir) != 0) return;
  const uid_t me = ::geteuid();
  // unlink in a sticky directory: the object's owner, the directory's, or root (CAP_FOWNER); in any other, whoever
  // may write the directory.
  const bool may = me == 0 || me == object.st_uid || me == dir.st_uid ||
                   ((dir.st_mode & S_ISVTX) == 0 && ::faccessat(AT_FDCWD, dir_path.c_str(), W_OK, AT_EACCESS) == 0);
  if (may) return;
  throw InputError(fmt::format("shared segment '{}' belongs to {}: only its owner or root may remove it", name,
                               UntrustedSegment::whose(object.st_uid, object.st_mode & 07777)));
}

namespace segment {

std::string object_path(const std::string& name) { return "/dev/shm/" + name; }

bool trusted(const struct stat& st) noexcept { return st.st_uid == ::geteuid() && (st.st_mode & 077) == 0; }

void check_trusted(int fd, const std::string& name) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw RuntimeError(fmt::format("shared segment '{}': cannot look at its owner: {}", name, std::strerror(errno)));
  if (!trusted(st)) throw UntrustedSegment(name, st.st_uid, st.st_mode & 07777);
}

void check_trusted(const std::string& name) {
  struct stat st {};
  if (::stat(object_path(name).c_str(), &st) != 0) return;
  if (!trusted(st)) throw UntrustedSegment(name, st.st_uid, st.st_mode & 07777);
}

}  // namespace segment
}  // namespace asgd
