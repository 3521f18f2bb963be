// A shared segment's header (segment::read_header, segment::layout_of: what attach and inspect read before they
// map the parameters), on bytes in memory: no shared memory is made. The input: the object's size in bytes
// (u64, little-endian), then the header (cut or zero-filled to kHeaderBytes).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "fuzz_input.hpp"
#include "segment_format.hpp"
#include "segment_header.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string name = "fuzz-segment";
  // Aligned as a mapping is (the header's fields are read through std::atomic_ref).
  static const auto header = std::make_unique<std::uint64_t[]>(segment::kHeaderBytes / 8);
  if (size < 8) return 0;
  std::uint64_t object_bytes = 0;
  std::memcpy(&object_bytes, data, 8);
  auto* bytes = reinterpret_cast<std::uint8_t*>(header.get());
  const std::size_t n = std::min(size - 8, segment::kHeaderBytes);
  std::memcpy(bytes, data + 8, n);
  std::memset(bytes + n, 0, segment::kHeaderBytes - n);
  const auto* h = reinterpret_cast<const segment::SegmentHeader*>(bytes);
  SegmentInfo info;
  if (!fuzz::reads({name}, [&] { info = segment::read_header(name, h, [&] { return object_bytes; }); })) return 0;
  fuzz::require(info.layout.size() + info.settings.size() <= segment::kLayoutTextMax, "texts past the header");
  if (!info.ready) return 0;
  fuzz::require(info.elements <= (object_bytes - segment::kHeaderBytes) / sizeof(float), "elements past the object");
  Layout layout;
  if (!fuzz::reads({name}, [&] { layout = segment::layout_of(info); })) return 0;
  fuzz::require(layout.size() == info.elements, "a layout of another size than the header's");
  return 0;
}
