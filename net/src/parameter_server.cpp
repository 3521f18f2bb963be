#include "asgd/net/parameter_server.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/net/allreduce.hpp"
#include "asgd/net/transport.hpp"
#include "ps_client.hpp"
#include "ps_shard.hpp"

namespace asgd::net {

std::string_view to_string(ServerRule rule) noexcept {
  return rule == ServerRule::mean ? "mean" : rule == ServerRule::sum ? "sum" : "adagrad";
}

std::string_view to_string(PushEncoding encoding) noexcept {
  return encoding == PushEncoding::int8 ? "int8" : encoding == PushEncoding::sign ? "sign" : "floats";
}

std::string_view to_string(PsTransport transport) noexcept {
  return transport == PsTransport::one_sided ? "one-sided" : transport == PsTransport::messages ? "messages" : "auto";
}

PsTransport resolve_transport(const PsOptions& options, const Transport& transport) noexcept {
  if (options.transport != PsTransport::automatic) return options.transport;
  const bool applies =
      options.rule != ServerRule::adagrad && options.push == PushEncoding::floats && options.servers == 0 &&
      options.checkpoint.empty();
  return applies && transport.one_host() ? PsTransport::one_sided : PsTransport::messages;
}

void PsOptions::validate(const std::function<std::string(std::string_view)>& spell) const {
  const auto name = [&](std::string_view option, std::string_view member) {
    return spell ? spell(option) : "PsOptions::" + std::string(member);
  };
  if (key_floats == 0 || key_floats > (std::size_t{1} << 20))
    throw InputError(fmt::format("{} {}: expected 1 to 2^20", name("key-floats", "key_floats"), key_floats));
  if (rule == ServerRule::adagrad && !(server_lr > 0 && std::isfinite(server_lr)))
    throw InputError(fmt::format("{} {}: expected a finite rate > 0", name("server-lr", "server_lr"), server_lr));
  if (!(push_fraction > 0 && push_fraction <= 1)) {
    throw InputError(fmt::format("{} {}: expected more than 0, at most 1", name("ps-push-fraction", "push_fraction"),
                                 push_fraction));
  }
  if (!(adagrad_eps > 0 && std::isfinite(adagrad_eps)))
    throw InputError(fmt::format("{} {}: expected a finite value > 0", name("adagrad-eps", "adagrad_eps"), adagrad_eps));
  if (transport == PsTransport::one_sided && (rule == ServerRule::adagrad || push != PushEncoding::floats)) {
    throw InputError(fmt::format("{} one-sided: takes the mean or sum rule and float pushes, not {}",
                                 name("ps-transport", "transport"),
                                 rule == ServerRule::adagrad ? "the AdaGrad rule" : "compressed pushes"));
  }
  if (transport == PsTransport::one_sided && servers > 0) {
    throw InputError(fmt::format("{} one-sided: the shards are the workers' windows, so it takes no {} {}",
                                 name("ps-transport", "transport"), name("servers", "servers"), servers));
  }
  if (transport == PsTransport::one_sided && !checkpoint.empty()) {
    throw InputError(fmt::format("{} one-sided: no server writes {} {} (the shards are the workers' windows)",
                                 name("ps-transport", "transport"), name("ps-checkpoint", "checkpoint"),
                                 checkpoint.string()));
  }
  if (!(checkpoint_seconds > 0 && checkpoint_seconds <= 1e9)) {
    throw InputError(fmt::format("{} {}: expected seconds above 0, at most 1e9",
                                 name("ps-checkpoint-seconds", "checkpoint_seconds"), checkpoint_seconds));
  }
}

void check_server_ranks(std::size_t servers, int ranks, std::string_view name) {
  if (servers > 0 && servers + 2 > static_cast<std::size_t>(ranks)) {
    throw InputError(fmt::format("{} {}: a job of {} ranks keeps {} worker rank{} beside them; dedicated servers "
                                 "need 2 or more",
                                 name, servers, ranks, servers < static_cast<std::size_t>(ranks) ? ranks - servers : 0,
                                 servers + 1 == static_cast<std::size_t>(ranks) ? "" : "s"));
  }
}

std::string PsGeneration::name() const {
  return generation == final_generation ? std::string("the final generation") : fmt::format("generation {}", generation);
}

void same_servers_on_all_ranks(Transport& transport, std::size_t servers, std::string_view name) {
  const auto P = static_cast<std::size_t>(transport.size());
  std::vector<float> each(P, 0.0f);  // rank r's count at r: the sum gives every rank all of them
  each[static_cast<std::size_t>(transport.rank())] = static_cast<float>(std::min<std::size_t>(servers, 1u << 24));
  make_allreduce(Algorithm::native, transport)->sum(each);
  if (std::all_of(each.begin(), each.end(), [&](float v) { return v == each[0]; })) return;
  std::string said;
  for (std::size_t r = 0; r < P; ++r) said += fmt::format("{}rank {} {}", r ? ", " : "", r, each[r]);
  throw InputError(fmt::format("the ranks were given different {}: {}; every rank needs the same", name, said));
}

bool is_server_rank(const PsOptions& options, const Transport& transport) noexcept {
  return options.servers > 0 &&
         static_cast<std::size_t>(transport.rank()) + options.servers >= static_cast<std::size_t>(transport.size());
}

namespace {

// A server that writes checkpoints finds out at the start, not a period into training, that it cannot.
void check_checkpoint_folder(const PsOptions& options) {
  if (options.checkpoint.empty()) return;
  try {
    AtomicFile::check(options.checkpoint);
  } catch (const InputError& e) {
    throw InputError(fmt::format("PsOptions::checkpoint: {}", e.what()));
  }
}

std::uint64_t encoding_flags(PushEncoding e) noexcept {
  return e == PushEncoding::int8 ? ps::kInt8 : e == PushEncoding::sign ? ps::kSign : 0;
}

}  // namespace

ParameterServer::ParameterServer(Transport& transport, std::span<float> params, PsOptions options)
    : transport_(transport), params_(params), options_(options) {
  options_.validate();
  options_.transport = resolve_transport(options_, transport);
  const int P = transport.size();
  check_server_ranks(options_.servers, P);
  if (is_server_rank(options_, transport)) {
    throw InputError(fmt::format("rank {} is one of the {} dedicated server ranks: it serves (serve_dedicated)",
                                 transport.rank(), options_.servers));
  }
  // Shards: one per rank, or one per dedicated server rank.
  const int S = options_.servers > 0 ? static_cast<int>(options_.servers) : P;
  first_server_ = P - S;
  client_ = std::make_unique<Client>();
  for (int s = 0; s < S; ++s) client_->shards.push_back(ps::KeyRange::of_shard(params.size(), options_.key_floats, s, S));
  client_->base.assign(params.size(), 0.0f);
  client_->snapshot.assign(params.size(), 0.0f);
  client_->sent.assign(params.size(), 0.0f);
  client_->seen.assign(client_->shards.size(), 0);
  client_->written.assign(client_->shards.size(), 0);
  if (options_.servers > 0) return;  // a client only
  const ps::KeyRange& mine = client_->shards[static_cast<std::size_t>(transport.rank())];
  if (options_.transport == PsTransport::one_sided) {
    one_sided_ = std::make_unique<OneSided>();
    one_sided_->ranks = P;
    one_sided_->clocks.assign(static_cast<std::size_t>(P), 0);
    one_sided_->window = transport.window(OneSided::bytes(mine, P));  // collective
    return;
  }
  check_checkpoint_folder(options_);
  shard_ = std::make_unique<ps::Shard>(P, mine, options_, static_cast<std::size_t>(transport.rank()),
                                       static_cast<std::size_t>(P));
  server_ = std::thread([this] { serve(); });
}

ParameterServer::~ParameterServer() {
  // After an error the last round may not have run: end the server without waiting for the other ranks, and
  // let the round thread's last round (rounds_thread_ ends after this body) give up instead of waiting.
  abandoned_.store(true);
  server_stop_.store(true);
  if (server_.joinable()) server_.join();
}

namespace {

// A shard's requests handled and its replies posted until every worker has its final reply (or `stop`).
void serve_shard(Transport& transport, ps::Shard& shard, const std::atomic<bool>& stop) {
  Backoff backoff;
  std::vector<ps::Shard::Out> out;
  Transport::Message m;
  while (!stop.load(std::memory_order_relaxed) && !shard.done()) {
    const bool polled = transport.poll(ps::kRequestTag, m);
    shard.tick(std::chrono::steady_clock::now());
    if (!polled) {
      backoff.idle();
      continue;
    }
    backoff.reset();
    out.clear();
    shard.handle(m.src, m.bytes, out);
    for (auto& o : out) transport.post(std::move(o.bytes), o.dst, ps::kReplyTag);
  }
  transport.flush();
}

}  // namespace

void ParameterServer::serve() noexcept {
  try {
    serve_shard(transport_, *shard_, server_stop_);
  } catch (...) {
    server_error_ = std::current_exception();
    server_failed_.store(true, std::memory_order_release);
  }
}

std::vector<std::uint64_t> ParameterServer::changed_keys(const ps::KeyRange& r, bool finished) {
  Client& c = *client_;
  std::vector<std::pair<float, std::uint64_t>> changed;  // (squared norm of the key's delta, key)
  for (std::size_t k = r.first_key; k < r.end_key; ++k) {
    float norm = 0;
    for (std::size_t i = r.begin(k); i < r.end(k); ++i) {
      c.snapshot[i] = load_param(params_[i]);
      c.sent[i] = 0;
      const float d = c.snapshot[i] - c.base[i];
      norm += d * d;
    }
    if (norm > 0 || std::isnan(norm)) changed.emplace_back(norm, k);
  }
  // Top-k by the delta's norm; the rest wait for a later round (error feedback) or are dropped.
  const std::size_t keep = finished || options_.push_fraction >= 1
                               ? changed.size()
                               : static_cast<std::size_t>(std::ceil(options_.push_fraction * changed.size()));
  if (keep < changed.size()) {
    std::nth_element(changed.begin(), changed.begin() + static_cast<std::ptrdiff_t>(keep), changed.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    if (!options_.error_feedback) {
      for (auto it = changed.begin() + static_cast<std::ptrdiff_t>(keep); it != changed.end(); ++it) {
        for (std::size_t i = r.begin(it->second); i < r.end(it->second); ++i) {
          std::atomic_ref<float>(params_[i]).fetch_add(c.base[i] - c.snapshot[i], std::memory_order_relaxed);
          c.snapshot[i] = c.base[i];  // dropped: a reply of the key adds server - base
        }
      }
    }
    changed.resize(keep);
  }
  std::vector<std::uint64_t> keys(changed.size());
  for (std::size_t j = 0; j < changed.size(); ++j) keys[j] = changed[j].second;
  std::sort(keys.begin(), keys.end());
  return keys;
}

void ParameterServer::take_key(const ps::KeyRange& r, std::uint64_t key, const float* server, bool exact) {
  Client& c = *client_;
  for (std::size_t i = r.begin(key), j = 0; i < r.end(key); ++i, ++j) {
    if (exact) {
      store_param(params_[i], server[j]);
    } else {
      const float keep = options_.error_feedback ? c.base[i] + c.sent[i] : c.snapshot[i];
      std::atomic_ref<float>(params_[i]).fetch_add(server[j] - keep, std::memory_order_relaxed);
    }
    c.base[i] = server[j];
  }
}

std::optional<PsGeneration> ParameterServer::take_generation(std::uint64_t epoch, std::uint64_t model) {
  const std::string& prefix = options_.resume.string();
  std::optional<PsGeneration> g = read_generation(options_.resume);
  if (!g) {
    throw InputError(fmt::format("PsOptions::resume {}: no complete generation of server checkpoints there "
                                 "(files {}.ps-*, every shard of one generation)",
                                 prefix, prefix));
  }
  const std::string which = g->name();
  if (g->values.size() != params_.size()) {
    throw InputError(fmt::format("PsOptions::resume {}: {} holds {} parameters; this model has {}", prefix, which,
                                 g->values.size(), params_.size()));
  }
  if (model != 0 && g->model != model) {
    throw InputError(fmt::format("PsOptions::resume {}: {} is of another model (digest {:010x}, this one's "
                                 "{:010x}): other model settings or data",
                                 prefix, which, g->model, model));
  }
  // Older than the epochs this run has done (a checkpoint written since): the run keeps its own values and takes
  // only the servers' sums, which a model checkpoint does not hold.
  g->values_taken = g->epoch >= epoch;
  if (g->values_taken)
    for (std::size_t i = 0; i < params_.size(); ++i) store_param(params_[i], g->values[i]);
  return g;
}

std::optional<PsGeneration> ParameterServer::share(bool root, std::uint64_t epoch, std::uint64_t model) {
  epochs_.store(epoch, std::memory_order_relaxed);  // the servers' first generations are of the epochs done
  std::optional<PsGeneration> resumed;
  if (root && !options_.resume.empty()) resumed = take_generation(epoch, model);
  if (one_sided_) {
    share_one_sided(root);
  } else {
    share_messages(root, resumed, model);
  }
  if (resumed) {
    resumed->values = {};
    resumed->sums = {};
  }
  return resumed;
}

void ParameterServer::share_messages(bool root, const std::optional<PsGeneration>& resumed, std::uint64_t model) {
  Client& c = *client_;
  if (root) {
    // The job's id: its start time, so that a later job's checkpoints read as newer.
    const auto job = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                    std::chrono::system_clock::now().time_since_epoch())
                                                    .count());
    const int workers = options_.servers > 0 ? first_server_ : transport_.size();
    // A resumed generation's AdaGrad sums go in the same message, each key's after its values: a shard
    // applies no push before it has both.
    const bool sums = resumed && !resumed->sums.empty() && options_.rule == ServerRule::adagrad;
    for (std::size_t s = 0; s < c.shards.size(); ++s) {
      const ps::KeyRange& r = c.shards[s];
      std::vector<std::uint64_t> keys;
      std::vector<float> floats;
      floats.reserve((r.end_float() - r.first_float()) * (sums ? 2 : 1));
      for (std::size_t k = r.first_key; k < r.end_key; ++k) {
        keys.push_back(k);
        for (std::size_t i = r.begin(k); i < r.end(k); ++i) floats.push_back(load_param(params_[i]));
        if (sums) floats.insert(floats.end(), resumed->sums.begin() + r.begin(k), resumed->sums.begin() + r.end(k));
      }
      const ps::Header init{ps::Kind::init, params_.size(), ps::options_digest(options_, workers),
                            sums ? ps::kWithSums : 0, 0, job, model};
      transport_.post(ps::encode(init, keys, floats), server_rank(s), ps::kRequestTag);
    }
  }
  // A pull of round 0 from nothing seen: every key, once the root's values are in.
  std::fill(c.seen.begin(), c.seen.end(), 0);
  for (std::size_t i = 0; i < params_.size(); ++i) c.snapshot[i] = c.base[i] = load_param(params_[i]);
  exchange(false, true);
}

