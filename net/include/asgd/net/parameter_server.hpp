// A parameter server across ranks (DistBelief's Downpour SGD; the Parameter
// Server of Li et al., OSDI 2014). The parameter vector is cut into keys of
// PsOptions::key_floats floats (rows), and the keys into one contiguous range
// per rank, its shard, kept by a server thread on that rank. Every rank
// trains a local copy with the single-node engine and, every round, pushes
// the keys it changed (its deltas since the last pull) to their shards and
// pulls the keys other ranks changed since its last pull (refreshed by
// version: a key nobody changed is not sent again).
//
// The servers apply a push by a rule (ServerRule: the mean, each delta over
// the number of ranks; the sum, asynchronous SGD; or per-parameter AdaGrad
// kept on the server, Downpour's) and hold a pull back until the slowest rank
// has pushed round k - tau (PsOptions::tau): tau 0 is bulk-synchronous (every
// round sees every rank's deltas of that round: the same parameters as model
// averaging's Combine::mean, or Combine::sum under the sum), a finite
// tau is stale-synchronous (SSP), kUnbounded is asynchronous (ASP). The
// staleness of each push (pushes of other ranks its shard applied since the
// pushing rank last pulled from it) is measured per shard.
//
// Dedicated server ranks (PsOptions::servers S > 0, ps-lite's and DistBelief's
// layout): the last S ranks of the transport keep the shards and do nothing
// else (serve_dedicated), and the first P - S ranks are the workers, each
// with a ParameterServer that is a client only.
//
// Two transports (PsTransport): tagged messages to a server thread on each
// rank, or one-sided: each shard is a Window (MPI_Win_allocate), a push is an
// MPI_Accumulate of the deltas into it and a raise of the keys' versions, a
// pull reads the versions and then the keys changed since the slowest rank's
// clock at the last pull; the clocks are words in rank 0's window. No server
// thread runs; the mean and sum rules and float pushes only (AdaGrad's
// state and the decoding of compressed pushes need a server).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "asgd/engine/bounded_delay.hpp"
#include "asgd/net/periodic_rounds.hpp"

namespace asgd::net {

class Transport;

// mean: x += d / ranks, the default: with many local steps a round (matrix factorization at 100 steps of
// ~4,000 ratings) the sum of every rank's deltas overshoots the rows they share and the error climbs
// (bench/RESULTS.md); sum: x += d, asynchronous SGD, right when a push is a step or a few.
enum class ServerRule { mean, sum, adagrad };
std::string_view to_string(ServerRule rule) noexcept;

// How a push encodes each key's deltas: floats; int8 (a scale per key, max
// |d| / 127, and a byte per value); sign (1 bit per value and a scale per
// key, the mean |d|: 1-bit SGD).
enum class PushEncoding { floats, int8, sign };
std::string_view to_string(PushEncoding encoding) noexcept;

// messages: MPI_Isend / MPI_Improbe to a server thread per rank; one_sided: MPI_Accumulate and MPI_Get on a
// window per shard, without a server thread; automatic: one_sided where it applies (the mean or sum rule,
// float pushes) and every rank is on one host (Transport::one_host), where it measured faster (matrix
// factorization 1.1-1.3x, word2vec 2.4x end to end: bench/RESULTS.md), messages otherwise.
enum class PsTransport { automatic, messages, one_sided };
std::string_view to_string(PsTransport transport) noexcept;

struct PsOptions {
  std::uint64_t tau = 0;       // rounds a rank may run ahead of the slowest's pushes; kUnbounded: ASP
  std::uint64_t warm_rounds = 0;  // rounds 1..warm_rounds bulk-synchronous whatever tau (DistBelief's warm start)
  ServerRule rule = ServerRule::mean;
  float server_lr = 0.1f;      // AdaGrad's step on the server: x += lr d / (sqrt(sum d^2) + eps)
  float adagrad_eps = 1e-6f;
  std::size_t key_floats = 32;  // floats per key: a push or pull moves whole keys
  // Compression of pushes (pulls are floats). With error feedback, what a push leaves out (the keys outside
  // push_fraction, the quantisation error) stays in the rank's copy and goes with a later push (Seide 2014,
  // Karimireddy 2019); without, it is dropped. The last round pushes every change exactly.
  PushEncoding push = PushEncoding::floats;
  float push_fraction = 1;      // the changed keys pushed each round, those of largest delta first (top-k)
  bool error_feedback = true;
  PsTransport transport = PsTransport::automatic;
  // Dedicated server ranks, the transport's last `servers`; 0: a server thread on every rank. Tagged messages
  // only (the one-sided transport's shards are the workers' own windows).
  std::size_t servers = 0;
  // InputError naming the option: PsOptions::key_floats, ..., or as `spell` says it, called with
  // "key-floats", "server-lr", "ps-push-fraction", "adagrad-eps" or "ps-transport" (one_sided with the
  // AdaGrad rule, a compressed push or dedicated servers).
  void validate(const std::function<std::string(std::string_view)>& spell = {}) const;
};

// The transport `options` ask for, automatic resolved for `transport` (the same on every rank).
PsTransport resolve_transport(const PsOptions& options, const Transport& transport) noexcept;

// Whether this rank of `transport` is one of options.servers dedicated server ranks (the last ones).
bool is_server_rank(const PsOptions& options, const Transport& transport) noexcept;

// One shard's server state and the wire format (private: net/src/ps_shard.hpp).
namespace ps {
class Shard;
struct KeyRange;
}

struct PsStats {
  std::uint64_t rounds = 0;
  std::uint64_t bytes_pushed = 0, bytes_pulled = 0;  // this rank's, both ways, headers included
  std::uint64_t keys_pushed = 0, keys_pulled = 0;
  double wait_seconds = 0;           // from this rank's pushes to its last pull reply, summed over rounds
  // messages: at this rank's shard, per push, other ranks' pushes it missed; one_sided: per push of this
  // rank, the other ranks' rounds completed since its last pull.
  StalenessHistogram staleness;
  std::uint64_t max_clock_gap = 0;   // most rounds a served pull was ahead of the slowest (one_sided: this rank's)
};

class ParameterServer {
 public:
  // `params` is this rank's local copy (the ParamStore's data), the same
  // size on every worker rank; `transport` outlives this. Starts this rank's
  // server thread, unless the job has dedicated server ranks. InputError from
  // options.validate(), and on a dedicated server rank or in a job of no
  // worker rank (options.servers >= the ranks).
  ParameterServer(Transport& transport, std::span<float> params, PsOptions options);
  ~ParameterServer();
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;

