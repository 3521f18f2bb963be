#include "asgd/sparse/linear_training_data.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>
#include <vector>

#include "asgd/engine/available_memory.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::sparse {

namespace {

constexpr std::string_view kRank = "{rank}";

// The ids the data may hold: below LinearFitOptions::features when given (processes training shards of one model
// need one layout: its width is fixed), below kMaxInferredFeatures otherwise, and below what the memory available
// trains. An id past them is refused at its line, before anything that wide is allocated.
FeatureLimit feature_limit(const LinearFitOptions& options) {
  const std::uint64_t per_feature = training_bytes_per_feature(options);
  const std::uint64_t width = options.features > 0 ? options.features : kMaxInferredFeatures;
  const AvailableMemory memory = available_memory();
  FeatureLimit limit;
  limit.features = std::min(width, memory.bytes / per_feature);
  limit.why = [given = options.features, width, per_feature, memory](std::uint32_t id) {
    if (id >= width && given > 0)
      return fmt::format("feature id {} is beyond LinearFitOptions::features {}", id, given);
    if (id >= width) {
      return fmt::format("feature id {} would make the model {} features wide, more than the {} (2^27) a model takes "
                         "from its data: give LinearFitOptions::features (above {}) to train a model that wide ({} "
                         "to train, {} bytes a feature), or remap the ids",
                         id, std::uint64_t{id} + 1, width, id, format_bytes((std::uint64_t{id} + 1) * per_feature),
                         per_feature);
    }
    return memory_shortfall((std::uint64_t{id} + 1) * per_feature,
                            fmt::format("feature id {}: a model of {} features ({} bytes a feature to train)", id,
                                        std::uint64_t{id} + 1, per_feature),
                            memory);
  };
  return limit;
}

SparseDataset read_data(const LinearFitOptions& options, const std::string& path) {
  SparseDataset data = read_libsvm(path, options.unsorted, feature_limit(options));
  if (options.features > 0) data.num_features = options.features;
  return data;
}

// Examples in memory as options.features widens them.
SparseDataset widened(SparseDataset data, const LinearFitOptions& options) {
  if (options.features == 0) return data;
  if (options.features < data.num_features) {
    throw InputError(fmt::format("LinearFitOptions::features {}: narrower than LinearFitOptions::data {} ({} features)",
                                 options.features, options.data, data.num_features));
  }
  data.num_features = options.features;
  return data;
}

}  // namespace

std::string rank_data_path(const LinearFitOptions& options, RankGroup& group) {
  std::string path = options.data;
  const bool per_rank_files = path.find(kRank) != std::string::npos;
  // Before any collective that only one of the two cases makes (the sum of the ranks' feature counts): ranks that
  // disagree here would wait for each other for ever, or meet in allreduces of different lengths.
  const std::array<std::uint64_t, 2> shape{per_rank_files ? 1u : 0u, options.features};
  group.same_on_all_ranks(shape, "LinearFitOptions::data with or without {rank}/LinearFitOptions::features (every "
                                 "rank needs the same)");
  // So must a resume and AdaGrad: with both, the ranks agree on the checkpoint's generation.
  const std::array<std::uint64_t, 2> resuming{options.run.resume.empty() ? 0u : 1u,
                                              options.trainer.schedule.has_adagrad() ? 1u : 0u};
  group.same_on_all_ranks(resuming, "TrainingRunOptions::resume (1: given)/Schedule::adagrad (1: on) (every rank "
                                    "needs the same)");
  if (!per_rank_files) return path;
  if (options.features == 0)
    throw InputError("LinearFitOptions::data with {rank}: give LinearFitOptions::features, the model width every "
                     "rank shares");
  if (options.reference && group.active())
    throw InputError("LinearFitOptions::reference: not with LinearFitOptions::data {rank} (the ranks' files "
                     "together are on no one rank: no optimum to compare with; `asgd linear eval` scores the model "
                     "on any file)");
  const std::string rank = std::to_string(group.rank());
  for (auto at = path.find(kRank); at != std::string::npos; at = path.find(kRank, at + rank.size()))
    path.replace(at, kRank.size(), rank);
  return path;
}

// InputError naming the file, and the rank whose file or share it is, when this rank would train no example
// (LinearProblem's own check names neither). Every rank of one file refuses alike (the same data, the same rule).
void LinearTrainingData::require_examples_to_train(const LinearFitOptions& options, const std::string& path,
                                                   const RankGroup& group) const {
  const std::string where = "LinearFitOptions::data " + options.data;
  if (path == options.data) require_examples(data_, where, "train");
  if (data_.rows() == 0)
    throw InputError(fmt::format("{}: rank {}'s file {} has no examples to train", where, group.rank(), path));
  if (shard_ && shard_->rows() == 0) {
    throw InputError(fmt::format("{}: rank {} of {} has none of its {} examples to train", where, group.rank(),
                                 group.size(), data_.rows()));
  }
}

LinearTrainingData::LinearTrainingData(const LinearFitOptions& options, const std::string& path, RankGroup& group)
    : LinearTrainingData(options, path, read_data(options, path), group) {}

LinearTrainingData::LinearTrainingData(const LinearFitOptions& options, SparseDataset data, RankGroup& group)
    : LinearTrainingData(options, options.data, widened(std::move(data), options), group) {}

LinearTrainingData::LinearTrainingData(const LinearFitOptions& options, const std::string& path, SparseDataset data,
                                       RankGroup& group)
    : data_(std::move(data)), all_examples_(data_.rows()) {
  const bool per_rank_files = path != options.data;
  if (group.active() && !per_rank_files) {
    try {
      shard_ = select_rows(data_, group.shard(data_.rows(), "examples"));
    } catch (const InputError& e) {
      throw InputError(fmt::format("LinearFitOptions::data {}: {}", path, e.what()));
    }
  }
  // One objective for the models the ranks average.
  const std::pair<std::string_view, std::string> settings[] = {
      {"LinearFitOptions::loss", std::string(to_string(options.loss))},
      {"LinearFitOptions::l2", fmt::format("{}", options.l2)}};
  group.same_settings(settings);
  require_examples_to_train(options, path, group);
  whole_.emplace(data_, options.l2, options.loss);
  if (shard_) own_shard_.emplace(*shard_, *whole_);
  if (per_rank_files && group.active()) sum_counts_of_ranks(options, group);
}

// Each rank's counts summed in floats: exact to 2^24 examples of a feature (the weights are floats anyway).
void LinearTrainingData::sum_counts_of_ranks(const LinearFitOptions& options, RankGroup& group) {
  auto counts = LinearProblem::count_features(data_);
  std::vector<float> sums(counts.per_feature.begin(), counts.per_feature.end());
  sums.push_back(static_cast<float>(counts.examples));
  group.sum_of_ranks(sums);
  constexpr float kMaxCount = 4294967040.0f;  // the largest float below 2^32
  for (std::size_t u = 0; u < counts.per_feature.size(); ++u)
    counts.per_feature[u] = static_cast<std::uint32_t>(std::min(sums[u], kMaxCount));
  counts.examples = static_cast<std::uint64_t>(sums.back());
  own_shard_.emplace(data_, options.l2, options.loss, counts);
  all_examples_ = counts.examples;
}

}  // namespace asgd::sparse
