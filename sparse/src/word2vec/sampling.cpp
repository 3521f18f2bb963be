#include "asgd/sparse/word2vec/sampling.hpp"

#include <fmt/format.h>

#include <cmath>

#include "asgd/engine/errors.hpp"

namespace asgd::sparse::w2v {

AliasSampler::AliasSampler(std::span<const double> weights) : size_(weights.size()) {
  if (weights.empty()) throw InputError("alias sampler: no weights");
  double sum = 0;
  for (double w : weights) {
    if (!(w >= 0) || !std::isfinite(w)) throw InputError("alias sampler: weights must be finite and >= 0");
    sum += w;
  }
  if (!(sum > 0)) throw InputError("alias sampler: all weights are zero");
  const std::size_t n = weights.size();
  // Vose: scaled probabilities split into small (< 1) and large (>= 1).
  std::vector<double> scaled(n);
  std::vector<std::uint32_t> small, large;
  for (std::size_t i = 0; i < n; ++i) {
    scaled[i] = weights[i] * static_cast<double>(n) / sum;
    (scaled[i] < 1.0 ? small : large).push_back(static_cast<std::uint32_t>(i));
  }
  buckets_.assign(n, Bucket{0xFFFFFFFFu, 0});
  for (std::size_t i = 0; i < n; ++i) buckets_[i].alias = static_cast<std::uint32_t>(i);
  while (!small.empty() && !large.empty()) {
    const std::uint32_t s = small.back(), l = large.back();
    small.pop_back();
    buckets_[s].threshold = static_cast<std::uint32_t>(std::min(4294967295.0, std::floor(scaled[s] * 4294967296.0)));
    buckets_[s].alias = l;
    scaled[l] -= 1.0 - scaled[s];
    if (scaled[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // Leftovers are 1 up to round-off: always keep themselves.
  for (auto i : small) buckets_[i] = {0xFFFFFFFFu, i};
  for (auto i : large) buckets_[i] = {0xFFFFFFFFu, i};
}

AliasSampler AliasSampler::unigram(std::span<const std::uint64_t> counts, double power) {
  std::vector<double> w(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) w[i] = std::pow(static_cast<double>(counts[i]), power);
  return AliasSampler(w);
}

double AliasSampler::probability(std::uint32_t i) const {
  // P(i) = (1/n) [ keep_i + sum over j with alias_j = i, j != i of (1 - keep_j) ]
  const double n = static_cast<double>(size_);
  auto keep = [](const Bucket& b) {
    return b.threshold == 0xFFFFFFFFu ? 1.0 : static_cast<double>(b.threshold) / 4294967296.0;
  };
  double p = keep(buckets_[i]);
  for (std::size_t j = 0; j < buckets_.size(); ++j) {
    if (j != i && buckets_[j].alias == i) p += 1.0 - keep(buckets_[j]);
  }
  return p / n;
}

}  // namespace asgd::sparse::w2v
