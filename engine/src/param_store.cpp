#include "asgd/engine/param_store.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/huge_pages.hpp"
#include "segment_fault.hpp"
#include "segment_format.hpp"
#include "segment_header.hpp"
#include "segment_trust.hpp"

namespace asgd {
namespace bip = boost::interprocess;

namespace {

using segment::kFormatVersion;
using segment::kHeaderBytes;
using segment::kLayoutTextMax;
using segment::kMagic;
using segment::kMaxWriters;
using segment::kStateReady;
using segment::SegmentHeader;

// Process `pid`'s state letter and start time (/proc/PID/stat's fields 3 and 22; the start in clock ticks since
// boot); none when it cannot be read (no such process, no /proc).
struct ProcStat {
  char state = '?';
  std::uint64_t start = 0;
};
std::optional<ProcStat> proc_stat(int pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // "pid (comm) state ppid ...": comm may hold spaces and ')', so the fields count from the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  ProcStat stat;
  std::string field;
  for (int i = 3; i <= 22; ++i) {  // field 3 is the state, 22 the start time
    if (!(fields >> field)) return std::nullopt;
    if (i == 3) stat.state = field.empty() ? '?' : field[0];
  }
  const auto [p, ec] = std::from_chars(field.data(), field.data() + field.size(), stat.start);
  if (ec != std::errc() || p != field.data() + field.size()) stat.start = 0;
  return stat;
}

// When process `pid` started; 0 when it cannot be read.
std::uint64_t process_start(int pid) {
  const auto stat = proc_stat(pid);
  return stat ? stat->start : 0;
}

// Whether the process that wrote (`pid`, `started`) into a segment is alive: a
// process of that pid exists, is no zombie (killed and not yet reaped: kill(pid, 0) still finds it) and, when
// both start times are known, started when the writer did, so a dead writer's pid reused by another process is
// not taken for the writer. Without /proc, a process that kill() finds is alive.
bool process_alive(int pid, std::uint64_t started) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno != EPERM)) return false;
  const auto stat = proc_stat(pid);
  if (stat && (stat->state == 'Z' || stat->state == 'X')) return false;
  return started == 0 || !stat || stat->start == 0 || stat->start == started;
}

// A process (this one included) that holds shared-memory object `id` (named `name`): open (a creator holds its
// object open from shm_open on) or mapped (another program may map an object and close its descriptor); 0 when
// none is seen, -1 when that cannot be told: no /proc, or a process that could hold it (running as the object's
// owner, or any process when we are root) whose descriptors we may not read. Matched by device and
// inode (/dev/shm may be a link); a descriptor is looked at (stat) only when its link ends in the name, so that
// a hung network file in some process does not hang this.
int holder_of(const SegmentId& id, const std::string& name, unsigned owner_uid) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists("/proc/self/fd", ec)) return -1;
  const auto dev_major = static_cast<unsigned>(major(static_cast<dev_t>(id.device)));
  const auto dev_minor = static_cast<unsigned>(minor(static_cast<dev_t>(id.device)));
  const bool root = ::geteuid() == 0;
  // Whether process `dir` runs as a user who could hold the object (its real, effective, saved or fs uid).
  auto could_hold = [&](const fs::path& dir) {
    if (root) return true;
    std::ifstream status(dir / "status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Uid:", 0) != 0) continue;
      std::istringstream uids(line.substr(4));
      unsigned uid = 0;
      while (uids >> uid)
        if (uid == owner_uid) return true;
      return false;
    }
    return false;  // gone
  };
  for (fs::directory_iterator procs("/proc", ec), end; !ec && procs != end; procs.increment(ec)) {
    const std::string pid_text = procs->path().filename().string();
    int pid = 0;
    const auto [p, err] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
    if (err != std::errc() || p != pid_text.data() + pid_text.size()) continue;
    std::error_code fd_ec;
    fs::directory_iterator fds(procs->path() / "fd", fd_ec);
    if (fd_ec) {
      if (fd_ec != std::errc::no_such_file_or_directory && could_hold(procs->path())) return -1;
      continue;
    }
    for (fs::directory_iterator fds_end; !fd_ec && fds != fds_end; fds.increment(fd_ec)) {
      std::error_code link_ec;
      const fs::path target = fs::read_symlink(fds->path(), link_ec);
      if (link_ec || target.filename() != name) continue;
      struct stat st {};
      if (::stat(fds->path().c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_dev) == id.device &&
          static_cast<std::uint64_t>(st.st_ino) == id.inode)
        return pid;
    }
    // "address perms offset major:minor inode path", the numbers of the device in hex. A process whose
    // descriptors we could read but whose maps we may not (pid 1 in a container, even for root) is taken at
    // its descriptors: only one that mapped the object and closed it would be missed.
    std::ifstream maps(procs->path() / "maps");
    std::string line;
    while (std::getline(maps, line)) {
      std::istringstream fields(line);
      std::string range, perms, offset, device;
      std::uint64_t inode = 0;
      if (!(fields >> range >> perms >> offset >> device >> inode) || inode != id.inode) continue;
      unsigned ma = 0, mi = 0;
      if (std::sscanf(device.c_str(), "%x:%x", &ma, &mi) == 2 && ma == dev_major && mi == dev_minor) return pid;
    }
  }
  return ec ? -1 : 0;
}

