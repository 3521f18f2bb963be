#include "asgd/net/averaging.hpp"

#include <fmt/format.h>

#include <chrono>
#include <limits>
#include <utility>

#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::net {

ModelAverager::ModelAverager(Allreduce& allreduce, std::span<float> params, AveragingOptions options,
                             const Layout* layout)
    : allreduce_(allreduce), params_(params), options_(options), snapshot_(params.size()),
      buffer_(params.size() + 3) {
  if (options_.weighted && options_.combine == Combine::sum) {
    throw InputError("model averaging: weights apply to the mean, not to the sum of updates");
  }
  if (options_.low_rank == 0) return;
  if (options_.weighted) throw InputError("AveragingOptions::low_rank: not with weighted rounds");
  if (layout == nullptr || layout->size() != params.size())
    throw InputError("AveragingOptions::low_rank: needs the parameters' layout");
  low_rank_ = std::make_unique<LowRankMean>(*layout, options_.low_rank);
}

ModelAverager::~ModelAverager() = default;

double ModelAverager::communication_seconds() const noexcept {
  return static_cast<double>(comm_ns_.load(std::memory_order_relaxed)) * 1e-9;
}

void ModelAverager::timed_sum(std::span<float> data, bool plain) {
  if (plain) dense_.fetch_add(data.size(), std::memory_order_relaxed);
  sent_.fetch_add(data.size(), std::memory_order_relaxed);
  const auto t0 = std::chrono::steady_clock::now();
  allreduce_.sum(data);
  comm_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count(),
                     std::memory_order_relaxed);
}

bool ModelAverager::round(double weight, bool finished, bool overlap) {
  if (low_rank_ && !base_.empty()) return low_rank_round(finished, overlap);
  const std::size_t n = params_.size();
  const bool weighted = options_.weighted;
  const float w = weighted ? static_cast<float>(weight) : 1.0f;
  // Combine::sum after its first round sums each rank's update x_r - b, not x_r: the sum of the x_r is about
  // P b, and rounding it at that size lost small updates (8 ranks adding 1e-4 a round to values near 100: 6.8 %
  // too much in all after 1,000 rounds).
  const bool updates = options_.combine == Combine::sum && !base_.empty();
  for (std::size_t i = 0; i < n; ++i) {
    snapshot_[i] = load_param(params_[i]);
    buffer_[i] = updates ? snapshot_[i] - base_[i] : w * snapshot_[i];
  }
  buffer_[n] = w;
  buffer_[n + 1] = finished ? 1.0f : 0.0f;
  buffer_[n + 2] = 1.0f;  // sums to the number of ranks
  timed_sum(buffer_);
  const float ranks = buffer_[n + 2];
  const bool all_finished = buffer_[n + 1] >= ranks - 0.5f;
  float total = buffer_[n];
  if (!(total > 0.0f)) {
    // Weighted, and no rank trained since the last round: average plainly.
    // Every rank sees the same total, so every rank takes this branch.
    for (std::size_t i = 0; i < n; ++i) buffer_[i] = snapshot_[i];
    timed_sum(std::span<float>(buffer_.data(), n));
    total = ranks;
  }
  const float inv = 1.0f / total;
  if (options_.combine == Combine::sum) {
    // Target b + sum_r (x_r - b); the first round has no b and takes the mean.
    if (!updates) {
      base_.resize(n);
      for (std::size_t i = 0; i < n; ++i) base_[i] = buffer_[i] * inv;
    } else {
      for (std::size_t i = 0; i < n; ++i) base_[i] += buffer_[i];
    }
    for (std::size_t i = 0; i < n; ++i) buffer_[i] = base_[i];
  }
  const float apply_scale = options_.combine == Combine::sum ? 1.0f : inv;
  for (std::size_t i = 0; i < n; ++i) buffer_[i] *= apply_scale;
  if (low_rank_) base_.assign(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(n));
  apply(std::span<const float>(buffer_.data(), n), overlap && !all_finished);
  rounds_.fetch_add(1, std::memory_order_relaxed);
  return all_finished;
}

