#include "asgd/engine/checkpoint.hpp"

#include <fmt/format.h>

#include <bit>
#include <boost/crc.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <fcntl.h>
#include <unistd.h>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd {
namespace {

static_assert(std::endian::native == std::endian::little, "checkpoint format is little-endian");

constexpr char kMagic[8] = {'A', 'S', 'G', 'D', 'C', 'K', 'P', 'T'};
constexpr char kEnd[8] = {'A', 'S', 'G', 'D', 'E', 'N', 'D', '!'};
constexpr std::uint32_t kVersion = 1;

struct FileHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t optimizer;  // kind | row head << 8; was reserved (0) before the kind was recorded
  std::uint64_t layout_hash;
  std::uint64_t elements;
  std::uint64_t optimizer_elements;
  std::uint64_t epoch;
  std::uint64_t examples;
  std::uint64_t seed;
  std::uint64_t layout_text_bytes;
  std::uint64_t metadata_bytes;
};
static_assert(sizeof(FileHeader) == 80);

}  // namespace

std::filesystem::path previous_checkpoint(const std::filesystem::path& path) {
  return std::filesystem::path(path.string() + ".prev");
}

void keep_previous_checkpoint(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return;
  // A link's target, as AtomicFile replaces it: a hard link to the link itself would follow every new write.
  const fs::path file = fs::is_symlink(path, ec) ? fs::canonical(path, ec) : path;
  if (ec) throw RuntimeError(fmt::format("{}: cannot resolve the link to keep its checkpoint: {}", path.string(),
                                         ec.message()));
  const fs::path previous = previous_checkpoint(path);
  // Already the same file (kept, and the write after it failed): a rename of one link over another of the same
  // file does nothing and would leave the temp name behind.
  if (fs::equivalent(file, previous, ec)) return;
  ec.clear();
  // One name, not one per process: one process writes a checkpoint path, and a keep killed half way leaves this
  // name for the next keep to remove.
  const fs::path temp = fs::path(previous.string() + ".tmp");
  fs::remove(temp, ec);
  ec.clear();
  fs::create_hard_link(file, temp, ec);
  if (ec) {
    // No hard links here: a copy, synced before it takes the name.
    ec.clear();
    fs::copy_file(file, temp, fs::copy_options::overwrite_existing, ec);
    if (!ec) {
      const int fd = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::fsync(fd) != 0) ec = std::error_code(errno, std::generic_category());
      if (fd >= 0) ::close(fd);
    }
  }
  if (!ec) fs::rename(temp, previous, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw RuntimeError(fmt::format("{}: cannot keep the previous checkpoint as {}: {}", path.string(),
                                   previous.string(), ec.message()));
  }
}

void save_checkpoint(const std::filesystem::path& path, const ParamStore& store, const TrainState& state,
                     std::span<const float> optimizer_state, std::string_view metadata, OptimizerKind optimizer_kind,
                     std::uint32_t row_head) {
  if (row_head >= kMaxRowHead || (row_head > 0 && optimizer_kind != OptimizerKind::row_adagrad)) {
    throw InputError(fmt::format("checkpoint {}: a row head ({}) is for per-row AdaGrad sums, below {}", path.string(),
                                 row_head, kMaxRowHead));
  }
  const std::string layout_text = store.layout().serialize();
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.optimizer = static_cast<std::uint32_t>(optimizer_kind) | row_head << 8;
  h.layout_hash = store.layout().hash();
  h.elements = store.size();
  h.optimizer_elements = optimizer_state.size();
  h.epoch = state.epoch;
  h.examples = state.examples;
  h.seed = state.seed;
  h.layout_text_bytes = layout_text.size();
  h.metadata_bytes = metadata.size();

  AtomicFile out(path);
  boost::crc_32_type crc;
  auto write = [&](const void* data, std::size_t n) {
    crc.process_bytes(data, n);
    out.write(data, n);
  };
  write(&h, sizeof h);
  write(layout_text.data(), layout_text.size());
  write(metadata.data(), metadata.size());
  // Parameters and optimizer state may still be changing (other workers,
  // other processes): snapshot each float once, through a relaxed load, so
  // what is checksummed is exactly what is written.
  std::vector<float> chunk(1 << 16);
  auto write_snapshot = [&](const float* values, std::size_t count, const char* what) {
    for (std::size_t i = 0; i < count; i += chunk.size()) {
      const std::size_t n = std::min(chunk.size(), count - i);
      for (std::size_t k = 0; k < n; ++k) {
        chunk[k] = load_param(values[i + k]);
        if (!std::isfinite(chunk[k])) {
          throw RuntimeError(fmt::format("checkpoint {}: {} {} is {}; refusing to save a diverged model",
                                         path.string(), what, i + k, chunk[k]));
        }
      }
      write(chunk.data(), n * sizeof(float));
    }
  };
  write_snapshot(store.data(), store.size(), "parameter");
  write_snapshot(optimizer_state.data(), optimizer_state.size(), "optimizer value");
  const std::uint32_t checksum = crc.checksum();
  out.write(&checksum, sizeof checksum);
  out.write(kEnd, sizeof kEnd);
  out.commit();
}

