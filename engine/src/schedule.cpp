#include "asgd/engine/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd {

ScheduleKind parse_schedule_kind(std::string_view name) {
  if (name == "constant") return ScheduleKind::constant;
  if (name == "linear") return ScheduleKind::linear;
  if (name == "inverse-sqrt" || name == "inverse_sqrt") return ScheduleKind::inverse_sqrt;
  throw InputError(fmt::format("schedule '{}': expected constant, linear or inverse-sqrt", name));
}

std::string_view to_string(ScheduleKind k) noexcept {
  switch (k) {
    case ScheduleKind::constant: return "constant";
    case ScheduleKind::linear: return "linear";
    case ScheduleKind::inverse_sqrt: return "inverse-sqrt";
  }
  return "?";
}

float Schedule::rate(double progress, double epochs_elapsed, std::uint64_t staleness) const noexcept {
  progress = std::clamp(progress, 0.0, 1.0);
  double r = lr;
  switch (kind) {
    case ScheduleKind::constant: break;
    case ScheduleKind::linear: r = lr * std::max(1.0 - progress, static_cast<double>(floor)); break;
    case ScheduleKind::inverse_sqrt: r = lr / std::sqrt(1.0 + decay * std::max(0.0, epochs_elapsed)); break;
  }
  if (warmup > 0.0f && progress < warmup) {
    const double ramp = progress / warmup;
    r *= warmup_start + (1.0 - warmup_start) * ramp;
  }
  if (staleness_aware) r /= static_cast<double>(staleness) + 1.0;
  return static_cast<float>(r);
}

void Schedule::validate() const {
  if (!(lr > 0.0f) || !std::isfinite(lr)) throw InputError(fmt::format("Schedule::lr {}: expected > 0", lr));
  if (!(floor >= 0.0f && floor <= 1.0f)) throw InputError(fmt::format("Schedule::floor {}: expected 0 to 1", floor));
  if (!(decay >= 0.0f) || !std::isfinite(decay))
    throw InputError(fmt::format("Schedule::decay {}: expected finite and >= 0", decay));
  if (!(warmup >= 0.0f && warmup < 1.0f)) throw InputError(fmt::format("Schedule::warmup {}: expected [0, 1)", warmup));
  if (!(warmup_start > 0.0f && warmup_start <= 1.0f)) {
    throw InputError(fmt::format("Schedule::warmup_start {}: expected (0, 1]", warmup_start));
  }
  if (adagrad && row_adagrad) throw InputError("Schedule::adagrad and Schedule::row_adagrad: choose one, not both");
  if (row_head > 0 && !row_adagrad) throw InputError("Schedule::row_head: for Schedule::row_adagrad only");
  if (row_head >= kMaxRowHead) throw InputError(fmt::format("Schedule::row_head {}: expected below {}", row_head, kMaxRowHead));
  if (!(adagrad_eps > 0.0f) || !std::isfinite(adagrad_eps))
    throw InputError(fmt::format("Schedule::adagrad_eps {}: expected finite and > 0", adagrad_eps));
}

std::string Schedule::describe() const {
  std::string s = fmt::format("{} lr {}", to_string(kind), lr);
  if (kind == ScheduleKind::linear) s += fmt::format(" floor {}", floor);
  if (kind == ScheduleKind::inverse_sqrt) s += fmt::format(" decay {}", decay);
  if (warmup > 0.0f) s += fmt::format(", warm-up {:.0f}%", 100.0 * warmup);
  if (staleness_aware) s += ", staleness-aware";
  if (adagrad) s += ", AdaGrad";
  if (row_adagrad) s += row_head > 0 ? fmt::format(", row AdaGrad (head {})", row_head) : ", row AdaGrad";
  return s;
}

}  // namespace asgd