// Whether the state word of a mapped header says ready.
bool is_ready(const SegmentHeader* h) {
  return std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(h->state)).load(std::memory_order_acquire) ==
         kStateReady;
}

// The size of the object `shm` has open; 0 when it cannot be told.
std::uint64_t object_bytes(const bip::shared_memory_object& shm) {
  struct stat st {};
  if (::fstat(shm.get_mapping_handle().handle, &st) != 0 || st.st_size < 0) return 0;
  return static_cast<std::uint64_t>(st.st_size);
}

// Opens the object `name` names (InputError when it cannot be: none, with `hint` added; or one this process may
// not open, saying whose it is when that is why).
void open_object(bip::shared_memory_object& shm, const std::string& name, bip::mode_t mode, std::string_view hint) {
  try {
    shm = bip::shared_memory_object(bip::open_only, name.c_str(), mode);
  } catch (const bip::interprocess_exception& e) {
    if (e.get_error_code() == bip::not_found_error) throw InputError(fmt::format("no shared segment '{}'{}", name, hint));
    segment::check_trusted(name);  // another user's, not ours to open: say whose
    throw InputError(fmt::format("shared segment '{}': cannot open: {}", name, e.what()));
  }
}

const SegmentHeader* header_of(const segment::MappedSegment& region) {
  return static_cast<const SegmentHeader*>(region.address());
}

// The object a descriptor has open, and the one `name` names now (none when it names nothing).
std::optional<SegmentId> id_of(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::nullopt;
  return SegmentId{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}
std::optional<SegmentId> id_of(const std::string& name) {
  const int fd = ::shm_open(("/" + name).c_str(), O_RDONLY, 0);
  if (fd < 0) return std::nullopt;
  auto id = id_of(fd);
  ::close(fd);
  return id;
}

// Whether `name` still names the object `shm` has open (the same inode).
bool same_object(const bip::shared_memory_object& shm, const std::string& name) {
  const auto held = id_of(shm.get_mapping_handle().handle);
  return held && id_of(name) == held;
}

// Removers by id hold one lock (flock on the shared-memory directory) from the check to the unlink: of two
// processes replacing one stale segment at once, the second cannot check the old object, let the first unlink
// it and make the name again, and then unlink the new one. (Without the directory, or when another program
// holds a lock on it for over 10 s, no lock: the window is then microseconds wide, not a hang.)
class DirLock {
 public:
  DirLock() {
    if (fd_ < 0) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0 && (errno == EWOULDBLOCK || errno == EINTR) &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = ::open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
};

// Removes `name` if it still names the object `shm` has open: a failed creator must not remove a segment that
// another process made under the name meanwhile (after an `asgd shm remove`).
void remove_if_same(const bip::shared_memory_object& shm, const std::string& name) noexcept {
  if (const auto held = id_of(shm.get_mapping_handle().handle)) ParamStore::remove_shared(name, *held);
}

void check_name(const std::string& name) {
  if (name.empty() || name.size() > 200) {
    throw InputError(fmt::format("shared segment '{}': name must have 1 to 200 characters", name));
  }
  if (name == "." || name == "..") {
    throw InputError(fmt::format("shared segment '{}': not a name (it is the shared-memory directory)", name));
  }
  if (name[0] == '-') {
    throw InputError(fmt::format("shared segment '{}': a name may not start with '-' (a command line would take it "
                                 "for an option)",
                                 name));
  }
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '-' || ch == '_' || ch == '.';
    if (!ok) {
      throw InputError(fmt::format("shared segment '{}': use only letters, digits, '.', '_' and '-'", name));
    }
  }
}

struct FreeDeleter {
  void operator()(float* p) const noexcept { std::free(p); }
};

// Writer slot i's pid and start time, of one occupant: the pid is read again after the start time, and a slot
// that changed hands in between is read again (else a detached writer's pid could meet its successor's start).
std::pair<std::int32_t, std::uint64_t> read_slot(const SegmentHeader& h, std::size_t i) {
  auto& h_ = const_cast<SegmentHeader&>(h);
  const std::atomic_ref<std::int32_t> pid_ref(h_.writers[i]);
  const std::atomic_ref<std::uint64_t> start_ref(h_.writer_starts[i]);
  for (;;) {
    const std::int32_t pid = pid_ref.load(std::memory_order_acquire);
    const std::uint64_t started = start_ref.load(std::memory_order_acquire);
    if (pid_ref.load(std::memory_order_acquire) == pid) return {pid, started};
  }
}

// The header of an opened segment, mapped at `h` (its kHeaderBytes), judged with `shm`'s size.
SegmentInfo read_info(const std::string& name, const SegmentHeader* h, const bip::shared_memory_object& shm) {
  return segment::read_header(name, h, [&shm] { return object_bytes(shm); });
}

// The bytes a ready segment of `elements` parameters maps: its header and parameters (read_info checked that the
// object holds them).
std::size_t mapped_bytes(std::uint64_t elements) {
  return kHeaderBytes + static_cast<std::size_t>(elements) * sizeof(float);
}

// What to map of an object of `bytes` (at least kHeaderBytes): header and parameters when its header (read, not
// mapped) says it is a ready segment whose parameters the object holds, so that a ready segment is mapped once;
// else the header alone, for read_info to judge (and refuse a short one before its parameters are mapped).
std::size_t bytes_to_map(const bip::shared_memory_object& shm, std::uint64_t bytes) {
  SegmentHeader fixed{};
  constexpr auto kFixed = static_cast<ssize_t>(offsetof(SegmentHeader, writers));
  if (::pread(shm.get_mapping_handle().handle, &fixed, kFixed, 0) != kFixed || fixed.magic != kMagic ||
      fixed.state != kStateReady || fixed.elements > (bytes - kHeaderBytes) / sizeof(float))
    return kHeaderBytes;
  return mapped_bytes(fixed.elements);
}

}  // namespace

