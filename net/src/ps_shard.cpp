#include "ps_shard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/fingerprint.hpp"
#include "ps_generation.hpp"

namespace asgd::net::ps {

std::size_t key_bytes(std::size_t w, std::uint64_t flags) noexcept {
  if (flags & kWithSums) return 2 * w * sizeof(float);
  if (flags & kInt8) return sizeof(float) + w;
  if (flags & kSign) return sizeof(float) + (w + 7) / 8;
  return w * sizeof(float);
}

void encode_key(std::span<const float> d, std::uint64_t flags, std::vector<std::byte>& out, std::span<float> sent) {
  const std::size_t at = out.size(), w = d.size();
  out.resize(at + key_bytes(w, flags));
  std::byte* p = out.data() + at;
  if (!(flags & (kInt8 | kSign))) {
    std::memcpy(p, d.data(), d.size_bytes());
    std::copy(d.begin(), d.end(), sent.begin());
    return;
  }
  float scale = 0;
  if (flags & kInt8) {
    for (float v : d) scale = std::max(scale, std::fabs(v));
    scale /= 127.0f;
  } else {
    for (float v : d) scale += std::fabs(v);
    scale /= static_cast<float>(w);
  }
  if (!(scale > 0 && std::isfinite(scale))) scale = 0;  // zeros, or too small to scale: sent as zeros
  std::memcpy(p, &scale, sizeof scale);
  p += sizeof scale;
  for (std::size_t i = 0; i < w; ++i) {
    if (flags & kInt8) {
      const auto q = static_cast<std::int8_t>(scale > 0 ? std::lround(std::clamp(d[i] / scale, -127.0f, 127.0f)) : 0);
      p[i] = static_cast<std::byte>(q);
      sent[i] = scale * static_cast<float>(q);
    } else {
      const bool negative = d[i] < 0;
      if (negative) p[i / 8] |= static_cast<std::byte>(1u << (i % 8));
      sent[i] = negative ? -scale : scale;
    }
  }
}

std::uint64_t options_digest(const PsOptions& o, int clients) noexcept {
  std::uint64_t h = kFoldStart;
  for (const std::uint64_t word :
       {o.tau, o.warm_rounds, static_cast<std::uint64_t>(o.rule), std::uint64_t{std::bit_cast<std::uint32_t>(o.server_lr)},
        std::uint64_t{std::bit_cast<std::uint32_t>(o.adagrad_eps)}, std::uint64_t{o.key_floats},
        std::uint64_t{o.servers}, static_cast<std::uint64_t>(clients)}) {
    h = fold(h, word);
  }
  return h;
}

Header peek(std::span<const std::byte> bytes, int from) {
  if (bytes.size() < sizeof(Header))
    throw RuntimeError(fmt::format("parameter server: a message of {} bytes from rank {}", bytes.size(), from));
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  return h;
}

namespace {

void decode_key(const std::byte* p, std::uint64_t flags, std::span<float> values) {
  if (!(flags & (kInt8 | kSign))) {
    std::memcpy(values.data(), p, values.size_bytes());
    return;
  }
  float scale = 0;
  std::memcpy(&scale, p, sizeof scale);
  p += sizeof scale;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (flags & kInt8) {
      values[i] = scale * static_cast<float>(static_cast<std::int8_t>(p[i]));
    } else {
      values[i] = (std::to_integer<unsigned>(p[i / 8]) >> (i % 8)) & 1u ? -scale : scale;
    }
  }
}

}  // namespace

std::vector<std::byte> encode(const Header& header, std::span<const std::uint64_t> keys,
                              std::span<const std::byte> payload) {
  std::vector<std::byte> bytes(sizeof(Header) + keys.size_bytes() + payload.size());
  Header h = header;
  h.count = keys.size();
  std::memcpy(bytes.data(), &h, sizeof h);
  if (!keys.empty()) std::memcpy(bytes.data() + sizeof h, keys.data(), keys.size_bytes());
  if (!payload.empty()) std::memcpy(bytes.data() + sizeof h + keys.size_bytes(), payload.data(), payload.size());
  return bytes;
}

std::vector<std::byte> encode(const Header& header, std::span<const std::uint64_t> keys,
                              std::span<const float> floats) {
  return encode(header, keys, std::as_bytes(floats));
}

