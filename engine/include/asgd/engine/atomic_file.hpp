// Writing a file so that a reader sees either the old file or the whole new
// one, never half of it, even if the writer is killed: the bytes go to
// PATH.tmp.PID.N (created exclusively), are fsync'ed, renamed over PATH, and
// the directory is fsync'ed. Temp files left by killed writers are removed
// the next time PATH is written.
//
// What PATH is decides how it is written: "-", /dev/stdout, /dev/stderr,
// /dev/fd/N and /proc/self/fd/N, and links to them, write to a copy of
// that descriptor (so `>> log` appends and a pipe gets the bytes); any
// other symlink is followed to its end (its target is replaced, the link
// stays; a dangling link gets its target; a loop is an InputError); a
// FIFO, character device (/dev/null) or anything else that is not a
// regular file is written in place, since it cannot be replaced by a rename.
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
  // Makes the new content visible at PATH. RuntimeError on failure: before
  // the rename PATH still holds the old content; a failure to sync the folder
  // after it is reported too, with the new content already in place.
  void commit();

  const std::filesystem::path& path() const noexcept { return path_; }

  // Throws the InputError the constructor would throw for `path`, without
  // writing it: for commands to check where their output goes before a long
  // run rather than after it. A temp file is created and removed beside
  // PATH; descriptors ("-", /dev/stdout, ...) and what is written in place
  // (a FIFO, a device) are not opened, since opening a pipe's writing end
  // and closing it would end its reader's input.
  static void check(const std::filesystem::path& path);

  // True when writing `path` would write to the file, pipe or terminal that
  // descriptor `fd` has open: `writes_to("-", STDOUT_FILENO)`, and as well
  // /dev/stdout, a link to it, or the very file stdout was redirected to.
  // Commands ask it to keep their report off the standard output that
  // carries their data.
  static bool writes_to(const std::filesystem::path& path, int fd);

  // False when `path` is written in place (a descriptor's name, a pipe, a
  // device): a second write there follows the first rather than replacing
  // it. A file rewritten during a run (a checkpoint) needs true.
  static bool replaces(const std::filesystem::path& path);

 private:
  void write_to_descriptor(int fd, const std::filesystem::path& given);
  void flush();
  [[noreturn]] void fail(const char* what, int err) const;

  std::filesystem::path path_, temp_;
  int fd_ = -1;
  bool in_place_ = false;  // not a regular file: written directly, no rename
  std::string buffer_;
  bool committed_ = false;
};

}  // namespace asgd
