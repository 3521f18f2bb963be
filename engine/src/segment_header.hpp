// Reading a shared segment's header (segment_format.hpp): what attach and inspect learn from it, judged on a
// header in memory, so that a mapped segment and a fuzz target's bytes (fuzz/segment_header.cpp) take one path.
// Internal to the engine.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "asgd/engine/layout.hpp"
#include "asgd/engine/param_store.hpp"
#include "segment_format.hpp"

namespace asgd::segment {

// What the header at `h` (kHeaderBytes of it) of segment `name` says. `object_bytes` tells the object's size; it
// is asked after the ready state is read (a creator sizes the segment before it marks it ready), so that a ready
// segment shorter than its header says is refused before its parameters are mapped. InputError naming the segment
// for a bad magic, another format version, or (ready) text sizes past the header or more elements than the object
// holds. The writers' pids are looked up (alive or dead), as the creator's.
SegmentInfo read_header(const std::string& name, const SegmentHeader* h,
                        const std::function<std::uint64_t()>& object_bytes);

// The layout a ready segment's header records (read_header's info), checked against the header's hash and element
// count: InputError naming the segment when the text does not parse or does not match them.
Layout layout_of(const SegmentInfo& info);

}  // namespace asgd::segment
