// The parameter server's one-sided transport (PsTransport::one_sided): the
// shards are windows that every rank adds its deltas to and reads from, and
// the consistency bound is kept by the ranks themselves from clocks in rank
// 0's window, with no server thread.
//
// Why a pull misses nothing: a rank raises its clock to k only after its
// round-k push (the adds and the keys' versions, raised to k) has completed.
// So when a pull reads the clocks and finds the slowest unfinished rank at
// m, every push not complete by then is of a round above m, and the next
// pull, which reads the keys whose version is above m, takes what it wrote.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <span>
#include <utility>

#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/net/parameter_server.hpp"
#include "ps_client.hpp"

namespace asgd::net {

namespace {

// Keys closer than this are moved by one operation, with the keys between them (zeros added, versions
// raised to 0, values read and left): an operation costs about as much as moving a few kilobytes on one host.
constexpr std::uint64_t kMergeGap = 16;

// Calls f(j, e) for each span keys[j..e) of the sorted `keys` whose neighbours are at most kMergeGap apart.
template <class F>
void for_each_span(const std::vector<std::uint64_t>& keys, F&& f) {
  for (std::size_t j = 0; j < keys.size();) {
    std::size_t e = j + 1;
    while (e < keys.size() && keys[e] - keys[e - 1] <= kMergeGap) ++e;
    f(j, e);
    j = e;
  }
}

}  // namespace

void ParameterServer::share_one_sided(bool root) {
  Client& c = *client_;
  OneSided& o = *one_sided_;
  Window& w = *o.window;
  if (root) {
    for (std::size_t i = 0; i < params_.size(); ++i) c.snapshot[i] = load_param(params_[i]);
    for (std::size_t s = 0; s < c.shards.size(); ++s) {
      const ps::KeyRange& r = c.shards[s];
      w.put(static_cast<int>(s), OneSided::values_at(r, o.ranks),
            std::span<const float>(c.snapshot.data() + r.first_float(), r.end_float() - r.first_float()));
    }
  }
  w.barrier();  // completes the puts
  for (std::size_t s = 0; s < c.shards.size(); ++s) {
    const ps::KeyRange& r = c.shards[s];
    w.get(static_cast<int>(s), OneSided::values_at(r, o.ranks),
          std::span<float>(c.base.data() + r.first_float(), r.end_float() - r.first_float()));
  }
  w.flush();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    store_param(params_[i], c.base[i]);
    c.snapshot[i] = c.base[i];
  }
  o.since = 0;
  std::fill(o.clocks.begin(), o.clocks.end(), 0);
  {
    std::scoped_lock lock(c.stats_mutex);
    for (const ps::KeyRange& r : c.shards) c.stats.keys_pulled += r.end_key - r.first_key;
    c.stats.bytes_pulled += 4 * params_.size();
  }
  w.barrier();  // nobody pushes before every rank has the root's values
}

bool ParameterServer::exchange_one_sided(bool finished) {
  Client& c = *client_;
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t clock = ++c.clock;
  wait_for_pulls_one_sided(clock);
  push_one_sided(finished, clock);
  const std::uint64_t slowest = gate_one_sided(finished, clock);
  pull_one_sided(finished, one_sided_->since);
  one_sided_->since = slowest;
  one_sided_->raise_mine(OneSided::kPulled, transport_.rank(), clock);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::scoped_lock lock(c.stats_mutex);
  c.stats.rounds += 1;
  c.stats.wait_seconds += seconds;
  c.stats.bytes_pulled += 8 * 3 * one_sided_->P() * std::exchange(one_sided_->clock_reads, 0);
  return finished;  // the last round waited for every rank to finish
}

void ParameterServer::push_one_sided(bool finished, std::uint64_t clock) {
  Client& c = *client_;
  OneSided& o = *one_sided_;
  Window& w = *o.window;
  const float scale = options_.rule == ServerRule::mean ? 1.0f / static_cast<float>(o.ranks) : 1.0f;
  std::uint64_t bytes = 0, count = 0;
  o.deltas.resize(c.shards.size());
  o.versions.resize(c.shards.size());
  for (std::size_t s = 0; s < c.shards.size(); ++s) {
    const ps::KeyRange& r = c.shards[s];
    const std::vector<std::uint64_t> keys = changed_keys(r, finished);
    count += keys.size();
    if (keys.empty()) continue;
    const int dst = static_cast<int>(s);
    const std::size_t first = r.first_float();
    std::vector<float>& deltas = o.deltas[s];
    std::vector<std::uint64_t>& versions = o.versions[s];
    deltas.resize(r.end_float() - first);
    versions.resize(r.end_key - r.first_key);
    for_each_span(keys, [&](std::size_t j0, std::size_t j1) {
      const std::uint64_t k0 = keys[j0], k1 = keys[j1 - 1] + 1;
      const std::size_t b = r.begin(k0), e = r.end(k1 - 1);
      // The keys between the span's changed ones go as zeros and versions of 0: no change.
      std::fill(deltas.begin() + static_cast<std::ptrdiff_t>(b - first),
                deltas.begin() + static_cast<std::ptrdiff_t>(e - first), 0.0f);
      std::fill(versions.begin() + static_cast<std::ptrdiff_t>(k0 - r.first_key),
                versions.begin() + static_cast<std::ptrdiff_t>(k1 - r.first_key), 0);
      for (std::size_t j = j0; j < j1; ++j) {
        versions[keys[j] - r.first_key] = clock;
        for (std::size_t i = r.begin(keys[j]); i < r.end(keys[j]); ++i) {
          const float d = c.snapshot[i] - c.base[i];
          c.sent[i] = d;
          deltas[i - first] = d * scale;
        }
      }
      w.add(dst, OneSided::values_at(r, o.ranks) + 4 * (b - first),
            std::span<const float>(deltas.data() + (b - first), e - b));
      w.raise(dst, o.versions_at() + 8 * (k0 - r.first_key),
              std::span<const std::uint64_t>(versions.data() + (k0 - r.first_key), k1 - k0));
      bytes += 4 * (e - b) + 8 * (k1 - k0);
    });
  }
  w.flush();  // the round's adds and versions are complete before its clock says so
  o.raise_mine(OneSided::kClocks, transport_.rank(), clock);
  if (finished) o.raise_mine(OneSided::kFinished, transport_.rank(), 1);
  std::scoped_lock lock(c.stats_mutex);
  c.stats.bytes_pushed += bytes + 16;
  c.stats.keys_pushed += count;
}

