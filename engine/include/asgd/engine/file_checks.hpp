// Checks of a program's file arguments before it reads or trains: an output
// that could not be written, one that names an input or another output, two
// outputs on stdout, stdin read twice. Each error names the argument as the
// caller calls it (a flag, an option), `what`, so a typo costs nothing rather
// than a whole run.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace asgd {

// Before training: InputError "WHAT: PATH: cannot write here: ..." when the
// file `path` (empty: none) could not be written, so a typo in an output
// path costs nothing rather than the whole run (AtomicFile::check).
void check_output(std::string_view what, const std::string& path);
// Before reading or training: InputError "WHAT: PATH is also OTHER's file
// (...)" when the output `path` names the same file as one of `others`
// (what, path) pairs: an input it would destroy, or another output of a
// different format. Through links and other spellings too (the same inode,
// or for files not there yet the same canonical path); empty paths, "-" and
// what is not a regular file (stdin, stdout, a pipe, a terminal) are never
// the same.
void check_distinct(std::string_view what, const std::string& path,
                    std::initializer_list<std::pair<std::string_view, std::string_view>> others);
// Before anything is written: InputError "B: stdout is A's already" when two
// of the (what, path) outputs both write to stdout ("-", /dev/stdout, or the
// file stdout was redirected to): their bytes would run into one another.
void check_one_on_stdout(std::initializer_list<std::pair<std::string_view, std::string_view>> outputs);

// Whether an input path reads standard input ("-" or /dev/stdin).
bool reads_stdin(std::string_view path) noexcept;
// Standard input read by one input at most: a second reader would find it spent and read nothing.
void check_one_stdin(std::initializer_list<std::pair<std::string_view, std::string_view>> inputs);

// check_output for a file rewritten during the run (a checkpoint after every
// epoch): InputError too when `path` is stdout, a pipe or a device, where
// each write would follow the last and none could be read back.
void check_rewritten_output(std::string_view what, const std::string& path);

}  // namespace asgd
