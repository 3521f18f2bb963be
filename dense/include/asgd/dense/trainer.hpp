// Bounded-delay block training of a dense Network (delayed block proximal
// gradient, Li et al. 2014; stale synchronous parallel, Ho et al. 2013).
//
// W workers share one parameter buffer (a ParamStore) and one momentum
// buffer. Each step a worker takes a minibatch, computes its gradient on a
// view of the parameters, and applies it block by block (one block per
// tensor; each block update is atomic with respect to other block updates).
//
//   tau = 0    synchronous data-parallel SGD: in every round the W workers
//              compute on the same parameters, then one update is made with
//              the sample-weighted mean of their gradients (a barrier, the
//              one wait point). W workers at batch B give the same steps as
//              one worker at batch W*B.
//   0 < tau    each worker reads a private view refreshed only when it is
//              more than tau updates behind the shared parameters, so every
//              gradient starts from parameters at most tau updates old (what
//              a worker of a parameter server sees under SSP). BoundedDelay
//              also keeps every worker at most tau steps ahead of the
//              slowest, which bounds the updates others make meanwhile.
//   tau = inf  Hogwild! for dense models: no view, workers read the live
//              parameters; the staleness is what concurrency produces
//              (about W - 1 updates).
//
// Momentum and weight decay: v = mu v + (g + wd w); w -= lr v, per block.
// Staleness compensation (Mitliagkas et al. 2016: asynchrony behaves like
// implicit momentum of about s / (s + 1) at mean staleness s): with
// `compensate`, the explicit momentum becomes max(0, mu - s / (s + 1)) and,
// when the implicit part alone exceeds mu, the rate is scaled by
// (1 - s / (s + 1)) / (1 - mu) so that the effective step lr / (1 - total
// momentum) stays that of the synchronous run. s is a running mean of the
// staleness observed at each update.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "asgd/dense/mnist.hpp"
#include "asgd/dense/network.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/param_store.hpp"

namespace asgd::dense {

struct TrainOptions {
  std::size_t epochs = 1;
  std::size_t batch = 64;
  std::size_t workers = 1;
  // Threads in each worker's GEMMs (Eigen with OpenMP; 1 without it).
  std::size_t gemm_threads = 1;
  std::uint64_t tau = 0;
  float lr = 0.01f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  bool compensate = false;
  // The rate over the run: constant, or cosine from lr to 0 over all
  // epochs (per update; Loshchilov & Hutter 2017, without restarts).
  enum class Schedule { constant, cosine } schedule = Schedule::constant;
  std::size_t total_epochs = 0;  // the run's length for the schedule (0: epochs); set for resumed runs
  std::uint64_t seed = 1;       // epoch shuffles
  std::size_t first_epoch = 0;  // for resumed runs: shuffles continue from here
  void validate() const;        // InputError naming the option
};

struct EpochReport {
  std::size_t epoch = 0;           // 1-based
  double seconds = 0;              // training time of this epoch (no evaluation)
  double images_per_second = 0;
  double train_loss = 0;           // mean minibatch loss over the epoch
  double test_accuracy = -1;       // -1 without a test set
  double mean_staleness = 0;       // updates between a gradient's view and its update
  std::uint64_t max_staleness = 0;
  std::uint64_t max_view_age = 0;  // updates between a view and the start of its gradient (<= tau)
  float momentum = 0, lr = 0;      // the values in use at the end of the epoch
};

struct EvalResult {
  double accuracy = 0, loss = 0;
  std::vector<std::size_t> confusion;  // classes x classes, row = true label
};

// Accuracy, mean loss and confusion matrix of `params` on `data`, in
// batches of `batch`, on `threads` threads.
EvalResult evaluate(const Network& net, const float* params, const Dataset& data, std::size_t batch = 1000,
                    std::size_t threads = 1);

// Trains `params` (net.layout(); initialised by the caller) on `train`.
// `momentum_buffer` (layout().size() floats, zero to start) carries the
// optimiser state across calls (and checkpoints). After each epoch
// `on_epoch` gets the report (test accuracy measured when `test` is given).
// Throws RuntimeError if the loss becomes NaN or infinite.
std::vector<EpochReport> train(const Network& net, ParamStore& params, std::vector<float>& momentum_buffer,
                               const Dataset& train, const Dataset* test, const TrainOptions& options,
                               const std::function<void(const EpochReport&)>& on_epoch = {});

}  // namespace asgd::dense
