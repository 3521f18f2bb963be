// One rank of `mpirun -np N asgd linear|mf|w2v|cnn train ...`, or the only
// process of a plain run. Each rank trains its shard of the data with the
// single-node engine; the ranks average their parameters every epoch or
// every K local steps (net/averaging.hpp), and rank 0 alone prints, writes
// the model, metrics and checkpoints. An error on any rank ends the whole
// job with "asgd: rank R: <cause>" (MPI_Abort), so no rank waits forever.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "asgd/engine/param_store.hpp"
#include "asgd/net/allreduce.hpp"
#include "asgd/engine/trainer.hpp"

namespace asgd::net {
class ModelAverager;
class Transport;
}  // namespace asgd::net

namespace asgd::cli {

struct DistributedFlags {
  std::string allreduce = "ring";     // tree, ring or native
  std::string average_every = "epoch";  // "epoch" or K local steps
  bool weighted = false;              // weight ranks by examples trained
  std::string combine = "mean";       // mean of models, or sum of updates (the app sets its default)
  std::vector<std::string> given;     // the flags above given on the command line, without dashes
  std::string dashes = "--";          // how the command spells its flags in messages (w2v: "-allreduce")
};
// --allreduce, --average-every, --average-weighted, --combine.
void add_distributed_flags(CLI::App& app, DistributedFlags& flags);
// The default of sparse models (BPR, word2vec): sum the ranks' updates, since
// the mean divides each rank's step on the rows several ranks move
// (bench/RESULTS.md). Kept as it is when the user chose --combine, or a
// weighted mean.
void sum_unless_chosen(DistributedFlags& flags, bool combine_given);

class Distributed {
 public:
  // Starts MPI (MPI_THREAD_SERIALIZED: the averaging thread makes the calls)
  // when launched by mpirun/mpiexec; otherwise this is rank 0 of 1 and every
  // other call is a no-op. On ranks other than 0, stdout goes to /dev/null.
  explicit Distributed(const DistributedFlags& flags);
  ~Distributed();
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  bool root() const noexcept { return rank_ == 0; }
  bool active() const noexcept { return size_ > 1; }
  bool every_epoch() const noexcept { return every_steps_ == 0; }
  std::uint64_t every_steps() const noexcept { return every_steps_; }  // K of --average-every K (0: epoch)
  // The indices of [0, n) this rank trains: rank, rank + P, rank + 2P, ...
  // With `equal`, every rank the same number, floor(n / P) (the last n mod P
  // indices are left out): for blocking rounds every rank must reach alike.
  // InputError when n < P ("N `what` cannot be shared by P ranks").
  std::vector<std::size_t> shard(std::size_t n, std::string_view what, bool equal = false) const;
  std::string describe() const;  // "4 ranks, ring allreduce, averaging every epoch"

  // Before the Trainer is made: counts steps for step averaging, leaves
  // checkpoints to rank 0 (written after each epoch's average, see
  // epoch_done, when averaging per epoch), and gives rank r the random
  // stream r (TrainerOptions::stream, which a resume keeps).
  void prepare(TrainerOptions& options);
  // The checkpoint this rank writes and resumes from, for `path` as given.
  // Each rank keeps its own AdaGrad sums (per parameter or per row), so a
  // run with them under mpirun checkpoints every rank: rank r > 0 in
  // PATH.rank<r>, beside rank 0's PATH. Otherwise `path` (rank 0 writes it;
  // every rank resumes from it).
  std::filesystem::path own_checkpoint(const std::filesystem::path& path, const TrainerOptions& options) const;
  // Whether each rank writes a checkpoint of its own (AdaGrad under mpirun).
  bool own_files(const TrainerOptions& options) const;
  // own_checkpoint(path), read, for a resume (collective: every rank calls
  // it), and the file it was read from. With own files every rank resumes
  // from one epoch, the one of the rank furthest behind: a job killed
  // between two ranks' writes leaves them a generation apart, and a rank
  // ahead then reads the file its last write replaced (PATH.prev, kept by
  // TrainerOptions::checkpoint_keep_previous), and says so. InputError,
  // with every rank's epochs, when a rank has that epoch in neither file,
  // and when the files are of different runs (their run ids differ). Nothing
  // on disk is changed.
  struct Resumed {
    CheckpointData data;
    std::filesystem::path file;
  };
  Resumed resume_own_checkpoint(const std::filesystem::path& path, const TrainerOptions& options);
  // The run id a checkpoint's options hold ("run", in hex: a digest of the
  // settings the job trains with, the same on every rank, so that files of
  // another job, or of one run with other settings, are told apart); 0 when
  // none (an older asgd's).
  static std::uint64_t run_id_of(const std::string& metadata);
  // What the ranks' comparisons carry exactly (40 bits): digests compared across ranks, run ids included, are
  // cut to it.
  static constexpr std::uint64_t kDigestMask = (std::uint64_t{1} << 40) - 1;
  // After the Trainer is made and initialised (or resumed), before training:
  // gives every rank rank 0's parameters, bit for bit (a common start; a
  // resumed job goes on exactly as the uninterrupted one) and, with
  // --average-every K, starts the communication thread.
  void start(Trainer& trainer, ParamStore& store);
  // The same for a model trained outside the Trainer (the CNN): a common
  // start now, then average() after each epoch or K updates. Both refuse
  // ranks whose parameters differ in number or in `layout` (tensors, shapes
  // and tag: k 8 and k 16 pad to the same row stride, and mf's tag stands
  // for its ids).
  void start(std::span<float> params, const Layout& layout);
  // After each Trainer::run(problem, e) of one epoch: averages (per-epoch
  // mode) and then writes rank 0's checkpoint.
  void epoch_done(const TrainReport& epoch);
  // After the last epoch: stops the communication thread; all ranks then
  // hold the same parameters.
  void finish();
  // Collective: InputError on every rank, naming each rank's values, unless
  // all ranks pass the same `values` (each below 2^40; as many on every
  // rank); `what` names them. Before blocking rounds whose number every rank
  // must agree on: a job that would wait forever is refused at the start.
  void same_on_all_ranks(std::span<const std::uint64_t> values, std::string_view what);
  // Collective: InputError naming the flags whose values differ between the
  // ranks, the ranks that differ from rank 0 and this rank's value (only
  // digests travel), unless every rank passes the same
  // `settings`, (flag, value as text) pairs in the same order: the flags
  // that define the objective or the model, without which averaging the
  // ranks' models mixes different problems. Compared by 40-bit digests.
  void same_settings(std::span<const std::pair<std::string_view, std::string>> settings);
  // Collective, over MPI_Allreduce itself (not --allreduce, which is one of
  // the things compared): InputError naming the flag and each rank's value
  // unless every rank was given the same --allreduce, --combine,
  // --average-weighted and --average-every. run_distributed calls it first.
  void agree_on_flags();
  // Collective and blocking: `data` (as long on every rank) becomes the mean
  // of the ranks' (the CNN's momentum buffers at the end of an epoch).
  void mean_of_ranks(std::span<float> data);
  // Collective and blocking, over MPI_Allreduce (setup, not a training
  // round: not counted in traffic()): `data` becomes the sum of the ranks'.
  void sum_of_ranks(std::span<float> data);
  // One blocking round over the parameters given to start(); `weight` as in
  // ModelAverager::average.
  void average(double weight);
  double communication_seconds() const noexcept;
  std::uint64_t rounds() const noexcept;
  // "R averaging rounds, S s in allreduce": what every command prints at the end.
  std::string traffic() const;

