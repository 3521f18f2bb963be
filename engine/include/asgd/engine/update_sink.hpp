// The update sink: what a Problem writes its gradient into. It reads shared
// parameters (relaxed atomic loads one at a time; whole rows through the
// rows:: kernels, each float read whole), turns a gradient into a step with the
// current learning rate (plain SGD or AdaGrad) and lands it through the
// consistency policy. A model never sees the policy, the rate or the memory.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "asgd/engine/consistency.hpp"
#include "asgd/engine/row_ops.hpp"

namespace asgd {

// A line that this thread will read and then write, fetched for writing (x86's PREFETCHW): a line another core
// wrote last then comes once, owned, rather than shared for the read and taken again for the write. GCC emits
// PREFETCHW for __builtin_prefetch(p, 1) only where the target names the PRFCHW extension, which the portable
// build does not; CPUs without it treat the instruction as a hint (a NOP).
inline void prefetch_to_write(const void* p) noexcept {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

// Step rule: plain SGD (w -= lr * g), AdaGrad per parameter (w -= lr * g /
// sqrt(G + eps), G += g^2) or AdaGrad per row (LIBMF 2: a row's step is
// lr / sqrt(1 + G_row), G_row += mean g^2 over the row, G_row kept in the
// accumulator slot of the row's first parameter; with a row head h > 0, a
// row's first h parameters and the rest each keep their own, in the slots of
// their first parameters, as LIBMF 2 does with h = 8). Accumulators are
// updated racily, like the parameters.
enum class StepRule { sgd, adagrad, row_adagrad };

template <ConsistencyPolicy Policy, StepRule kRule = StepRule::sgd>
class UpdateSink {
 public:
  UpdateSink(float* params, std::size_t size, const Policy& policy, float* adagrad_sums = nullptr,
             float adagrad_eps = 1e-8f, std::size_t row_head = 0) noexcept
      : params_(params), size_(size), policy_(&policy), sums_(adagrad_sums), eps_(adagrad_eps), row_head_(row_head) {}

  // The current value of parameter i (relaxed; may be mid-update by others).
  float read(std::size_t i) const noexcept { return load_param(params_[i]); }
  // Reads n parameters from offset into out (a vectorised row copy; each
  // float is read whole, the row as a whole may mix old and new values).
  void read(std::size_t offset, float* out, std::size_t n) const noexcept { rows::load(params_ + offset, out, n); }

  // Parameter i moves against gradient g.
  void add_gradient(std::size_t i, float g) noexcept {
    if constexpr (kRule == StepRule::sgd) {
      policy_->add(params_[i], -lr_ * g);
    } else if constexpr (kRule == StepRule::adagrad) {
      policy_->add(params_[i], adagrad_step(i, g));
    } else {
      policy_->add(params_[i], -row_rate(i, g * g) * g);
    }
  }
  // Parameters offset..offset+n-1 (one row) move against scale * g[k].
  void add_gradient(std::size_t offset, const float* g, std::size_t n, float scale = 1.0f) noexcept {
    if constexpr (kRule == StepRule::sgd) {
      policy_->add_scaled(params_ + offset, g, -lr_ * scale, n);
    } else if constexpr (kRule == StepRule::adagrad) {
      for (std::size_t k = 0; k < n; ++k) add_gradient(offset + k, scale * g[k]);
    } else {
      if (n == 0) return;
      if (row_head_ > 0 && n > row_head_) {  // the head and the tail at their own rates
        row_step(offset, g, row_head_, scale);
        row_step(offset + row_head_, g + row_head_, n - row_head_, scale);
      } else {
        row_step(offset, g, n, scale);
      }
    }
  }

  // sum_k x[a + k] * x[b + k] over two rows of shared parameters (each
  // float read whole, as read()).
  float dot(std::size_t a, std::size_t b, std::size_t n) const noexcept { return rows::dot(params_ + a, params_ + b, n); }
  // The same for a local row `local` against the shared row at offset, and
  // out[k] += s * x[offset + k] into a local row: a model that uses a shared
  // row twice (a dot, then its gradient) reads it in place each time, as
  // word2vec.c does, rather than copying it first (read()); another worker's
  // update may land in between.
  float dot(const float* local, std::size_t offset, std::size_t n) const noexcept {
    return rows::dot(local, params_ + offset, n);
  }
  void add_row_to(float s, std::size_t offset, float* out, std::size_t n) const noexcept {
    rows::axpy(s, params_ + offset, out, n);
  }
  // add_row_to(s, offset, out, n), then add_gradient(offset, g, n, scale): in one pass over the row with plain
  // SGD under Racy (the row read once; word2vec's output rows), else the two calls.
  void add_row_to_then_gradient(float s, std::size_t offset, float* out, const float* g, std::size_t n,
                                float scale) noexcept {
    if constexpr (kRule == StepRule::sgd && std::is_same_v<Policy, Racy>) {
      rows::axpy_then_add_scaled(s, params_ + offset, out, g, -lr_ * scale, n);
    } else {
      add_row_to(s, offset, out, n);
      add_gradient(offset, g, n, scale);
    }
  }

  // The gradient of a bilinear term on two rows a, b (not overlapping): for
  // a loss L(x) at x = a . b with L2 weight l2 on both rows, g = L'(x) and
  //   a moves against g b + l2 a,  b moves against g a + l2 b,
  // both computed from the rows before the step. A policy with a
  // bilinear_step (Racy) does it in one vectorised pass with no copies:
  // matrix factorization's whole factor update.
  void add_bilinear_gradient(std::size_t a, std::size_t b, std::size_t n, float g, float l2) noexcept {
    if (n == 0) return;
    if constexpr (kRule == StepRule::row_adagrad) {
      if (row_head_ > 0 && n > row_head_) {  // the rows' heads and tails at their own rates
        bilinear_rows(a, b, row_head_, g, l2);
        bilinear_rows(a + row_head_, b + row_head_, n - row_head_, g, l2);
        return;
      }
    }
    bilinear_rows(a, b, n, g, l2);
  }

  float learning_rate() const noexcept { return lr_; }
  std::size_t size() const noexcept { return size_; }

  // A hint that parameters offset..offset+n-1 will be read and written soon (a
  // prefetch for writing of every line they span: one line of a 100-float row left
  // the other six to miss), and with AdaGrad their sums (per row: the row's slot): a
  // miss there was 40 % of mf's time with --row-adagrad.
  void prefetch(std::size_t offset, std::size_t n = 1) const noexcept {
    constexpr std::size_t kLine = 64 / sizeof(float);
    for (std::size_t k = 0; k < n; k += kLine) prefetch_to_write(params_ + offset + k);
    if (n > 1) prefetch_to_write(params_ + offset + n - 1);  // the last line of a row not line-aligned
    if constexpr (kRule != StepRule::sgd) prefetch_to_write(sums_ + offset);
  }

  // The seed of this process's random stream (the run's seed plus
  // TrainerOptions::stream) and the current epoch (0-based): a Problem that draws
  // random numbers seeds them from (seed(), epoch(), example), so results do
  // not depend on which worker ran the example.
  std::uint64_t seed() const noexcept { return seed_; }
  std::uint64_t epoch() const noexcept { return epoch_; }

  // Engine side: set by the Trainer.
  void set_learning_rate(float lr) noexcept { lr_ = lr; }
  void set_run(std::uint64_t seed, std::uint64_t epoch) noexcept {
    seed_ = seed;
    epoch_ = epoch;
  }

 private:
  // The step size of the row whose accumulator is slot `row` (from the sum
  // before this step), then the sum grows by `mean_square`.
  float row_rate(std::size_t row, float mean_square) noexcept {
    std::atomic_ref<float> sum(sums_[row]);
    const float before = sum.load(std::memory_order_relaxed);
    sum.store(before + mean_square, std::memory_order_relaxed);
    return lr_ / std::sqrt(1.0f + before);
  }

  // add_bilinear_gradient on rows (or row heads or tails) of one accumulator each.
  void bilinear_rows(std::size_t a, std::size_t b, std::size_t n, float g, float l2) noexcept {
    float rate_a = lr_, rate_b = lr_;
    if constexpr (kRule == StepRule::row_adagrad) {
      // Both rows' squared gradient norms from |a|^2, |b|^2 and a . b:
      // |g b + l2 a|^2 = g^2 |b|^2 + 2 g l2 a.b + l2^2 |a|^2.
      float gram[3];
      rows::gram(params_ + a, params_ + b, n, gram);
      const float aa = gram[0], bb = gram[1], ab = gram[2], inv_n = 1.0f / static_cast<float>(n);
      rate_a = row_rate(a, (g * g * bb + 2 * g * l2 * ab + l2 * l2 * aa) * inv_n);
      rate_b = row_rate(b, (g * g * aa + 2 * g * l2 * ab + l2 * l2 * bb) * inv_n);
    }
    if constexpr (kRule != StepRule::adagrad && requires(float* p) { policy_->bilinear_step(p, p, n, g, g, g, g); }) {
      policy_->bilinear_step(params_ + a, params_ + b, n, rate_a * g, 1.0f - rate_a * l2, rate_b * g,
                             1.0f - rate_b * l2);
    } else {
      constexpr std::size_t kChunk = 64;
      float x[kChunk], y[kChunk], gx[kChunk], gy[kChunk];
      for (std::size_t k = 0; k < n; k += kChunk) {
        const std::size_t m = std::min(kChunk, n - k);
        read(a + k, x, m);
        read(b + k, y, m);
        for (std::size_t j = 0; j < m; ++j) {
          gx[j] = g * y[j] + l2 * x[j];
          gy[j] = g * x[j] + l2 * y[j];
        }
        if constexpr (kRule == StepRule::adagrad) {
          add_gradient(a + k, gx, m);
          add_gradient(b + k, gy, m);
        } else {
          policy_->add_scaled(params_ + a + k, gx, -rate_a, m);
          policy_->add_scaled(params_ + b + k, gy, -rate_b, m);
        }
      }
    }
  }

  // One row (or a row's head or tail) of a row-AdaGrad step.
  void row_step(std::size_t offset, const float* g, std::size_t n, float scale) noexcept {
    const float mean_square = scale * scale * rows::dot(g, g, n) / static_cast<float>(n);
    policy_->add_scaled(params_ + offset, g, -row_rate(offset, mean_square) * scale, n);
  }

  float adagrad_step(std::size_t i, float g) noexcept {
    std::atomic_ref<float> sum(sums_[i]);
    const float s = sum.load(std::memory_order_relaxed) + g * g;
    sum.store(s, std::memory_order_relaxed);
    return -lr_ * g / std::sqrt(s + eps_);
  }

  float* params_;
  std::size_t size_;
  const Policy* policy_;
  float* sums_;
  float eps_;
  std::size_t row_head_;
  float lr_ = 0.0f;
  std::uint64_t seed_ = 0;
  std::uint64_t epoch_ = 0;
};

}  // namespace asgd
