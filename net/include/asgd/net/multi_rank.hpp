// One rank of a multi-rank training job, over any Transport (MPI, or ranks
// that are threads of one process in tests). Each rank trains its shard of
// the data with the single-node engine; the ranks agree on their settings,
// start from rank 0's parameters, average every epoch or every K local steps
// (ModelAverager), and checkpoint: rank 0 alone, or with AdaGrad each rank
// its own sums (PATH.rank<r>), resumed at the epoch every rank has.
//
// Every call that says "collective" must be made by every rank in the same
// order. In one process (no transport, or one rank) every collective call is
// a no-op and the run is the single-node one.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/options_record.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/rank_group.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/net/allreduce.hpp"
#include "asgd/net/averaging.hpp"
#include "asgd/net/parameter_server.hpp"

namespace asgd::net {

class Transport;

// How the ranks combine their training: model averaging (allreduce rounds)
// or a parameter server (pushes and pulls under a bounded delay).
enum class Distributed { averaging, ps };

struct MultiRankOptions {
  Distributed distributed = Distributed::averaging;
  PsOptions ps = {};                // Distributed::ps
  Algorithm allreduce = Algorithm::ring;
  std::uint64_t average_every = 0;  // K local steps between rounds; 0: every epoch
  bool average_weighted = false;    // weight each rank by the examples it trained (mean only)
  Combine combine = Combine::mean;
  // Averaging: above 0, rounds send rank-R factors of each matrix's update with error feedback (PowerSGD,
  // AveragingOptions::low_rank) instead of every parameter.
  std::size_t average_rank = 0;
  // With average_rank: a last round of every parameter at the end sends what the factors left out (each rank's
  // kept error), so the job ends on the mean of every update (ModelAverager::flush), at the cost of one whole
  // round.
  bool average_flush = false;
  static constexpr std::size_t kMostAverageRank = std::size_t{1} << 20;
  // A bench's straggler: rank slow_rank's workers sleep (slow_factor - 1) times each step's compute after it
  // (the Trainer's apps: linear, mf, w2v). -1: none. With slow_turn_steps N > 0 the straggler comes and goes:
  // the ranks take turns, N of their own steps each, rank slow_rank first (rank r's step s is slowed when
  // (slow_rank + s / N) mod P == r), so one rank is slow at a time and none all the time.
  int slow_rank = -1;
  double slow_factor = 1;
  std::uint64_t slow_turn_steps = 0;
  // How errors spell an option: called with "distributed", "allreduce", "combine", "average-weighted", "average-rank",
  // "average-flush",
  // "average-every", "tau", "server-rule", "server-lr", "ps-push", "ps-push-fraction", "ps-error-feedback",
  // "ps-transport", "servers", "resume", "epochs" or "until-epoch". Empty: the library's names (MultiRankOptions::allreduce, ...); a
  // command line passes its flags' spellings.
  std::function<std::string(std::string_view option)> spell = {};

  // average_every from text: "epoch" (0) or a number of steps, 1 to 2^40 - 1; combine from "mean" or "sum".
  // InputError naming the option, as spell() says it.
  void set_average_every(std::string_view text);
  void set_combine(std::string_view text);
  // "averaging" or "ps"; the server rule from "mean", "sum" or "adagrad".
  void set_distributed(std::string_view text);
  void set_server_rule(std::string_view text);
  // slow_rank, slow_factor and slow_turn_steps from "R:F" or "R:F:N" (F from 1 to 1000, N from 1 to 2^40);
  // InputError naming "slow-rank".
  void set_slow_rank(std::string_view text);
  // PsOptions::push from "floats", "int8" or "sign"; PsOptions::transport from "messages" or "one-sided".
  void set_push(std::string_view text);
  void set_ps_transport(std::string_view text);
  // InputError naming the option that is wrong.
  void validate() const;
  std::string spelled(std::string_view option) const;
};

class MultiRank final : public RankGroup {
 public:
  // One process: rank 0 of 1, every collective a no-op.
  explicit MultiRank(MultiRankOptions options);
  // Rank transport.rank() of transport.size(); `transport` outlives this. With dedicated server ranks
  // (options.ps.servers S) this is worker rank r of the first P - S, and the last S run serve_dedicated instead;
  // InputError on one of those.
  MultiRank(Transport& transport, MultiRankOptions options);
  ~MultiRank() override;
  MultiRank(const MultiRank&) = delete;
  MultiRank& operator=(const MultiRank&) = delete;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  bool every_epoch() const noexcept { return options_.average_every == 0; }
  std::uint64_t every_steps() const noexcept override { return options_.average_every; }
  // On several ranks: "average-every" (epoch or K), "combine" (mean or sum), "average-weighted" (on or off).
  void add_to_record(OptionsRecord& record) const override;
  const MultiRankOptions& options() const noexcept { return options_; }
  // The indices of [0, n) this rank trains: rank, rank + P, rank + 2P, ...
  // With `equal`, every rank the same number, floor(n / P) (the last n mod P
  // indices are left out): for blocking rounds every rank must reach alike.
  // InputError when n < P ("N `what` cannot be shared by P ranks").
  std::vector<std::size_t> shard(std::size_t n, std::string_view what, bool equal = false) const override;
  // "4 ranks, ring allreduce, averaging models every epoch"; "4 ranks, parameter server (sum, tau 4), rounds
  // every 100 local steps".
  std::string describe() const override;