SegmentInfo segment::read_header(const std::string& name, const SegmentHeader* h,
                                 const std::function<std::uint64_t()>& object_bytes) {
  if (std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(h->magic)).load(std::memory_order_acquire) != kMagic) {
    throw InputError(fmt::format("shared segment '{}' is not an asgd parameter segment (bad magic)", name));
  }
  if (h->format_version != kFormatVersion) {
    throw InputError(fmt::format("shared segment '{}' has format version {}, this asgd reads version {}", name,
                                 h->format_version, kFormatVersion));
  }
  SegmentInfo info;
  info.name = name;
  info.format_version = h->format_version;
  info.layout_hash = h->layout_hash;
  info.elements = h->elements;
  info.creator_pid = h->creator_pid;
  info.creator_alive = process_alive(h->creator_pid, h->creator_start);
  info.ready = is_ready(h);
  if (info.ready) {
    info.elements = h->elements;  // read after the acquire of `state`
    if (h->layout_text_bytes > kLayoutTextMax || h->settings_bytes > kLayoutTextMax - h->layout_text_bytes) {
      throw InputError(fmt::format("shared segment '{}' is corrupt (header says {} bytes of layout and {} of "
                                   "settings, more than its {})",
                                   name, h->layout_text_bytes, h->settings_bytes, kLayoutTextMax));
    }
    const std::uint64_t bytes = object_bytes();
    if (bytes < kHeaderBytes || info.elements > (bytes - kHeaderBytes) / sizeof(float) ||
        info.elements > (SIZE_MAX - kHeaderBytes) / sizeof(float)) {
      throw InputError(fmt::format("shared segment '{}' is truncated or corrupt (header says {} elements, {} bytes "
                                   "hold {})",
                                   name, info.elements, bytes,
                                   bytes < kHeaderBytes ? 0 : (bytes - kHeaderBytes) / sizeof(float)));
    }
    info.layout.assign(h->layout_text, h->layout_text_bytes);
    info.settings.assign(h->layout_text + h->layout_text_bytes, h->settings_bytes);
  }
  for (std::size_t i = 0; i < kMaxWriters; ++i) {
    const auto [pid, started] = read_slot(*h, i);
    if (pid == 0) continue;
    (process_alive(pid, started) ? info.writers : info.dead_writers).push_back(pid);
  }
  return info;
}

Layout segment::layout_of(const SegmentInfo& info) {
  Layout layout;
  try {
    layout = Layout::parse(info.layout);
  } catch (const InputError& e) {  // the layout's message says what, not where
    throw InputError(fmt::format("shared segment '{}' is corrupt: {}", info.name, e.what()));
  }
  if (layout.hash() != info.layout_hash || layout.size() != info.elements) {
    throw InputError(fmt::format("shared segment '{}' is corrupt: its layout text does not match its hash", info.name));
  }
  return layout;
}

