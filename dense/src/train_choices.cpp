#include "asgd/dense/train_choices.hpp"

#include <fmt/format.h>

#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::dense {
namespace {

std::uint64_t parsed_tau(const std::string& tau) {
  try {
    return parse_tau(tau);
  } catch (const InputError& e) {
    throw InputError(fmt::format("TrainChoices::tau: {}", e.what()));
  }
}

bool compensation(const std::string& mode, std::uint64_t tau) {
  if (mode != "auto" && mode != "on" && mode != "off")
    throw InputError(fmt::format("TrainChoices::compensate: expected auto, on or off, got '{}'", mode));
  return tau > 0 && (mode == "on" || (mode == "auto" && tau != kUnbounded));
}

}  // namespace

void TrainChoices::apply(TrainOptions& o) const {
  o.tau = parsed_tau(tau);
  o.compensate = compensation(compensate, o.tau);
  if (schedule == "cosine") {
    o.schedule = TrainOptions::Schedule::cosine;
  } else if (schedule == "constant") {
    o.schedule = TrainOptions::Schedule::constant;
  } else {
    throw InputError(fmt::format("TrainChoices::schedule: expected constant or cosine, got '{}'", schedule));
  }
  if (threads != 0) {
    if (o.workers == 0) throw InputError("TrainOptions::workers 0: expected at least 1");
    if (threads % o.workers != 0)
      throw InputError(fmt::format("TrainChoices::threads {}: must be a multiple of TrainOptions::workers {}",
                                   threads, o.workers));
    o.gemm_threads = threads / o.workers;
  }
}

bool TrainChoices::compensation_moot() const { return compensate == "on" && parsed_tau(tau) == 0; }

}  // namespace asgd::dense
