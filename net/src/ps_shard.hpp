// The parameter server's wire format and one shard's state (private to net/):
// pure logic, no threads and no transport, so that parameter_server.cpp only
// moves messages.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "asgd/net/parameter_server.hpp"

namespace asgd::net::ps {

enum class Kind : std::uint64_t { init = 1, push_pull = 2, reply = 3, stop = 4 };
inline constexpr int kRequestTag = 101;  // to a server
inline constexpr int kReplyTag = 102;    // to a rank's client
inline constexpr int kStatsTag = 103;    // a dedicated server's figures, to worker rank 0 at the end
inline constexpr std::uint64_t kFinished = 1;  // push_pull flag: the rank takes no more steps
// push_pull flags: how each key's deltas are encoded (neither: w floats).
inline constexpr std::uint64_t kInt8 = 2;  // a float scale, then w signed bytes: d = scale q
inline constexpr std::uint64_t kSign = 4;  // a float scale, then w bits: d = +-scale
inline constexpr std::uint64_t kWithSums = 8;  // init flag: each key's w values, then its w AdaGrad sums

// A message: the header, then `count` key ids, then the keys' values in that
// order (floats, or per key as the flags encode them). push_pull: clock = the round, seen = the shard version of the
// sender's last pull (0: none), floats = deltas, epoch = the epochs the sender
// has finished, generation = the newest checkpoint generation it has seen
// every shard write. reply: seen = the shard's version now, floats = values,
// generation = the shard's last checkpoint generation (0: none). init: the
// root's values for the whole shard, clock = the parameters' size, seen =
// options_digest of the root's options, epoch = the job's id, generation =
// the model's digest, flags kWithSums when AdaGrad's sums follow each key's
// values (a resumed generation's).
struct Header {
  Kind kind{};
  std::uint64_t clock = 0, seen = 0, flags = 0, count = 0, epoch = 0, generation = 0;
};
struct Decoded {
  Header header;
  std::vector<std::uint64_t> keys;
  std::vector<float> floats;
};
// Keys [first_key, end_key) of a vector of n floats cut into keys of w floats.
struct KeyRange {
  std::size_t n = 0, w = 1, first_key = 0, end_key = 0;
  std::size_t begin(std::size_t key) const noexcept { return key * w; }
  std::size_t end(std::size_t key) const noexcept { return key * w + w < n ? key * w + w : n; }
  // The range's floats, [first_float, end_float); both 0 for a range of no keys.
  std::size_t first_float() const noexcept { return end_key > first_key ? begin(first_key) : 0; }
  std::size_t end_float() const noexcept { return end_key > first_key ? end(end_key - 1) : 0; }
  // Shard s of `ranks`: keys ceil(n / w) split into contiguous ranges.
  static KeyRange of_shard(std::size_t n, std::size_t w, int s, int ranks);
};

// What a server must share with the workers to apply their pushes alike: the rule and its rate, tau, the warm
// rounds, the key size, the servers and the `clients` (worker ranks).
std::uint64_t options_digest(const PsOptions& options, int clients) noexcept;
// A message's header; RuntimeError naming `from` when it is shorter than one.
Header peek(std::span<const std::byte> bytes, int from);

// The bytes one key of w values takes under `flags`' encoding.
std::size_t key_bytes(std::size_t w, std::uint64_t flags) noexcept;
// Appends the key's values `d` encoded per `flags` to `out`, and puts in
// `sent` what a decoder will read back (d itself for floats).
void encode_key(std::span<const float> d, std::uint64_t flags, std::vector<std::byte>& out, std::span<float> sent);

std::vector<std::byte> encode(const Header& header, std::span<const std::uint64_t> keys,
                              std::span<const std::byte> payload);
std::vector<std::byte> encode(const Header& header, std::span<const std::uint64_t> keys,
                              std::span<const float> floats);
// The keys checked against `range` and their values decoded to floats.
// RuntimeError naming `from` for a key outside the range or sizes that do
// not add up.
Decoded decode(std::span<const std::byte> bytes, int from, const KeyRange& range);

class Shard {
 public:
  // `ranks`: the worker ranks, 0 to ranks - 1, that push and pull; this is shard `shard` of `shards` (the
  // checkpoint files' names).
  Shard(int ranks, KeyRange range, const PsOptions& options, std::size_t shard, std::size_t shards);
  struct Out {
    int dst;
    std::vector<std::byte> bytes;
  };
  // A request from rank `src`; appends the replies that may now be sent.
  // RuntimeError for a malformed or out-of-range request.
  void handle(int src, std::span<const std::byte> bytes, std::vector<Out>& out);
  // Every rank has finished and has its final reply.
  bool done() const noexcept { return finals_served_ == ranks_; }
  // Writes the next checkpoint generation when it is due (PsOptions::checkpoint_seconds after the last).
  void tick(std::chrono::steady_clock::time_point now);
  std::uint64_t generations_written() const noexcept { return generations_written_; }
  const StalenessHistogram& staleness() const noexcept { return staleness_; }
  std::uint64_t max_clock_gap() const noexcept { return max_gap_; }

 private:
  struct Pull {
    int rank;
    std::uint64_t clock, seen;
    bool final;
  };
  void apply(const Decoded& push);
  std::uint64_t slowest() const noexcept;  // the least clock of the ranks still training; kUnbounded if none
  bool ready(const Pull& p) const noexcept;
  void serve(const Pull& p, std::vector<Out>& out);
  void serve_ready(std::vector<Out>& out);
  void write_generation(std::uint64_t generation);
  std::chrono::steady_clock::duration period() const;  // PsOptions::checkpoint_seconds
  // The least of the epochs the workers said they have finished.
  std::uint64_t epochs_done() const noexcept;

  int ranks_;
  KeyRange range_;
  PsOptions options_;
  std::vector<float> values_, sums_;        // the shard's floats; AdaGrad's sums of squared deltas
  std::vector<std::uint64_t> key_version_;  // the version that last changed each key
  std::uint64_t version_ = 0;               // pushes applied (1 after init)
  std::vector<std::uint64_t> clock_;        // each rank's last pushed round
  std::vector<bool> finished_;
  std::vector<Pull> pending_;
  int finished_count_ = 0, finals_served_ = 0;
  StalenessHistogram staleness_;
  std::uint64_t max_gap_ = 0;
  // Checkpoints (PsOptions::checkpoint): this shard's place, the job and model the root named at init, when
  // the next generation is due, the last one written and the newest the workers saw complete, and each
  // worker's epochs.
  std::size_t shard_ = 0, shards_ = 1;
  std::uint64_t job_ = 0, model_ = 0;
  std::chrono::steady_clock::time_point next_due_{};
  std::uint64_t written_ = 0, complete_ = 0, generations_written_ = 0;
  std::vector<std::uint64_t> epochs_;
};

}  // namespace asgd::net::ps