struct ParamStore::Storage {
  Layout layout;
  std::string name;  // empty on the heap
  std::unique_ptr<float, FreeDeleter> heap;
  bip::shared_memory_object shm;
  segment::MappedSegment region;  // guarded: a truncation under us is said, not a bare SIGBUS
  SegmentHeader* header = nullptr;
  int writer_slot = -1;

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (header != nullptr && writer_slot >= 0) {
      // The start time goes first: whoever takes the slot next never reads ours with its pid.
      std::atomic_ref<std::uint64_t>(header->writer_starts[writer_slot]).store(0, std::memory_order_release);
      std::int32_t me = ::getpid();
      std::atomic_ref<std::int32_t>(header->writers[writer_slot])
          .compare_exchange_strong(me, 0, std::memory_order_acq_rel);
    }
  }

  // A slot is taken by its pid; its start time follows (a reader that sees the pid before it checks the pid
  // alone for that moment).
  void register_writer() {
    const std::int32_t me = ::getpid();
    const std::uint64_t started = process_start(me);
    for (std::size_t i = 0; i < kMaxWriters; ++i) {
      std::int32_t expected = 0;
      if (std::atomic_ref<std::int32_t>(header->writers[i])
              .compare_exchange_strong(expected, me, std::memory_order_acq_rel)) {
        std::atomic_ref<std::uint64_t>(header->writer_starts[i]).store(started, std::memory_order_release);
        writer_slot = static_cast<int>(i);
        return;
      }
    }
    throw RuntimeError(fmt::format("shared segment '{}': all {} writer slots are taken", name, kMaxWriters));
  }

  void clear_dead_writers() {
    for (std::size_t i = 0; i < kMaxWriters; ++i) {
      auto [pid, when] = read_slot(*header, i);
      auto started = std::atomic_ref<std::uint64_t>(header->writer_starts[i]);
      if (pid != 0 && !process_alive(pid, when)) {
        std::uint64_t expected = when;  // only if no new writer has taken the slot meanwhile
        if (started.compare_exchange_strong(expected, 0, std::memory_order_acq_rel))
          std::atomic_ref<std::int32_t>(header->writers[i]).compare_exchange_strong(pid, 0, std::memory_order_acq_rel);
      }
    }
  }
};

ParamStore::ParamStore(std::unique_ptr<Storage> storage, float* data, std::size_t size, bool writable)
    : storage_(std::move(storage)), data_(data), size_(size), writable_(writable) {}
ParamStore::ParamStore(ParamStore&&) noexcept = default;
ParamStore& ParamStore::operator=(ParamStore&&) noexcept = default;
ParamStore::~ParamStore() = default;

ParamStore ParamStore::on_heap(Layout layout) {
  auto s = std::make_unique<Storage>();
  const std::size_t n = layout.size();
  // Stores of 2 MiB and more start on a huge page and are advised onto huge pages: the zeroing below faults in
  // 512 times fewer pages. (Fewer TLB misses for rows read at random were hoped for too: hogwild mf's SGD on 10M
  // ratings measured the same, 8.4-9.2 s before and 8.6 s after on one thread.)
  const std::size_t wanted = std::max<std::size_t>(kCacheLine, n * sizeof(float));  // a multiple of 64
  const std::size_t align = wanted >= kHugePageBytes ? kHugePageBytes : kCacheLine;
  const std::size_t bytes = (wanted + align - 1) / align * align;  // aligned_alloc takes whole alignments
  s->heap.reset(static_cast<float*>(std::aligned_alloc(align, bytes)));
  if (!s->heap) throw RuntimeError(fmt::format("cannot allocate {} bytes of parameters", bytes));
  advise_huge_pages(s->heap.get(), bytes);
  std::memset(s->heap.get(), 0, bytes);
  s->layout = std::move(layout);
  float* data = s->heap.get();
  return ParamStore(std::move(s), data, n, true);
}

