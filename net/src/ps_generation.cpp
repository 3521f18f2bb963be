#include "ps_generation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/fingerprint.hpp"

namespace asgd::net {
namespace ps {
namespace {

constexpr char kMagic[8] = {'A', 'S', 'G', 'D', 'P', 'S', 'G', '1'};

// A shard file: this header, the shard's floats, then as many AdaGrad sums when has_sums.
struct FileHeader {
  char magic[8];
  std::uint64_t job, generation, model, epoch, shard, shards, rule, n, key_floats, first_key, end_key, has_sums;
  std::uint64_t checksum;  // of the fields above and every float's bits
};

std::uint64_t checksum_of(const FileHeader& h, std::span<const float> values, std::span<const float> sums) {
  std::uint64_t c = kFoldStart;
  for (std::uint64_t w : {h.job, h.generation, h.model, h.epoch, h.shard, h.shards, h.rule, h.n, h.key_floats,
                          h.first_key, h.end_key, h.has_sums}) {
    c = fold(c, w);
  }
  for (std::span<const float> part : {values, sums})
    for (float v : part) c = fold(c, std::bit_cast<std::uint32_t>(v));
  return c;
}

std::string file_name(const std::filesystem::path& prefix, std::uint64_t job, std::uint64_t generation,
                      std::size_t shard, std::size_t shards) {
  return fmt::format("{}.ps-{:016x}-g{}-{}of{}", prefix.filename().string(), job,
                     generation == kFinalGeneration ? std::string("final") : std::to_string(generation), shard, shards);
}

// The job, generation, shard and shards a file's name says, when it is one of `prefix`'s.
struct NameParts {
  std::uint64_t job = 0, generation = 0;
  std::size_t shard = 0, shards = 0;
};
std::optional<NameParts> parse_name(const std::filesystem::path& prefix, const std::string& name) {
  const std::string head = prefix.filename().string() + ".ps-";
  if (name.size() <= head.size() || name.compare(0, head.size(), head) != 0) return std::nullopt;
  NameParts p;
  int used = 0;
  const std::string rest = name.substr(head.size());
  // The final generation is named "final"; the others by their number.
  const bool whole =
      std::sscanf(rest.c_str(), "%16" SCNx64 "-g%" SCNu64 "-%zuof%zu%n", &p.job, &p.generation, &p.shard, &p.shards,
                  &used) == 4 ||
      (std::sscanf(rest.c_str(), "%16" SCNx64 "-gfinal-%zuof%zu%n", &p.job, &p.shard, &p.shards, &used) == 3 &&
       (p.generation = kFinalGeneration) != 0);
  if (!whole || static_cast<std::size_t>(used) != rest.size() || p.shards == 0 || p.shard >= p.shards)
    return std::nullopt;
  return p;
}

std::filesystem::path folder_of(const std::filesystem::path& prefix) {
  return prefix.has_parent_path() ? prefix.parent_path() : std::filesystem::path(".");
}

// One shard file read whole and checked; none when it is not whole or not sound.
struct ShardFile {
  FileHeader header;
  std::vector<float> values, sums;
};
std::optional<ShardFile> read_shard_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  ShardFile f;
  if (!in.read(reinterpret_cast<char*>(&f.header), sizeof f.header)) return std::nullopt;
  const FileHeader& h = f.header;
  // The fields are checked before they size anything: a damaged header is passed over, not followed.
  constexpr std::uint64_t kMostShards = std::uint64_t{1} << 20, kMostFloats = std::uint64_t{1} << 40;
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.shards == 0 || h.shards > kMostShards ||
      h.shard >= h.shards || h.key_floats == 0 || h.key_floats > kMostFloats || h.n > kMostFloats ||
      h.has_sums > 1) {
    return std::nullopt;
  }
  const KeyRange range{h.n, h.key_floats, h.first_key, h.end_key};
  const KeyRange expected = KeyRange::of_shard(h.n, h.key_floats, static_cast<int>(h.shard), static_cast<int>(h.shards));
  if (range.first_key != expected.first_key || range.end_key != expected.end_key) return std::nullopt;
  const std::size_t floats = range.end_float() - range.first_float();
  std::error_code ec;
  if (std::filesystem::file_size(path, ec) != sizeof(FileHeader) + floats * sizeof(float) * (1 + h.has_sums) || ec)
    return std::nullopt;
  f.values.resize(floats);
  f.sums.resize(h.has_sums ? floats : 0);
  if (!in.read(reinterpret_cast<char*>(f.values.data()), static_cast<std::streamsize>(floats * sizeof(float))) ||
      !in.read(reinterpret_cast<char*>(f.sums.data()), static_cast<std::streamsize>(f.sums.size() * sizeof(float))) ||
      in.peek() != std::char_traits<char>::eof() || checksum_of(h, f.values, f.sums) != h.checksum) {
    return std::nullopt;
  }
  return f;
}

}  // namespace

