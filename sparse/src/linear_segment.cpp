#include "asgd/sparse/linear_segment.hpp"

#include <fmt/format.h>

#include <exception>
#include <sstream>
#include <string_view>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/training_store.hpp"

namespace asgd::sparse {

std::string linear_segment_settings(LinearLoss loss, double l2) {
  return fmt::format("--loss {} --l2 {}", to_string(loss), l2);
}

LinearSegmentObjective linear_segment_objective(const std::string& settings, const std::string& name,
                                                LinearSegmentObjective given) {
  const auto setting = [&](std::string_view key) -> std::optional<std::string> {
    std::istringstream in(settings);
    for (std::string k, value; in >> k >> value;)
      if (k == key) return value;
    return std::nullopt;
  };
  if (const auto loss = setting("--loss"); loss && !given.loss) {
    try {
      given.loss = parse_linear_loss(*loss);
    } catch (const InputError& e) {
      throw InputError(fmt::format("the segment's --loss: {}", e.what()));
    }
  }
  if (const auto l2 = setting("--l2"); l2 && !given.l2) {
    try {
      given.l2 = std::stod(*l2);
    } catch (const std::exception&) {
      throw InputError(fmt::format("segment {}: its --l2 '{}' is not a number", name, *l2));
    }
  }
  return given;
}

LinearSegmentModel linear_segment_model(const ParamStore& store, const std::string& name,
                                        const LinearSegmentObjective& given) {
  refuse_diverged(store, name);
  if (!store.layout().contains("weights")) throw InputError(fmt::format("segment {}: not a linear model", name));
  LinearSegmentModel model;
  model.weights = store.snapshot("weights");
  model.objective = linear_segment_objective(ParamStore::inspect_shared(name).settings, name, given);
  return model;
}

LinearSegmentEval evaluate_linear_segment(const std::string& name, const LinearEvalOptions& options) {
  SparseDataset data = read_libsvm(options.data, options.unsorted);
  require_examples(data, options.data.string(), "score");
  const ParamStore store = ParamStore::attach_shared_any(name, Access::read_only);
  LinearSegmentModel m = linear_segment_model(store, name, {.loss = options.loss, .l2 = options.l2});
  LinearSegmentEval eval;
  eval.l2_assumed = !m.objective.l2;
  eval.l2 = m.objective.l2.value_or(1e-4);
  eval.quality = score_linear(data, std::move(m.weights), eval.l2, m.objective.loss.value_or(LinearLoss::logistic));
  return eval;
}

}  // namespace asgd::sparse