ParamStore ParamStore::create_shared(const std::string& name, Layout layout, CreateOptions options,
                                     const std::function<void(ParamStore&)>& initialize) {
  check_name(name);
  const std::string text = layout.serialize();
  if (text.size() > kLayoutTextMax) {
    throw InputError(fmt::format("shared segment '{}': layout description too long ({} bytes)", name, text.size()));
  }
  if (options.settings.size() > kLayoutTextMax - text.size()) {
    throw InputError(fmt::format("shared segment '{}': settings too long ({} bytes, {} left after the layout)", name,
                                 options.settings.size(), kLayoutTextMax - text.size()));
  }
  CreateOptions again = options;  // for a create after removing what was there
  again.replace_stale = false;
  auto s = std::make_unique<Storage>();
  bip::permissions owner_only;
  owner_only.set_permissions(0600);
  try {
    s->shm = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write, owner_only);
  } catch (const bip::interprocess_exception& e) {
    if (e.get_error_code() != bip::already_exists_error) {
      throw RuntimeError(fmt::format("shared segment '{}': cannot create: {}", name, e.what()));
    }
    SegmentInfo info;
    try {
      info = inspect_shared(name);
    } catch (const UntrustedSegment&) {
      throw;  // another user's, or open to them: not ours to judge or replace
    } catch (const InputError&) {
      // Not ours or corrupt: only an explicit remove may delete it; one a creator left before writing its header
      // holds nothing.
      if (const auto left = abandoned_shared(name)) {
        if (options.replace_stale) {
          remove_shared(name, *left);
          return create_shared(name, std::move(layout), again, initialize);
        }
        throw InputError(fmt::format("shared segment '{}' exists but its creator died before writing its header; "
                                     "remove it (ParamStore::remove_shared(\"{}\")) or replace it",
                                     name, name));
      }
      throw InputError(fmt::format("shared segment '{}' exists and is not a usable asgd segment; remove it "
                                   "(ParamStore::remove_shared(\"{}\"), which does not check that it is asgd's) if it is yours",
                                   name, name));
    }
    const bool nobody_alive = info.writers.empty() && !(!info.ready && info.creator_alive);
    if (options.replace_stale && info.stale() && nobody_alive) {
      // Only the segment judged stale: one made again under the name meanwhile is left (the create below then
      // finds the name taken and says so).
      remove_shared(name, info.id);
      return create_shared(name, std::move(layout), again, initialize);
    }
    if (info.stale() && nobody_alive) {
      throw InputError(fmt::format("shared segment '{}' exists but is stale (left by a killed process{}); "
                                   "remove it (ParamStore::remove_shared(\"{}\")) or replace it",
                                   name,
                                   info.dead_writers.empty() ? "" : fmt::format(", pid {}", info.dead_writers[0]),
                                   name));
    }
    throw InputError(fmt::format("shared segment '{}' already exists ({} live writer(s)); attach to it instead",
                                 name, info.writers.size()));
  }
  // Boost applies the permissions; fchmod again so a umask can never widen them.
  ::fchmod(s->shm.get_mapping_handle().handle, 0600);
  const std::size_t n = layout.size();
  try {
    // The header first (its magic last), state initialising: a creator killed while it sizes the parameters
    // leaves a segment that names it, which recovery replaces and `asgd shm remove` removes, and an attacher
    // waits on a live creator however long the sizing takes.
    s->shm.truncate(static_cast<bip::offset_t>(kHeaderBytes));
    s->region.map(s->shm, bip::read_write, kHeaderBytes, name);
    auto* h = static_cast<SegmentHeader*>(s->region.address());
    h->format_version = kFormatVersion;
    h->header_bytes = kHeaderBytes;
    h->layout_hash = layout.hash();
    h->elements = n;
    h->layout_text_bytes = text.size();
    h->settings_bytes = options.settings.size();
    h->creator_pid = ::getpid();
    h->creator_start = process_start(h->creator_pid);
    std::memcpy(h->layout_text, text.data(), text.size());
    std::memcpy(h->layout_text + text.size(), options.settings.data(), options.settings.size());
    std::atomic_ref<std::uint64_t>(h->magic).store(kMagic, std::memory_order_release);
    const auto bytes = static_cast<bip::offset_t>(kHeaderBytes + n * sizeof(float));
    s->shm.truncate(bytes);
    // truncate() only sizes a sparse file: reserve its pages now, so a full /dev/shm is this error and not a
    // SIGBUS at the first write to a page that cannot be had.
    if (const int err = ::posix_fallocate(s->shm.get_mapping_handle().handle, 0, bytes); err != 0) {
      throw bip::interprocess_exception(std::strerror(err));
    }
    s->region.map(s->shm, bip::read_write, static_cast<std::size_t>(bytes), name);
  } catch (const bip::interprocess_exception& e) {
    remove_if_same(s->shm, name);
    throw RuntimeError(fmt::format("shared segment '{}': cannot size or map {} bytes: {}", name,
                                   kHeaderBytes + n * sizeof(float), e.what()));
  }
  auto* h = static_cast<SegmentHeader*>(s->region.address());
  s->header = h;
  s->name = name;
  s->layout = std::move(layout);
  s->register_writer();
  float* data = reinterpret_cast<float*>(static_cast<char*>(s->region.address()) + kHeaderBytes);
  ParamStore made(std::move(s), data, n, true);
  if (initialize) {
    // Attachers wait for the ready state below, so nobody sees the segment half initialised; a failed
    // initialisation leaves nothing behind.
    try {
      initialize(made);
    } catch (...) {
      remove_if_same(made.storage_->shm, name);
      throw;
    }
  }
  std::atomic_ref<std::uint32_t>(h->state).store(kStateReady, std::memory_order_release);
  return made;
}

