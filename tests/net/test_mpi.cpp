// The allreduce algorithms over real MPI: run by ctest under
// `mpiexec --oversubscribe -n 2` and `-n 4` (tests/net/CMakeLists.txt).
// Every rank checks the closed-form sums for every algorithm and size, then
// model averaging with its communication thread (MPI_THREAD_SERIALIZED)
// while a worker thread keeps updating: the ranks must end equal, holding
// the closed-form mean of all updates. Then the parameter server
// (MPI_THREAD_MULTIPLE: a server thread and a round thread beside the
// worker) under tau 0, 3 and inf: every rank ends with the same bits,
// holding every rank's updates, and no served pull ran more than tau rounds
// ahead of the slowest rank.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "asgd/net/allreduce.hpp"
#include "asgd/net/averaging.hpp"
#include "asgd/net/mpi.hpp"
#include "asgd/net/parameter_server.hpp"

int main(int argc, char** argv) {
  asgd::net::MpiSession session(&argc, &argv, MPI_THREAD_MULTIPLE);
  asgd::net::MpiTransport world;
  const int P = world.size(), r = world.rank();
  int failures = 0;
  for (auto a : {asgd::net::Algorithm::ring, asgd::net::Algorithm::tree, asgd::net::Algorithm::native}) {
    auto reduce = asgd::net::make_allreduce(a, world);
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000},
                          (std::size_t{1} << 20) + 3}) {
      std::vector<float> data(n);
      for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<float>((r + 1) * static_cast<int>(i % 7 + 1));
      reduce->sum(data);
      const float total = static_cast<float>(P * (P + 1) / 2);
      for (std::size_t i = 0; i < n; ++i)
        if (data[i] != total * static_cast<float>(i % 7 + 1)) {
          std::fprintf(stderr, "rank %d: %s with %zu floats: element %zu is %g, expected %g\n", r,
                       std::string(asgd::net::to_string(a)).c_str(), n, i, static_cast<double>(data[i]),
                       static_cast<double>(total * static_cast<float>(i % 7 + 1)));
          ++failures;
          break;
        }
    }
  }
  for (auto a : {asgd::net::Algorithm::ring, asgd::net::Algorithm::tree}) {
    // Rank r takes 300 + 50 r steps, each adding r + 1 to all 10,007
    // parameters; a mean-combining round keeps the sum over ranks.
    auto reduce = asgd::net::make_allreduce(a, world);
    std::vector<float> x(10007, 0.0f);
    asgd::net::ModelAverager averager(*reduce, x);
    averager.start(7);
    const int steps = 300 + 50 * r;
    std::thread worker([&] {
      for (int s = 0; s < steps; ++s) {
        for (auto& v : x) std::atomic_ref<float>(v).fetch_add(static_cast<float>(r + 1), std::memory_order_relaxed);
        averager.step_done(1);
      }
    });
    worker.join();
    averager.stop();
    double expected = 0;
    for (int q = 0; q < P; ++q) expected += (300.0 + 50.0 * q) * (q + 1);
    expected /= P;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (std::fabs(x[i] - expected) > 1e-5 * expected) {
        std::fprintf(stderr, "rank %d: averaging over %s: element %zu is %g, expected %g\n", r,
                     std::string(asgd::net::to_string(a)).c_str(), i, static_cast<double>(x[i]), expected);
        ++failures;
        break;
      }
    if (r == 0) std::printf("%s: %llu averaging rounds\n", std::string(asgd::net::to_string(a)).c_str(),
                            static_cast<unsigned long long>(averager.rounds()));
  }
  for (const std::uint64_t tau : {std::uint64_t{0}, std::uint64_t{3}, asgd::kUnbounded}) {
    // Rank r adds r + 1 to its own slots (i = r mod P) for 200 + 40 r steps; rank 0 is slow.
    std::vector<float> x(5003, 0.0f);
    const asgd::net::PsOptions options{.tau = tau, .rule = asgd::net::ServerRule::sum, .key_floats = 16};
    asgd::net::ParameterServer ps(world, x, options);
    ps.share(r == 0);
    ps.start(5);
    const int steps = 200 + 40 * r;
    std::thread worker([&] {
      for (int s = 0; s < steps; ++s) {
        for (std::size_t i = static_cast<std::size_t>(r); i < x.size(); i += static_cast<std::size_t>(P))
          std::atomic_ref<float>(x[i]).fetch_add(static_cast<float>(r + 1), std::memory_order_relaxed);
        if (r == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        ps.step_done(1);
      }
    });
    worker.join();
    ps.stop();
    const asgd::net::PsStats stats = ps.stats();
    for (std::size_t i = 0; i < x.size(); ++i) {
      const int q = static_cast<int>(i % static_cast<std::size_t>(P));
      const float expected = static_cast<float>((200 + 40 * q) * (q + 1));
      if (x[i] != expected) {
        std::fprintf(stderr, "rank %d: parameter server, tau %s: element %zu is %g, expected %g\n", r,
                     asgd::tau_to_string(tau).c_str(), i, static_cast<double>(x[i]), static_cast<double>(expected));
        ++failures;
        break;
      }
    }
    if (tau != asgd::kUnbounded && stats.max_clock_gap > tau) {
      std::fprintf(stderr, "rank %d: parameter server, tau %llu: a pull served %llu rounds ahead\n", r,
                   static_cast<unsigned long long>(tau), static_cast<unsigned long long>(stats.max_clock_gap));
      ++failures;
    }
    if (r == 0)
      std::printf("parameter server, tau %s: %llu rounds, clock gap at most %llu, staleness %s\n",
                  asgd::tau_to_string(tau).c_str(), static_cast<unsigned long long>(stats.rounds),
                  static_cast<unsigned long long>(stats.max_clock_gap), stats.staleness.describe().c_str());
  }
  // Every rank's verdict reaches rank 0, which reports for the job.
  std::vector<float> bad{static_cast<float>(failures)};
  asgd::net::make_allreduce(asgd::net::Algorithm::native, world)->sum(bad);
  if (r == 0) std::printf("%d ranks: %s\n", P, bad[0] == 0 ? "all allreduce, averaging and parameter server checks passed" : "FAILED");
  return bad[0] == 0 ? 0 : 1;
}
