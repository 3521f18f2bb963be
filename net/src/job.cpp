#include "asgd/net/job.hpp"

#include <cstdio>
#include <cstdlib>

#include "asgd/config.hpp"
#include "asgd/engine/errors.hpp"
#if ASGD_HAVE_MPI
#include "asgd/net/mpi.hpp"
#endif

namespace asgd::net {

#if ASGD_HAVE_MPI
struct Job::Mpi {
  // MULTIPLE when the MPI has it: the parameter server's threads call MPI at once (it checks the level it got).
  MpiSession session{nullptr, nullptr, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE};
  MpiTransport world;
};

Job::Job() {
  if (MpiSession::launched_by_mpi()) mpi_ = std::make_unique<Mpi>();
}
#else
struct Job::Mpi {};

Job::Job() {
  // The variables Open MPI, MPICH and PMIx set in every rank: without MPI each rank would train alone.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v) != nullptr) {
      throw InputError("started by mpirun, but this asgd was built without MPI (ASGD_WITH_MPI)");
    }
  }
}
#endif

Job::~Job() = default;

Transport* Job::transport() noexcept {
#if ASGD_HAVE_MPI
  if (mpi_) return &mpi_->world;
#endif
  return nullptr;
}

void Job::abort(int rank, const std::string& message, int code) {
#if ASGD_HAVE_MPI
  if (mpi_) mpi_->world.abort(message, code);
#endif
  std::fprintf(stderr, "asgd: rank %d: %s\n", rank, message.c_str());
  std::exit(code);
}

}  // namespace asgd::net
