#include "asgd/sparse/linear_quality.hpp"

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <utility>

#include "asgd/engine/errors.hpp"

#include "asgd/sparse/linear_model_file.hpp"

namespace asgd::sparse {

LinearQuality quality_of(const LinearProblem& problem, std::span<const float> w) {
  return {.examples = problem.num_examples(), .objective = problem.objective(w), .accuracy = problem.accuracy(w)};
}

ReferenceGap reference_gap(const LinearProblem& problem, std::span<const float> w) {
  const LbfgsResult opt = solve_lbfgs(problem);
  return {.iterations = opt.iterations,
          .gradient_norm = opt.gradient_norm,
          .optimum = opt.objective,
          .ours = problem.objective(w)};
}

void linear_margins(const SparseDataset& data, std::span<const float> w, std::span<double> margins) {
  if (w.size() < data.num_features)
    throw InputError(fmt::format("the weights: {} for data {} features wide", w.size(), data.num_features));
  if (margins.size() != data.rows())
    throw InputError(fmt::format("the margins: room for {} of {} examples", margins.size(), data.rows()));
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, data.rows(), 4096), [&](const auto& range) {
    for (std::size_t i = range.begin(); i != range.end(); ++i) {
      double m = 0.0;
      for (std::uint64_t k = data.row_ptr[i]; k < data.row_ptr[i + 1]; ++k)
        m += static_cast<double>(w[data.index[k]]) * data.value[k];
      margins[i] = m;
    }
  });
}

LinearQuality score_linear(SparseDataset& data, std::vector<float> weights, double l2, LinearLoss loss) {
  // Narrowed first: the problem is built on the data it leaves.
  const std::vector<float> w = narrow_to_weights(data, std::move(weights));
  return quality_of(LinearProblem(data, l2, loss), w);
}

LinearQuality evaluate_linear_model(const std::filesystem::path& model, const LinearEvalOptions& options) {
  SparseDataset data = read_libsvm(options.data, options.unsorted);
  require_examples(data, options.data.string(), "score");
  LinearModelFile file = read_linear_model(model);
  const double l2 = options.l2 ? *options.l2 : file.l2().value_or(1e-4);
  const LinearLoss loss = options.loss ? *options.loss : file.loss();
  return score_linear(data, std::move(file.weights), l2, loss);
}

}  // namespace asgd::sparse
