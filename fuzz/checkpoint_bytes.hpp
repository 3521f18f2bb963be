// Checkpoint files (engine/checkpoint.hpp's format) for the targets that read them: a mutated file repaired so
// that it gets past the checksum to the parsing behind it, and a file made from parts (a model whose parameters
// are too many for a seed file, LeNet-5's).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "asgd/engine/layout.hpp"

namespace asgd::fuzz {

// `input` with what a mutation almost always breaks made right again, so that the reader judges the rest: when
// the header's layout text parses, the layout hash is that text's; the metadata takes the bytes the header's
// other sizes leave (so an inserted or removed byte keeps the sizes consistent); the CRC-32 and the end marker
// are the right ones. An input too short to hold a header and a trailer is returned as it is.
std::vector<std::uint8_t> repair_checkpoint(std::span<const std::uint8_t> input);

// A whole checkpoint of `layout` with `params` (layout.size() of them), `optimizer` values recorded with the
// header's optimizer word `optimizer_word`, and `metadata`, as save_checkpoint writes one.
std::string checkpoint_file(const Layout& layout, std::span<const float> params, std::span<const float> optimizer,
                            std::uint32_t optimizer_word, std::string_view metadata);

}  // namespace asgd::fuzz
