#include "asgd/net/low_rank.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "asgd/engine/errors.hpp"

namespace asgd::net {

namespace {

double squared_norm(const std::vector<float>& p, std::size_t rows, std::size_t r, std::size_t c) {
  double s = 0;
  for (std::size_t i = 0; i < rows; ++i) s += static_cast<double>(p[i * r + c]) * p[i * r + c];
  return s;
}

// Columns of `p` (rows x r, row-major) made orthonormal in turn, by Gram-Schmidt twice (once leaves rounding
// along the earlier columns when a column is nearly in their span). A column that loses all but 1e-4 of its
// length to them (the update has a lower rank) becomes 0, so its factor sends nothing rather than noise.
void orthonormalize(std::vector<float>& p, std::size_t rows, std::size_t r) {
  for (std::size_t c = 0; c < r; ++c) {
    const double before = squared_norm(p, rows, r, c);
    for (int pass = 0; pass < 2; ++pass) {
      for (std::size_t k = 0; k < c; ++k) {
        double dot = 0;
        for (std::size_t i = 0; i < rows; ++i) dot += static_cast<double>(p[i * r + c]) * p[i * r + k];
        for (std::size_t i = 0; i < rows; ++i) p[i * r + c] -= static_cast<float>(dot) * p[i * r + k];
      }
    }
    const double after = squared_norm(p, rows, r, c);
    const float inv = after > 1e-8 * before && after > 1e-30 ? static_cast<float>(1.0 / std::sqrt(after)) : 0.0f;
    for (std::size_t i = 0; i < rows; ++i) p[i * r + c] *= inv;
  }
}

}  // namespace

bool LowRankMean::factored(const Tensor& t) const noexcept {
  return t.rows > 1 && t.cols > 1 && (t.rows + t.cols) * rank_ < t.rows * t.cols;
}

LowRankMean::LowRankMean(const Layout& layout, std::size_t rank, std::uint64_t seed) : rank_(rank), rng_(seed) {
  if (rank == 0) throw InputError("low-rank averaging: rank 0; expected at least 1");
  for (const Tensor& t : layout.tensors()) {
    if (!factored(t)) {
      whole_.push_back(t);
      continue;
    }
    Matrix m{t, std::vector<float>(t.cols * rank, 0.0f), std::vector<float>(t.rows * rank),
             std::vector<float>(t.rows * t.cols, 0.0f)};
    redraw_empty_columns(m);
    matrices_.push_back(std::move(m));
  }
}

void LowRankMean::redraw_empty_columns(Matrix& m) {
  const std::size_t r = rank_, cols = m.tensor.cols;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t c = 0; c < r; ++c) {
    bool empty = true;
    for (std::size_t j = 0; j < cols && empty; ++j) empty = m.q[j * r + c] == 0.0f;
    if (!empty) continue;
    for (std::size_t j = 0; j < cols; ++j) m.q[j * r + c] = normal(rng_);
  }
}

void LowRankMean::take_error(std::span<float> update) noexcept {
  for (Matrix& m : matrices_) {
    const Tensor& t = m.tensor;
    for (std::size_t i = 0; i < t.rows; ++i)
      for (std::size_t j = 0; j < t.cols; ++j) update[t.at(i, j)] += m.error[i * t.cols + j];
    std::fill(m.error.begin(), m.error.end(), 0.0f);
  }
}

float LowRankMean::mean(std::span<float> update, std::span<float> extra,
                        const std::function<void(std::span<float>)>& sum) {
  const std::size_t r = rank_;
  // First sum: P = M Q of every matrix, the whole tensors, the extra floats.
  buffer_.clear();
  for (Matrix& m : matrices_) {
    const Tensor& t = m.tensor;
    for (std::size_t i = 0; i < t.rows; ++i) {
      float* e = &m.error[i * t.cols];
      const float* u = &update[t.at(i)];
      for (std::size_t j = 0; j < t.cols; ++j) e[j] += u[j];  // M = update + error, kept in `error`
      for (std::size_t c = 0; c < r; ++c) {
        float s = 0;
        for (std::size_t j = 0; j < t.cols; ++j) s += e[j] * m.q[j * r + c];
        buffer_.push_back(s);
      }
    }
  }
  for (const Tensor& t : whole_)
    for (std::size_t i = 0; i < t.rows; ++i) buffer_.insert(buffer_.end(), &update[t.at(i)], &update[t.at(i)] + t.cols);
  buffer_.insert(buffer_.end(), extra.begin(), extra.end());
  buffer_.push_back(1.0f);  // sums to the number of ranks
  sent_ += buffer_.size();
  sum(buffer_);
  const float ranks = buffer_.back(), inv = 1.0f / ranks;
  buffer_.pop_back();
  std::size_t at = 0;
  for (Matrix& m : matrices_) {
    std::copy_n(buffer_.begin() + static_cast<std::ptrdiff_t>(at), m.p.size(), m.p.begin());
    at += m.p.size();
    orthonormalize(m.p, m.tensor.rows, r);
  }
  for (const Tensor& t : whole_) {
    for (std::size_t i = 0; i < t.rows; ++i)
      for (std::size_t j = 0; j < t.cols; ++j) update[t.at(i, j)] = buffer_[at++] * inv;
  }
  std::copy(buffer_.begin() + static_cast<std::ptrdiff_t>(at), buffer_.end(), extra.begin());
  // Second sum: Q = M^T P, averaged.
  buffer_.clear();
  for (Matrix& m : matrices_) {
    const Tensor& t = m.tensor;
    const std::size_t first = buffer_.size();
    buffer_.resize(first + t.cols * r, 0.0f);
    for (std::size_t i = 0; i < t.rows; ++i) {
      const float* e = &m.error[i * t.cols];
      for (std::size_t j = 0; j < t.cols; ++j)
        for (std::size_t c = 0; c < r; ++c) buffer_[first + j * r + c] += e[j] * m.p[i * r + c];
    }
  }
  sent_ += buffer_.size();
  if (!buffer_.empty()) sum(buffer_);
  at = 0;
  // The mean update P Q^T; this rank's error what its M has beyond it.
  for (Matrix& m : matrices_) {
    const Tensor& t = m.tensor;
    for (std::size_t k = 0; k < m.q.size(); ++k) m.q[k] = buffer_[at + k] * inv;
    at += m.q.size();
    for (std::size_t i = 0; i < t.rows; ++i) {
      float* e = &m.error[i * t.cols];
      float* u = &update[t.at(i)];
      for (std::size_t j = 0; j < t.cols; ++j) {
        float s = 0;
        for (std::size_t c = 0; c < r; ++c) s += m.p[i * r + c] * m.q[j * r + c];
        u[j] = s;
        e[j] -= s;
      }
    }
    redraw_empty_columns(m);  // after its use: a 0 column added nothing this round
  }
  for (const Matrix& m : matrices_) dense_ += m.tensor.elements();
  for (const Tensor& t : whole_) dense_ += t.elements();
  dense_ += extra.size() + 1;
  return ranks;
}

}  // namespace asgd::net
