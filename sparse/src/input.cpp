#include "input.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>

#include "asgd/engine/errors.hpp"
#include "text_util.hpp"

namespace asgd::sparse::io {

namespace fs = std::filesystem;

struct InputFile::Gz {
  gzFile file = nullptr;
  ~Gz() {
    if (file != nullptr) gzclose(file);
  }
};

InputFile::InputFile(const fs::path& path, const char* what)
    : name_(display_name(path)), gz_(std::make_unique<Gz>()) {
  std::error_code ec;
  if (path != "-" && fs::is_directory(path, ec)) throw InputError(fmt::format("{}: is a directory, not {}", name_, what));
  const int fd =
      path == "-" ? ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open {}: {}", name_, what, std::strerror(errno)));
  struct stat st {};
  regular_ = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  gz_->file = gzdopen(fd, "rb");
  if (gz_->file == nullptr) {
    ::close(fd);
    throw RuntimeError(fmt::format("{}: cannot read: out of memory for zlib", name_));
  }
  // zlib's 8 KiB default means a read call per 8 KiB of a plain file: 256 KiB.
  gzbuffer(gz_->file, 256 * 1024);
}

InputFile::~InputFile() = default;

std::size_t InputFile::read(char* dst, std::size_t n) {
  if (at_start_) {
    at_start_ = false;
    char start[3];
    held_.assign(start, read_stream(start, sizeof start));
    if (held_ == text::kUtf8Bom) held_.clear();
  }
  std::size_t given = 0;
  if (!held_.empty()) {
    given = std::min(n, held_.size());
    std::copy_n(held_.data(), given, dst);
    held_.erase(0, given);
  }
  return given + read_stream(dst + given, n - given);
}

std::size_t InputFile::read_stream(char* dst, std::size_t n) {
  std::size_t total = 0;
  while (total < n) {
    const auto ask = static_cast<unsigned>(std::min<std::size_t>(n - total, INT_MAX / 2));
    const int got = gzread(gz_->file, dst + total, ask);
    if (got > 0) total += static_cast<std::size_t>(got);
    if (got >= 0 && static_cast<unsigned>(got) == ask) continue;
    int err = Z_OK;
    const char* message = gzerror(gz_->file, &err);
    if (err == Z_ERRNO) throw RuntimeError(fmt::format("{}: read failed: {}", name_, std::strerror(errno)));
    // zlib's "unexpected end of file": the gzip stream stops before its end (its 8-byte CRC and length trailer
    // included), so what was read is not checked.
    if (err == Z_BUF_ERROR) throw InputError(fmt::format("{}: truncated: the gzip stream is cut off", name_));
    if (err != Z_OK) {
      // zlib's message starts with the file it was given, here "<fd:N>: ": ours names the file already.
      std::string_view what = message != nullptr ? message : "zlib error";
      if (what.starts_with("<fd:")) what.remove_prefix(std::min(what.size(), what.find(": ") + 2));
      throw InputError(fmt::format("{}: corrupt gzip data: {}", name_, what));
    }
    break;  // the end
  }
  return total;
}

void InputFile::rewind() {
  if (!regular_) throw RuntimeError(fmt::format("{}: cannot read it a second time (not a regular file)", name_));
  if (gzrewind(gz_->file) != 0) throw RuntimeError(fmt::format("{}: cannot rewind: {}", name_, std::strerror(errno)));
  at_start_ = true;
  held_.clear();
}

std::string read_all(const fs::path& path, const char* what) {
  InputFile in(path, what);
  std::string text;
  std::error_code ec;
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  if (in.regular()) {
    // A chunk more than the file: the read that finds its end asks for a whole chunk, and with the file's size
    // alone the string grew to twice it for that read (a 1 GB file peaked at 2 GB). A gzip file's text is
    // larger: the string grows.
    const auto size = fs::file_size(path, ec);
    if (!ec) text.reserve(static_cast<std::size_t>(size) + kChunk);
  }
  for (;;) {
    const std::size_t old = text.size();
    text.resize(old + kChunk);
    const std::size_t got = in.read(text.data() + old, kChunk);
    text.resize(old + got);
    if (got < kChunk) break;
  }
  return text;
}

}  // namespace asgd::sparse::io