  // Before the Trainer is made: counts steps for step averaging, leaves
  // checkpoints to rank 0 (written after each epoch's average, see
  // epoch_done, when averaging per epoch), and gives rank r the random
  // stream r (TrainerOptions::stream, which a resume keeps).
  void prepare(TrainerOptions& options) override;
  // Whether each rank writes a checkpoint of its own (AdaGrad on several ranks).
  bool own_files(const TrainerOptions& options) const;
  // With AdaGrad's sums in as many ranks' files as this job has ranks (rank_files_of, from rank 0's file), or
  // without AdaGrad: resume_own_checkpoint, with an InputError naming TrainingRunOptions::resume when this rank's
  // own file is missing. With AdaGrad's sums in another number of files: recut_checkpoints (elastic).
  std::optional<Resumed> resume_checkpoint(const std::filesystem::path& path, const TrainerOptions& options) override;
  // The checkpoint this rank writes and resumes from, for `path` as given:
  // with own files rank r > 0 has PATH.rank<r> beside rank 0's PATH;
  // otherwise `path` (rank 0 writes it; every rank resumes from it).
  std::filesystem::path own_checkpoint(const std::filesystem::path& path, const TrainerOptions& options) const;
  // own_checkpoint(path), read, for a resume (collective), and the file it
  // was read from. With own files every rank resumes from one epoch, the one
  // of the rank furthest behind: a job killed between two ranks' writes
  // leaves them a generation apart, and a rank ahead then reads the file its
  // last write replaced (PATH.prev, TrainerOptions::checkpoint_keep_previous)
  // and says so on stderr. InputError, with every rank's epochs, when a rank
  // has that epoch in neither file, and when the files are of different runs
  // (run_id_of differs). Nothing on disk is changed.
  Resumed resume_own_checkpoint(const std::filesystem::path& path, const TrainerOptions& options);
  // The checkpoint of an AdaGrad job of `wrote` ranks, each with its own sums' file, for this job's P ranks (every
  // rank reads all of them): rank 0's values and state at the epoch the files share (as resume_own_checkpoint
  // picks it) with the W ranks' sums added and divided by P, as if each new rank had trained its 1/P of the
  // examples from the start; the metadata then records P. rank_files_of's count is W. InputError naming a file
  // that is missing, of another run, or of another number of sums.
  Resumed recut_checkpoints(const std::filesystem::path& path, int wrote);
  // InputError unless `chosen`, the file of the epoch the ranks' files share, records `wrote` ranks' files: a job
  // that resumed them with another number of ranks and was stopped between its ranks' first writes leaves rank
  // 0's newest file of the new count over files of the old.
  void check_generation_ranks(const CheckpointData& chosen, int wrote, std::uint64_t epoch,
                              const std::filesystem::path& path) const;
  // What cross-rank comparisons carry exactly (40 bits): digests are cut to it, as run ids are.
  static constexpr std::uint64_t kDigestMask = kRunIdMask;

