// Checkpoints: a ParamStore with its layout and training state, written to a
// temp file, fsync'ed and renamed into place, so a crash at any moment leaves
// either the old or the new file; a CRC-32 and an end marker let load refuse
// a torn, corrupt or foreign file with a clear message.
//
// File format (little-endian, version 1):
//   "ASGDCKPT" u32 version u32 optimizer: OptimizerKind in bits 0-7 (0 before it
//   was recorded), the row head of per-row sums in bits 8-31 (0: none; 0 too
//   before it was recorded, which an older reader takes for an unknown kind)
//   u64 layout_hash u64 elements u64 optimizer_elements
//   u64 epoch u64 examples u64 seed u64 layout_text_bytes u64 metadata_bytes
//   layout text | metadata | elements x f32 | optimizer_elements x f32
//   u32 crc32(all of the above) "ASGDEND!"
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "asgd/engine/layout.hpp"
#include "asgd/engine/param_store.hpp"

namespace asgd {

// Where training stands: enough to resume at an epoch boundary.
struct TrainState {
  std::uint64_t epoch = 0;     // epochs completed
  std::uint64_t examples = 0;  // examples processed so far
  std::uint64_t seed = 0;      // the run's seed (shuffles derive from it)
  friend bool operator==(const TrainState&, const TrainState&) = default;
};

// What wrote a checkpoint's optimizer state, when the writer said (the
// Trainer does): sums of one step rule are not the other's.
enum class OptimizerKind : std::uint32_t { unrecorded = 0, adagrad = 1, row_adagrad = 2 };
// The largest row head a checkpoint can record is kMaxRowHead - 1 (24 bits).
inline constexpr std::size_t kMaxRowHead = std::size_t{1} << 24;

struct CheckpointData {
  Layout layout;
  std::vector<float> params;           // layout.size() values
  std::vector<float> optimizer_state;  // e.g. AdaGrad sums; empty if none
  OptimizerKind optimizer_kind = OptimizerKind::unrecorded;
  // With row_adagrad: Schedule::row_head of the sums (0: one sum per row).
  std::uint32_t row_head = 0;
  TrainState state;
  std::string metadata;  // opaque to the engine: apps keep id maps, options...
};

// Throws InputError for a path that cannot be written at all (no such
// folder, a folder, no permission: AtomicFile's checks, a caller's mistake),
// RuntimeError when the write itself fails (the previous file, if any,
// stays) and when a parameter is NaN or infinite (a diverged model is never
// saved). `row_head` goes with OptimizerKind::row_adagrad only, and is
// below kMaxRowHead.
void save_checkpoint(const std::filesystem::path& path, const ParamStore& store, const TrainState& state,
                     std::span<const float> optimizer_state = {}, std::string_view metadata = {},
                     OptimizerKind optimizer_kind = OptimizerKind::unrecorded, std::uint32_t row_head = 0);

// Keeps the checkpoint at `path` as previous_checkpoint(path) (PATH.prev),
// replacing an older one, before `path` is written again: one generation
// back, for jobs whose processes each write a file (see
// TrainerOptions::checkpoint_keep_previous). A hard link where the file
// system has them, else a copy, renamed into place, so a kill leaves the old
// PATH.prev or the new one whole. Nothing when `path` does not exist.
// RuntimeError when it cannot be made.
void keep_previous_checkpoint(const std::filesystem::path& path);
std::filesystem::path previous_checkpoint(const std::filesystem::path& path);

// Throws InputError naming the file and what is wrong: missing, not a
// checkpoint, other version, truncated, checksum mismatch.
CheckpointData read_checkpoint(const std::filesystem::path& path);

// Reads `path` into `store`, whose layout must match; returns the state.
TrainState load_checkpoint(const std::filesystem::path& path, ParamStore& store,
                           std::vector<float>* optimizer_state = nullptr, std::string* metadata = nullptr);
// The same for a checkpoint already read (its metadata looked at first), so
// the file is not read twice; `path` names it in errors.
TrainState load_checkpoint(CheckpointData data, const std::filesystem::path& path, ParamStore& store,
                           std::vector<float>* optimizer_state = nullptr, std::string* metadata = nullptr);

}  // namespace asgd
