// Ranks as threads of one process over a LocalFabric, for tests of net/.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "asgd/net/transport.hpp"
#include "message_of.hpp"

namespace asgd::testing {

// Runs body(rank's transport, rank) on P threads; each rank's first exception is kept, as message_of says it
// ("(no exception)" when none).
inline std::vector<std::string> on_ranks(int P, const std::function<void(net::Transport&, int)>& body) {
  net::LocalFabric fabric(P);
  std::vector<std::string> errors(static_cast<std::size_t>(P));
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) {
    threads.emplace_back(
        [&, r] { errors[static_cast<std::size_t>(r)] = message_of([&] { body(fabric.endpoint(r), r); }); });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace asgd::testing
