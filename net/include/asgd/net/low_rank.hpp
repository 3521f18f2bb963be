// PowerSGD (Vogels, Karimireddy and Jaggi, NeurIPS 2019) for the rounds of model averaging: instead of every
// parameter, a round sends low-rank factors of each matrix of the rank's update since the common point.
// For a matrix M (rows x cols: this rank's update plus the error it kept) and the Q (cols x r) of the round
// before (random at the first, the same on every rank):
//   P = M Q, summed over the ranks;  P orthonormalised (Gram-Schmidt, the same on every rank);
//   Q = M^T P, averaged over the ranks;  the mean update becomes P Q^T, and each rank keeps M - P Q^T as its
//   error for the next round (error feedback: what the factors left out is sent later, not lost).
// Two allreduces of (rows + cols) r floats per matrix instead of rows x cols. Tensors of one row or column,
// and those whose factors would not be smaller, go whole (averaged) with the first allreduce.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "asgd/engine/layout.hpp"

namespace asgd::net {

class LowRankMean {
 public:
  // `rank` >= 1. Every rank of a job makes it with the same layout, rank and seed.
  LowRankMean(const Layout& layout, std::size_t rank, std::uint64_t seed = 1);

  // Collective through `sum` (an allreduce sum in place, on every rank at once): `update` (layout.size()
  // floats, this rank's) becomes the mean over the ranks of the updates as the factors give it; `extra` floats
  // ride along the first sum (summed, not averaged). Padding is left as it was. Returns the number of ranks.
  float mean(std::span<float> update, std::span<float> extra, const std::function<void(std::span<float>)>& sum);

  // Adds this rank's kept error (what the factors have left out so far) into `update` (layout.size() floats,
  // at each matrix's place) and clears it: for a last round of every parameter (ModelAverager::flush).
  void take_error(std::span<float> update) noexcept;

  // Floats this rank put into the allreduces so far, and what plain averaging would have.
  std::uint64_t floats_sent() const noexcept { return sent_; }
  std::uint64_t floats_dense() const noexcept { return dense_; }
  // Whether `tensor` goes as factors (false: whole).
  bool factored(const Tensor& tensor) const noexcept;

 private:
  struct Matrix {
    Tensor tensor;
    std::vector<float> q, p, error;  // cols x r, rows x r (row-major), rows x cols
  };
  // A column of Q that came back 0 (a round in which no rank changed that matrix) is drawn again: from a 0
  // column the power iteration would never leave 0. Every rank draws alike (their Q are the same sum).
  void redraw_empty_columns(Matrix& m);

  std::size_t rank_;
  std::mt19937_64 rng_;
  std::vector<Matrix> matrices_;
  std::vector<Tensor> whole_;
  std::vector<float> buffer_;
  std::uint64_t sent_ = 0, dense_ = 0;
};

}  // namespace asgd::net
