// OSError for a file the library could not read or write: the library says what went wrong (InputError), this
// says which errno a Python caller sees (FileNotFoundError for a missing file, IsADirectoryError, ...).
#pragma once

#include <pybind11/pybind11.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace asgd::python {

// OSError(err, message, path): Python picks the subclass (FileNotFoundError for ENOENT).
[[noreturn]] inline void raise_os_error(int err, const std::string& message, const std::filesystem::path& path) {
  namespace py = pybind11;
  const py::object error = py::module_::import("builtins").attr("OSError")(err, message, path.string());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

// Why `path` cannot be read or written as a file, as an errno; 0 when it can.
inline int file_errno(const std::filesystem::path& path, bool write) {
  std::error_code ec;
  const auto target = write ? (path.has_parent_path() ? path.parent_path() : ".") : path;
  if (!std::filesystem::exists(target, ec)) return ENOENT;
  if (std::filesystem::is_directory(path, ec)) return EISDIR;
  if (write) return std::filesystem::is_directory(target, ec) ? 0 : ENOTDIR;
  if (!std::filesystem::is_regular_file(path, ec)) return EINVAL;
  return std::ifstream(path).good() ? 0 : EACCES;
}

// Raises OSError when `path` cannot be read (write: written); returns otherwise, for the caller to rethrow the
// library's error as it is.
inline void raise_if_file_error(const std::string& message, const std::filesystem::path& path, bool write) {
  if (const int err = file_errno(path, write)) raise_os_error(err, message, path);
}

}  // namespace asgd::python
