#include "asgd/sparse/mf/saved_model.hpp"

#include <utility>

#include "asgd/engine/errors.hpp"

namespace asgd::sparse::mf {

SavedModel saved_model(FitReport report, const FitOptions& options) {
  if (!report.model) throw InputError("saved_model: the fit holds no model (it was stopped)");
  SavedModel s;
  s.model = std::move(*report.model);
  s.state = report.train.state;
  // model_metadata reads the names and the range of the ratings it is given: the model's maps, and its range as
  // two ratings (fit's range is RatingRange::of the training ratings; a bpr model has none).
  Ratings named;
  named.users = s.model.users;
  named.items = s.model.items;
  const bool bpr = s.model.loss == "bpr";
  if (!bpr) named.rating = {s.model.range.lo, s.model.range.hi};
  s.metadata = model_metadata(named, s.model.cold, s.model.scale, options.model, s.model.loss,
                              bpr ? s.model.positive : 0.0f);
  return s;
}

SavedModel read_saved_model(const std::filesystem::path& path) {
  CheckpointData d = read_checkpoint(path);
  SavedModel s;
  static_cast<ModelInfo&>(s.model) = read_model_info(d, path);
  s.model.epochs = d.state.epoch;
  s.model.store.emplace(ParamStore::on_heap(d.layout));
  s.model.store->assign(d.params);
  s.metadata = std::move(d.metadata);
  s.state = d.state;
  s.optimizer_state = std::move(d.optimizer_state);
  s.optimizer_kind = d.optimizer_kind;
  s.row_head = d.row_head;
  return s;
}

void write_saved_model(const std::filesystem::path& path, const SavedModel& m) {
  save_checkpoint(path, *m.model.store, m.state, m.optimizer_state, m.metadata, m.optimizer_kind, m.row_head);
}

}  // namespace asgd::sparse::mf
