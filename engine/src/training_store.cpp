#include "asgd/engine/training_store.hpp"

#include <fmt/format.h>

namespace asgd {

DivergedSegment::DivergedSegment(std::string name, std::size_t at, float v)
    : InputError(fmt::format("segment '{}': parameter {} is {}: a run that trained into it diverged (it stopped "
                             "with \"training diverged\"); remove it (ParamStore::remove_shared(\"{}\")) and train "
                             "again",
                             name, at, v, name)),
      segment(std::move(name)),
      index(at),
      value(v) {}

void refuse_diverged(const ParamStore& store, const std::string& name) {
  if (const auto i = store.first_non_finite()) throw DivergedSegment(name, *i, store.load(*i));
}

RemoveOnFailure::~RemoveOnFailure() {
  if (name_.empty() || std::uncaught_exceptions() <= exceptions_) return;
  try {
    if (ParamStore::inspect_shared(name_).writers.empty()) ParamStore::remove_shared(name_, id_);
  } catch (...) {  // gone already, or no longer ours: leave it
  }
}

TrainingStore open_training_store(const std::string& shm, Layout layout, AttachOptions attach,
                                  const std::function<void(ParamStore&)>& initialize) {
  if (shm.empty()) {
    ParamStore store = ParamStore::on_heap(std::move(layout));
    if (initialize) initialize(store);
    return {RemoveOnFailure(), std::move(store), true};
  }
  bool created = false;
  ParamStore store = ParamStore::open_or_create_shared(shm, std::move(layout), attach, &created, initialize);
  auto cleanup = created ? RemoveOnFailure(shm, store.segment_id()) : RemoveOnFailure();
  return {std::move(cleanup), std::move(store), created};
}

}  // namespace asgd
