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
#include "asgd/engine/huge_pages.hpp"
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

namespace {

// The 1-based line of the byte at `offset` of `text`.
std::uint64_t line_at(std::string_view text, std::size_t offset) {
  const auto newlines = std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
  return 1 + static_cast<std::uint64_t>(newlines);
}

// Room for `bytes` of text in `text`, doubling its capacity (as the string would), checked against the memory there
// is first: a file larger than the memory is refused before it is read, an endless pipe once it has filled it.
void make_room(Text& text, std::size_t bytes, const std::string& name, const char* what) {
  if (bytes <= text.capacity()) return;
  const std::size_t capacity = std::max(bytes, 2 * text.capacity());
  const AvailableMemory available = available_memory();
  if (capacity <= available.bytes) {
    text.reserve(capacity);
  } else if (text.size() == 0) {
    require_memory(capacity, fmt::format("{}: reading {} whole", name, what), available);
  } else {
    require_memory(capacity, fmt::format("{}:{}: reading {} whole (an endless input?), {} so far", name,
                                         line_at(text, text.size()), what, format_bytes(text.size())),
                   available);
  }
}

// The checks of one chunk just read, text[old..]: a NUL byte, a line past max_line. `line_start`: where the line
// being read starts, moved past the chunk's last newline.
void judge_chunk(std::string_view text, std::size_t old, std::size_t& line_start, std::size_t max_line,
                 const std::string& name, const char* what) {
  const char* chunk = text.data() + old;
  const std::size_t n = text.size() - old;
  if (const void* nul = std::memchr(chunk, 0, n); nul != nullptr) {
    const auto at = static_cast<std::size_t>(static_cast<const char*>(nul) - text.data());
    throw InputError(fmt::format("{}:{}: byte {} is NUL: this looks like a binary file, not {}", name,
                                 line_at(text, at), at, what));
  }
  if (const void* nl = ::memrchr(chunk, '\n', n); nl != nullptr)
    line_start = static_cast<std::size_t>(static_cast<const char*>(nl) - text.data()) + 1;
  if (text.size() - line_start > max_line) {
    refuse_long_line(name, line_at(text, line_start), line_start, text.substr(line_start), max_line, what);
  }
}

}  // namespace

void refuse_long_line(std::string_view name, std::uint64_t line_no, std::uint64_t start, std::string_view line,
                      std::size_t max_line, std::string_view what) {
  std::string message =
      fmt::format("{}:{}: line longer than {} bytes, the limit for {}", name, line_no, max_line, what);
  if (const auto nul = line.find('\0'); nul != std::string_view::npos)
    message += fmt::format("; byte {} is NUL: this looks like a binary file", start + nul);
  throw InputError(message);
}

void Text::reserve(std::size_t n) {
  if (n <= capacity_) return;
  std::unique_ptr<char[]> bigger(new char[n]);  // not zero-filled
  advise_huge_pages(bigger.get(), n);
  if (size_ > 0) std::memcpy(bigger.get(), bytes_.get(), size_);
  bytes_ = std::move(bigger);
  capacity_ = n;
}

Text read_all(const fs::path& path, const char* what, std::size_t max_line) {
  InputFile in(path, what);
  Text text;
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  if (in.regular()) {
    // A chunk more than the file: the read that finds its end asks for a whole chunk, and with the file's size
    // alone the string grew to twice it for that read (a 1 GB file peaked at 2 GB). A gzip file's text is
    // larger: the string grows.
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (!ec) make_room(text, static_cast<std::size_t>(size) + kChunk, in.name(), what);
  }
  std::size_t line_start = 0;
  for (;;) {
    const std::size_t old = text.size();
    make_room(text, old + kChunk, in.name(), what);
    const std::size_t got = in.read(text.data() + old, kChunk);
    text.resize_within(old + got);
    judge_chunk(text, old, line_start, max_line, in.name(), what);
    if (got < kChunk) break;
  }
  return text;
}

LineReader::LineReader(const fs::path& path, const char* what, std::size_t max_line)
    : file_(path, what), what_(what), max_line_(max_line), buffer_(max_line + (std::size_t{64} << 10)) {}

bool LineReader::fill() {
  if (eof_) return false;
  if (pos_ > 0) {  // the line begun so far to the front: room for a chunk after it
    std::memmove(buffer_.data(), buffer_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
  }
  const std::size_t got = file_.read(buffer_.data() + end_, buffer_.size() - end_);
  end_ += got;
  eof_ = got == 0;
  return got > 0;
}

bool LineReader::next(std::string_view& line) {
  std::size_t searched = pos_;  // no newline in [pos_, searched)
  for (;;) {
    const void* nl = std::memchr(buffer_.data() + searched, '\n', end_ - searched);
    const std::size_t eol = nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - buffer_.data())
                                          : end_;
    const std::string_view so_far(buffer_.data() + pos_, eol - pos_);
    if (so_far.size() > max_line_)
      refuse_long_line(name(), line_no_ + 1, offset_, so_far, max_line_, what_);
    if (nl != nullptr || (eof_ && eol > pos_)) {
      line = so_far;
      ++line_no_;
      const std::size_t consumed = std::min(eol + 1, end_) - pos_;
      pos_ += consumed;
      offset_ += consumed;
      return true;
    }
    if (eof_) return false;
    const std::size_t scanned = end_ - pos_;  // fill() may move the line to the front
    fill();
    searched = pos_ + scanned;
  }
}

}  // namespace asgd::sparse::io
