// Two ranks train one logistic-regression model by model averaging (net/):
// each trains its half of the examples with the single-node engine, and the
// ranks average their parameters after every epoch. Under mpirun the ranks
// are processes (MPI); started plainly, they are two threads of this process
// over an in-process transport, the same calls either way.
//   mpirun -np 2 two_ranks      or      two_ranks
#include <asgd/engine/param_store.hpp>
#include <asgd/engine/trainer.hpp>
#include <asgd/net/job.hpp>
#include <asgd/net/multi_rank.hpp>
#include <asgd/net/transport.hpp>
#include <asgd/sparse/generator.hpp>
#include <asgd/sparse/libsvm.hpp>
#include <asgd/sparse/linear.hpp>
#include <cstdio>
#include <exception>
#include <thread>
#include <vector>

namespace {

// One rank's part: its shard of the data, trained for 5 epochs with an average after each; rank 0 reports.
void train_rank(asgd::net::Transport& transport, const asgd::sparse::SparseDataset& data) {
  asgd::net::MultiRank group(transport, {.allreduce = asgd::net::Algorithm::ring});
  group.agree_on_options();  // ranks given other options are refused on every rank, never left waiting
  const asgd::sparse::LinearProblem whole(data, 1e-4);
  const asgd::sparse::SparseDataset shard = asgd::sparse::select_rows(data, group.shard(data.rows(), "examples"));
  asgd::sparse::LinearProblem problem(shard, whole);  // the whole set's regulariser weights
  asgd::ParamStore store = asgd::ParamStore::on_heap(problem.layout());
  asgd::TrainerOptions options;
  options.workers = 2;
  options.epochs = 5;
  options.schedule.lr = 0.5f;
  group.prepare(options);
  asgd::Trainer trainer(store, options);
  group.start(trainer, store);  // every rank starts from rank 0's parameters
  const asgd::TrainReport report = asgd::net::run_averaged(group, trainer, problem, options.epochs);
  // One model on every rank: compare a digest of the parameters across ranks (InputError if they differ).
  const std::vector<float> w = store.snapshot();
  std::uint64_t digest = 0;
  for (const float x : w) digest = (digest * 1000003u + static_cast<std::uint64_t>(x * 1e6f)) & ((1ull << 40) - 1);
  const std::uint64_t mine[] = {digest};
  group.same_on_all_ranks(mine, "the parameters' digest");
  if (group.root()) {
    std::printf("%s: %zu of %zu examples on rank 0, %llu averaging rounds\n", group.describe().c_str(),
                problem.num_examples(), data.rows(), static_cast<unsigned long long>(group.rounds()));
    std::printf("objective %.6f, accuracy %.4f on the whole set after %zu epochs; every rank holds this model\n",
                whole.objective(w), whole.accuracy(w), report.epochs.size());
  }
}

}  // namespace

int main() try {
  const auto generated = asgd::sparse::generate_sparse({.examples = 20000, .features = 2000, .nnz_per_example = 10});
  asgd::net::Job job;  // MPI when mpirun started this process
  if (asgd::net::Transport* world = job.transport()) {
    train_rank(*world, generated.data);
    return 0;
  }
  asgd::net::LocalFabric fabric(2);
  std::exception_ptr error;
  std::thread other([&] {
    try {
      train_rank(fabric.endpoint(1), generated.data);
    } catch (...) {
      error = std::current_exception();
    }
  });
  train_rank(fabric.endpoint(0), generated.data);
  other.join();
  if (error) std::rethrow_exception(error);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "two_ranks: %s\n", e.what());
  return 1;
}
