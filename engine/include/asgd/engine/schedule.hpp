// Learning-rate schedules: how the step size moves with progress and staleness.
// A Schedule is plain validated data; the Trainer asks it for a rate once per
// step (not per example). AdaGrad changes the per-parameter step rule instead
// and lives in the update sink (update_sink.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace asgd {

enum class ScheduleKind {
  constant,      // lr
  linear,        // lr * max(1 - progress, floor)            (word2vec)
  inverse_sqrt,  // lr / sqrt(1 + decay * epochs_elapsed)
};

ScheduleKind parse_schedule_kind(std::string_view name);  // throws InputError
std::string_view to_string(ScheduleKind k) noexcept;

struct Schedule {
  ScheduleKind kind = ScheduleKind::constant;
  float lr = 0.1f;
  // linear: the rate never falls below lr * floor (word2vec uses 1e-4).
  float floor = 1e-4f;
  // inverse_sqrt: decay per epoch.
  float decay = 1.0f;
  // Warm-up (Goyal et al. 2017): the first `warmup` fraction of training ramps
  // the rate linearly from lr * warmup_start to the schedule's value.
  float warmup = 0.0f;
  float warmup_start = 0.1f;
  // Staleness-aware (Zhang et al. 2016): divide by (observed staleness + 1),
  // the staleness of the worker's previous step.
  bool staleness_aware = false;
  // AdaGrad per parameter (Downpour SGD, LIBMF 2): w -= rate * g / sqrt(G + eps).
  bool adagrad = false;
  float adagrad_eps = 1e-8f;
  // AdaGrad per row (LIBMF 2's rule, Chin et al. 2015): one accumulator per
  // row that a Problem updates as a whole (a factor row; a scalar is a row
  // of one), rate lr / sqrt(1 + G_row), G_row += the step's mean squared
  // gradient. Exclusive with `adagrad`.
  bool row_adagrad = false;
  // With row_adagrad and > 0: a row's first row_head parameters and the rest
  // keep an accumulator each (LIBMF 2: 8, its first SIMD block of factors).
  // Checkpoints record it (below kMaxRowHead), and a resume with another head
  // is refused.
  std::size_t row_head = 0;
  // Whether the run keeps AdaGrad sums (either kind): state a checkpoint carries.
  bool has_adagrad() const noexcept { return adagrad || row_adagrad; }

  // progress: fraction of all training done, in [0, 1]; epochs_elapsed: the
  // same in epochs; staleness: the updates of other workers that landed
  // during this worker's previous step (see trainer.hpp).
  float rate(double progress, double epochs_elapsed, std::uint64_t staleness) const noexcept;

  // Throws InputError("schedule: ...") for a non-positive lr, floor outside
  // [0, 1], warm-up outside [0, 1), negative decay or eps.
  void validate() const;
  std::string describe() const;
};

}  // namespace asgd
