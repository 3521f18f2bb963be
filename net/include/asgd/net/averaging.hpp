// Model averaging across ranks ("local SGD"): every rank trains its own shard
// with the single-node engine, and now and then the ranks replace their
// parameters by the average of everyone's,
//     x  :=  sum_r w_r x_r / sum_r w_r,
// with w_r = 1, or (weighted) the examples rank r trained since the previous
// average (or, Combine::sum, the sum of the ranks' updates). One allreduce of n + 2 floats per round: the weighted parameters,
// the weight, and a flag saying the rank has finished training.
//
// Two ways to drive it:
//  * average(w): blocking and collective (every epoch, or between chunks).
//  * start(K) / step_done() / stop(): a communication thread averages every
//    K local steps while the workers go on training. It snapshots x, runs
//    the allreduce, and adds (average - snapshot) to the live parameters, so
//    the updates workers made during the allreduce are kept rather than
//    overwritten (the same relaxed atomic writes as Hogwild!'s). Ranks that
//    finish early keep taking part in the others' rounds; stop() returns once
//    every rank has finished, after a last round that leaves all ranks with
//    the same parameters.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "asgd/engine/layout.hpp"
#include "asgd/net/allreduce.hpp"
#include "asgd/net/low_rank.hpp"
#include "asgd/net/periodic_rounds.hpp"

namespace asgd::net {

// How a round combines the ranks' parameters x_r, from the common point b
// the previous round left (the first round always takes the mean):
//   mean: x := sum_r w_r x_r / sum_r w_r  (model averaging; dense models)
//   sum:  x := b + sum_r (x_r - b)        (every rank's update is kept whole:
//         sparse models such as MF, where each rank moves a row by its share
//         of that row's examples, and a mean would divide the step by P)
enum class Combine { mean, sum };

struct AveragingOptions {
  bool weighted = false;  // mean only: weight ranks by examples trained since the last round
  Combine combine = Combine::mean;
  // Above 0: each round sends, for every matrix of the layout, rank-`low_rank` factors of the ranks' updates
  // since the common point, with error feedback (PowerSGD: LowRankMean), instead of every parameter. Needs the
  // layout, the common start of share() first, and no weights.
  std::size_t low_rank = 0;
};

class ModelAverager {
 public:
  // `params` is the rank's parameter vector (a ParamStore's data); it must
  // have the same size on every rank.
  // `layout`: the parameters' tensors, for AveragingOptions::low_rank (null without it).
  ModelAverager(Allreduce& allreduce, std::span<float> params, AveragingOptions options = {},
                const Layout* layout = nullptr);
  ~ModelAverager();  // stops the communication thread if stop() was not called
  ModelAverager(const ModelAverager&) = delete;
  ModelAverager& operator=(const ModelAverager&) = delete;

  // Collective and blocking: the parameters become the average now. `weight`
  // is this rank's weight when options.weighted (examples trained), ignored
  // otherwise. Not while the communication thread runs.
  void average(double weight = 1);

  // Collective and blocking: every rank's parameters become those of the one
  // rank that passes `root` = true, bit for bit (the others add -0.0, the
  // sum's exact identity; a mean of P equal values is not exact for every P).
  // The common start of a job (Horovod's broadcast of rank 0's parameters),
  // and the common point of Combine::sum. Counts as a round. Not while the
  // communication thread runs.
  void share(bool root);

  // Collective: starts the communication thread, which averages each time
  // this rank has done another `every_steps` = K steps (>= 1): round k
  // starts at step k K of every rank. While a round runs the workers go on
  // for up to K more steps; a worker that gets further waits in step_done
  // until the round ends. So the allreduce overlaps one period of compute,
  // and no rank gets more than about 2 K steps ahead of the slowest (a
  // bounded delay across ranks; without it, a rank that finished early
  // would leave the others to pull the model toward their own shards).
  // InputError for 0 or more than kMostEverySteps (step counts must not wrap; below 2^40, as
  // the apps compare K across ranks).
  void start(std::uint64_t every_steps);
  static constexpr std::uint64_t kMostEverySteps = PeriodicRounds::kMostEverySteps;
  // A worker finished a step of `examples` examples. Cheap, any thread; it
  // blocks only when this rank is a period ahead of the round in flight.
  void step_done(std::uint64_t examples) noexcept { rounds_thread_.step_done(examples); }
  // Collective: this rank will take no more steps. Returns when every rank
  // has stopped and the parameters are the same on all; rethrows an error
  // of the communication thread.
  void stop();
  // Collective and blocking, once no worker runs (after stop(), or the last average()): with low_rank, one
  // round of every parameter that sends what the factors left out (each rank's kept error) with any update
  // since the last round, so the job ends on the mean of every update, the same on every rank. Nothing
  // without low_rank, or after the first call. Not while the communication thread runs.
  void flush();

  std::uint64_t rounds() const noexcept { return rounds_.load(std::memory_order_relaxed); }
  // Floats this rank put into allreduces, and (with low_rank) what plain rounds would have put.
  std::uint64_t floats_sent() const noexcept { return sent_.load(std::memory_order_relaxed); }
  std::uint64_t floats_dense() const noexcept { return dense_.load(std::memory_order_relaxed); }
  // Time spent inside allreduce calls (overlapped with training when the
  // communication thread runs).
  double communication_seconds() const noexcept;

 private:
  // One round; `finished`: this rank is done. Returns true when every rank is.
  bool round(double weight, bool finished, bool overlap);
  // The same with AveragingOptions::low_rank, from the common point base_.
  bool low_rank_round(bool finished, bool overlap);
  // Puts `target` into the parameters: whole, or (overlap) as a correction of the snapshot, so the steps the
  // workers took since it are kept.
  void apply(std::span<const float> target, bool overlap);
  // The allreduce, its time added to comm_ns_; `plain`: a round of every parameter (counted in floats_dense).
  void timed_sum(std::span<float> data, bool plain = true);

  Allreduce& allreduce_;
  std::span<float> params_;
  AveragingOptions options_;
  std::vector<float> snapshot_, buffer_;
  std::vector<float> base_;  // the common point of the last round (Combine::sum, low_rank)
  std::unique_ptr<LowRankMean> low_rank_;
  bool flushed_ = false;
  std::atomic<std::uint64_t> sent_{0}, dense_{0};

  std::atomic<std::uint64_t> rounds_{0};
  std::atomic<std::int64_t> comm_ns_{0};
  PeriodicRounds rounds_thread_;  // last: its thread ends before the members it uses
};

}  // namespace asgd::net