void ParameterServer::round() {
  if (rounds_thread_.running()) throw InputError("ParameterServer::round: the round thread is running");
  exchange(false);
}

void ParameterServer::start(std::uint64_t every_steps) {
  rounds_thread_.start(
      every_steps, [this](std::uint64_t, bool finished) { return exchange(finished); }, "ParameterServer::start",
      options_.overlap);
}

bool ParameterServer::exchange(bool finished, bool first) {
  // The destructor's: the parameters may be gone already.
  if (abandoned_.load()) throw RuntimeError("parameter server: abandoned before a round");
  if (one_sided_) return exchange_one_sided(finished);
  Client& c = *client_;
  const auto t0 = std::chrono::steady_clock::now();
  // Round 0 (share) pushes nothing; round k > 0 the keys this rank changed since its last pull.
  const std::uint64_t clock = first ? 0 : ++c.clock;
  std::uint64_t pushed_bytes = 0, pushed_keys = 0, pulled_bytes = 0, pulled_keys = 0;
  // The newest checkpoint generation every shard has written, as their last replies said.
  const std::uint64_t complete = *std::min_element(c.written.begin(), c.written.end());
  for (std::size_t s = 0; s < c.shards.size(); ++s) {
    std::vector<std::uint64_t> keys = first ? std::vector<std::uint64_t>{} : changed_keys(c.shards[s], finished);
    std::vector<std::byte> payload;
    // The last round pushes every change exactly: nothing may be left behind when the ranks end.
    const std::uint64_t encoding = finished ? 0 : encoding_flags(options_.push);
    const ps::KeyRange& r = c.shards[s];
    payload.reserve(keys.size() * ps::key_bytes(r.w, encoding));
    std::vector<float> d(r.w);
    for (std::uint64_t k : keys) {
      const std::size_t b = r.begin(k), w = r.end(k) - b;
      for (std::size_t i = 0; i < w; ++i) d[i] = c.snapshot[b + i] - c.base[b + i];
      ps::encode_key(std::span<const float>(d.data(), w), encoding, payload, std::span<float>(c.sent.data() + b, w));
    }
    pushed_keys += keys.size();
    auto bytes = ps::encode(
        ps::Header{ps::Kind::push_pull, clock, c.seen[s], (finished ? ps::kFinished : 0) | encoding, 0,
                   epochs_.load(std::memory_order_relaxed), complete},
        keys, payload);
    pushed_bytes += bytes.size();
    transport_.post(std::move(bytes), server_rank(s), ps::kRequestTag);
  }
  // The replies, in any order. A key that comes back takes the server's value plus what this rank has that the
  // server has not: the workers' updates since the snapshot, and with error feedback what the push left out
  // (its delta less what the server decoded): local += server - base - sent, an atomic add as model averaging's
  // correction. Without error feedback what was left out is dropped: local += server - snapshot. After the last
  // round no worker runs and the server's value is stored as it is, so every rank ends with the same bits.
  const bool last = finished;
  Backoff backoff;
  Transport::Message m;
  for (std::size_t got = 0; got < c.shards.size();) {
    if (server_failed_.load(std::memory_order_acquire)) std::rethrow_exception(server_error_);
    if (abandoned_.load()) throw RuntimeError("parameter server: abandoned during a round");
    if (!transport_.poll(ps::kReplyTag, m)) {
      backoff.idle();
      continue;
    }
    backoff.reset();
    ++got;
    pulled_bytes += m.bytes.size();
    const int shard = m.src - first_server_;
    if (shard < 0 || static_cast<std::size_t>(shard) >= c.shards.size())
      throw RuntimeError(fmt::format("parameter server: a reply from rank {}", m.src));
    const ps::KeyRange& r = c.shards[static_cast<std::size_t>(shard)];
    const ps::Decoded d = ps::decode(m.bytes, m.src, r);
    if (d.header.kind != ps::Kind::reply)
      throw RuntimeError(fmt::format("parameter server: a reply of kind {} from rank {}",
                                     static_cast<std::uint64_t>(d.header.kind), m.src));
    c.seen[static_cast<std::size_t>(shard)] = d.header.seen;
    c.written[static_cast<std::size_t>(shard)] = d.header.generation;
    pulled_keys += d.keys.size();
    std::size_t at = 0;
    for (std::uint64_t key : d.keys) {
      take_key(r, key, d.floats.data() + at, last || first);  // decode checked the sizes
      at += r.end(key) - r.begin(key);
    }
  }
  // Keys that did not come back: nobody changed them, so their snapshot equals their base; the next round
  // compares against the base again.
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::scoped_lock lock(c.stats_mutex);
  c.stats.rounds += first ? 0 : 1;
  c.stats.bytes_pushed += pushed_bytes;
  c.stats.bytes_pulled += pulled_bytes;
  c.stats.keys_pushed += pushed_keys;
  c.stats.keys_pulled += pulled_keys;
  c.stats.wait_seconds += seconds;
  return finished;
}

