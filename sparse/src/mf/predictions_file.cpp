#include "asgd/sparse/mf/predictions_file.hpp"

#include <fmt/format.h>

#include <string>

#include "asgd/engine/atomic_file.hpp"

namespace asgd::sparse::mf {

ErrorMetrics write_predictions(const LoadedModel& model, const Ratings& test, const std::filesystem::path& path) {
  const ParamStore& store = *model.store;
  const FactorLayout layout = FactorLayout::of(store.layout());
  // Not centred: unknown ids predict from the mean biases of the trained rows.
  const RatingScale scale = with_bias_means(model.scale, store, &model.cold);
  std::string out;
  for (std::size_t i = 0; i < test.size(); ++i) {
    const float r = predict_or_fallback(store, layout, scale, test.user[i], test.item[i], &model.cold);
    out += fmt::format("{:.6g}\n", model.range.clip(r));
  }
  AtomicFile file(path);
  file.write(out);
  file.commit();
  return evaluate_errors(store, model.scale, test, model.range.lo, model.range.hi, &model.cold);
}

}  // namespace asgd::sparse::mf
