#include "asgd/net/mpi.hpp"

#if ASGD_HAVE_MPI
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "asgd/engine/errors.hpp"

namespace asgd::net {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw RuntimeError(fmt::format("{}: {}", what, std::string(text, static_cast<std::size_t>(len))));
}

int count_of(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw InputError(fmt::format("MPI message of {} floats is larger than an int can count", n));
  return static_cast<int>(n);
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv, int required, int requested) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised) throw RuntimeError("MPI was already initialised (one MpiSession per process)");
  check(MPI_Init_thread(argc, argv, std::max(required, requested), &provided_), "MPI_Init_thread");
  if (provided_ < required) {
    MPI_Finalize();
    throw RuntimeError(fmt::format("MPI provides thread level {}, asgd needs {}", provided_, required));
  }
  // A failed MPI call aborts the whole job (the default): with
  // MPI_ERRORS_RETURN one rank could throw while the others wait forever.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

MpiSession::~MpiSession() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_Finalize();
}

bool MpiSession::launched_by_mpi() noexcept {
  // Open MPI, MPICH and Slurm set these in every rank's environment.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

MpiTransport::MpiTransport(MPI_Comm comm) {
  check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Query_thread(&thread_level_);
  MPI_Comm shared;
  check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared), "MPI_Comm_split_type");
  int shared_size = 0;
  MPI_Comm_size(shared, &shared_size);
  MPI_Comm_free(&shared);
  one_host_ = shared_size == size_;
}

MpiTransport::~MpiTransport() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_Comm_free(&comm_);
}

void MpiTransport::send(std::span<const float> data, int dst) {
  check(MPI_Send(data.data(), count_of(data.size()), MPI_FLOAT, dst, 0, comm_), "MPI_Send");
}

void MpiTransport::recv(std::span<float> data, int src) {
  MPI_Status status;
  check(MPI_Recv(data.data(), count_of(data.size()), MPI_FLOAT, src, 0, comm_, &status), "MPI_Recv");
  int got = 0;
  MPI_Get_count(&status, MPI_FLOAT, &got);
  if (static_cast<std::size_t>(got) != data.size())
    throw RuntimeError(fmt::format("rank {}: expected {} floats from rank {}, got {}", rank_, data.size(), src, got));
}

void MpiTransport::sendrecv(std::span<const float> send_data, int dst, std::span<float> recv_data, int src) {
  check(MPI_Sendrecv(send_data.data(), count_of(send_data.size()), MPI_FLOAT, dst, 0, recv_data.data(),
                     count_of(recv_data.size()), MPI_FLOAT, src, 0, comm_, MPI_STATUS_IGNORE),
        "MPI_Sendrecv");
}

void MpiTransport::check_multiple() const {
  if (thread_level_ < MPI_THREAD_MULTIPLE) {
    throw RuntimeError(fmt::format("tagged messages need MPI_THREAD_MULTIPLE; this MPI provides thread level {}",
                                   thread_level_));
  }
}

