// The allreduce algorithms over real MPI: run by ctest under
// `mpiexec --oversubscribe -n 2` and `-n 4` (tests/net/CMakeLists.txt).
// Every rank checks the closed-form sums for every algorithm and size, then
// model averaging with its communication thread (MPI_THREAD_SERIALIZED)
// while a worker thread keeps updating: the ranks must end equal, holding
// the closed-form mean of all updates.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "asgd/net/allreduce.hpp"
#include "asgd/net/averaging.hpp"
#include "asgd/net/mpi.hpp"

int main(int argc, char** argv) {
  asgd::net::MpiSession session(&argc, &argv, MPI_THREAD_SERIALIZED);
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
  // Every rank's verdict reaches rank 0, which reports for the job.
  std::vector<float> bad{static_cast<float>(failures)};
  asgd::net::make_allreduce(asgd::net::Algorithm::native, world)->sum(bad);
  if (r == 0) std::printf("%d ranks: %s\n", P, bad[0] == 0 ? "all allreduce and averaging checks passed" : "FAILED");
  return bad[0] == 0 ? 0 : 1;
}
