// The ranks of a training job as the training calls of sparse/ and dense/
// see them, so that one call trains in one process or on several ranks.
// This class is one process: rank 0 of 1, every collective call a no-op.
// net::MultiRank is several ranks over a Transport (MPI, or threads in
// tests). A call marked "collective" is made by every rank in the same order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/layout.hpp"
#include "asgd/engine/options_record.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/trainer.hpp"

namespace asgd {

class RankGroup {
 public:
  RankGroup() = default;
  virtual ~RankGroup() = default;
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  virtual int rank() const noexcept { return 0; }
  virtual int size() const noexcept { return 1; }
  bool root() const noexcept { return rank() == 0; }
  bool active() const noexcept { return size() > 1; }
  // The indices of [0, n) this rank trains: rank, rank + P, ...; with
  // `equal` every rank as many (the last n mod P left out). InputError when
  // n < P, naming `what`.
  virtual std::vector<std::size_t> shard(std::size_t n, std::string_view what, bool equal = false) const;
  // "4 ranks, ring allreduce, averaging models every epoch"; "1 process".
  virtual std::string describe() const { return "1 process"; }
  // "R averaging rounds, S s in allreduce"; empty in one process.
  virtual std::string traffic() const { return {}; }
  // Adds how the ranks combine their models to a run's record (checkpoints keep it; a resume says what changed).
  virtual void add_to_record(OptionsRecord& /*record*/) const {}

  // Collective: InputError naming the settings (name, value as text) whose values differ between ranks.
  virtual void same_settings(std::span<const std::pair<std::string_view, std::string>> /*settings*/) {}
  // Collective: InputError naming `what` and each rank's values unless all ranks pass the same (each < 2^40).
  virtual void same_on_all_ranks(std::span<const std::uint64_t> /*values*/, std::string_view /*what*/) {}
  // Collective: `data` becomes the mean, or the sum, of the ranks'.
  virtual void mean_of_ranks(std::span<float> /*data*/) {}
  // Whether a round leaves every rank with the exact mean of the ranks' models (false: compressed rounds, whose
  // factors and kept error no checkpoint holds; a model's other state, such as momentum, then stays each rank's).
  virtual bool exact_rounds() const noexcept { return true; }
  virtual void sum_of_ranks(std::span<float> /*data*/) {}

  // The sparse loop on several ranks, in this order: prepare(options)
  // before the Trainer is made; start(trainer, store) once it is initialised
  // or resumed (every rank takes rank 0's parameters); then run_averaged.
  virtual void prepare(TrainerOptions& /*options*/) {}
  // The checkpoint this rank resumes for `path` (collective), and the file it was read from; none: `path` itself,
  // read by the run (one process). On several ranks each may have a file of its own (net::MultiRank).
  struct Resumed {
    CheckpointData data;
    std::filesystem::path file;
  };
  virtual std::optional<Resumed> resume_checkpoint(const std::filesystem::path& /*path*/,
                                                   const TrainerOptions& /*options*/) {
    return std::nullopt;
  }
  virtual void start(Trainer& /*trainer*/, ParamStore& /*store*/) {}
  // A model trained outside the Trainer (the CNN): a common start, then
  // average(weight) after each epoch or K updates.
  virtual void start(std::span<float> /*params*/, const Layout& /*layout*/) {}
  virtual void average(double /*weight*/) {}
  // Collective: InputError unless every rank runs the same plan of epochs (run_averaged checks it first).
  virtual void check_same_plan(const Trainer& /*trainer*/, std::uint64_t /*until_epoch*/) {}
  // After each epoch: the average (per-epoch mode), then this rank's checkpoint.
  virtual void epoch_done(const TrainReport& /*epoch*/) {}
  // After the last epoch, while the parameters given to start() live (a parameter server's last round writes
  // them): every rank then holds the same parameters. A second call does nothing.
  virtual void finish() {}
  // Instead of finish() when training failed on this rank: stops the background rounds before the parameters
  // go, and starts no round of its own (another rank may be inside an epoch's round).
  virtual void end_after_error() { finish(); }
  // K local steps between averaging rounds; 0: every epoch.
  virtual std::uint64_t every_steps() const noexcept { return 0; }
};

// Trains epochs state().epoch + 1 .. until_epoch one at a time with the
// group's averaging between them, merging the reports; `after_epoch` sees
// each epoch's report after its average (and checkpoint). One process
// without `after_epoch` trains them in one run. A stop ends the loop.
template <class P>
TrainReport run_averaged(RankGroup& group, Trainer& trainer, P& problem, std::uint64_t until_epoch,
                         const std::function<void(const TrainReport&)>& after_epoch = {}) {
  if (!group.active() && !after_epoch) return trainer.run(problem, until_epoch);
  group.check_same_plan(trainer, until_epoch);
  // Resumed past until_epoch: the Trainer refuses it (InputError naming both), as in one process.
  if (trainer.state().epoch > until_epoch) return trainer.run(problem, until_epoch);
  TrainReport total;
  try {
    for (std::uint64_t e = trainer.state().epoch + 1; e <= until_epoch; ++e) {
      TrainReport r = trainer.run(problem, e);
      total.append(r);
      // A stopped epoch is unfinished: neither averaged, checkpointed nor shown to after_epoch.
      if (r.stopped) break;
      group.epoch_done(r);
      if (after_epoch) after_epoch(r);
    }
  } catch (...) {
    // The averaging thread (every K steps) works on the caller's store: stopped before the error unwinds it.
    try {
      group.end_after_error();
    } catch (...) {
    }
    throw;
  }
  group.finish();
  return total;
}

}  // namespace asgd