void MpiTransport::reap(bool wait) {
  // Never blocks holding the lock: another thread's poll must go on receiving while this one waits for a send
  // (the receiver of that send may be waiting for exactly that).
  for (;;) {
    {
      std::unique_lock lock(posted_mutex_, std::defer_lock);
      if (wait) {
        lock.lock();
      } else if (!lock.try_lock()) {
        return;
      }
      for (auto it = posted_.begin(); it != posted_.end();) {
        int done = 0;
        check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        it = done ? posted_.erase(it) : std::next(it);
      }
      if (!wait || posted_.empty()) return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void MpiTransport::post(std::vector<std::byte> bytes, int dst, int tag) {
  check_multiple();
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw InputError(fmt::format("MPI message of {} bytes is larger than an int can count", bytes.size()));
  reap(false);
  std::scoped_lock lock(posted_mutex_);
  Posted& p = posted_.emplace_back(Posted{MPI_REQUEST_NULL, std::move(bytes)});
  check(MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, dst, tag, comm_, &p.request),
        "MPI_Isend");
}

bool MpiTransport::poll(int tag, Message& out) {
  check_multiple();
  int found = 0;
  MPI_Message message;
  MPI_Status status;
  check(MPI_Improbe(MPI_ANY_SOURCE, tag, comm_, &found, &message, &status), "MPI_Improbe");
  if (!found) {
    reap(false);
    return false;
  }
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  out.src = status.MPI_SOURCE;
  out.bytes.resize(static_cast<std::size_t>(count));
  check(MPI_Mrecv(out.bytes.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
  return true;
}

void MpiTransport::flush() { reap(true); }

void MpiTransport::barrier() { check(MPI_Barrier(comm_), "MPI_Barrier"); }

namespace {

// Calls f(offset, count) over [0, n) in pieces an int can count.
template <class F>
void in_pieces(std::size_t n, F&& f) {
  constexpr std::size_t kMax = std::size_t{1} << 30;
  for (std::size_t at = 0; at < n; at += kMax) f(at, static_cast<int>(std::min(kMax, n - at)));
}

class MpiWindow final : public Window {
 public:
  MpiWindow(MPI_Comm comm, std::size_t bytes) : comm_(comm) {
    void* base = nullptr;
    check(MPI_Win_allocate(static_cast<MPI_Aint>(bytes), 1, MPI_INFO_NULL, comm, &base, &win_), "MPI_Win_allocate");
    if (bytes > 0) std::memset(base, 0, bytes);
    check(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_), "MPI_Win_lock_all");
    check(MPI_Win_sync(win_), "MPI_Win_sync");
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }
  void add(int dst, std::size_t offset, std::span<const float> values) override {
    accumulate(values.data(), values.size(), MPI_FLOAT, dst, offset, MPI_SUM);
  }
  void put(int dst, std::size_t offset, std::span<const float> values) override {
    accumulate(values.data(), values.size(), MPI_FLOAT, dst, offset, MPI_REPLACE);
  }
  void raise(int dst, std::size_t offset, std::span<const std::uint64_t> words) override {
    accumulate(words.data(), words.size(), MPI_UINT64_T, dst, offset, MPI_MAX);
  }
  void get(int src, std::size_t offset, std::span<float> out) override {
    in_pieces(out.size(), [&](std::size_t at, int n) {
      check(MPI_Get(out.data() + at, n, MPI_FLOAT, src, static_cast<MPI_Aint>(offset + 4 * at), n, MPI_FLOAT, win_),
            "MPI_Get");
    });
  }
  void get(int src, std::size_t offset, std::span<std::uint64_t> out) override {
    in_pieces(out.size(), [&](std::size_t at, int n) {
      check(MPI_Get_accumulate(nullptr, 0, MPI_UINT64_T, out.data() + at, n, MPI_UINT64_T, src,
                               static_cast<MPI_Aint>(offset + 8 * at), n, MPI_UINT64_T, MPI_NO_OP, win_),
            "MPI_Get_accumulate");
    });
  }
  void flush() override { check(MPI_Win_flush_all(win_), "MPI_Win_flush_all"); }
  void barrier() override {
    flush();
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }
  void close() override {
    if (win_ == MPI_WIN_NULL) return;
    check(MPI_Win_unlock_all(win_), "MPI_Win_unlock_all");
    check(MPI_Win_free(&win_), "MPI_Win_free");
  }

 private:
  void accumulate(const void* data, std::size_t n, MPI_Datatype type, int dst, std::size_t offset, MPI_Op op) {
    int size = 0;
    MPI_Type_size(type, &size);
    const auto* bytes = static_cast<const std::byte*>(data);
    in_pieces(n, [&](std::size_t at, int count) {
      check(MPI_Accumulate(bytes + at * static_cast<std::size_t>(size), count, type, dst,
                           static_cast<MPI_Aint>(offset + at * static_cast<std::size_t>(size)), count, type, op, win_),
            "MPI_Accumulate");
    });
  }
  MPI_Comm comm_;
  MPI_Win win_ = MPI_WIN_NULL;
};

}  // namespace

std::unique_ptr<Window> MpiTransport::window(std::size_t bytes) {
  if (thread_level_ < MPI_THREAD_MULTIPLE) {
    throw RuntimeError(fmt::format("one-sided windows (the parameter server's one-sided transport, "
                                   "PsOptions::transport) need MPI_THREAD_MULTIPLE; this MPI provides thread level {}",
                                   thread_level_));
  }
  return std::make_unique<MpiWindow>(comm_, bytes);
}

void MpiTransport::abort(const std::string& message, int code) {
  std::fprintf(stderr, "asgd: rank %d: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  MPI_Abort(comm_, code);
  std::_Exit(code);
}

namespace {
class Native final : public Allreduce {
 public:
  explicit Native(MpiTransport& t) : t_(t) {}
  Algorithm algorithm() const noexcept override { return Algorithm::native; }
  void sum(std::span<float> data) override {
    constexpr std::size_t kMax = std::size_t{1} << 30;
    for (std::size_t first = 0; first < data.size(); first += kMax) {
      const auto part = data.subspan(first, std::min(kMax, data.size() - first));
      check(MPI_Allreduce(MPI_IN_PLACE, part.data(), static_cast<int>(part.size()), MPI_FLOAT, MPI_SUM, t_.comm()),
            "MPI_Allreduce");
    }
  }

 private:
  MpiTransport& t_;
};
}  // namespace

std::unique_ptr<Allreduce> make_native_allreduce(MpiTransport& transport) {
  return std::make_unique<Native>(transport);
}

}  // namespace asgd::net
#endif
