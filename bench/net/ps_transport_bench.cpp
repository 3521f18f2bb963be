// One bulk-synchronous parameter-server round over MPI, by each of net::ParameterServer's transports:
//   messages:  the server thread per rank; pushes and pulls as tagged messages (MPI_Isend / MPI_Improbe +
//              MPI_Mrecv); only changed keys travel, refreshed by version;
//   one-sided: each rank's shard is a window; a push is an MPI_Accumulate (MPI_SUM) per run of changed keys
//              and a raise of their versions, a pull reads the versions and then the keys changed since the
//              slowest rank's last clock (PsTransport::one_sided).
// Both under the sum rule, so both end each round with the same parameters (checked). Every round each
// rank changes `--fraction` of the keys (random, the same for both ways); rank 0 prints the median seconds
// per round over `--rounds` rounds of each way (messages first, then one-sided) and the ratio.
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

// One transport's rounds: every round each rank adds to the keys it changes, then a blocking ps.round().
std::vector<double> run(asgd::net::MpiTransport& world, const Args& a, std::vector<float>& x,
                        asgd::net::PsTransport transport) {
  asgd::net::ParameterServer ps(world, x, asgd::net::PsOptions{.tau = 0, .rule = asgd::net::ServerRule::sum,
                                                               .key_floats = a.key, .transport = transport});
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
  const std::vector<double> p2p = run(world, a, x1, asgd::net::PsTransport::messages);
  const std::vector<double> onesided = run(world, a, x2, asgd::net::PsTransport::one_sided);
  float worst = 0;
  for (std::size_t i = 0; i < x1.size(); ++i) worst = std::max(worst, std::abs(x1[i] - x2[i]));
  if (world.rank() == 0) {
    const double bytes = static_cast<double>(a.floats) * sizeof(float);
    std::printf("ranks %d, %.1f MB of parameters, keys of %zu floats, %.0f %% changed a round, %d rounds\n",
                world.size(), bytes / 1e6, a.key, 100 * a.fraction, a.rounds);
    std::printf("messages (server thread, tagged messages): median %.4f s a round\n", median(p2p));
    std::printf("one-sided (windows: MPI_Accumulate, versions, MPI_Get): median %.4f s a round\n", median(onesided));
    std::printf("ratio one-sided / messages: %.2f; largest difference between the two ways' parameters %.2e\n",
                median(onesided) / median(p2p), worst);
  }
  return 0;
}
