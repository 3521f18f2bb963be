#include "asgd/dense/floor.hpp"

#include <fmt/format.h>

#include <thread>
#include <utility>

#include "asgd/engine/errors.hpp"

namespace asgd::dense {

void FloorOptions::validate() const {
  for (const auto& [option, value] : {std::pair{"FloorOptions::threads", threads},
                                      std::pair{"FloorOptions::workers", workers},
                                      std::pair{"FloorOptions::repeats", repeats}})
    if (value == 0) throw InputError(fmt::format("{} 0: expected at least 1", option));
}

unsigned FloorOptions::cores_short() const {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 && workers * threads > cores ? cores : 0;
}

std::size_t floor_size(const FloorOptions& options, std::size_t device_default) {
  const std::size_t n = options.size > 0 ? options.size : device_default;
  if (n > kMaxFloorSize)
    throw InputError(fmt::format("FloorOptions::size {}: at most {} (three n x n matrices)", n, kMaxFloorSize));
  return n;
}

Floor floor_at(const Network& net, std::size_t size, std::size_t repeats, double gflops, std::size_t workers) {
  Floor f;
  f.flops = net.flops_per_sample();
  f.size = size;
  f.repeats = repeats;
  f.workers = workers;
  f.gflops = gflops;
  f.images_per_second = gflops * 1e9 / f.flops.training * static_cast<double>(workers);
  return f;
}

Floor measure_floor(const Network& net, const FloorOptions& options) {
  options.validate();
  const std::size_t n = floor_size(options, kCpuFloorSize);
  return floor_at(net, n, options.repeats, sgemm_gflops(n, options.repeats, options.threads), options.workers);
}

}  // namespace asgd::dense
