// The floor of a network's training speed on a device: its GEMM FLOPs per
// training image over the device's measured SGEMM rate, the images/s a step
// could reach if it did nothing but large GEMMs at full speed
// (bench/RESULTS.md compares training with it). gpu::measure_floor is the GPU's.
#pragma once

#include <cstddef>

#include "asgd/dense/network.hpp"

namespace asgd::dense {

inline constexpr std::size_t kCpuFloorSize = 2048;   // the CPU's default SGEMM n
inline constexpr std::size_t kMaxFloorSize = 16384;  // three n x n float matrices: 3 GiB

struct FloorOptions {
  std::size_t size = 0;     // the SGEMM's n (n x n x n); 0: the device's default (kCpuFloorSize on the CPU)
  std::size_t repeats = 5;  // timed SGEMMs after a warm-up; the median is used
  std::size_t threads = 1;  // the CPU's threads for the SGEMM: one worker's share
  std::size_t workers = 1;  // CPU workers, each on its own cores: W x one worker's floor
  // InputError naming the option for a count of 0 (refused rather than taken as 1). The size is checked by
  // the measurement, once the device's default is known.
  void validate() const;
  // The machine's hardware threads when workers x threads asks for more (the CPU's floor is then above what
  // this machine can reach); 0 when it has as many, or cannot tell.
  unsigned cores_short() const;
};

struct Floor {
  Network::Flops flops;         // the network's, per sample
  std::size_t size = 0;         // the SGEMM's n
  std::size_t repeats = 0;      // timed SGEMMs
  std::size_t workers = 1;      // the floor's multiple: the CPU's workers; 1 on the GPU (its streams share one rate)
  double gflops = 0;            // the measured rate
  double images_per_second = 0;  // gflops * 1e9 / flops.training * workers
};

// The SGEMM's n for `options` on a device whose default is `device_default`; InputError naming
// FloorOptions::size past kMaxFloorSize.
std::size_t floor_size(const FloorOptions& options, std::size_t device_default);
// The floor of `net` at a measured rate of `gflops` for `workers` workers.
Floor floor_at(const Network& net, std::size_t size, std::size_t repeats, double gflops, std::size_t workers);
// On the CPU: sgemm_gflops on options.threads threads, times options.workers (each worker runs its own GEMMs on
// its own cores). InputError naming the option.
Floor measure_floor(const Network& net, const FloorOptions& options);

}  // namespace asgd::dense
