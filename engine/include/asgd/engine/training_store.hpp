// Where a training run keeps its parameters: the heap, or a shared segment
// that is attached when it exists (training continues from its parameters)
// or created, and removed again when the run fails before training starts.
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <utility>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/layout.hpp"
#include "asgd/engine/param_store.hpp"

namespace asgd {

// Removes a shared segment this run created when the run fails before
// training: it is destroyed while an exception unwinds the scope that holds
// it, release() was not called (call it as training starts: from then on the
// segment holds work worth keeping), nobody else is attached as a writer, and
// the name still names the segment it made (not one made again under it after
// a removal). A killed process leaves its segment (stale, for
// AttachOptions::recover_stale or ParamStore::remove_shared); a finished run
// keeps it for serving.
class RemoveOnFailure {
 public:
  RemoveOnFailure() = default;
  RemoveOnFailure(std::string name, SegmentId id) : name_(std::move(name)), id_(id) {}
  RemoveOnFailure(RemoveOnFailure&& other) noexcept
      : name_(std::exchange(other.name_, {})), id_(other.id_), exceptions_(other.exceptions_) {}
  RemoveOnFailure& operator=(RemoveOnFailure&&) = delete;
  ~RemoveOnFailure();
  void release() noexcept { name_.clear(); }

 private:
  std::string name_;  // empty: nothing to remove
  SegmentId id_;      // the segment made under name_: a segment made again under it is not ours to remove
  int exceptions_ = std::uncaught_exceptions();
};

// An attached segment whose parameters are not all finite: a run that
// trained into it diverged, and training on from there would diverge again.
class DivergedSegment : public InputError {
 public:
  DivergedSegment(std::string segment, std::size_t index, float value);
  std::string segment;
  std::size_t index;  // the first parameter that is NaN or infinite
  float value;
};
// Throws DivergedSegment when a parameter of `store`, segment `name`, is NaN or infinite: what a reader serves
// and what a trainer would go on from.
void refuse_diverged(const ParamStore& store, const std::string& name);

// The parameters of a run: on the heap when `shm` is empty, else in the
// shared segment `shm` (ParamStore::open_or_create_shared). `initialize`,
// when given, fills a new store (on the heap, or a segment before another
// process may attach it); `created` says whether the store is new. Keep the
// TrainingStore for the whole run: a segment it created is removed if the
// run fails before training starts (cleanup.release() then).
struct TrainingStore {
  RemoveOnFailure cleanup;  // declared first, so the store detaches before it runs
  ParamStore store;
  bool created = true;
};
TrainingStore open_training_store(const std::string& shm, Layout layout, AttachOptions attach = {},
                                  const std::function<void(ParamStore&)>& initialize = {});

}  // namespace asgd