Decoded decode(std::span<const std::byte> bytes, int from, const KeyRange& range) {
  Decoded d;
  d.header = peek(bytes, from);
  const std::size_t rest = bytes.size() - sizeof(Header);
  if (d.header.count > rest / sizeof(std::uint64_t)) {
    throw RuntimeError(fmt::format("parameter server: a message from rank {} of {} bytes cannot hold {} keys",
                                   from, bytes.size(), d.header.count));
  }
  d.keys.resize(d.header.count);
  if (!d.keys.empty()) std::memcpy(d.keys.data(), bytes.data() + sizeof(Header), d.keys.size() * sizeof(std::uint64_t));
  const std::size_t payload = sizeof(Header) + d.keys.size() * sizeof(std::uint64_t);
  const std::size_t per_value = d.header.flags & kWithSums ? 2 : 1;  // floats per parameter: a value, a sum
  std::size_t need = 0, floats = 0;
  for (std::uint64_t key : d.keys) {
    if (key < range.first_key || key >= range.end_key) {
      throw RuntimeError(fmt::format("parameter server: rank {} sent key {} for the shard of keys {} to {}", from,
                                     key, range.first_key, range.end_key - 1));
    }
    need += key_bytes(range.end(key) - range.begin(key), d.header.flags);
    floats += per_value * (range.end(key) - range.begin(key));
  }
  if (need != bytes.size() - payload) {
    throw RuntimeError(fmt::format("parameter server: rank {} sent {} bytes of values for keys of {}", from,
                                   bytes.size() - payload, need));
  }
  d.floats.resize(floats);
  const std::byte* p = bytes.data() + payload;
  std::size_t at = 0;
  for (std::uint64_t key : d.keys) {
    const std::size_t w = range.end(key) - range.begin(key);
    decode_key(p, d.header.flags, std::span<float>(d.floats.data() + at, per_value * w));
    p += key_bytes(w, d.header.flags);
    at += per_value * w;
  }
  return d;
}

KeyRange KeyRange::of_shard(std::size_t n, std::size_t w, int s, int ranks) {
  const std::size_t keys = (n + w - 1) / w, P = static_cast<std::size_t>(ranks), r = static_cast<std::size_t>(s);
  return KeyRange{n, w, keys * r / P, keys * (r + 1) / P};
}

Shard::Shard(int ranks, KeyRange range, const PsOptions& options, std::size_t shard, std::size_t shards)
    : ranks_(ranks), range_(range), options_(options), key_version_(range.end_key - range.first_key, 0),
      clock_(static_cast<std::size_t>(ranks), 0), finished_(static_cast<std::size_t>(ranks), false), shard_(shard),
      shards_(shards), epochs_(static_cast<std::size_t>(ranks), 0) {
  const std::size_t floats = range.end_float() - range.first_float();
  values_.assign(floats, 0.0f);
  if (options_.rule == ServerRule::adagrad) sums_.assign(floats, 0.0f);
}

void Shard::handle(int src, std::span<const std::byte> bytes, std::vector<Out>& out) {
  if (src < 0 || src >= ranks_) throw RuntimeError(fmt::format("parameter server: a message from rank {}", src));
  Decoded d = decode(bytes, src, range_);
  const std::size_t first = range_.begin(range_.first_key);
  std::size_t at = 0;
  switch (d.header.kind) {
    case Kind::init:
      if (d.header.seen != options_digest(options_, ranks_)) {
        throw RuntimeError(fmt::format(
            "parameter server: rank {} trains under other options than this server's (PsOptions: the rule, tau, warm "
            "rounds, key size, servers or the {} workers): every rank needs the same",
            src, ranks_));
      }
      if (d.header.clock != range_.n)
        throw RuntimeError(fmt::format("parameter server: rank {} sent {} parameters for a shard of a vector of {}",
                                       src, d.header.clock, range_.n));
      for (std::uint64_t key : d.keys) {
        for (std::size_t i = range_.begin(key); i < range_.end(key); ++i) values_[i - first] = d.floats[at++];
        // A resumed generation's sums; a rule without them skips them.
        if (d.header.flags & kWithSums)
          for (std::size_t i = range_.begin(key); i < range_.end(key); ++i, ++at)
            if (!sums_.empty()) sums_[i - first] = d.floats[at];
      }
      version_ = 1;
      std::fill(key_version_.begin(), key_version_.end(), 1);
      job_ = d.header.epoch;
      model_ = d.header.generation;
      next_due_ = std::chrono::steady_clock::now() + period();
      break;
    case Kind::push_pull: {
      const auto r = static_cast<std::size_t>(src);
      if (d.header.clock > 0) apply(d);
      const bool final = (d.header.flags & kFinished) != 0;
      if (final && !finished_[r]) {
        finished_[r] = true;
        ++finished_count_;
      }
      clock_[r] = std::max(clock_[r], d.header.clock);
      epochs_[r] = std::max(epochs_[r], d.header.epoch);
      pending_.push_back(Pull{src, d.header.clock, d.header.seen, final});
      if (d.header.generation > complete_ && !options_.checkpoint.empty()) {
        complete_ = d.header.generation;  // every shard wrote it: the older ones are not needed
        remove_older_files(options_.checkpoint, job_, shard_, shards_, complete_);
      }
      // Once every worker has finished, the final generation is written before any final reply.
      if (finished_count_ == ranks_ && written_ != kFinalGeneration && !options_.checkpoint.empty())
        write_generation(kFinalGeneration);
      break;
    }
    default:
      throw RuntimeError(fmt::format("parameter server: rank {} sent a message of kind {}", src,
                                     static_cast<std::uint64_t>(d.header.kind)));
  }
  serve_ready(out);
}