namespace {

std::mutex wait_notice_mutex;
std::function<void(const std::string&)> wait_notice_fn;
std::function<void(const std::string&)> wait_notice() {
  std::scoped_lock lock(wait_notice_mutex);
  return wait_notice_fn;
}

constexpr std::chrono::seconds kHeaderWait{2};
constexpr std::chrono::seconds kInitialiseWait{600};

// An attach's wait for a segment's creator, in steps of 5 ms: a stop request ends it at the next step
// (StopRequested), so that Ctrl-C or SIGTERM is obeyed at once rather than after up to kInitialiseWait.
class CreatorWait {
 public:
  CreatorWait(const std::string& name, const std::atomic<bool>* stop) : name_(name), stop_(stop) {}
  bool past(std::chrono::seconds limit) const { return std::chrono::steady_clock::now() - start_ > limit; }
  // Waits one step for the segment, which `what` ("is still being initialised by pid 12").
  void step(const std::string& what) const {
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) {
      throw StopRequested(fmt::format("shared segment '{}' {}: stopped waiting for it (a stop request); nothing "
                                      "attached or made",
                                      name_, what));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

 private:
  const std::string& name_;
  const std::atomic<bool>* stop_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// No header yet, past kHeaderWait: one that no process is making (a creator killed before it wrote the header) is
// named as such, with a removal that works; anything else may be another program's memory. Closes what it holds
// first, so that this process does not count as the object's creator.
[[noreturn]] void refuse_headerless(const std::string& name, const std::string& what, bip::shared_memory_object& shm,
                                    segment::MappedSegment& region) {
  region.unmap();
  shm = bip::shared_memory_object();
  if (ParamStore::abandoned_shared(name)) {
    throw InputError(fmt::format("shared segment '{}' {}: its creator died before writing it; remove it "
                                 "(ParamStore::remove_shared(\"{}\")), or replace it (AttachOptions::recover_stale)",
                                 name, what, name));
  }
  throw InputError(fmt::format("shared segment '{}' {} after {} s: not an asgd segment, or its creator hangs "
                               "while making it; remove it if it is yours (ParamStore::remove_shared(\"{}\"), which "
                               "does not check that it is asgd's)",
                               name, what, kHeaderWait.count(), name));
}

// A segment that is not ready: refused when its creator died or removed it; else the caller waits (told once,
// after kHeaderWait, to the wait notice), up to kInitialiseWait.
void check_still_coming(const std::string& name, const SegmentInfo& info, const bip::shared_memory_object& shm,
                        const CreatorWait& wait, bool& told) {
  if (!info.creator_alive) {
    throw InputError(fmt::format("shared segment '{}' is stale: its creator (pid {}) died before it was ready; "
                                 "remove it (ParamStore::remove_shared(\"{}\")), or replace it "
                                 "(AttachOptions::recover_stale)",
                                 name, info.creator_pid, name));
  }
  // A creator whose initialisation failed removes the name (and may live on): what we hold is then no segment
  // anyone will finish.
  if (!same_object(shm, name)) {
    throw InputError(fmt::format("shared segment '{}' was removed while pid {} initialised it", name,
                                 info.creator_pid));
  }
  if (!told && wait.past(kHeaderWait)) {
    told = true;
    if (const auto notice = wait_notice())
      notice(fmt::format("waiting for pid {} to finish initialising shared segment '{}' (at most {} s)",
                         info.creator_pid, name, kInitialiseWait.count()));
  }
  if (wait.past(kInitialiseWait)) {
    throw InputError(fmt::format("shared segment '{}' is still being initialised by pid {} after {} s: its creator "
                                 "hangs while making it; stop it, or remove the segment "
                                 "(ParamStore::remove_shared(\"{}\"), which does not check that it is asgd's)",
                                 name, info.creator_pid, kInitialiseWait.count(), name));
  }
}

// Opens and maps `name` (its header, then, once it is ready and its size checked, header and parameters), waiting
// for a creator that is still making it. A creator may be between shm_open and writing its magic: until
// kHeaderWait, a short object or a zero magic means "still initialising". Once the header is there, a live creator
// may take longer (it sizes the segment and fills the parameters before marking it ready): up to kInitialiseWait.
SegmentInfo open_segment(const std::string& name, Access access, const AttachOptions& options,
                         bip::shared_memory_object& shm, segment::MappedSegment& region) {
  check_name(name);
  const auto mode = access == Access::read_only ? bip::read_only : bip::read_write;
  open_object(shm, name, mode, " (is the training process running?)");
  segment::check_trusted(shm.get_mapping_handle().handle, name);  // before anything of it is read
  const CreatorWait wait(name, options.stop);
  bool told = false;
  for (;;) {
    const std::uint64_t bytes = object_bytes(shm);
    if (bytes < kHeaderBytes) {
      const std::string what = fmt::format("is only {} bytes", bytes);
      if (wait.past(kHeaderWait)) refuse_headerless(name, what, shm, region);
      wait.step(what);
      continue;
    }
    const std::size_t to_map = bytes_to_map(shm, bytes);
    if (region.size() != to_map) region.map(shm, mode, to_map, name);
    const auto* h = header_of(region);
    if (std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(h->magic)).load(std::memory_order_acquire) == 0) {
      if (wait.past(kHeaderWait)) refuse_headerless(name, "has no header", shm, region);
      wait.step("has no header");
      continue;
    }
    SegmentInfo info = read_info(name, h, shm);
    if (info.ready) {
      // Made ready since bytes_to_map looked (read_info checked that the object holds the parameters).
      if (region.size() != mapped_bytes(info.elements)) region.map(shm, mode, mapped_bytes(info.elements), name);
      return info;
    }
    check_still_coming(name, info, shm, wait, told);
    wait.step(fmt::format("is still being initialised by pid {}", info.creator_pid));
  }
}

}  // namespace

ParamStore ParamStore::attach(const std::string& name, const Layout* expected, Access access,
                              AttachOptions options) {
  auto s = std::make_unique<Storage>();
  SegmentInfo info = open_segment(name, access, options, s->shm, s->region);
  s->header = static_cast<SegmentHeader*>(s->region.address());
  s->name = name;
  s->layout = segment::layout_of(info);
  // Checked on the mapping we keep (the name could be replaced between a separate check and the attach), and
  // before anything below changes the segment.
  if (expected && s->layout.tag() != expected->tag() &&
      Layout(s->layout).set_tag({}) == Layout(*expected).set_tag({})) {
    throw InputError(fmt::format("shared segment '{}' holds other parameters of the same shape: its rows are "
                                 "tagged '{}', this model's '{}'",
                                 name, s->layout.tag(), expected->tag()));
  }
  if (expected && s->layout.hash() != expected->hash()) {
    throw LayoutMismatch(fmt::format("shared segment '{}' holds another layout:\n{}expected:\n{}", name,
                                     s->layout.describe(), expected->describe()));
  }
  if (access == Access::read_write && !options.settings.empty() && !info.settings.empty() &&
      options.settings != info.settings) {
    throw InputError(fmt::format("shared segment '{}' is trained with {}; this process would train it with {}: "
                                 "processes that train one segment must train one objective",
                                 name, info.settings, options.settings));
  }
  if (access == Access::read_write) {
    if (!info.dead_writers.empty()) {
      if (!options.recover_stale) {
        throw InputError(fmt::format(
            "shared segment '{}': writer pid {} died without detaching (killed?); its parameters may hold a "
            "half-applied update. Attach with recovery (AttachOptions::recover_stale) to take it over as it is, or "
            "remove it (ParamStore::remove_shared(\"{}\"))",
            name, info.dead_writers[0], name));
      }
      s->clear_dead_writers();
    }
    s->register_writer();
  }
  float* data = reinterpret_cast<float*>(static_cast<char*>(s->region.address()) + kHeaderBytes);
  const std::size_t n = info.elements;
  return ParamStore(std::move(s), data, n, access == Access::read_write);
}

ParamStore ParamStore::attach_shared_any(const std::string& name, Access access, AttachOptions options) {
  return attach(name, nullptr, access, options);
}

ParamStore ParamStore::attach_shared(const std::string& name, const Layout& expected, Access access,
                                     AttachOptions options) {
  return attach(name, &expected, access, options);
}

SegmentInfo ParamStore::inspect_shared(const std::string& name) {
  check_name(name);
  bip::shared_memory_object shm;
  open_object(shm, name, bip::read_only, "");
  const int fd = shm.get_mapping_handle().handle;
  // Whether it is asgd's at all comes first (read, not mapped): another program's memory is said to be that.
  const std::uint64_t bytes = object_bytes(shm);
  std::uint64_t magic = 0;
  if (bytes < kHeaderBytes) {
    throw InputError(fmt::format("shared segment '{}' is not an asgd parameter segment ({} bytes)", name, bytes));
  }
  if (::pread(fd, &magic, sizeof magic, 0) != static_cast<ssize_t>(sizeof magic) || magic != kMagic) {
    throw InputError(fmt::format("shared segment '{}' is not an asgd parameter segment (bad magic)", name));
  }
  segment::check_trusted(fd, name);
  segment::MappedSegment region;
  region.map(shm, bip::read_only, kHeaderBytes, name);
  SegmentInfo info = read_info(name, header_of(region), shm);
  info.id = id_of(fd).value_or(SegmentId{});
  return info;
}

bool ParamStore::exists_shared(const std::string& name) {
  check_name(name);
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_only);
    return true;
  } catch (const bip::interprocess_exception& e) {
    if (e.get_error_code() == bip::not_found_error) return false;
    return true;  // exists, but we may not open it: attach will say why
  }
}