  // Collective (the workers): the servers take the parameters of the rank
  // that passes root = true, and every rank's copy becomes them, bit for bit.
  void share(bool root);
  // One blocking round: push this rank's deltas, pull what changed. Not
  // while the round thread runs.
  void round();
  // Rounds every K local steps on a thread while the workers train
  // (PeriodicRounds); step_done is the Trainer's on_step.
  void start(std::uint64_t every_steps);
  void step_done(std::uint64_t examples) noexcept { rounds_thread_.step_done(examples); }
  // Collective: a last round; returns when every rank has finished and
  // holds the servers' final parameters (the same on every rank, bit for
  // bit), then ends this rank's server. Rethrows a round's or the server's
  // error.
  void stop();

  PsStats stats() const;
  const PsOptions& options() const noexcept { return options_; }

 private:
  struct Client;
  struct OneSided;
  void serve() noexcept;
  // PsTransport::one_sided's share, round (as exchange) and end (ps_one_sided.cpp).
  void share_one_sided(bool root);
  bool exchange_one_sided(bool finished);
  // Reads rank 0's clocks (OneSided::read_view) until `ready` says so, with a backoff; gives up when abandoned.
  void wait_one_sided(const std::function<bool()>& ready);
  // After a bulk-synchronous round, waits until every rank still training has pulled it.
  void wait_for_pulls_one_sided(std::uint64_t clock);
  void push_one_sided(bool finished, std::uint64_t clock);
  // Waits until the bound lets round `clock` pull (with `finished`, until every rank has finished); returns
  // the slowest unfinished rank's clock (kUnbounded: none) and records staleness and the clock gap.
  std::uint64_t gate_one_sided(bool finished, std::uint64_t clock);
  void pull_one_sided(bool finished, std::uint64_t since);
  // One round; `first`: share's pull of everything, which pushes nothing. True when every rank has finished.
  bool exchange(bool finished, bool first = false);
  // The keys of shard range `r` whose values changed since the last pull, the push_fraction largest (all of
  // them when `finished`); takes the snapshot and clears `sent` for the range.
  std::vector<std::uint64_t> changed_keys(const ps::KeyRange& r, bool finished);
  // Takes a pulled key's server values (`server`, its floats): local += server - base - sent, what this rank
  // has that the server has not (with error feedback; without, server - snapshot); with `exact` (share's
  // pull, the last round) the server's values as they are, the same bits on every rank.
  void take_key(const ps::KeyRange& r, std::uint64_t key, const float* server, bool exact);

  // The rank that keeps shard s: s itself, or with dedicated servers the (s + 1)-th of the last ranks.
  int server_rank(std::size_t s) const noexcept { return first_server_ + static_cast<int>(s); }

  Transport& transport_;
  int first_server_ = 0;
  std::span<float> params_;
  PsOptions options_;
  std::unique_ptr<ps::Shard> shard_;    // PsTransport::messages
  std::unique_ptr<OneSided> one_sided_;  // PsTransport::one_sided
  std::unique_ptr<Client> client_;
  std::thread server_;
  std::atomic<bool> server_stop_{false};
  std::atomic<bool> abandoned_{false};  // the destructor runs: a round waiting for replies gives up
  std::exception_ptr server_error_;       // written by the server thread before server_failed_
  std::atomic<bool> server_failed_{false};
  bool stopped_ = false;
  PeriodicRounds rounds_thread_;  // last: its thread ends before the members it uses
};

// A dedicated server rank's whole part in the job (is_server_rank): keeps its shard until every worker has
// finished and has its final reply, then returns the shard's figures (staleness, clock gap; no traffic). The
// shard's size comes with the root's parameters; InputError when this is not a server rank, RuntimeError when
// the workers' PsOptions differ from `options` (every rank must be given the same) or a request is malformed.
PsStats serve_dedicated(Transport& transport, const PsOptions& options);

}  // namespace asgd::net