void Shard::apply(const Decoded& push) {
  if (push.header.seen > 0) staleness_.add(version_ - push.header.seen);
  ++version_;
  const std::size_t first = range_.begin(range_.first_key);
  std::size_t at = 0;
  const float ranks = static_cast<float>(ranks_);
  for (std::uint64_t key : push.keys) {
    key_version_[key - range_.first_key] = version_;
    for (std::size_t i = range_.begin(key) - first, e = range_.end(key) - first; i < e; ++i) {
      const float d = push.floats[at++];
      if (options_.rule == ServerRule::mean) {
        values_[i] += d / ranks;
      } else if (options_.rule == ServerRule::sum) {
        values_[i] += d;
      } else {
        sums_[i] += d * d;
        values_[i] += options_.server_lr * d / (std::sqrt(sums_[i]) + options_.adagrad_eps);
      }
    }
  }
}

bool Shard::ready(const Pull& p) const noexcept {
  if (version_ == 0) return false;  // not initialised yet
  if (p.final) return finished_count_ == ranks_;
  const std::uint64_t tau = p.clock <= options_.warm_rounds ? 0 : options_.tau;
  return tau == kUnbounded || slowest() + tau >= p.clock;
}

std::uint64_t Shard::slowest() const noexcept {
  std::uint64_t clock = kUnbounded;  // every rank finished: nobody holds a pull back
  for (std::size_t r = 0; r < clock_.size(); ++r)
    if (!finished_[r]) clock = std::min(clock, clock_[r]);
  return clock;
}

void Shard::serve(const Pull& p, std::vector<Out>& out) {
  if (!p.final) {  // measured under ASP too, where nothing bounds it
    const std::uint64_t s = slowest();
    if (s != kUnbounded && p.clock > s) max_gap_ = std::max(max_gap_, p.clock - s);
  }
  std::vector<std::uint64_t> keys;
  std::vector<float> floats;
  const std::size_t first = range_.begin(range_.first_key);
  for (std::size_t k = range_.first_key; k < range_.end_key; ++k) {
    if (key_version_[k - range_.first_key] <= p.seen) continue;
    keys.push_back(k);
    floats.insert(floats.end(), values_.begin() + static_cast<std::ptrdiff_t>(range_.begin(k) - first),
                  values_.begin() + static_cast<std::ptrdiff_t>(range_.end(k) - first));
  }
  out.push_back(
      Out{p.rank, encode(Header{Kind::reply, p.clock, version_, p.final ? kFinished : 0, 0, 0, written_}, keys, floats)});
  if (p.final) ++finals_served_;
}

std::chrono::steady_clock::duration Shard::period() const {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options_.checkpoint_seconds));
}

void Shard::tick(std::chrono::steady_clock::time_point now) {
  if (options_.checkpoint.empty() || version_ == 0 || written_ == kFinalGeneration || now < next_due_) return;
  // Generations 1, 2, 3, ... every period from the start, on every server alike, none skipped: a worker takes
  // the least generation the shards last wrote as one they all wrote. A server that falls a period behind
  // (a slow disk) writes the next one a period later rather than a burst to catch up.
  write_generation(written_ + 1);
  next_due_ += period();
  if (next_due_ <= now) next_due_ = now + period();
}

std::uint64_t Shard::epochs_done() const noexcept {
  return epochs_.empty() ? 0 : *std::min_element(epochs_.begin(), epochs_.end());
}

void Shard::write_generation(std::uint64_t generation) {
  const ShardFileInfo info{.job = job_, .generation = generation, .model = model_, .epoch = epochs_done(),
                           .shard = shard_, .shards = shards_, .rule = options_.rule};
  write_shard_file(options_.checkpoint, info, range_, values_, sums_);
  written_ = generation;
  ++generations_written_;
}

void Shard::serve_ready(std::vector<Out>& out) {
  // In arrival order: a rank's pulls are answered in the order it sent them.
  auto keep = pending_.begin();
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (ready(*it)) {
      serve(*it, out);
    } else {
      *keep++ = *it;
    }
  }
  pending_.erase(keep, pending_.end());
}

}  // namespace asgd::net::ps