namespace {
// Whether segment `name` is an asgd segment whose creator died before making it ready, with no writer left, or
// an object a creator killed before writing the header left.
bool never_finished(const std::string& name) {
  try {
    const SegmentInfo info = ParamStore::inspect_shared(name);
    return !info.ready && !info.creator_alive && info.writers.empty();
  } catch (const InputError&) {  // not ours, or gone: attach says which
    return ParamStore::abandoned_shared(name).has_value();
  }
}
}  // namespace

void ParamStore::set_wait_notice(std::function<void(const std::string&)> notice) {
  std::scoped_lock lock(wait_notice_mutex);
  wait_notice_fn = std::move(notice);
}

ParamStore ParamStore::open_or_create_shared(const std::string& name, Layout layout, AttachOptions options,
                                             bool* created, const std::function<void(ParamStore&)>& initialize) {
  if (created != nullptr) *created = false;
  for (int attempt = 0;; ++attempt) {
    // Once asked to stop (while the data was read, or a wait below ended by it), nothing is made.
    if (options.stop != nullptr && options.stop->load(std::memory_order_relaxed)) {
      throw StopRequested(
          fmt::format("shared segment '{}': a stop request came first; nothing attached or made", name));
    }
    if (exists_shared(name)) {
      // With recovery, a segment whose creator died before making it ready holds nothing: make it again.
      if (options.recover_stale && never_finished(name)) {
        try {
          ParamStore made = create_shared(name, layout, CreateOptions{true, options.settings}, initialize);
          if (created != nullptr) *created = true;
          return made;
        } catch (const InputError&) {
          // Another process recovering it too replaced it first: attach to its segment.
          if (attempt >= 2 || !exists_shared(name)) throw;
          continue;
        }
      }
      try {
        return attach_shared(name, layout, Access::read_write, options);
      } catch (const InputError&) {
        // Removed while we waited for its creator (its initialisation failed): start over, create it ourselves.
        if (attempt >= 2 || exists_shared(name)) throw;
        continue;
      }
    }
    try {
      ParamStore made = create_shared(name, layout, CreateOptions{false, options.settings}, initialize);
      if (created != nullptr) *created = true;
      return made;
    } catch (const InputError&) {
      // Another process created it between our check and our create: attach.
      if (attempt >= 2 || !exists_shared(name)) throw;
    }
  }
}

