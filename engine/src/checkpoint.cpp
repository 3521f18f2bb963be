#include "asgd/engine/checkpoint.hpp"

#include <fcntl.h>
#include <signal.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <boost/crc.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

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
  std::uint32_t reserved;
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

// A file descriptor that closes itself; writes are checked and checksummed.
class OutFile {
 public:
  explicit OutFile(const std::filesystem::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create");
  }
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;
  ~OutFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  void write(const void* data, std::size_t n) {
    crc_.process_bytes(data, n);
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t k = ::write(fd_, p, n);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) fail("cannot write");
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }
  std::uint32_t crc() const { return crc_.checksum(); }
  void sync_and_close() {
    if (::fsync(fd_) != 0) fail("cannot fsync");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("cannot close");
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw RuntimeError(fmt::format("checkpoint {}: {}: {}", path_.string(), what, std::strerror(errno)));
  }
  std::filesystem::path path_;
  int fd_ = -1;
  boost::crc_32_type crc_;
};

// The rename is durable only once the directory is synced.
void fsync_directory(const std::filesystem::path& file) {
  const std::filesystem::path dir = file.parent_path().empty() ? "." : file.parent_path();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int rc = fd < 0 ? -1 : ::fsync(fd);
  const int saved = errno;
  if (fd >= 0) ::close(fd);
  if (rc != 0) {
    throw RuntimeError(fmt::format("checkpoint {}: written, but syncing directory {} failed: {}", file.string(),
                                   dir.string(), std::strerror(saved)));
  }
}

// A process killed while saving leaves PATH.tmp.PID.N behind; the next save
// of PATH removes those whose PID is no longer running.
void remove_stale_temporaries(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
  const std::string prefix = path.filename().string() + ".tmp.";
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const int pid = std::atoi(name.c_str() + prefix.size());
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace

void save_checkpoint(const std::filesystem::path& path, const ParamStore& store, const TrainState& state,
                     std::span<const float> optimizer_state, std::string_view metadata) {
  const std::string layout_text = store.layout().serialize();
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.layout_hash = store.layout().hash();
  h.elements = store.size();
  h.optimizer_elements = optimizer_state.size();
  h.epoch = state.epoch;
  h.examples = state.examples;
  h.seed = state.seed;
  h.layout_text_bytes = layout_text.size();
  h.metadata_bytes = metadata.size();

  remove_stale_temporaries(path);
  static std::atomic<std::uint64_t> serial{0};
  std::filesystem::path tmp = path;
  tmp += fmt::format(".tmp.{}.{}", ::getpid(), serial.fetch_add(1));
  try {
    OutFile out(tmp);
    out.write(&h, sizeof h);
    out.write(layout_text.data(), layout_text.size());
    out.write(metadata.data(), metadata.size());
    // Parameters and optimizer state may still be changing (other workers,
    // other processes): snapshot each float once, through a relaxed load,
    // so what is checksummed is exactly what is written.
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
        out.write(chunk.data(), n * sizeof(float));
      }
    };
    write_snapshot(store.data(), store.size(), "parameter");
    write_snapshot(optimizer_state.data(), optimizer_state.size(), "optimizer value");
    const std::uint32_t crc = out.crc();
    out.write(&crc, sizeof crc);
    out.write(kEnd, sizeof kEnd);
    out.sync_and_close();
    std::filesystem::rename(tmp, path);
  } catch (const std::filesystem::filesystem_error& e) {
    std::filesystem::remove(tmp);
    throw RuntimeError(fmt::format("checkpoint {}: cannot rename into place: {}", path.string(), e.what()));
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
  fsync_directory(path);
}

CheckpointData read_checkpoint(const std::filesystem::path& path) {
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
  d.layout = Layout::parse(layout_text);
  if (d.layout.hash() != h.layout_hash || d.layout.size() != h.elements) {
    throw InputError(fmt::format("checkpoint {}: layout does not match its hash", path.string()));
  }
  d.state = TrainState{h.epoch, h.examples, h.seed};
  return d;
}

TrainState load_checkpoint(const std::filesystem::path& path, ParamStore& store, std::vector<float>* optimizer_state,
                           std::string* metadata) {
  CheckpointData d = read_checkpoint(path);
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
