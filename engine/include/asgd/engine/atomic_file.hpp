// Writing a file so that a reader sees either the old file or the whole new
// one, never half of it, even if the writer is killed: the bytes go to
// PATH.tmp.PID.N (created exclusively), are fsync'ed, renamed over PATH, and
// the directory is fsync'ed. Temp files left by killed writers are removed
// the next time PATH is written.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace asgd {

class AtomicFile {
 public:
  // InputError when `path` is a directory or its folder cannot take a file.
  explicit AtomicFile(std::filesystem::path path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temp file unless committed; never throws

  // Buffered; RuntimeError (naming PATH) when the disk refuses.
  void write(const void* data, std::size_t n);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Makes the new content visible at PATH. RuntimeError on failure (PATH then
  // still holds the old content).
  void commit();

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  void flush();
  [[noreturn]] void fail(const char* what, int err) const;

  std::filesystem::path path_, temp_;
  int fd_ = -1;
  std::string buffer_;
  bool committed_ = false;
};

}  // namespace asgd
