// The message of the exception `f` throws, or "(no exception)": tests check
// that an error says where and what.
#pragma once

#include <exception>
#include <string>

namespace asgd::testing {

inline std::string message_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace asgd::testing