void ParameterServer::wait_one_sided(const std::function<bool()>& ready) {
  Backoff backoff;
  for (;;) {
    if (abandoned_.load()) throw RuntimeError("parameter server: abandoned during a round");
    one_sided_->read_view();
    if (ready()) return;
    backoff.idle();
  }
}

void ParameterServer::wait_for_pulls_one_sided(std::uint64_t clock) {
  // A bulk-synchronous round k reads every rank's pushes of k and none of k + 1: so after a BSP round nobody
  // pushes again until every rank still training has pulled it.
  const std::uint64_t previous = clock - 1;
  if (previous == 0 || (previous > options_.warm_rounds && options_.tau != 0)) return;
  const OneSided& o = *one_sided_;
  wait_one_sided([&] {
    for (std::size_t q = 0; q < o.P(); ++q)
      if (o.at(OneSided::kFinished, q) == 0 && o.at(OneSided::kPulled, q) < previous) return false;
    return true;
  });
}

std::uint64_t ParameterServer::gate_one_sided(bool finished, std::uint64_t clock) {
  Client& c = *client_;
  OneSided& o = *one_sided_;
  const std::size_t P = o.P();
  const std::uint64_t tau = clock <= options_.warm_rounds ? 0 : options_.tau;
  std::uint64_t slowest = kUnbounded;
  wait_one_sided([&] {
    slowest = kUnbounded;
    std::size_t finished_ranks = 0;
    for (std::size_t q = 0; q < P; ++q) {
      if (o.at(OneSided::kFinished, q) != 0) {
        ++finished_ranks;
      } else {
        slowest = std::min(slowest, o.at(OneSided::kClocks, q));
      }
    }
    return finished ? finished_ranks == P : tau == kUnbounded || clock - std::min(slowest, clock) <= tau;
  });
  std::uint64_t missed = 0;
  for (std::size_t q = 0; q < P; ++q) {
    const std::uint64_t now = o.at(OneSided::kClocks, q);
    if (q != static_cast<std::size_t>(transport_.rank())) missed += now - std::min(now, o.clocks[q]);
    o.clocks[q] = now;
  }
  std::scoped_lock lock(c.stats_mutex);
  c.stats.staleness.add(missed);
  if (!finished && slowest != kUnbounded && clock > slowest)
    c.stats.max_clock_gap = std::max(c.stats.max_clock_gap, clock - slowest);
  return slowest;
}

void ParameterServer::pull_one_sided(bool finished, std::uint64_t since) {
  // Two flushes a round, whatever the number of shards: every shard's versions, then every span of values.
  Client& c = *client_;
  OneSided& o = *one_sided_;
  Window& w = *o.window;
  const std::size_t S = c.shards.size();
  std::uint64_t bytes = 0, count = 0;
  o.versions.resize(S);  // the push's buffers are complete (flushed) by now
  if (!finished) {
    for (std::size_t s = 0; s < S; ++s) {
      const ps::KeyRange& r = c.shards[s];
      o.versions[s].resize(r.end_key - r.first_key);
      w.get(static_cast<int>(s), o.versions_at(), o.versions[s]);
      bytes += 8 * o.versions[s].size();
    }
    w.flush();
  }
  std::vector<std::vector<std::uint64_t>>& keys = o.pulled;
  keys.resize(S);
  o.floats.resize(params_.size());  // values at their index in the parameters
  for (std::size_t s = 0; s < S; ++s) {
    const ps::KeyRange& r = c.shards[s];
    keys[s].clear();
    for (std::size_t k = r.first_key; k < r.end_key; ++k)
      if (finished || o.versions[s][k - r.first_key] > since) keys[s].push_back(k);
    count += keys[s].size();
    const std::size_t first = r.first_float();
    for_each_span(keys[s], [&](std::size_t j0, std::size_t j1) {
      const std::size_t b = r.begin(keys[s][j0]), e = r.end(keys[s][j1 - 1]);
      w.get(static_cast<int>(s), OneSided::values_at(r, o.ranks) + 4 * (b - first),
            std::span<float>(o.floats.data() + b, e - b));
      bytes += 4 * (e - b);
    });
  }
  w.flush();
  for (std::size_t s = 0; s < S; ++s)
    for (std::uint64_t k : keys[s]) take_key(c.shards[s], k, o.floats.data() + c.shards[s].begin(k), finished);
  std::scoped_lock lock(c.stats_mutex);
  c.stats.bytes_pulled += bytes;
  c.stats.keys_pulled += count;
}

}  // namespace asgd::net
