// MPI: an RAII session (MPI_Init_thread with the thread level asgd needs,
// checked) and a Communicator that is a Transport. Built when MPI is found
// (ASGD_HAVE_MPI in asgd/config.hpp).
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "asgd/config.hpp"
#include "asgd/net/allreduce.hpp"
#include "asgd/net/transport.hpp"

#if ASGD_HAVE_MPI
#include <mpi.h>

namespace asgd::net {

// Initialises MPI on construction and finalises it on destruction. Asks for
// `requested` (by default `required`; MPI_THREAD_FUNNELED: only the thread
// that created the session calls MPI); throws RuntimeError if the library
// provides less than `required`. MPI errors abort the job with the rank and the message (no
// rank may hang waiting for a dead one).
class MpiSession {
 public:
  explicit MpiSession(int* argc, char*** argv, int required = MPI_THREAD_FUNNELED, int requested = 0);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int provided() const noexcept { return provided_; }
  // True when the process was started by mpirun/mpiexec with more than one
  // rank (or MPI was initialised anyway).
  static bool launched_by_mpi() noexcept;

 private:
  int provided_ = 0;
};

// MPI_COMM_WORLD (or a duplicate of another communicator) as a Transport.
class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(MPI_Comm comm = MPI_COMM_WORLD);
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  void send(std::span<const float> data, int dst) override;
  void recv(std::span<float> data, int src) override;
  void sendrecv(std::span<const float> send_data, int dst, std::span<float> recv_data, int src) override;
  // Tagged messages (MPI_Isend, MPI_Improbe + MPI_Mrecv): RuntimeError unless
  // MPI runs at MPI_THREAD_MULTIPLE.
  void post(std::vector<std::byte> bytes, int dst, int tag) override;
  bool poll(int tag, Message& out) override;
  void flush() override;
  // MPI_Win_allocate under MPI_Win_lock_all (MPI_MODE_NOCHECK); floats added by MPI_Accumulate (MPI_SUM) and
  // read by MPI_Get, words raised by MPI_Accumulate (MPI_MAX) and read by MPI_Get_accumulate (MPI_NO_OP).
  // RuntimeError unless MPI runs at MPI_THREAD_MULTIPLE.
  std::unique_ptr<Window> window(std::size_t bytes) override;
  // Whether MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) holds every rank.
  bool one_host() const noexcept override { return one_host_; }
  MPI_Comm comm() const noexcept { return comm_; }
  void barrier();
  // Ends every rank of the job: prints "asgd: rank R: MESSAGE" and calls
  // MPI_Abort, so the others do not wait forever.
  [[noreturn]] void abort(const std::string& message, int code = 1);

 private:
  void check_multiple() const;
  void reap(bool wait);  // frees posted buffers whose sends completed; with `wait` until all have

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  int thread_level_ = 0;
  bool one_host_ = false;
  struct Posted {
    MPI_Request request;
    std::vector<std::byte> bytes;
  };
  std::mutex posted_mutex_;
  std::list<Posted> posted_;
};

// MPI_Allreduce with MPI_SUM over floats, in messages of at most 2^30 floats.
std::unique_ptr<Allreduce> make_native_allreduce(MpiTransport& transport);

}  // namespace asgd::net
#endif
