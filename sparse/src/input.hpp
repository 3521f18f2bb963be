// Input files of sparse/'s readers, gzip or not (private to the library).
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

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

// The whole text of a file, gzip or not.
std::string read_all(const std::filesystem::path& path, const char* what);

// How errors name a path: "stdin" for "-".
inline std::string display_name(const std::filesystem::path& path) { return path == "-" ? "stdin" : path.string(); }

}  // namespace asgd::sparse::io