CheckpointData read_checkpoint(const std::filesystem::path& path) {
  // Its size is checked against the header before anything is allocated: a pipe has none (and opening one
  // would wait for a writer).
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw InputError(fmt::format("checkpoint {}: not a regular file (a pipe or a device cannot be read as a "
                                 "checkpoint; save it to a file first)",
                                 path.string()));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("checkpoint {}: cannot open (missing?)", path.string()));
  in.seekg(0, std::ios::end);
  const auto file_bytes = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  FileHeader h{};
  if (file_bytes < sizeof h || !in.read(reinterpret_cast<char*>(&h), sizeof h) ||
      std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    throw InputError(fmt::format("checkpoint {}: not an asgd checkpoint (bad magic)", path.string()));
  }
  if (h.version != kVersion) {
    throw InputError(fmt::format("checkpoint {}: format version {}, this asgd reads version {}", path.string(),
                                 h.version, kVersion));
  }
  const std::uint64_t body = h.layout_text_bytes + h.metadata_bytes + (h.elements + h.optimizer_elements) * 4;
  const std::uint64_t expected = sizeof h + body + sizeof(std::uint32_t) + sizeof kEnd;
  if (h.layout_text_bytes > (1u << 24) || h.metadata_bytes > file_bytes || h.elements > file_bytes ||
      h.optimizer_elements > file_bytes || expected != file_bytes) {
    throw InputError(fmt::format("checkpoint {}: truncated or torn ({} bytes, header promises {})", path.string(),
                                 file_bytes, expected));
  }
  CheckpointData d;
  // A kind this asgd does not know reads as unrecorded, its head as none (what was written before either was).
  const std::uint32_t kind = h.optimizer & 0xffu;
  d.optimizer_kind = kind <= 2 ? static_cast<OptimizerKind>(kind) : OptimizerKind::unrecorded;
  if (d.optimizer_kind == OptimizerKind::row_adagrad) d.row_head = h.optimizer >> 8;
  std::string layout_text(h.layout_text_bytes, '\0');
  d.metadata.resize(h.metadata_bytes);
  d.params.resize(h.elements);
  d.optimizer_state.resize(h.optimizer_elements);
  std::uint32_t stored_crc = 0;
  char end[8];
  in.read(layout_text.data(), static_cast<std::streamsize>(layout_text.size()));
  in.read(d.metadata.data(), static_cast<std::streamsize>(d.metadata.size()));
  in.read(reinterpret_cast<char*>(d.params.data()), static_cast<std::streamsize>(d.params.size() * 4));
  in.read(reinterpret_cast<char*>(d.optimizer_state.data()),
          static_cast<std::streamsize>(d.optimizer_state.size() * 4));
  in.read(reinterpret_cast<char*>(&stored_crc), sizeof stored_crc);
  in.read(end, sizeof end);
  if (!in || std::memcmp(end, kEnd, sizeof kEnd) != 0) {
    throw InputError(fmt::format("checkpoint {}: truncated or torn (no end marker)", path.string()));
  }
  boost::crc_32_type crc;
  crc.process_bytes(&h, sizeof h);
  crc.process_bytes(layout_text.data(), layout_text.size());
  crc.process_bytes(d.metadata.data(), d.metadata.size());
  crc.process_bytes(d.params.data(), d.params.size() * 4);
  crc.process_bytes(d.optimizer_state.data(), d.optimizer_state.size() * 4);
  if (crc.checksum() != stored_crc) {
    throw InputError(fmt::format("checkpoint {}: checksum mismatch (corrupt file)", path.string()));
  }
  try {
    d.layout = Layout::parse(layout_text);
  } catch (const InputError& e) {  // the layout's message says what, not where
    throw InputError(fmt::format("checkpoint {}: {}", path.string(), e.what()));
  }
  if (d.layout.hash() != h.layout_hash || d.layout.size() != h.elements) {
    throw InputError(fmt::format("checkpoint {}: layout does not match its hash", path.string()));
  }
  // What save_checkpoint never writes: a file holding NaN or inf was made elsewhere, and training from it would
  // only fail later as "diverged".
  for (const auto* values : {&d.params, &d.optimizer_state}) {
    for (std::size_t i = 0; i < values->size(); ++i) {
      if (!std::isfinite((*values)[i])) {
        throw InputError(fmt::format("checkpoint {}: {} {} is {} (not a model asgd saved)", path.string(),
                                     values == &d.params ? "parameter" : "optimizer value", i, (*values)[i]));
      }
    }
  }
  // AdaGrad's sums of squared gradients: a negative one would make its step a NaN at the first update.
  if (d.optimizer_kind == OptimizerKind::adagrad || d.optimizer_kind == OptimizerKind::row_adagrad) {
    for (std::size_t i = 0; i < d.optimizer_state.size(); ++i) {
      if (d.optimizer_state[i] < 0) {
        throw InputError(fmt::format("checkpoint {}: AdaGrad sum {} is {} (a sum of squares; not a model asgd "
                                     "saved)",
                                     path.string(), i, d.optimizer_state[i]));
      }
    }
  }
  d.state = TrainState{h.epoch, h.examples, h.seed};
  return d;
}

TrainState load_checkpoint(const std::filesystem::path& path, ParamStore& store, std::vector<float>* optimizer_state,
                           std::string* metadata) {
  return load_checkpoint(read_checkpoint(path), path, store, optimizer_state, metadata);
}

TrainState load_checkpoint(CheckpointData d, const std::filesystem::path& path, ParamStore& store,
                           std::vector<float>* optimizer_state, std::string* metadata) {
  if (d.layout.hash() != store.layout().hash()) {
    throw InputError(fmt::format("checkpoint {} holds another model:\n{}expected:\n{}", path.string(),
                                 d.layout.describe(), store.layout().describe()));
  }
  store.assign(d.params);
  if (optimizer_state) *optimizer_state = std::move(d.optimizer_state);
  if (metadata) *metadata = std::move(d.metadata);
  return d.state;
}

}  // namespace asgd
