// The allreduce algorithms over real MPI: run by ctest under
// `mpiexec --oversubscribe -n 2` and `-n 4` (tests/net/CMakeLists.txt).
// Every rank checks the closed-form sums for every algorithm and size; a
// failure aborts the job with the rank in the message.
#include <cstdio>
#include <string>
#include <vector>

#include "asgd/net/allreduce.hpp"
#include "asgd/net/mpi.hpp"

int main(int argc, char** argv) {
  asgd::net::MpiSession session(&argc, &argv);
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
  // Every rank's verdict reaches rank 0, which reports for the job.
  std::vector<float> bad{static_cast<float>(failures)};
  asgd::net::make_allreduce(asgd::net::Algorithm::native, world)->sum(bad);
  if (r == 0) std::printf("%d ranks: %s\n", P, bad[0] == 0 ? "all allreduce checks passed" : "FAILED");
  return bad[0] == 0 ? 0 : 1;
}