void write_shard_file(const std::filesystem::path& prefix, const ShardFileInfo& info, const KeyRange& range,
                      std::span<const float> values, std::span<const float> sums) {
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.job = info.job;
  h.generation = info.generation;
  h.model = info.model;
  h.epoch = info.epoch;
  h.shard = info.shard;
  h.shards = info.shards;
  h.rule = static_cast<std::uint64_t>(info.rule);
  h.n = range.n;
  h.key_floats = range.w;
  h.first_key = range.first_key;
  h.end_key = range.end_key;
  h.has_sums = sums.empty() ? 0 : 1;
  h.checksum = checksum_of(h, values, sums);
  AtomicFile out(folder_of(prefix) / file_name(prefix, info.job, info.generation, info.shard, info.shards));
  out.write(&h, sizeof h);
  out.write(values.data(), values.size_bytes());
  out.write(sums.data(), sums.size_bytes());
  out.commit();
}

void remove_older_files(const std::filesystem::path& prefix, std::uint64_t job, std::size_t shard,
                        std::size_t shards, std::uint64_t below) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder_of(prefix), ec)) {
    const auto p = parse_name(prefix, entry.path().filename().string());
    if (!p) continue;
    const bool mine = p->job == job && p->shards == shards && p->shard == shard && p->generation < below;
    const bool other_job = p->job != job && p->shard % shards == shard;
    if (mine || other_job) std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace ps

std::optional<PsGeneration> read_generation(const std::filesystem::path& prefix) {
  // The sound files by (job, generation, shards), each shard once.
  std::map<std::tuple<std::uint64_t, std::uint64_t, std::size_t>, std::map<std::size_t, std::filesystem::path>> sets;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(ps::folder_of(prefix), ec)) {
    if (const auto p = ps::parse_name(prefix, entry.path().filename().string()))
      sets[{p->job, p->generation, p->shards}][p->shard] = entry.path();
  }
  if (ec) throw InputError(fmt::format("PsOptions::resume {}: {}", prefix.string(), ec.message()));
  // The newest complete one: the latest job's (its id is its start time), then its latest generation.
  for (auto it = sets.rbegin(); it != sets.rend(); ++it) {
    const auto& [key, files] = *it;
    const auto& [job, generation, shards] = key;
    if (files.size() != shards) continue;
    PsGeneration g;
    g.prefix = prefix;
    g.job = job;
    g.generation = generation;
    g.shards = shards;
    g.epoch = ps::kFinalGeneration;
    bool whole = true;
    for (const auto& [s, path] : files) {
      const auto f = ps::read_shard_file(path);
      const bool fits = f && f->header.job == job && f->header.generation == generation && f->header.shard == s &&
                        f->header.shards == shards &&
                        (s == 0 || (f->header.n == g.values.size() && f->header.model == g.model &&
                                    f->header.key_floats == g.key_floats &&
                                    f->header.rule == static_cast<std::uint64_t>(g.rule) &&
                                    (f->header.has_sums != 0) == !g.sums.empty()));
      if (!fits) {
        whole = false;
        break;
      }
      if (s == 0) {
        g.values.assign(f->header.n, 0.0f);
        if (f->header.has_sums) g.sums.assign(f->header.n, 0.0f);
        g.model = f->header.model;
        g.rule = static_cast<ServerRule>(f->header.rule);
        g.key_floats = f->header.key_floats;
      }
      const ps::KeyRange r{f->header.n, f->header.key_floats, f->header.first_key, f->header.end_key};
      std::copy(f->values.begin(), f->values.end(), g.values.begin() + static_cast<std::ptrdiff_t>(r.first_float()));
      if (!g.sums.empty())
        std::copy(f->sums.begin(), f->sums.end(), g.sums.begin() + static_cast<std::ptrdiff_t>(r.first_float()));
      g.epoch = std::min(g.epoch, f->header.epoch);
    }
    if (whole) return g;
  }
  return std::nullopt;
}

}  // namespace asgd::net
