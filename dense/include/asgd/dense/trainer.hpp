// Training a dense Network with bounded-delay block updates: the engine's
// BlockTrainer (asgd/engine/block_trainer.hpp: workers, the gate, views,
// momentum, staleness compensation) runs the steps; this file supplies the
// minibatch gradients (shuffled batches of a Dataset through the Network)
// and measures test accuracy after each epoch.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "asgd/dense/mnist.hpp"
#include "asgd/dense/network.hpp"
#include "asgd/engine/block_trainer.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/param_store.hpp"

namespace asgd::dense {

// The engine's options (workers, tau, lr, momentum, weight decay,
// compensation, schedule: see block_trainer.hpp) plus the epochs over a
// Dataset. The schedule's length and position are set by train() from the
// epochs.
struct TrainOptions : BlockTrainOptions {
  std::size_t epochs = 1;
  std::size_t batch = 64;
  // Threads in each worker's GEMMs (Eigen with OpenMP; 1 without it).
  std::size_t gemm_threads = 1;
  std::size_t total_epochs = 0;  // the run's length for the schedule (0: epochs); set for resumed runs
  std::uint64_t seed = 1;       // epoch shuffles
  std::size_t first_epoch = 0;  // for resumed runs: shuffles continue from here
  // Called after each epoch's training with every worker idle, before the
  // test accuracy is measured and the report is made: it may change the
  // parameters and the momentum buffer (under mpirun: average the
  // parameters across the ranks), and the next epoch starts from what it
  // leaves. The GPU trainer copies both to the host before it and back after.
  std::function<void()> after_epoch;
  void validate() const;        // InputError naming the option
  // The engine's part for an epoch of `batches` minibatches, with the
  // schedule's place in the whole run (first_update, total_updates) derived
  // from first_epoch and total_epochs: what the CPU and GPU trainers run.
  BlockTrainOptions block_options(std::size_t batches) const;
};

// The engine's epoch statistics (seconds of training without evaluation,
// mean minibatch loss, staleness, view age, the momentum and rate in use at
// the end) plus what the dense trainers add.
struct EpochReport : BlockEpochStats {
  std::size_t epoch = 0;      // 1-based
  double images_per_second = 0;
  double test_accuracy = -1;  // -1 without a test set
  std::size_t graph_steps = 0;  // GPU with cuda_graphs: minibatch steps launched as one CUDA graph
};

struct EvalResult {
  double accuracy = 0, loss = 0;
  std::vector<std::size_t> confusion;  // classes x classes, row = true label
  std::size_t threads = 1;             // what ran (no more than there were batches)
};

// InputError naming `what` unless `data` fits `net`: one-channel images of the
// network's rows and columns (for several channels, as many pixels), labels
// below its classes.
void check_images(const Network& net, const Dataset& data, std::string_view what);

// The seed of epoch `epoch`'s shuffle (shuffled_indices), shared by the
// CPU and GPU trainers so both visit the same minibatches.
std::uint64_t epoch_seed(std::uint64_t seed, std::size_t epoch) noexcept;

// Accuracy, mean loss and confusion matrix of `params` on `data`, in
// batches of `batch`, on `threads` threads.
EvalResult evaluate(const Network& net, const float* params, const Dataset& data, std::size_t batch = 1000,
                    std::size_t threads = 1);

// evaluate() timed: `repeats` passes (the first warms the caches), each one's seconds kept.
struct TimedEvalOptions {
  std::size_t batch = 1000;  // images a thread takes at a time
  std::size_t threads = 1;   // the CPU's (the GPU evaluates in one stream)
  std::size_t repeats = 1;   // timed passes; the median's rate is the speed
  void validate() const;     // InputError naming the option for a count of 0 (refused rather than taken as 1)
};
struct TimedEval {
  EvalResult result;
  std::vector<double> seconds;  // of each pass
  // The median pass's rate over `images` images, in images/s.
  double images_per_second(std::size_t images) const;
};
TimedEval evaluate_timed(const Network& net, const float* params, const Dataset& data,
                         const TimedEvalOptions& options);

// After epoch `epoch` (1-based), on the CPU and the GPU alike: RuntimeError
// when a parameter is not finite, or the test loss (when measured) is not:
// finite parameters can still overflow the network (--lr 1e30 ends near
// 1e30), and either would be written as the model.
inline void check_not_diverged(std::span<const float> params, const EvalResult* test, std::size_t epoch) {
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!std::isfinite(params[i]))
      throw RuntimeError(fmt::format("training diverged: parameter {} is {} after epoch {} (lower TrainOptions::lr)", i,
                                     params[i], epoch));
  if (test != nullptr && !std::isfinite(test->loss))
    throw RuntimeError(fmt::format("training diverged: the test loss is {} after epoch {} (the parameters "
                                   "overflow the network; lower TrainOptions::lr)",
                                   test->loss, epoch));
}

// Trains `params` (net.layout(); initialised by the caller) on `train`.
// `momentum_buffer` (layout().size() floats, zero to start) carries the
// optimiser state across calls (and checkpoints). After each epoch
// `on_epoch` gets the report (test accuracy measured when `test` is given).
// With options.stop set mid-run the epoch under way stops unfinished (see
// BlockTrainOptions::stop) and train returns the reports of the epochs
// finished before it: fewer than options.epochs (the parameters hold the
// part-epoch's updates too). Throws RuntimeError if the loss becomes NaN or
// infinite.
std::vector<EpochReport> train(const Network& net, ParamStore& params, std::vector<float>& momentum_buffer,
                               const Dataset& train, const Dataset* test, const TrainOptions& options,
                               const std::function<void(const EpochReport&)>& on_epoch = {});

// A function that trains as train() does: train itself, or another
// device's (gpu::trainer), for the calls that take the device as a value (dense::Fit).
using TrainFunction = std::function<std::vector<EpochReport>(
    const Network&, ParamStore&, std::vector<float>&, const Dataset&, const Dataset*, const TrainOptions&,
    const std::function<void(const EpochReport&)>&)>;

}  // namespace asgd::dense