void ParameterServer::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (rounds_thread_.running()) {
    rounds_thread_.stop();  // its last round is the finished one
  } else {
    exchange(true);
  }
  if (server_.joinable()) server_.join();  // ends once every rank has its final reply
  if (server_error_) std::rethrow_exception(server_error_);
  if (options_.servers > 0 && transport_.rank() == 0) take_server_figures();
  if (one_sided_) {
    // Nobody may free the window while another rank still reads its final values from it.
    one_sided_->window->barrier();
    one_sided_->window->close();
  }
}

void ParameterServer::take_server_figures() {
  Client& c = *client_;
  Backoff backoff;
  Transport::Message m;
  for (std::size_t got = 0; got < options_.servers;) {
    if (!transport_.poll(ps::kStatsTag, m)) {
      backoff.idle();
      continue;
    }
    backoff.reset();
    ++got;
    constexpr std::size_t W = StalenessHistogram::kWords;
    if (m.bytes.size() != (W + 2) * sizeof(std::uint64_t))
      throw RuntimeError(fmt::format("parameter server: figures of {} bytes from rank {}", m.bytes.size(), m.src));
    std::array<std::uint64_t, W + 2> words{};
    std::memcpy(words.data(), m.bytes.data(), m.bytes.size());
    std::array<std::uint64_t, W> histogram{};
    std::copy(words.begin(), words.begin() + W, histogram.begin());
    std::scoped_lock lock(c.stats_mutex);
    c.stats.staleness.merge(StalenessHistogram::of_words(histogram));
    c.stats.max_clock_gap = std::max(c.stats.max_clock_gap, words[W]);
    c.stats.generations = std::max(c.stats.generations, words[W + 1]);
  }
}

