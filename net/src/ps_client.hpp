// The parameter server's client side, shared by its two transports (private
// to net/): this rank's copy's base (the values of the last pull), the
// snapshot a round pushes from and what the server will decode of each
// pushed key; and the one-sided transport's window and clocks.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "asgd/net/parameter_server.hpp"
#include "asgd/net/transport.hpp"
#include "ps_shard.hpp"

namespace asgd::net {

struct ParameterServer::Client {
  std::vector<ps::KeyRange> shards;
  std::vector<float> base, snapshot, sent;
  std::vector<std::uint64_t> seen;  // messages: the shard versions of the last pull
  std::vector<std::uint64_t> written;  // messages: each shard's last checkpoint generation, as its replies say
  std::uint64_t clock = 0;
  mutable std::mutex stats_mutex;
  PsStats stats;
};

// Each rank's window: words [0, P) the ranks' clocks (their last pushed round), [P, 2P) whether each has
// finished, [2P, 3P) the last round each has pulled (rank 0's are the ones used), then a version per key of the
// rank's shard (the round of its last push); then the shard's floats.
struct ParameterServer::OneSided {
  std::unique_ptr<Window> window;
  int ranks = 1;
  std::uint64_t since = 0;             // the slowest unfinished clock read before the last pull
  std::vector<std::uint64_t> clocks;   // every rank's clock as the last gate read them
  std::vector<std::uint64_t> view;     // rank 0's 3P words as last read
  std::uint64_t clock_reads = 0;
  std::vector<std::uint64_t> words;    // scratch: versions read, a word raised
  std::vector<float> floats;           // scratch: values pulled, at their index in the parameters
  std::vector<std::vector<std::uint64_t>> pulled;  // scratch: the keys a pull takes, per shard
  // A push's deltas and versions per shard, kept until the flush that completes them.
  std::vector<std::vector<float>> deltas;
  std::vector<std::vector<std::uint64_t>> versions;

  std::size_t P() const noexcept { return static_cast<std::size_t>(ranks); }
  static constexpr std::size_t kClocks = 0, kFinished = 1, kPulled = 2;  // rank 0's word arrays, P words each
  std::size_t word_at(std::size_t array, std::size_t rank) const noexcept { return 8 * (array * P() + rank); }
  std::size_t versions_at() const noexcept { return 8 * 3 * P(); }
  static std::size_t values_at(const ps::KeyRange& r, int ranks) noexcept {
    return 8 * (3 * static_cast<std::size_t>(ranks) + (r.end_key - r.first_key));
  }
  static std::size_t bytes(const ps::KeyRange& r, int ranks) noexcept {
    return values_at(r, ranks) + 4 * (r.end_float() - r.first_float());
  }
  // Reads rank 0's words into `view`.
  void read_view() {
    view.resize(3 * P());
    window->get(0, 0, view);
    window->flush();
    ++clock_reads;
  }
  std::uint64_t at(std::size_t array, std::size_t rank) const noexcept { return view[array * P() + rank]; }
  // Raises this rank's word of `array` to `value`, flushed.
  void raise_mine(std::size_t array, int rank, std::uint64_t value) {
    words.assign(1, value);
    window->raise(0, word_at(array, static_cast<std::size_t>(rank)), words);
    window->flush();
  }
};

// Waits with a growing sleep (20 us to 0.5 ms): a spinning poll would take a
// core from the workers on a machine with as many ranks as cores.
class Backoff {
 public:
  void idle() {
    std::this_thread::sleep_for(std::chrono::microseconds(us_));
    us_ = std::min(us_ * 2, 500);
  }
  void reset() { us_ = 20; }

 private:
  int us_ = 20;
};

}  // namespace asgd::net
