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
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
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
  // Rounds overlap a period of compute: a worker goes on past a round's start while its push and pull are in
  // flight, on a copy that lacks the other ranks' deltas of that round. false: the worker waits at the round's
  // start until the round ends; with tau 0 and one worker a rank every step then sees every rank's steps of
  // the rounds before it (Li et al.'s sequential consistency), and tau adds its rounds to that.
  bool overlap = true;
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
  // Server checkpoints: with a prefix, every server writes its shard (values, AdaGrad's sums, the epochs every
  // worker has finished) as PREFIX.ps-<job>-g<G>-<s>of<S>, generation G = 1, 2, ... every checkpoint_seconds
  // from the start, and a final generation once every worker has finished; each file
  // is written atomically, and a generation is complete when all S shards of one job wrote it (read_generation).
  // A server removes its files of a generation older than one the workers saw complete, and other jobs' files
  // under the prefix once this job has a complete one. Tagged messages only (the one-sided transport has no
  // server to write them).
  std::filesystem::path checkpoint = {};
  double checkpoint_seconds = 60;
  // The servers start from the newest complete generation under this prefix instead of the root's parameters
  // (and, under the AdaGrad rule, with its sums): the shards are cut again for this job's servers, so the job
  // may have other ranks than the one that wrote it.
  std::filesystem::path resume = {};
  // InputError naming the option: PsOptions::key_floats, ..., or as `spell` says it, called with
  // "key-floats", "server-lr", "ps-push-fraction", "adagrad-eps" or "ps-transport" (one_sided with the
  // AdaGrad rule, a compressed push or dedicated servers).
  void validate(const std::function<std::string(std::string_view)>& spell = {}) const;
};

// A complete generation of the servers' checkpoint files, read back whole.
struct PsGeneration {
  std::filesystem::path prefix;
  std::uint64_t job = 0;         // the writing job's id (its start time)
  std::uint64_t generation = 0;  // final_generation once every worker had finished
  std::uint64_t epoch = 0;       // epochs every worker had finished when it was written (the least of the shards')
  std::uint64_t model = 0;       // the model's digest the workers gave (its layout's)
  std::size_t shards = 0, key_floats = 0;
  ServerRule rule = ServerRule::mean;
  std::vector<float> values, sums;  // the whole vector; AdaGrad's sums (empty under the other rules)
  bool values_taken = true;  // ParameterServer::share: its values became the job's (not when older than the run)
  // "the final generation" or "generation G".
  std::string name() const;
  static constexpr std::uint64_t final_generation = std::uint64_t{1} << 62;
};
// The newest complete generation under `prefix` (the latest job's, then its latest generation); none when no
// generation is complete. Incomplete generations and files that are not sound are passed over.
std::optional<PsGeneration> read_generation(const std::filesystem::path& prefix);

// The transport `options` ask for, automatic resolved for `transport` (the same on every rank).
PsTransport resolve_transport(const PsOptions& options, const Transport& transport) noexcept;

// Collective over every rank of `transport`, before the ranks take their roles: InputError on every rank,
// naming `name` and each rank's value, unless all were given the same number of dedicated servers (ranks that
// disagree would wait for each other in different roles for ever).
void same_servers_on_all_ranks(Transport& transport, std::size_t servers,
                               std::string_view name = "PsOptions::servers");

// Whether this rank of `transport` is one of options.servers dedicated server ranks (the last ones).
bool is_server_rank(const PsOptions& options, const Transport& transport) noexcept;
// InputError, naming the option as `name`, unless a job of `ranks` keeps 2 worker ranks or more beside
// `servers` dedicated servers (one worker would train as one process, and nothing would feed the servers).
void check_server_ranks(std::size_t servers, int ranks, std::string_view name = "PsOptions::servers");

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
  // messages: at this rank's shard, per push, other ranks' pushes it missed (with dedicated servers: at all
  // of them, on worker rank 0 after stop()); one_sided: per push of this rank, the other ranks' rounds
  // completed since its last pull.
  StalenessHistogram staleness;
  std::uint64_t max_clock_gap = 0;   // most rounds a served pull was ahead of the slowest (one_sided: this rank's)
  std::uint64_t generations = 0;     // checkpoint generations this rank's shard (or each server) wrote, final included
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
  // With PsOptions::resume the root first takes the newest complete
  // generation under it and returns it, without its vectors: the servers
  // take its AdaGrad sums, and every rank its values unless it holds fewer
  // epochs than `epoch`, those this run has done (resumed from a model
  // checkpoint written since, whose values it keeps). InputError when there
  // is none, or it is of another size or `model` (the layout's digest, which
  // the checkpoints record).
  std::optional<PsGeneration> share(bool root, std::uint64_t epoch = 0, std::uint64_t model = 0);
  // The epochs this rank has finished, sent with its next push: the servers stamp a checkpoint generation with
  // the least of the workers'.
  void epoch_done(std::uint64_t epochs) noexcept { epochs_.store(epochs, std::memory_order_relaxed); }
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
  // On worker rank 0 at the end, with dedicated servers: every server's figures merged into this rank's.
  void take_server_figures();
  // share's reading of PsOptions::resume on the root; its values are then this rank's copy.
  std::optional<PsGeneration> take_generation(std::uint64_t epoch, std::uint64_t model);
  // share over messages: the root's parameters (and a generation's sums) to every shard, then the pull of all.
  void share_messages(bool root, const std::optional<PsGeneration>& resumed, std::uint64_t model);
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
  std::atomic<std::uint64_t> epochs_{0};  // epoch_done's, sent with each push
  bool stopped_ = false;
  PeriodicRounds rounds_thread_;  // last: its thread ends before the members it uses
};

// A dedicated server rank's whole part in the job (is_server_rank): keeps its shard until every worker has
// finished and has its final reply, then returns the shard's figures (staleness, clock gap; no traffic). The
// shard's size comes with the root's parameters; InputError when this is not a server rank, RuntimeError when
// the workers' PsOptions differ from `options` (every rank must be given the same) or a request is malformed.
PsStats serve_dedicated(Transport& transport, const PsOptions& options);

}  // namespace asgd::net
