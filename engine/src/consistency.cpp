#include "asgd/engine/consistency.hpp"

#include <fmt/format.h>

#include "asgd/engine/errors.hpp"

namespace asgd {

Consistency parse_consistency(std::string_view name) {
  if (name == "racy" || name == "hogwild") return Consistency::racy;
  if (name == "atomic") return Consistency::atomic;
  if (name == "locked") return Consistency::locked;
  throw InputError(fmt::format("consistency '{}': expected racy (hogwild), atomic or locked", name));
}

std::string_view to_string(Consistency c) noexcept {
  switch (c) {
    case Consistency::racy: return "racy";
    case Consistency::atomic: return "atomic";
    case Consistency::locked: return "locked";
  }
  return "?";
}

Locked::Locked(std::size_t stripes)
    : count_(stripes == 0 ? 1 : stripes), stripes_(std::make_unique<Stripe[]>(count_)) {}

}  // namespace asgd