  // After the Trainer is made and initialised (or resumed), before training
  // (collective): every rank takes rank 0's parameters, bit for bit, and with
  // average_every K the communication thread starts.
  void start(Trainer& trainer, ParamStore& store) override;
  // The same for a model trained outside the Trainer (the CNN): a common
  // start now, then average() after each epoch or K updates. Both refuse
  // ranks whose parameters differ in number or in `layout` (tensors, shapes
  // and tag).
  void start(std::span<float> params, const Layout& layout) override;
  // After each Trainer::run of one epoch: averages (per-epoch mode), then
  // writes this rank's checkpoint if it writes one.
  void epoch_done(const TrainReport& epoch) override;
  // After the last epoch: stops the communication thread, and after low-rank
  // rounds sends what their factors left out (ModelAverager::flush); all
  // ranks then hold the same parameters.
  void finish() override;
  // The communication thread and the parameter server stopped, without the flush.
  void end_after_error() override;

  // Collective: InputError on every rank, naming each rank's values, unless
  // all ranks pass the same `values` (each below 2^40; as many on every
  // rank); `what` names them.
  void same_on_all_ranks(std::span<const std::uint64_t> values, std::string_view what) override;
  // Collective: InputError naming the settings whose values differ between
  // ranks (name, value as text), the ranks that differ from rank 0 and this
  // rank's value. Compared by 40-bit digests.
  void same_settings(std::span<const std::pair<std::string_view, std::string>> settings) override;
  // Collective, over the native allreduce (not options().allreduce, which is
  // one of the things compared): InputError naming the option and each
  // rank's value unless every rank has the same allreduce, combine,
  // average_weighted and average_every.
  void agree_on_options();
  // Collective and blocking: `data` becomes the mean of the ranks'.
  void mean_of_ranks(std::span<float> data) override;
  bool exact_rounds() const noexcept override { return options_.average_rank == 0; }
  // Collective and blocking, over the native allreduce (setup: not counted
  // in traffic()): `data` becomes the sum of the ranks'.
  void sum_of_ranks(std::span<float> data) override;
  // One blocking round over the parameters given to start(); `weight` as in
  // ModelAverager::average.
  void average(double weight) override;
  // Collective: InputError unless every rank runs the same plan (epochs done, last epoch, total, K).
  void check_same_plan(const Trainer& trainer, std::uint64_t until_epoch) override;
  double communication_seconds() const noexcept;
  std::uint64_t rounds() const noexcept;
  // The parameter server's transport, PsOptions::transport resolved for this job's ranks.
  PsTransport ps_transport() const noexcept;
  // The parameter server's figures of this rank (Distributed::ps, after finish() for its shard's); none otherwise.
  std::optional<PsStats> ps_stats() const;
  // "R averaging rounds, S s in allreduce"; with a parameter server "R rounds, B MB pushed, C MB pulled, W s
  // waiting for pulls".
  std::string traffic() const override;

 private:
  void timed_sum(std::span<float> data);
  void stop_rounds();  // the communication thread's last round, or the parameter server's: finish's first part
  // Where MultiRankOptions::slow_rank is set, every worker after each step: slow_down_step sleeps for the
  // step's compute since start_step_clock, which the worker calls once the step's round bookkeeping is done.
  void slow_down_step();
  static void start_step_clock();
  // Every rank's `values` (each below 2^40), rank by rank; over the native allreduce when `native`.
  std::vector<std::uint64_t> gather(std::span<const std::uint64_t> values, std::string_view what, bool native);

  MultiRankOptions options_;
  Transport* transport_ = nullptr;     // the workers': the collectives and the data's shards
  Transport* ps_transport_ = nullptr;  // every rank's, the dedicated servers' too: the parameter server's
  std::unique_ptr<Transport> workers_;  // the first ranks, when the last are dedicated servers
  int rank_ = 0, size_ = 1;
  std::unique_ptr<Allreduce> allreduce_;  // options_.allreduce
  std::unique_ptr<Allreduce> native_;     // agreement and setup sums
  Trainer* trainer_ = nullptr;
  std::filesystem::path checkpoint_;
  std::uint64_t checkpoint_every_ = 1;
  std::unique_ptr<ModelAverager> averager_;  // Distributed::averaging
  std::unique_ptr<ParameterServer> ps_;      // Distributed::ps
  std::atomic<std::uint64_t> slow_steps_{0};  // this rank's steps, for slow_turn_steps
  double other_seconds_ = 0;  // in mean_of_ranks and same_on_all_ranks
  std::uint64_t other_floats_ = 0;  // put into those allreduces
};

// The engine's loop over epochs with averaging between them (engine/rank_group.hpp).
using asgd::run_averaged;

}  // namespace asgd::net
