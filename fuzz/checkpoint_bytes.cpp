#include "checkpoint_bytes.hpp"

#include <boost/crc.hpp>
#include <cstring>

#include "fuzz_input.hpp"

namespace asgd::fuzz {
namespace {

// engine/src/checkpoint.cpp's header: 80 bytes, little-endian.
struct FileHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t optimizer;
  std::uint64_t layout_hash;
  std::uint64_t elements;
  std::uint64_t optimizer_elements;
  std::uint64_t epoch;
  std::uint64_t examples;
  std::uint64_t seed;
  std::uint64_t layout_text_bytes;
  std::uint64_t metadata_bytes;
};
static_assert(sizeof(FileHeader) == 80);
constexpr std::size_t kTrailer = sizeof(std::uint32_t) + 8;  // CRC-32, "ASGDEND!"

// Writes the CRC-32 of bytes [0, size - kTrailer) and the end marker into the last kTrailer bytes.
void seal(std::uint8_t* bytes, std::size_t size) {
  boost::crc_32_type crc;
  crc.process_bytes(bytes, size - kTrailer);
  const std::uint32_t sum = crc.checksum();
  std::memcpy(bytes + size - kTrailer, &sum, sizeof sum);
  std::memcpy(bytes + size - 8, "ASGDEND!", 8);
}

}  // namespace

std::vector<std::uint8_t> repair_checkpoint(std::span<const std::uint8_t> input) {
  std::vector<std::uint8_t> out(input.begin(), input.end());
  if (out.size() < sizeof(FileHeader) + kTrailer) return out;
  FileHeader h;
  std::memcpy(&h, out.data(), sizeof h);
  const std::uint64_t room = out.size() - sizeof h - kTrailer;  // layout text, metadata and floats
  if (h.layout_text_bytes <= room) {
    const std::string_view text(reinterpret_cast<const char*>(out.data()) + sizeof h, h.layout_text_bytes);
    reads({}, [&] { h.layout_hash = Layout::parse(text).hash(); });
    const std::uint64_t left = room - h.layout_text_bytes;
    if (h.elements <= left / 4 && h.optimizer_elements <= left / 4 - h.elements)
      h.metadata_bytes = left - (h.elements + h.optimizer_elements) * 4;
  }
  std::memcpy(out.data(), &h, sizeof h);
  seal(out.data(), out.size());
  return out;
}

std::string checkpoint_file(const Layout& layout, std::span<const float> params, std::span<const float> optimizer,
                            std::uint32_t optimizer_word, std::string_view metadata) {
  const std::string text = layout.serialize();
  FileHeader h{};
  std::memcpy(h.magic, "ASGDCKPT", 8);
  h.version = 1;
  h.optimizer = optimizer_word;
  h.layout_hash = layout.hash();
  h.elements = params.size();
  h.optimizer_elements = optimizer.size();
  h.layout_text_bytes = text.size();
  h.metadata_bytes = metadata.size();
  std::string file(reinterpret_cast<const char*>(&h), sizeof h);
  file += text;
  file += metadata;
  file.append(reinterpret_cast<const char*>(params.data()), params.size_bytes());
  file.append(reinterpret_cast<const char*>(optimizer.data()), optimizer.size_bytes());
  file.append(kTrailer, '\0');
  seal(reinterpret_cast<std::uint8_t*>(file.data()), file.size());
  return file;
}

}  // namespace asgd::fuzz
