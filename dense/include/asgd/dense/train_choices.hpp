// The trainer's settings as a user states them: words (the staleness bound,
// compensation, the schedule) and the threads in all, read into TrainOptions
// by the rules that tie them to the other settings (tau, workers).
#pragma once

#include <cstddef>
#include <string>

#include "asgd/dense/trainer.hpp"

namespace asgd::dense {

struct TrainChoices {
  std::string tau = "0";              // 0 synchronous, N bounded, inf unbounded (parse_tau)
  std::string compensate = "auto";    // auto, on or off (see apply)
  std::string schedule = "constant";  // constant, or cosine (to 0 over the run)
  // Threads in all, each worker's GEMMs on threads / workers of them (a multiple of the workers); 0: one per worker.
  std::size_t threads = 0;

  // Sets o.tau, o.compensate, o.schedule and (with threads) o.gemm_threads, from these and o.workers.
  // Momentum 0.9 on views a few updates old diverges (bench/RESULTS.md, "Accuracy vs tau"), so auto compensates
  // for a bounded tau > 0; inf's staleness is set by timing, not the bound, so there only on does. Tau 0 has no
  // staleness: compensation is off whatever was asked (the files record "off"; compensation_moot says when "on"
  // was asked).
  // InputError naming the field (TrainChoices::tau, ...) or TrainOptions::workers (0 beside threads).
  void apply(TrainOptions& o) const;
  // "on" asked at tau 0, where apply leaves compensation off (a caller may say so); InputError for a bad tau.
  bool compensation_moot() const;
};

}  // namespace asgd::dense
