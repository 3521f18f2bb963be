// An mf model file, as `asgd mf train` writes it and `asgd mf eval|predict|recommend` read it: a checkpoint of
// the factors (engine/checkpoint.hpp) whose metadata holds what predicting and serving need beside them (the id
// maps, how sums map to ratings, the ratings' range, the ids without a training rating, the loss).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/options_record.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/mf/ratings.hpp"

namespace asgd::sparse::mf {

// The range of the training ratings: predictions are clipped into it (as Surprise does with its rating scale);
// lo == hi means no clipping.
struct RatingRange {
  float lo = 0, hi = 0;
  static RatingRange of(const Ratings& r) {
    if (r.size() == 0) return {};
    const auto [min, max] = std::minmax_element(r.rating.begin(), r.rating.end());
    return {*min, *max};
  }
  float clip(float x) const { return lo < hi ? std::clamp(x, lo, hi) : x; }
};

// What a model file holds beside its factors.
struct ModelInfo {
  std::string loss = "squared";  // squared (ratings) or bpr (implicit feedback: scores only rank)
  float positive = 4.0f;         // bpr: ratings at or above this are positives
  RatingScale scale;             // squared: how the model's sums map to ratings
  RatingRange range;             // squared: the training ratings'
  IdMap users, items;            // the factor rows' external ids, in row order
  ColdIds cold;                  // rows with no training rating (zero rows; never recommended), sorted
};

// The metadata of a model trained on `trained`, whose id maps are the model's (ids a validation or test file
// added included; `cold` = cold_ids of them), for save_checkpoint or TrainerOptions::checkpoint_metadata. `loss`
// is "squared" (with `rs`) or "bpr" (with its `positive` threshold). Names that are not UTF-8 are kept as hex.
// `options`: the run's record (TrainingRun::record), kept under "options" so that a resume can say what changed.
std::string model_metadata(const Ratings& trained, const ColdIds& cold, const RatingScale& rs, const MfOptions& o,
                           std::string_view loss, float positive = 0, const OptionsRecord& options = {});

// The metadata of a model file read with read_checkpoint, checked against its factors: InputError "PATH: ..."
// for a file that is not an mf model, or whose parts disagree (ids and rows, a cold id past the rows, a scale
// that is not positive, a range upside down, a number that is not a finite float). The factors are `file`'s
// (ParamStore::on_heap(file.layout), then assign(file.params)) or, for serving, a shared segment of its layout.
ModelInfo read_model_info(const CheckpointData& file, const std::filesystem::path& path);

// A model file read for predicting or serving: what it holds beside the factors, and the factors, from the file
// or, given `shm`, live from that shared segment (attached read-only: a trainer may be writing it; the file gives
// the ids and the scale). InputError as read_model_info's, or naming the segment; DivergedSegment when the segment
// holds a NaN or infinite parameter (a run that trained into it diverged: its scores would be served).
struct LoadedModel : ModelInfo {
  std::optional<ParamStore> store;
  std::uint64_t epochs = 0;  // the file's: 0 for one written as training into a segment began
};
LoadedModel load_model(const std::filesystem::path& path, const std::string& shm = {});

// A ratings file read with the model's id maps (read_ratings): its users and items are the model's rows, the ids the
// model has never seen appended after them (cold: a caller scores them from the mean and biases, or skips them).
Ratings read_ratings_for(const LoadedModel& model, const std::filesystem::path& path,
                         RatingsFormat format = RatingsFormat::detect);

}  // namespace asgd::sparse::mf
