#include "asgd/engine/segment_removal.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/param_store.hpp"

namespace asgd {

namespace {

// Why `name` is not removed without RemoveSegmentOptions::force (nothing when it may be): its owner or mode, what
// it is, its live writers. A headerless object that nobody is making is removed here: SegmentRemoved::abandoned.
bool refuse_unforced(const std::string& name) {
  SegmentInfo info;
  try {
    info = ParamStore::inspect_shared(name);
  } catch (const UntrustedSegment& e) {
    // Removable (root, or its owner), but another user's or open to others: say whose, and remove only when told.
    throw InputError(fmt::format("shared segment '{}' belongs to {}{}; not removed (pass RemoveSegmentOptions::force "
                                 "to remove it anyway)",
                                 name, UntrustedSegment::whose(e.owner_uid, e.mode),
                                 e.foreign() ? "" : ", open to other users"));
  } catch (const InputError& e) {
    // What a creator killed before writing the header left holds nothing, and nobody is making it.
    if (const auto left = ParamStore::abandoned_shared(name)) {
      if (ParamStore::remove_shared(name, *left)) return true;
      throw InputError(fmt::format("shared segment '{}' changed meanwhile (made again, or removed); not removed: look "
                                   "again (ParamStore::inspect_shared(\"{}\"))",
                                   name, name));
    }
    // Another program's shared memory (Open MPI's, a database's) is not ours to remove unless told to.
    throw InputError(fmt::format("{}; not removed (pass RemoveSegmentOptions::force to remove it anyway)", e.what()));
  }
  if (!info.writers.empty()) {
    throw InputError(fmt::format("segment '{}' has {} live writer(s) ({} {}); a new trainer would start a second "
                                 "model under the same name. Stop them, or pass RemoveSegmentOptions::force",
                                 name, info.writers.size(), info.writers.size() > 1 ? "pids" : "pid",
                                 fmt::join(info.writers, ", ")));
  }
  return false;
}

}  // namespace

SegmentRemoved remove_segment(const std::string& name, const RemoveSegmentOptions& options) {
  if (!ParamStore::exists_shared(name)) throw InputError(fmt::format("no shared segment '{}'", name));
  // Another user's, which only its owner or root may remove: force would not help, so none is suggested.
  ParamStore::check_removable_shared(name);
  if (!options.force && refuse_unforced(name)) return SegmentRemoved::abandoned;
  if (!ParamStore::remove_shared(name)) {
    if (ParamStore::exists_shared(name)) {
      throw RuntimeError(fmt::format("shared segment '{}' could not be removed (ParamStore::inspect_shared(\"{}\") "
                                     "says whose it is)",
                                     name, name));
    }
    throw InputError(fmt::format("no shared segment '{}'", name));
  }
  return SegmentRemoved::segment;
}

}  // namespace asgd