  // A multi-rank job cannot return an error from one rank: it ends them all.
  [[noreturn]] void abort(const std::string& message, int code);

 private:
  std::unique_ptr<struct MpiParts> mpi_;
  int rank_ = 0, size_ = 1;
  std::uint64_t every_steps_ = 0;
  bool weighted_ = false;
  bool sum_ = false;
  net::Algorithm algorithm_{};  // of --allreduce
  Trainer* trainer_ = nullptr;
  std::filesystem::path checkpoint_;
  std::uint64_t checkpoint_every_ = 1;
  std::unique_ptr<net::ModelAverager> averager_;
  double other_seconds_ = 0;  // in mean_of_ranks and same_on_all_ranks
  std::string dashes_ = "--";  // DistributedFlags::dashes
  void timed_sum(std::span<float> data);  // the allreduce, its time added to other_seconds_
  // Every rank's `values` (each below 2^40), rank by rank; over MPI_Allreduce when `native`, else --allreduce.
  std::vector<std::uint64_t> gather(std::span<const std::uint64_t> values, std::string_view what, bool native);
};

// Runs `body` with this process's Distributed. In a multi-rank job an error
// on this rank (bad input, I/O, NaN) ends every rank with the rank and the
// cause; in a single process it is rethrown (run_guarded reports it).
int run_distributed(const DistributedFlags& flags, const std::function<int(Distributed&)>& body);

// Trains epochs state().epoch+1 .. until_epoch one at a time with averaging
// between them (or in the background), merging the reports; `after_epoch`
// sees each epoch's report after its average (rank 0's checkpoint is
// written by then). A single process without `after_epoch` trains them in
// one run. A stopped run ends the loop (report.stopped).
template <class P>
TrainReport run_averaged(Distributed& dist, Trainer& trainer, P& problem, std::uint64_t until_epoch,
                         const std::function<void(const TrainReport&)>& after_epoch = {}) {
  if (!dist.active() && !after_epoch) return trainer.run(problem, until_epoch);
  if (dist.active()) {
    // Every rank must run as many blocking rounds: a job whose ranks were given different plans would wait forever.
    const std::uint64_t plan[] = {trainer.state().epoch, until_epoch, trainer.options().epochs, dist.every_steps()};
    const bool own_files = trainer.options().schedule.has_adagrad();
    const std::string what =
        std::string("epochs done/last epoch/--epochs/K of --average-every (0: epoch) (every rank needs the same "
                    "--resume, --epochs, --until-epoch and --average-every") +
        (own_files ? "; with AdaGrad each rank resumes from its own file, CHECKPOINT.rank<r> beside rank 0's)"
                   : ")");
    dist.same_on_all_ranks(plan, what);
  }
  // Resumed past until_epoch: the Trainer refuses it (InputError naming both), as without mpirun.
  if (trainer.state().epoch > until_epoch) return trainer.run(problem, until_epoch);
  TrainReport total;
  for (std::uint64_t e = trainer.state().epoch + 1; e <= until_epoch; ++e) {
    TrainReport r = trainer.run(problem, e);
    total.append(r);
    // A stopped run (TrainerOptions::stop: only in a single process, see StopOnSignal) left its epoch
    // unfinished: neither averaged, checkpointed nor shown to after_epoch.
    if (r.stopped) break;
    dist.epoch_done(r);
    if (after_epoch) after_epoch(r);
  }
  dist.finish();
  return total;
}

}  // namespace asgd::cli
