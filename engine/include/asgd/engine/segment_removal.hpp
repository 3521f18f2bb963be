// Removing a shared parameter segment by name, as `asgd shm remove` does: checked first, so that nobody removes
// another program's shared memory, another user's segment or one that live processes train, unless forced.
#pragma once

#include <string>

namespace asgd {

struct RemoveSegmentOptions {
  // Remove it even while live processes write to it, when it is another user's or open to others, or when it is
  // not an asgd parameter segment.
  bool force = false;
};

enum class SegmentRemoved {
  segment,    // the segment
  abandoned,  // what a creator killed before writing its header left (ParamStore::abandoned_shared)
};

// Removes segment `name`. InputError when there is no such object, when this process may not remove it
// (ParamStore::check_removable_shared), and, unless options.force: when it is another user's or open to others,
// not an asgd parameter segment, or has live writers; RuntimeError when it could not be removed. The messages
// say what to do (RemoveSegmentOptions::force; ParamStore::inspect_shared("NAME") to see whose it is).
SegmentRemoved remove_segment(const std::string& name, const RemoveSegmentOptions& options = {});

}  // namespace asgd
