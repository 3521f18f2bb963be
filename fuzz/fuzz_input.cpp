#include "fuzz_input.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <boost/core/demangle.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <typeinfo>

#include "asgd/engine/errors.hpp"

namespace asgd::fuzz {

InputFile::InputFile(const char* name) {
  fd_ = ::memfd_create(name, MFD_CLOEXEC);
  if (fd_ >= 0) {
    path_ = "/proc/self/fd/" + std::to_string(fd_);
    return;
  }
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/asgd-fuzz-" + name + "-XXXXXX";
  fd_ = ::mkstemp(pattern.data());
  if (fd_ < 0) finding(std::string("cannot make a temp file: ") + std::strerror(errno));
  path_ = temp_ = pattern;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

const std::filesystem::path& InputFile::write(std::span<const std::uint8_t> bytes) {
  if (::ftruncate(fd_, 0) != 0) finding(std::string("cannot empty the input file: ") + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) finding(std::string("cannot write the input file: ") + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  return path_;
}

const std::filesystem::path& InputFile::write(std::string_view bytes) {
  return write(std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
}

void finding(const std::string& what) {
  std::fprintf(stderr, "asgd fuzz: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

bool judge_current_exception(std::initializer_list<std::string_view> inputs) {
  try {
    throw;
  } catch (const asgd::Error& e) {
    const std::string_view message = e.what();
    const bool named = inputs.size() == 0 || std::any_of(inputs.begin(), inputs.end(), [&](std::string_view input) {
                         return message.find(input) != std::string_view::npos;
                       });
    if (!named) finding("the error names no input (" + std::string(*inputs.begin()) + "...): " + e.what());
    if (dynamic_cast<const InputError*>(&e) == nullptr && dynamic_cast<const RuntimeError*>(&e) == nullptr)
      finding(std::string("an asgd::Error that is neither InputError nor RuntimeError: ") + e.what());
    return false;
  } catch (const std::exception& e) {
    finding(boost::core::demangle(typeid(e).name()) + " escaped the reader: " + e.what());
  } catch (...) {
    finding("an exception of unknown type escaped the reader");
  }
}

}  // namespace asgd::fuzz
