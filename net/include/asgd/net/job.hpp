// This process's place in a job: an MPI session and MPI_COMM_WORLD as a
// Transport when mpirun (or mpiexec, or Slurm) started it, none otherwise.
// Built with or without MPI, so that a program needs no #if of its own.
#pragma once

#include <memory>
#include <string>

#include "asgd/net/transport.hpp"

namespace asgd::net {

class Job {
 public:
  // Starts MPI (MPI_THREAD_SERIALIZED: an averaging thread may make the calls) when the process was launched by
  // mpirun; throws InputError when it was but this build has no MPI (ASGD_WITH_MPI off).
  Job();
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // MPI_COMM_WORLD; null when the process is not one rank of an MPI job.
  Transport* transport() noexcept;
  // Ends the whole job, so that no rank waits forever for this one: "asgd: rank RANK: MESSAGE" on stderr, then
  // MPI_Abort with `code` (or exit(code) without MPI).
  [[noreturn]] void abort(int rank, const std::string& message, int code);

 private:
  struct Mpi;
  std::unique_ptr<Mpi> mpi_;
};

}  // namespace asgd::net
