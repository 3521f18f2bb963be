// Input files of sparse/'s readers, gzip or not (private to the library).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "asgd/engine/available_memory.hpp"

namespace asgd::sparse::io {

// A file read front to back through zlib, which tells gzip from plain bytes by the first two (as `gzip -dc` and
// gensim do; plain files pass through unchanged), so every reader takes a corpus, ratings, libsvm or vectors file
// gzipped as it is. "-" is standard input, named "stdin". Gzip members written one after another read as one
// stream; bytes after the last member that are not gzip are ignored, as zlib does. A UTF-8 byte-order mark at
// the start of the text (Notepad's, Excel's "CSV UTF-8") is skipped, as Python's utf-8-sig does, so no reader
// takes it into its first word or field.
class InputFile {
 public:
  // InputError naming `what` when the path is a directory or cannot be opened.
  InputFile(const std::filesystem::path& path, const char* what);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Up to n bytes of text; fewer only at its end. InputError for corrupt gzip data, and for a gzip stream cut
  // off before its end; RuntimeError when reading fails.
  std::size_t read(char* dst, std::size_t n);
  // Back to the start. Only a regular file (not a pipe) can be read again: RuntimeError otherwise.
  void rewind();

  const std::string& name() const noexcept { return name_; }
  bool regular() const noexcept { return regular_; }  // a regular file: rewind() works

 private:
  std::size_t read_stream(char* dst, std::size_t n);  // zlib's bytes, the mark and all

  std::string name_;
  struct Gz;
  std::unique_ptr<Gz> gz_;
  bool regular_ = false;
  bool at_start_ = true;  // the mark is looked for before the first read, and again after rewind()
  std::string held_;      // bytes read to look for it that were not one: given out first
};

// The longest line read_all takes by default (64 MiB): far beyond any line of text a reader here parses (a libsvm
// line of a million features is about 15 MB), near enough that a file with no newline (a binary file without NUL
// bytes, or text with old Mac '\r' line ends) is refused after that much, not after the whole file.
inline constexpr std::size_t kMaxLineBytes = std::size_t{64} << 20;

// A file's text in memory. Not a std::string: growing one zero-fills the bytes a read then overwrites (reading a
// 180 MB ratings file spent 0.23 s in that memset alone).
class Text {
 public:
  std::string_view view() const noexcept { return {bytes_.get(), size_}; }
  operator std::string_view() const noexcept { return view(); }  // NOLINT(google-explicit-constructor)
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return capacity_; }
  char* data() noexcept { return bytes_.get(); }
  // Room for n bytes (the text kept), on huge pages where the kernel allows.
  void reserve(std::size_t n);
  void resize_within(std::size_t n) noexcept { size_ = n; }  // n <= capacity(); bytes past the old size unset

 private:
  std::unique_ptr<char[]> bytes_;
  std::size_t size_ = 0, capacity_ = 0;
};

// The whole text of a file, gzip or not, judged as it streams in, so that binary or endless input is refused after
// a bounded amount: InputError "NAME:LINE: byte N is NUL: this looks like a binary file, not WHAT" at the chunk
// (1 MiB) holding the first NUL byte; "NAME:LINE: line longer than MAX bytes, the limit for WHAT" within a chunk
// of a line passing `max_line` (the parser checks every line exactly); and, before the text grows past the memory
// there is (asgd::available_memory), an InputError naming the bytes rather than std::bad_alloc.
Text read_all(const std::filesystem::path& path, const char* what, std::size_t max_line = kMaxLineBytes);

// InputError "NAME:LINE: line longer than MAX bytes, the limit for WHAT", and where the bytes hold a NUL, "; byte N
// is NUL: this looks like a binary file": what every reader says of a line too long (`start`: the offset of that
// line's first byte, `line`: its bytes as far as they were read). Out of line, so that a parser's check of each line
// costs it a comparison and nothing more.
[[noreturn]] void refuse_long_line(std::string_view name, std::uint64_t line_no, std::uint64_t start,
                                   std::string_view line, std::size_t max_line, std::string_view what);

// Lines of a text file streamed through a buffer of about `max_line` bytes, for a reader that parses line by line:
// its memory is what it keeps, not the text, and a line with no end is refused (refuse_long_line) after `max_line`
// bytes. NUL bytes are the caller's to judge (they arrive within lines).
class LineReader {
 public:
  LineReader(const std::filesystem::path& path, const char* what, std::size_t max_line);

  // The next line without its '\n' (valid until the next call); false at the end of the file.
  bool next(std::string_view& line);
  std::uint64_t line_no() const noexcept { return line_no_; }  // of the line next() gave last, from 1
  const std::string& name() const noexcept { return file_.name(); }

 private:
  bool fill();  // more bytes after end_; false at the end of the file

  InputFile file_;
  std::string what_;
  std::size_t max_line_;
  std::vector<char> buffer_;
  std::size_t pos_ = 0, end_ = 0;
  std::uint64_t line_no_ = 0, offset_ = 0;  // offset_: of buffer_[pos_] in the text
  bool eof_ = false;
};

// Memory that grows with the input (a pipe held whole, a vocabulary), checked at each doubling: refused (InputError
// from require_memory, `what()` naming the input) once holding as much again would pass the memory available, so
// that input without end stops with a message, not std::bad_alloc. One look at /proc per doubling.
class GrowthCheck {
 public:
  explicit GrowthCheck(std::uint64_t first_check = std::uint64_t{64} << 20) : next_(first_check) {}
  template <class What>
  void operator()(std::uint64_t bytes_held, What&& what) {
    if (bytes_held < next_) return;
    require_memory(bytes_held, what());
    next_ = 2 * bytes_held;
  }

 private:
  std::uint64_t next_;
};

// How errors name a path: "stdin" for "-".
inline std::string display_name(const std::filesystem::path& path) { return path == "-" ? "stdin" : path.string(); }

}  // namespace asgd::sparse::io
