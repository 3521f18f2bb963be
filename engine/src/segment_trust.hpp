// Whose a shared segment is, and whether this process may trust what it
// holds: only a segment of its own effective user, owner-only (no group or
// other permission bit; asgd makes them 0600). Any other could have been
// written, or be truncated, by another user. Internal to the engine.
#pragma once

#include <sys/stat.h>

#include <string>

namespace asgd::segment {

// Where Linux keeps the object that shm_open("/NAME") opens.
std::string object_path(const std::string& name);

// Whether an object of this owner and mode is this process's effective user's and owner-only.
bool trusted(const struct stat& st) noexcept;

// UntrustedSegment (param_store.hpp) when the object that `fd` has open, segment `name`, is not trusted.
void check_trusted(int fd, const std::string& name);

// The same for the object `name` names, looked at by its path (an object this process may not open);
// nothing when there is none.
void check_trusted(const std::string& name);

}  // namespace asgd::segment
