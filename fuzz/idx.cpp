// MNIST's IDX files (read_idx): an image file and a label file, from one input: a little-endian u32 (the image
// file's length, cut to what follows), the image file, then the label file.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "asgd/dense/mnist.hpp"
#include "fuzz_input.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile images("idx-images"), labels("idx-labels");
  if (size < 4) return 0;
  std::uint32_t split = 0;
  std::memcpy(&split, data, 4);
  const std::size_t image_bytes = std::min<std::size_t>(split, size - 4);
  const auto& image_path = images.write({data + 4, image_bytes});
  const auto& label_path = labels.write({data + 4 + image_bytes, size - 4 - image_bytes});
  dense::Dataset d;
  const std::initializer_list<std::string_view> inputs = {image_path.native(), label_path.native()};
  if (!fuzz::reads(inputs, [&] { d = dense::read_idx(image_path, label_path); })) return 0;
  fuzz::require(d.pixels.size() == d.size() * d.image_size(), "pixels are not images x rows x cols");
  fuzz::require(d.rows >= 1 && d.cols >= 1, "an image side of 0");
  for (const std::uint8_t l : d.labels) fuzz::require(l < d.classes, "a label past the classes");
  for (const float p : d.pixels) fuzz::require(p >= 0 && p <= 1, "a pixel outside [0, 1]");
  // A limit keeps the first images.
  dense::Dataset one;
  if (!fuzz::reads(inputs, [&] { one = dense::read_idx(image_path, label_path, 1); }))
    fuzz::finding("a file read whole is refused with a limit of 1");
  fuzz::require(one.size() == std::min<std::size_t>(1, d.size()), "a limit of 1 kept another count");
  return 0;
}
