// Small Problems with known answers for the engine tests.
#pragma once

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "asgd/engine/layout.hpp"

namespace asgd::testing {

// Example i owns parameters [i*block, (i+1)*block) and pulls them towards
// target_i: f_i(w) = 1/2 ||w_i - t_i||^2. Updates never overlap, so every
// worker count, policy and tau must give exactly the serial result.
struct DisjointQuadratic {
  std::size_t examples;
  std::size_t block;
  Layout layout() const {
    Layout l;
    l.add("w", {examples, block});
    return l;
  }
  float target(std::size_t i, std::size_t k) const { return static_cast<float>((i * 31 + k * 7) % 13) - 6.0f; }
  std::size_t num_examples() const { return examples; }
  template <class Sink>
  double gradient(std::size_t i, Sink& sink) const {
    double loss = 0;
    for (std::size_t k = 0; k < block; ++k) {
      const float diff = sink.read(i * block + k) - target(i, k);
      loss += 0.5 * diff * diff;
      sink.add_gradient(i * block + k, diff);
    }
    return loss;
  }
};

// Every example pulls the same small vector towards its own target, so
// workers collide on every update: f(w) = mean_i 1/2 ||w - t_i||^2, optimum
// the mean target.
struct SharedQuadratic {
  std::size_t examples;
  std::size_t dims;
  Layout layout() const {
    Layout l;
    l.add("w", {dims});
    return l;
  }
  float target(std::size_t i, std::size_t k) const { return static_cast<float>((i * 17 + k * 5) % 11) - 5.0f; }
  std::vector<double> optimum() const {
    std::vector<double> m(dims, 0.0);
    for (std::size_t i = 0; i < examples; ++i)
      for (std::size_t k = 0; k < dims; ++k) m[k] += target(i, k) / static_cast<double>(examples);
    return m;
  }
  std::size_t num_examples() const { return examples; }
  template <class Sink>
  double gradient(std::size_t i, Sink& sink) const {
    double loss = 0;
    for (std::size_t k = 0; k < dims; ++k) {
      const float diff = sink.read(k) - target(i, k);
      loss += 0.5 * diff * diff;
      sink.add_gradient(k, diff);
    }
    return loss;
  }
};

// Throws or returns NaN at one example, to test the stop paths.
struct FailingProblem {
  std::size_t examples;
  std::size_t bad_example;
  bool throw_instead_of_nan;
  std::size_t num_examples() const { return examples; }
  template <class Sink>
  double gradient(std::size_t i, Sink& sink) const {
    if (i == bad_example) {
      if (throw_instead_of_nan) throw std::runtime_error("bad example " + std::to_string(i));
      return std::nan("");
    }
    sink.add_gradient(0, 0.0f);
    return 1.0;
  }
};

}  // namespace asgd::testing