PsStats ParameterServer::stats() const {
  std::scoped_lock lock(client_->stats_mutex);
  PsStats s = client_->stats;
  if (shard_ && !server_.joinable()) {
    s.staleness = shard_->staleness();
    s.max_clock_gap = shard_->max_clock_gap();
    s.generations = shard_->generations_written();
  }
  return s;
}

PsStats serve_dedicated(Transport& transport, const PsOptions& options) {
  options.validate();
  check_server_ranks(options.servers, transport.size());
  check_checkpoint_folder(options);
  if (!is_server_rank(options, transport)) {
    throw InputError(fmt::format("rank {} of {} is not one of the last PsOptions::servers {}: it is a worker",
                                 transport.rank(), transport.size(), options.servers));
  }
  const int P = transport.size(), S = static_cast<int>(options.servers), workers = P - S;
  // Until the root's parameters arrive (an init, with their size) the shard's range is not known: the other
  // workers' first pulls wait in arrival order.
  std::vector<Transport::Message> early;
  Transport::Message m;
  Backoff backoff;
  std::size_t n = 0;
  for (;;) {
    if (!transport.poll(ps::kRequestTag, m)) {
      backoff.idle();
      continue;
    }
    backoff.reset();
    const ps::Header h = ps::peek(m.bytes, m.src);
    early.push_back(std::move(m));
    if (h.kind == ps::Kind::init) {
      n = h.clock;
      std::rotate(early.begin(), early.end() - 1, early.end());  // the init first
      break;
    }
  }
  const int s = transport.rank() - workers;
  ps::Shard shard(workers, ps::KeyRange::of_shard(n, options.key_floats, s, S), options, static_cast<std::size_t>(s),
                  static_cast<std::size_t>(S));
  std::vector<ps::Shard::Out> out;
  for (const auto& e : early) {
    shard.handle(e.src, e.bytes, out);
    for (auto& o : out) transport.post(std::move(o.bytes), o.dst, ps::kReplyTag);
    out.clear();
  }
  const std::atomic<bool> never{false};
  serve_shard(transport, shard, never);
  PsStats stats;
  stats.staleness = shard.staleness();
  stats.max_clock_gap = shard.max_clock_gap();
  stats.generations = shard.generations_written();
  // Worker rank 0 reports the job: it merges every server's figures.
  const auto words = stats.staleness.words();
  std::vector<std::uint64_t> figures(words.begin(), words.end());
  figures.push_back(stats.max_clock_gap);
  figures.push_back(stats.generations);
  const auto* bytes = reinterpret_cast<const std::byte*>(figures.data());
  transport.post(std::vector<std::byte>(bytes, bytes + figures.size() * sizeof(std::uint64_t)), 0, ps::kStatsTag);
  transport.flush();
  return stats;
}

}  // namespace asgd::net
