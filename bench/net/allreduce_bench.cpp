// Allreduce bus bandwidth, the nccl-tests convention:
//   busbw = 2 (P - 1) / P * bytes / time,
// for tree, ring and native (MPI_Allreduce) over message sizes, with the
// ratio ours/native and, as the ceiling, the memcpy bandwidth of one core at
// the same size. Run under mpiexec (bench/net/allreduce.sh); rank 0 prints
// a CSV row per (size, algorithm).
//
// Each measurement: barrier, `iters` allreduces, the slowest rank's time
// over iters. Algorithms alternate within every repeat so that the machine's
// noise falls on all three alike; the figure is the median of the repeats.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "asgd/net/allreduce.hpp"
#include "asgd/net/mpi.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double memcpy_gbs(std::size_t bytes, int iters) {
  std::vector<char> a(bytes, 1), b(bytes, 0);
  std::memcpy(b.data(), a.data(), bytes);
  std::vector<double> t;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
      std::memcpy(b.data(), a.data(), bytes);
      a[static_cast<std::size_t>(i) % bytes] = b[0];  // keep the copies
    }
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / iters);
  }
  return static_cast<double>(bytes) / median(t) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  asgd::net::MpiSession session(&argc, &argv);
  asgd::net::MpiTransport world;
  const int P = world.size(), rank = world.rank();
  std::size_t min_bytes = 1024, max_bytes = std::size_t{64} << 20;
  int repeats = 7;
  std::size_t tree_chunk = 0;  // floats; 0: make_allreduce's choice by size
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--min-bytes") min_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--max-bytes") max_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--repeats") repeats = std::atoi(argv[i + 1]);
    else if (flag == "--tree-chunk") tree_chunk = std::strtoull(argv[i + 1], nullptr, 10);
    else {
      if (rank == 0) std::fprintf(stderr, "usage: allreduce_bench [--min-bytes B] [--max-bytes B] [--repeats R] [--tree-chunk FLOATS]\n");
      return 2;
    }
  }
  using asgd::net::Algorithm;
  const std::vector<Algorithm> algorithms{Algorithm::tree, Algorithm::ring, Algorithm::native};
  std::vector<std::unique_ptr<asgd::net::Allreduce>> impls;
  for (auto a : algorithms)
    impls.push_back(a == Algorithm::native ? asgd::net::make_native_allreduce(world)
                                           : asgd::net::make_allreduce(a, world, tree_chunk));
  if (rank == 0) std::printf("ranks,bytes,algorithm,iters,seconds,busbw_gbs,ratio_to_native,memcpy_gbs\n");
  for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const std::size_t n = bytes / sizeof(float);
    std::vector<float> data(n, 1.0f);
    const int iters = static_cast<int>(std::clamp<std::size_t>((std::size_t{256} << 20) / bytes, 5, 2000));
    std::vector<std::vector<double>> times(algorithms.size());
    for (auto& impl : impls) impl->sum(data);  // warm-up: buffers, connections
    for (int rep = 0; rep < repeats; ++rep) {
      for (std::size_t a = 0; a < impls.size(); ++a) {
        std::fill(data.begin(), data.end(), 1.0f);
        world.barrier();
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) impls[a]->sum(data);
        double mine = std::chrono::duration<double>(Clock::now() - t0).count() / iters, slowest = 0;
        MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, world.comm());
        times[a].push_back(slowest);
      }
    }
    const double ceiling = rank == 0 ? memcpy_gbs(bytes, std::max(iters, 20)) : 0;
    if (rank == 0) {
      const double native = median(times.back());
      for (std::size_t a = 0; a < impls.size(); ++a) {
        const double t = median(times[a]);
        const double busbw = 2.0 * (P - 1) / P * static_cast<double>(bytes) / t / 1e9;
        std::printf("%d,%zu,%s,%d,%.9f,%.4f,%.3f,%.2f\n", P, bytes,
                    std::string(asgd::net::to_string(algorithms[a])).c_str(), iters, t, busbw, native / t, ceiling);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
