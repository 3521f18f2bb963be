#include "asgd/sparse/mf/saved_model.hpp"

#include <utility>

#include "asgd/engine/errors.hpp"

namespace asgd::sparse::mf {

SavedModel saved_model(FitReport report) {
  if (!report.model) throw InputError("saved_model: the fit holds no model (it was stopped)");
  SavedModel s;
  s.model = std::move(*report.model);
  s.state = report.train.state;
  s.metadata = std::move(report.metadata);
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
