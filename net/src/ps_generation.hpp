// The servers' checkpoint files (private to net/): each server writes its
// shard as PREFIX.ps-<job>-g<generation>-<s>of<S>, atomically, and a
// generation is complete when all S shards of one job wrote it; anything else
// (a shard missing, a file damaged) is ignored. Pure file logic: the Shard
// decides when to write and what may be removed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>

#include "asgd/net/parameter_server.hpp"
#include "ps_shard.hpp"

namespace asgd::net::ps {

// The generation a job writes when every worker has finished: one number on every server, whatever the time.
inline constexpr std::uint64_t kFinalGeneration = PsGeneration::final_generation;

// What one shard's file says besides its floats.
struct ShardFileInfo {
  std::uint64_t job = 0, generation = 0, model = 0, epoch = 0;
  std::size_t shard = 0, shards = 1;
  ServerRule rule = ServerRule::mean;
};

// Writes shard `info.shard` of `range` (its values and, when not empty, AdaGrad's sums) under `prefix`;
// RuntimeError naming the file when the disk refuses.
void write_shard_file(const std::filesystem::path& prefix, const ShardFileInfo& info, const KeyRange& range,
                      std::span<const float> values, std::span<const float> sums);

// Removes this job's files of shard `shard` (of `shards`) older than generation `below`, and every other job's
// files of the shards s' with s' mod shards == shard (so that together the servers remove them all). Files
// that cannot be removed are left.
void remove_older_files(const std::filesystem::path& prefix, std::uint64_t job, std::size_t shard,
                        std::size_t shards, std::uint64_t below);

}  // namespace asgd::net::ps
