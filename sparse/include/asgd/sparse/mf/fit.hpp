// A factor model trained on ratings in memory as one call, for either loss: the split into training, test and
// validation sets, the store (the heap or a shared segment), the engine loop in one process or on a RankGroup's
// ranks, the evaluation after it and the model file.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "asgd/engine/options_record.hpp"
#include "asgd/engine/rank_group.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/mf/model_file.hpp"
#include "asgd/sparse/mf/popular_baseline.hpp"
#include "asgd/sparse/mf/ratings.hpp"

namespace asgd::sparse::mf {

enum class Loss {
  squared,  // explicit ratings: BiasedMf
  bpr,      // implicit feedback, the ratings >= FitOptions::positive: BprMf
};
// "squared" or "bpr"; InputError otherwise.
Loss parse_loss(std::string_view name);

// The order of the squared loss's updates. blocks: LIBMF's grid, workers taking blocks that share no user or item
// row, each walked in storage order (on 10M ratings 3x the updates per second of hogwild on one thread, 6x on two,
// at the same test RMSE: bench/RESULTS.md); hogwild: each worker its shard, rows shared racily, the delay
// bounded by TrainerOptions::tau. automatic: blocks where MfOptions::bins is given, or in one process on more
// than BiasedMf::kReshuffleBelow training ratings, where hogwild too walks a fixed order and misses the caches;
// hogwild on fewer (they fit the caches and get a new order each epoch: ml-latest-small test RMSE 0.8440 against
// the blocks' 0.8515), with a bounded tau, on several ranks (their rounds count steps of
// TrainerOptions::step_examples ratings, where a block is one step) and for bpr.
enum class Order { automatic, hogwild, blocks };
// "auto" (or "automatic"), "hogwild" or "blocks"; InputError naming FitOptions::order otherwise.
Order parse_order(std::string_view name);
std::string_view to_string(Order order) noexcept;  // "auto", "hogwild" or "blocks"

struct FitOptions {
  Loss loss = Loss::squared;
  // bins (squared in the block order): the block grid asked for, 0 for block_grid's default.
  MfOptions model;
  // The engine's: workers, epochs, seed, rates. Its `blocks` is fit's to set, from `order`.
  TrainerOptions trainer;
  Order order = Order::automatic;
  static constexpr float kDefaultPositive = 4.0f;
  float positive = kDefaultPositive;  // bpr: ratings at or above this are positives
  double test_fraction = 0;         // held out at random (bpr: per user) and scored after training
  double validation_fraction = 0;   // squared: held out of the training part, scored after every epoch
  std::uint64_t split_seed = 42;
  // bpr: also NCF's protocol (a second model trained with each user's latest positive left out, ranked against
  // 99 sampled negatives at 10): sampled_against_popular.
  bool sampled_eval = false;
  std::string shm;                  // train in this shared segment (empty: the heap)
  bool shm_recover = false;         // take over a segment whose writer was killed
  // Written at the end by the group's root; with shm also before training (a server needs its ids meanwhile).
  std::filesystem::path model_file;
  std::atomic<bool>* stop = nullptr;  // a stop request of the caller's (StopOnSignal::flag()); null: none
  // Written by the group's root after every checkpoint_every epochs (and the last): a model file (load_model reads
  // it) that also holds the epoch, the seed and any AdaGrad sums. Under a RankGroup with AdaGrad each rank writes
  // its own sums beside it (RankGroup::resume_checkpoint says which file each resumes). Empty: none.
  std::filesystem::path checkpoint;
  std::uint64_t checkpoint_every = 1;
  // Whether fit takes the checkpoint's lock (CheckpointLock, on the group's root) for the run; false: the caller
  // holds it already, taken before it read the ratings, so that a second run on the path is refused first.
  bool lock_checkpoint = true;
  // Go on from this checkpoint (or a model file fit wrote) up to trainer.epochs: its factors, epoch, seed and sums.
  // Refused, naming it, when it holds another loss, other model options or other ratings' ids. Without AdaGrad
  // a job may resume with another number of ranks than wrote it (each trains its new share of the ratings).
  std::filesystem::path resume;
  // Training goes on from these factors (a model fit trained before, as fit_more does) instead of random ones:
  // copy_factor_rows of them into the new store, whose ids beyond theirs keep their random rows. Null: none.
  const ParamStore* initial = nullptr;
  // When the stop request ends the run mid-epoch: report.model still holds the model, its factors as the last
  // finished epoch left them (a copy of the store taken after every epoch, while no worker runs: the store's
  // size again in memory), no model file written. None when no epoch finished. For a caller that keeps what a
  // stopped fit trained (the Python module on Ctrl-C).
  bool keep_last_epoch = false;
  ProgressCallback on_progress;
  // InputError naming the option (FitOptions::positive), MfOptions::validate's or TrainerOptions::validate's. An
  // option that the loss or the order does not use is refused ("MfOptions::bins: only with Loss::squared"), not
  // ignored: bpr with validation_fraction, bins, no biases, no centring, scale_ratings, head_first or the block
  // order; squared with another positive or sampled_eval; a bounded tau with the block order, bins with the
  // hogwild order (or automatic with a bounded tau); head_first without row AdaGrad; initial with resume; a
  // checkpoint that is the model file; trainer.blocks set (fit sets it).
  void validate() const;
};

// Whether fit trains `options` in the block order: on a group of several ranks or not, on `ratings` training
// ratings in this process.
bool block_order(const FitOptions& options, bool several_ranks, std::size_t ratings) noexcept;

// The objective every process training one segment must share, as the segment keeps it
// ("--loss squared --l2 0.05 --bias-l2 0.05"): the CLI's spelling, since CLI and library processes share segments.
std::string objective_settings(const FitOptions& options);

// The block schedule's grid: `asked` bins (0: 2 x workers + 1, at most BlockScheduler::kMostBins), cut to the
// fewer of users and items (a grid with empty rows schedules blocks with nothing in them), and the workers that
// can share it: fewer than the bins (as LIBMF), fewer than half of them where the bins were cut.
struct BlockGrid {
  std::size_t bins = 0, workers = 0;
  bool cut = false;  // bins lowered to the users or items
};
BlockGrid block_grid(std::size_t asked, std::size_t workers, std::size_t users, std::size_t items);

// The ratings a run trains and scores: `all` split into a test part (test_fraction) and a validation part
// (validation_fraction of the rest, seed + 1), or `validation` given (read with `all`'s id maps; the ids it adds
// get rows too, never trained). InputError when both fractions' validation and `validation` are given.
struct RatingSets {
  Ratings train, test, validation;
  bool have_test = false, have_validation = false;
};
RatingSets split_sets(Ratings all, double test_fraction, double validation_fraction, std::uint64_t seed,
                      std::optional<Ratings> validation = std::nullopt);

// What the run trains on, told as it sets up: sizes and the grid before the store opens (FitEvents::on_data),
// the store and this rank's share once the store is open, before the first epoch (on_start).
struct FitSetup {
  std::size_t ratings = 0;      // given
  std::size_t trained = 0;      // training ratings or positives (all ranks together)
  std::size_t users = 0, items = 0;  // the model's rows
  std::size_t positives = 0, users_with_positive = 0, items_with_positive = 0;  // bpr
  std::optional<BlockGrid> grid;  // squared with the block schedule
  // on_start:
  bool created = true;          // a new store (false: a segment attached, its parameters kept)
  // With FitOptions::resume: the epochs its checkpoint had done, and the options recorded there that this run
  // sets otherwise (TrainingRun::changes_since_resumed).
  bool resumed = false;
  std::uint64_t resumed_epoch = 0;
  std::vector<OptionChange> changes;
  float mean = 0;               // squared: the training ratings' mean
  std::size_t examples = 0;     // trained by this rank
};

// On the group's root: one epoch done; squared: with the errors of the validation and test sets that hold
// ratings (computed only when FitEvents::on_epoch is given).
struct FitEpoch {
  std::uint64_t epoch = 0;
  double loss = 0;              // the epoch's mean example loss (squared: half its squared error; bpr: -ln sigma)
  double squared_error = 0;     // squared: mean over the epoch's updates
  double seconds = 0;           // of SGD so far
  std::optional<double> validation_rmse, test_rmse;
};

struct FitEvents {
  std::function<void(const FitSetup&)> on_data;
  std::function<void(const FitSetup&)> on_start;
  std::function<void(const FitEpoch&)> on_epoch;
};

// A run's outcome. Where train.stopped (the stop request) or on a rank other than the root, nothing after the
// training is filled (no evaluation, no model file; the model only with FitOptions::keep_last_epoch).
struct FitReport {
  TrainReport train;  // its seconds: of SGD, evaluation left out
  std::size_t workers = 0;
  std::size_t bins = 0;  // squared: the block grid's (0: Hogwild)
  std::optional<ErrorMetrics> validation, test;  // squared, when the set was asked for
  // bpr with test_fraction: full ranking at 10 of the held-out positives, against most-popular.
  std::size_t positives = 0, held_out = 0, cold_items = 0;
  std::optional<AgainstPopular> ranking;
  bool model_written = false;
  std::optional<SampledAgainstPopular> sampled;  // bpr with sampled_eval (after the model file)
  // The trained model, as load_model reads it from the model file: the factors (the heap's, or the segment,
  // still attached), the id maps, the scale and range, the cold ids.
  std::optional<LoadedModel> model;
  std::string metadata;  // with model: the metadata its model file holds (model_metadata and the run's record)
};

// Trains `ratings` (with `validation`: squared only, see split_sets) as `options` say: the model file, if asked,
// written by the root. InputError naming the option, or from the data and the segment (DivergedSegment for one
// that holds NaN or inf).
FitReport fit(Ratings ratings, const FitOptions& options, RankGroup& group, const FitEvents& events = {},
              std::optional<Ratings> validation = std::nullopt);
FitReport fit(Ratings ratings, const FitOptions& options);

}  // namespace asgd::sparse::mf
