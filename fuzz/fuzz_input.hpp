// What every fuzz target shares: a file to hand a reader that takes a path (the input written into memory, not
// onto the disk), and the rule for what a reader may answer to a bad input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace asgd::fuzz {

// One file, rewritten for every input: a memfd named by its /proc/self/fd path (a temp file where memfd_create is
// missing), so a reader opens, stats and reads it as any regular file, and no input touches the disk.
class InputFile {
 public:
  explicit InputFile(const char* name);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Replaces the file's bytes with `bytes`; returns the path to read.
  const std::filesystem::path& write(std::span<const std::uint8_t> bytes);
  const std::filesystem::path& write(std::string_view bytes);
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  int fd_ = -1;
  std::filesystem::path path_;
  std::filesystem::path temp_;  // the temp file to remove, when not a memfd
};

// The input's bytes as text.
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A finding that is no crash of its own (a broken invariant, an error that escapes as the wrong type): prints
// "asgd fuzz: WHAT" and aborts, which libFuzzer reports as a crash with this input.
[[noreturn]] void finding(const std::string& what);

// Checks `ok` (an invariant of what a reader returned); finding(what) when it does not hold.
inline void require(bool ok, const char* what) {
  if (!ok) finding(what);
}

// Calls read(); true when it returned. An asgd::InputError or asgd::RuntimeError is a reader's answer to bad
// input (false): its message must name one of `inputs` (the file, the segment: what a user must look at), as
// every reader's error does; no name is asked for when `inputs` is empty. Any other exception (std::bad_alloc, a
// JSON library's, std::out_of_range) is a finding.
template <class Read>
bool reads(std::initializer_list<std::string_view> inputs, Read&& read);

// reads()' judgment of an exception caught in it (rethrown here).
bool judge_current_exception(std::initializer_list<std::string_view> inputs);

template <class Read>
bool reads(std::initializer_list<std::string_view> inputs, Read&& read) {
  try {
    read();
    return true;
  } catch (...) {
    return judge_current_exception(inputs);
  }
}

}  // namespace asgd::fuzz
