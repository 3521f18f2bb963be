// A small learnable image task for the dense trainers' tests: ten classes of
// 8x8 images, class c a bright 2x2 square at its own place plus noise, and a
// small net that learns it in an epoch or two.
#pragma once

#include <cstdint>
#include <random>

#include "asgd/dense/mnist.hpp"
#include "asgd/dense/network.hpp"

namespace asgd::dense::fixtures {

inline Dataset squares(std::size_t n, std::uint64_t seed) {
  Dataset d;
  d.rows = d.cols = 8;
  d.pixels.resize(n * 64);
  d.labels.resize(n);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<std::uint8_t>(rng() % 10);
    d.labels[i] = c;
    float* img = d.pixels.data() + i * 64;
    for (std::size_t p = 0; p < 64; ++p) img[p] = noise(rng);
    const std::size_t y = (c / 5) * 4 + 1, x = (c % 5) + (c % 5 > 2 ? 1 : 0);
    for (std::size_t dy = 0; dy < 2; ++dy)
      for (std::size_t dx = 0; dx < 2; ++dx) img[(y + dy) * 8 + x + dx] += 2.0f;
  }
  return d;
}

inline Network small_net() {
  Network net(Shape{1, 8, 8});
  net.add(conv2d(1, 4, 3, 1)).add(relu()).add(max_pool2());
  net.add(flatten()).add(linear(4 * 16, 32)).add(relu()).add(linear(32, 10));
  return net;
}

}  // namespace asgd::dense::fixtures