bool ModelAverager::low_rank_round(bool finished, bool overlap) {
  const std::size_t n = params_.size();
  for (std::size_t i = 0; i < n; ++i) {
    snapshot_[i] = load_param(params_[i]);
    buffer_[i] = snapshot_[i] - base_[i];
  }
  float finished_ranks[1] = {finished ? 1.0f : 0.0f};
  const std::uint64_t dense_before = low_rank_->floats_dense();
  const float ranks = low_rank_->mean(std::span<float>(buffer_.data(), n), finished_ranks,
                                      [this](std::span<float> data) { timed_sum(data, false); });
  dense_.fetch_add(low_rank_->floats_dense() - dense_before, std::memory_order_relaxed);
  const bool all_finished = finished_ranks[0] >= ranks - 0.5f;
  // The common point moves by the mean update (Combine::sum: by all of the ranks' updates).
  const float scale = options_.combine == Combine::sum ? ranks : 1.0f;
  for (std::size_t i = 0; i < n; ++i) base_[i] += scale * buffer_[i];
  apply(base_, overlap && !all_finished);
  rounds_.fetch_add(1, std::memory_order_relaxed);
  return all_finished;
}

void ModelAverager::apply(std::span<const float> target, bool overlap) {
  if (overlap) {
    // Keep what the workers added since the snapshot: the correction is an
    // atomic add, so it never overwrites a worker's update. (A racy worker's
    // plain store may still overwrite a correction; the next round repairs
    // that coordinate.)
    for (std::size_t i = 0; i < target.size(); ++i) {
      std::atomic_ref<float>(params_[i]).fetch_add(target[i] - snapshot_[i], std::memory_order_relaxed);
    }
  } else {
    for (std::size_t i = 0; i < target.size(); ++i) store_param(params_[i], target[i]);
  }
}

void ModelAverager::average(double weight) {
  if (rounds_thread_.running()) throw InputError("ModelAverager::average: the communication thread is running");
  round(weight, false, false);
}

void ModelAverager::share(bool root) {
  if (rounds_thread_.running()) throw InputError("ModelAverager::share: the communication thread is running");
  const std::size_t n = params_.size();
  for (std::size_t i = 0; i < n; ++i) buffer_[i] = root ? load_param(params_[i]) : -0.0f;
  timed_sum(std::span<float>(buffer_.data(), n));
  for (std::size_t i = 0; i < n; ++i) store_param(params_[i], buffer_[i]);
  if (options_.combine == Combine::sum || low_rank_)
    base_.assign(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(n));
  rounds_.fetch_add(1, std::memory_order_relaxed);
}

void ModelAverager::start(std::uint64_t every_steps) {
  rounds_thread_.start(
      every_steps,
      [this](std::uint64_t examples, bool finished) { return round(static_cast<double>(examples), finished, true); },
      "ModelAverager::start");
}

void ModelAverager::stop() { rounds_thread_.stop(); }

void ModelAverager::flush() {
  if (!low_rank_ || base_.empty() || flushed_) return;
  flushed_ = true;
  if (rounds_thread_.running()) throw InputError("ModelAverager::flush: the communication thread is running");
  const std::size_t n = params_.size();
  for (std::size_t i = 0; i < n; ++i) {
    snapshot_[i] = load_param(params_[i]);
    buffer_[i] = snapshot_[i] - base_[i];
  }
  low_rank_->take_error(std::span<float>(buffer_.data(), n));
  buffer_[n] = 1.0f;  // sums to the number of ranks
  timed_sum(std::span<float>(buffer_.data(), n + 1));
  const float scale = options_.combine == Combine::sum ? 1.0f : 1.0f / buffer_[n];
  for (std::size_t i = 0; i < n; ++i) base_[i] += scale * buffer_[i];
  apply(base_, false);
  rounds_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace asgd::net