std::optional<SegmentId> ParamStore::abandoned_shared(const std::string& name) {
  check_name(name);
  const int fd = ::shm_open(("/" + name).c_str(), O_RDONLY, 0);
  if (fd < 0) return std::nullopt;
  // What a creator killed between shm_open and writing its magic leaves: nothing, or a header's size of bytes
  // without the magic.
  struct stat st {};
  bool headerless = false;
  if (::fstat(fd, &st) != 0 || !segment::trusted(st)) {
    ::close(fd);
    return std::nullopt;  // another user's (or open to them): not ours to call abandoned and remove
  }
  if (st.st_size == 0) {
    headerless = true;
  } else if (st.st_size == static_cast<off_t>(kHeaderBytes)) {
    std::uint64_t magic = 1;
    headerless = ::pread(fd, &magic, sizeof magic, 0) == static_cast<ssize_t>(sizeof magic) && magic == 0;
  }
  auto id = headerless ? id_of(fd) : std::nullopt;
  ::close(fd);
  // A creator writes its header microseconds after it made the object: one modified (made or truncated) less
  // than kAbandonedAge ago may still be on its way, whatever /proc shows (a creator in another pid namespace
  // that shares /dev/shm is not in ours).
  constexpr std::chrono::seconds kAbandonedAge{2};
  if (!id || std::chrono::system_clock::now() - std::chrono::system_clock::from_time_t(st.st_mtim.tv_sec) <
                 kAbandonedAge)
    return std::nullopt;
  // A live creator has it open (its create made it, so none can have started since); another program may hold
  // such an object too, by a descriptor or a mapping.
  if (holder_of(*id, name, st.st_uid) != 0) return std::nullopt;
  return id;
}

bool ParamStore::remove_shared(const std::string& name) noexcept {
  try {
    return bip::shared_memory_object::remove(name.c_str());
  } catch (...) {
    return false;
  }
}

bool ParamStore::remove_shared(const std::string& name, SegmentId only) noexcept {
  try {
    const DirLock lock;
    return id_of(name) == only && bip::shared_memory_object::remove(name.c_str());
  } catch (...) {
    return false;
  }
}

SegmentId ParamStore::segment_id() const noexcept {
  if (!is_shared()) return {};
  return id_of(storage_->shm.get_mapping_handle().handle).value_or(SegmentId{});
}

const Layout& ParamStore::layout() const noexcept { return storage_->layout; }
bool ParamStore::is_shared() const noexcept { return !storage_->name.empty(); }
const std::string& ParamStore::segment_name() const noexcept { return storage_->name; }

float* ParamStore::data() {
  if (!writable_) throw RuntimeError(fmt::format("parameters '{}' are attached read-only", storage_->name));
  return data_;
}

float ParamStore::load(std::size_t i) const noexcept { return load_param(data_[i]); }

void ParamStore::store(std::size_t i, float value) { store_param(data()[i], value); }

std::vector<float> ParamStore::snapshot() const {
  std::vector<float> out(size_);
  for (std::size_t i = 0; i < size_; ++i) out[i] = load_param(data_[i]);
  return out;
}

std::vector<float> ParamStore::snapshot(std::string_view tensor) const {
  const Tensor& t = layout()[tensor];
  std::vector<float> out;
  out.reserve(t.elements());
  for (std::size_t r = 0; r < t.rows; ++r) {
    for (std::size_t c = 0; c < t.cols; ++c) out.push_back(load_param(data_[t.at(r, c)]));
  }
  return out;
}

void ParamStore::assign(std::span<const float> values) {
  if (values.size() != size_) {
    throw InputError(fmt::format("assign: {} values for {} parameters", values.size(), size_));
  }
  float* d = data();
  for (std::size_t i = 0; i < size_; ++i) store_param(d[i], values[i]);
}

std::optional<std::size_t> ParamStore::first_non_finite() const noexcept {
  for (std::size_t i = 0; i < size_; ++i)
    if (!std::isfinite(load_param(data_[i]))) return i;
  return std::nullopt;
}

void ParamStore::fill(float value) {
  float* d = data();
  for (std::size_t i = 0; i < size_; ++i) store_param(d[i], value);
}

}  // namespace asgd
