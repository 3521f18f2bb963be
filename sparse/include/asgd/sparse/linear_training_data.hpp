// What one rank of a linear fit trains on: its file (a "{rank}" path gives
// each rank its own), the whole set's problem (for the report and the
// reference) and this rank's shard of it with the whole set's regulariser.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "asgd/engine/rank_group.hpp"
#include "asgd/sparse/libsvm.hpp"
#include "asgd/sparse/linear.hpp"
#include "asgd/sparse/linear_fit.hpp"

namespace asgd::sparse {

// options.data with {rank} replaced by this rank, after the checks every rank must pass alike (collective: the
// ranks agree first on whether they read one file or their own, the width, and resume/AdaGrad).
std::string rank_data_path(const LinearFitOptions& options, RankGroup& group);

// The data of `path` (rank_data_path's), as options.features widens it. On several ranks each trains every P-th
// example of one file, or all of its own file: then `whole` is this rank's file and the shard's regulariser
// weights come from every rank's feature counts summed (collective). The ranks agree on the objective first.
class LinearTrainingData {
 public:
  LinearTrainingData(const LinearFitOptions& options, const std::string& path, RankGroup& group);
  // Examples in memory (options.data names them), widened to options.features when given: InputError when they are
  // wider.
  LinearTrainingData(const LinearFitOptions& options, SparseDataset data, RankGroup& group);
  LinearTrainingData(const LinearTrainingData&) = delete;
  LinearTrainingData& operator=(const LinearTrainingData&) = delete;

  // What this rank trains.
  const LinearProblem& problem() const { return own_shard_ ? *own_shard_ : *whole_; }
  const SparseDataset& trained() const { return own_shard_ && shard_ ? *shard_ : data_; }
  // The file's problem: quality is reported on it.
  const LinearProblem& whole() const { return *whole_; }
  // The examples all ranks train together.
  std::uint64_t all_examples() const noexcept { return all_examples_; }

 private:
  LinearTrainingData(const LinearFitOptions& options, const std::string& path, SparseDataset data, RankGroup& group);
  void require_examples_to_train(const LinearFitOptions& options, const std::string& path,
                                 const RankGroup& group) const;
  void sum_counts_of_ranks(const LinearFitOptions& options, RankGroup& group);

  SparseDataset data_;
  std::optional<SparseDataset> shard_;
  std::optional<LinearProblem> whole_;  // made once the ranks agreed: an empty shard is refused on every rank alike
  std::optional<LinearProblem> own_shard_;
  std::uint64_t all_examples_ = 0;
};

}  // namespace asgd::sparse
