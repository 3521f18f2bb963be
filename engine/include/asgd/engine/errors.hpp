// Error types thrown at asgd's edges (files, flags, shared segments, MPI).
// InputError: the caller gave something wrong (exit 2 in the CLI).
// RuntimeError: something failed while running (exit 1 in the CLI).
#pragma once

#include <stdexcept>
#include <string>

namespace asgd {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input: a malformed file, a wrong flag, a segment of another layout.
// The message says where (file:line, flag name, segment name) and what was expected.
class InputError : public Error {
 public:
  using Error::Error;
};

// A shared segment that holds another layout than the one asked for: an InputError that a caller may add to
// (linear train says which flag sizes the model).
class LayoutMismatch : public InputError {
 public:
  using InputError::InputError;
};

// A failure while running: I/O error, non-finite loss, a worker that failed.
class RuntimeError : public Error {
 public:
  using Error::Error;
};

}  // namespace asgd
