// A multi-rank test problem: f(w) = mean over this rank's examples of
// 1/2 ||w - t_i||^2, t_i of the whole data set's example rows[i], so the
// ranks together minimise the mean over every example, whose optimum is the
// mean target.
#pragma once

#include <cstddef>
#include <vector>

#include "asgd/engine/layout.hpp"

namespace asgd::testing {

struct ShardedQuadratic {
  std::vector<std::size_t> rows;
  std::size_t dims = 4;
  static float target(std::size_t i, std::size_t k) { return static_cast<float>((i * 17 + k * 5) % 11) - 5.0f; }
  // The optimum's coordinate k over examples 0 .. n - 1.
  static double optimum(std::size_t n, std::size_t k) {
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += target(i, k);
    return sum / static_cast<double>(n);
  }
  Layout layout() const {
    Layout l;
    l.add("w", {dims});
    return l;
  }
  std::size_t num_examples() const { return rows.size(); }
  template <class Sink>
  double gradient(std::size_t i, Sink& sink) const {
    double loss = 0;
    for (std::size_t k = 0; k < dims; ++k) {
      const float diff = sink.read(k) - target(rows[i], k);
      loss += 0.5 * diff * diff;
      sink.add_gradient(k, diff);
    }
    return loss;
  }
};

}  // namespace asgd::testing
