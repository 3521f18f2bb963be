// One bulk-synchronous parameter-server round over MPI two ways, for issue 42's choice of transport:
//   p2p:      net::ParameterServer::round() (the server thread per rank; pushes and pulls as tagged
//             messages, MPI_Isend / MPI_Improbe + MPI_Mrecv; only changed keys travel, refreshed by version);
//   onesided: passive-target RMA: each rank's shard is a window (MPI_Win_allocate, MPI_Win_lock_all once);
//             a push is an MPI_Accumulate with MPI_SUM per changed key (element-wise atomic: "Hogwild across
//             ranks"), then MPI_Win_flush_all and a barrier; a pull is one MPI_Get of every shard (there
//             are no versions to send only what changed), flushed.
// Both under the sum rule, so both end each round with the same parameters (checked). Every round each
// rank changes `--fraction` of the keys (random, the same for both ways); rank 0 prints the median seconds
// per round over `--rounds` rounds of each way (p2p's rounds first, then one-sided's) and the ratio.
//   mpiexec -n 2 bench_ps_transport [--floats 2560000] [--key 32] [--fraction 1] [--rounds 20]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "asgd/net/mpi.hpp"
#include "asgd/net/parameter_server.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Args {
  std::size_t floats = 2560000, key = 32;
  double fraction = 1;
  int rounds = 20;
};

// The keys rank r changes in round k, and by how much: the same for both ways.
std::vector<std::size_t> changed_keys(std::size_t keys, double fraction, int rank, int round) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(rank) * 1000003u + static_cast<std::uint64_t>(round));
  std::vector<std::size_t> out;
  std::bernoulli_distribution pick(fraction);
  for (std::size_t k = 0; k < keys; ++k)
    if (fraction >= 1 || pick(rng)) out.push_back(k);
  return out;
}

float step(int rank, int round) { return 0.001f * static_cast<float>(rank + 1) + 0.0001f * static_cast<float>(round); }

// The contiguous range of keys shard s holds, cut as the server cuts them (ps::KeyRange::of_shard, a private
// header of net/).
std::pair<std::size_t, std::size_t> shard_keys(std::size_t keys, int s, int P) {
  const auto us = static_cast<std::size_t>(s), ranks = static_cast<std::size_t>(P);
  return {keys * us / ranks, keys * (us + 1) / ranks};
}

std::vector<double> run_p2p(asgd::net::MpiTransport& world, const Args& a, std::vector<float>& x) {
  asgd::net::ParameterServer ps(world, x, asgd::net::PsOptions{.tau = 0, .rule = asgd::net::ServerRule::sum,
                                                               .key_floats = a.key});
  ps.share(world.rank() == 0);
  std::vector<double> t;
  for (int round = 0; round < a.rounds; ++round) {
    for (std::size_t k : changed_keys(x.size() / a.key, a.fraction, world.rank(), round))
      for (std::size_t i = k * a.key; i < (k + 1) * a.key; ++i) x[i] += step(world.rank(), round);
    world.barrier();
    const auto t0 = Clock::now();
    ps.round();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  ps.stop();
  return t;
}

std::vector<double> run_onesided(asgd::net::MpiTransport& world, const Args& a, std::vector<float>& x) {
  const int P = world.size(), rank = world.rank();
  const std::size_t keys = x.size() / a.key;
  const auto [first, end] = shard_keys(keys, rank, P);
  float* shard = nullptr;
  MPI_Win win;
  MPI_Win_allocate(static_cast<MPI_Aint>((end - first) * a.key * sizeof(float)), sizeof(float), MPI_INFO_NULL,
                   world.comm(), &shard, &win);
  std::copy(x.begin() + static_cast<std::ptrdiff_t>(first * a.key), x.begin() + static_cast<std::ptrdiff_t>(end * a.key), shard);
  MPI_Win_lock_all(0, win);
  MPI_Win_sync(win);
  world.barrier();
  std::vector<int> owner(keys);
  std::vector<std::size_t> firsts(static_cast<std::size_t>(P));
  for (int s = 0; s < P; ++s) {
    const auto [f, e] = shard_keys(keys, s, P);
    firsts[static_cast<std::size_t>(s)] = f;
    for (std::size_t k = f; k < e; ++k) owner[k] = s;
  }
  std::vector<float> delta(a.key);
  std::vector<double> t;
  for (int round = 0; round < a.rounds; ++round) {
    const auto changed = changed_keys(keys, a.fraction, rank, round);
    world.barrier();
    const auto t0 = Clock::now();
    for (std::size_t k : changed) {
      // What the workers added this round, as the server thread would have it pushed (a delta buffer per key).
      std::fill(delta.begin(), delta.end(), step(rank, round));
      const int s = owner[k];
      MPI_Accumulate(delta.data(), static_cast<int>(a.key), MPI_FLOAT, s,
                     static_cast<MPI_Aint>((k - firsts[static_cast<std::size_t>(s)]) * a.key), static_cast<int>(a.key),
                     MPI_FLOAT, MPI_SUM, win);
    }
    MPI_Win_flush_all(win);
    world.barrier();  // BSP: every push in before any pull
    for (int s = 0; s < P; ++s) {
      const auto [f, e] = shard_keys(keys, s, P);
      MPI_Get(x.data() + f * a.key, static_cast<int>((e - f) * a.key), MPI_FLOAT, s, 0, static_cast<int>((e - f) * a.key),
              MPI_FLOAT, win);
    }
    MPI_Win_flush_all(win);
    MPI_Win_sync(win);
    world.barrier();  // nobody pushes the next round into a shard still being read
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  asgd::net::MpiSession session(&argc, &argv, MPI_THREAD_MULTIPLE);
  asgd::net::MpiTransport world;
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--floats") a.floats = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--key") a.key = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--fraction") a.fraction = std::atof(argv[i + 1]);
    else if (flag == "--rounds") a.rounds = std::atoi(argv[i + 1]);
    else {
      if (world.rank() == 0) std::fprintf(stderr, "usage: bench_ps_transport [--floats N] [--key F] [--fraction F] [--rounds R]\n");
      return 2;
    }
  }
  a.floats -= a.floats % a.key;
  std::vector<float> x1(a.floats, 0.5f), x2(a.floats, 0.5f);
  const std::vector<double> p2p = run_p2p(world, a, x1);
  const std::vector<double> onesided = run_onesided(world, a, x2);
  float worst = 0;
  for (std::size_t i = 0; i < x1.size(); ++i) worst = std::max(worst, std::abs(x1[i] - x2[i]));
  if (world.rank() == 0) {
    const double bytes = static_cast<double>(a.floats) * sizeof(float);
    std::printf("ranks %d, %.1f MB of parameters, keys of %zu floats, %.0f %% changed a round, %d rounds\n",
                world.size(), bytes / 1e6, a.key, 100 * a.fraction, a.rounds);
    std::printf("p2p (server thread, tagged messages): median %.4f s a round\n", median(p2p));
    std::printf("one-sided (MPI_Accumulate + MPI_Get): median %.4f s a round\n", median(onesided));
    std::printf("ratio one-sided / p2p: %.2f; largest difference between the two ways' parameters %.2e\n",
                median(onesided) / median(p2p), worst);
  }
  return 0;
}
