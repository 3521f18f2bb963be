// The MNIST IDX reader: what reads back (raw and gzip), and how each kind of
// bad file is reported: by name, with what was wrong, and without a large
// allocation for a header that lies.
#include "../common/limited_child.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/dense/mnist.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <new>
#include <numeric>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "asgd/engine/errors.hpp"

// The largest single allocation since the last reset: the tests of lying
// headers check that nothing near the announced size was ever requested.
// (A replacement of the global operator new is program-wide, so it sees the
// library's allocations too.)
namespace {
std::atomic<std::size_t> largest_allocation{0};
}  // namespace

void* operator new(std::size_t n) {
  std::size_t seen = largest_allocation.load(std::memory_order_relaxed);
  while (n > seen && !largest_allocation.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// Not inlined: GCC would see operator new's memory reach free() and warn
// (-Wmismatched-new-delete), not knowing this new is malloc.
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace asgd::dense {
namespace {

namespace fs = std::filesystem;
using ScratchDir = asgd::testing::ScratchDir;

// ---- fixture builders ----------------------------------------------------------------------------------------------

void put_be32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
}

std::string image_header(std::uint32_t n, std::uint32_t rows, std::uint32_t cols, std::uint32_t magic = 0x803) {
  std::string out;
  put_be32(out, magic);
  put_be32(out, n);
  put_be32(out, rows);
  put_be32(out, cols);
  return out;
}

std::string idx_images(std::uint32_t rows, std::uint32_t cols, const std::vector<std::uint8_t>& pixels) {
  std::string out = image_header(static_cast<std::uint32_t>(pixels.size() / (rows * cols)), rows, cols);
  out.append(pixels.begin(), pixels.end());
  return out;
}

std::string label_header(std::uint32_t n, std::uint32_t magic = 0x801) {
  std::string out;
  put_be32(out, magic);
  put_be32(out, n);
  return out;
}

std::string idx_labels(const std::vector<std::uint8_t>& labels) {
  std::string out = label_header(static_cast<std::uint32_t>(labels.size()));
  out.append(labels.begin(), labels.end());
  return out;
}

std::uint32_t crc32_of(std::string_view data) {
  std::uint32_t crc = 0xffffffffu;
  for (unsigned char byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void put_le(std::string& out, std::uint32_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) out += static_cast<char>((v >> (8 * k)) & 0xff);
}

// A gzip member of stored (uncompressed) deflate blocks, written here so the
// test needs no zlib of its own; any inflater must read it.
std::string gzip_stored(std::string_view data) {
  std::string out = {'\x1f', '\x8b', '\x08', '\0', '\0', '\0', '\0', '\0', '\0', '\xff'};
  std::size_t at = 0;
  do {
    const std::size_t len = std::min<std::size_t>(data.size() - at, 65535);
    const bool last = at + len == data.size();
    out += static_cast<char>(last ? 1 : 0);  // BFINAL, BTYPE 00 (stored), padding
    put_le(out, static_cast<std::uint32_t>(len), 2);
    put_le(out, static_cast<std::uint32_t>(~len & 0xffff), 2);
    out.append(data.substr(at, len));
    at += len;
  } while (at < data.size());
  put_le(out, crc32_of(data), 4);
  put_le(out, static_cast<std::uint32_t>(data.size()), 4);
  return out;
}

std::vector<std::uint8_t> ramp(std::size_t n) {
  std::vector<std::uint8_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>((i * 37 + 11) % 256);
  return out;
}

// The message of the asgd::InputError that `f` throws; a test failure if it
// throws something else or nothing.
std::string input_error(auto&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected asgd::InputError, got: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected asgd::InputError, nothing thrown";
  return "(no exception)";
}

void expect_mentions(const std::string& message, std::initializer_list<std::string_view> parts) {
  for (std::string_view part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "message: " << message << "\n lacks: " << part;
  }
}

void expect_pixels(const Dataset& data, const std::vector<std::uint8_t>& bytes) {
  ASSERT_EQ(data.pixels.size(), bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    ASSERT_FLOAT_EQ(data.pixels[i], static_cast<float>(bytes[i]) / 255.0f) << "pixel " << i;
  }
}

// Three 2x3 images with 0 and 255 among the pixels, labels 0, 9, 5.
const std::vector<std::uint8_t> kPixels = {0, 255, 128, 1, 2, 3, 10, 20, 30, 40, 50, 60, 254, 253, 252, 251, 250, 249};
const std::vector<std::uint8_t> kLabels = {0, 9, 5};

// ---- reading good files --------------------------------------------------------------------------------------------

TEST(ReadIdx, RawRoundTrip) {
  ScratchDir dir;
  const Dataset data = read_idx(dir.file("img", idx_images(2, 3, kPixels)), dir.file("lbl", idx_labels(kLabels)));
  EXPECT_EQ(data.rows, 2u);
  EXPECT_EQ(data.cols, 3u);
  EXPECT_EQ(data.classes, 10u);
  EXPECT_EQ(data.size(), 3u);
  EXPECT_EQ(data.image_size(), 6u);
  EXPECT_EQ(data.labels, kLabels);
  expect_pixels(data, kPixels);
  EXPECT_FLOAT_EQ(data.pixels[0], 0.0f);
  EXPECT_FLOAT_EQ(data.pixels[1], 1.0f);
  const auto second = data.image(1);
  ASSERT_EQ(second.size(), 6u);
  EXPECT_FLOAT_EQ(second[0], 10.0f / 255.0f);
  EXPECT_FLOAT_EQ(second[5], 60.0f / 255.0f);
}

TEST(ReadIdx, GzipRoundTrip) {
  ScratchDir dir;
  const Dataset data = read_idx(dir.file("img.gz", gzip_stored(idx_images(2, 3, kPixels))),
                                dir.file("lbl.gz", gzip_stored(idx_labels(kLabels))));
  EXPECT_EQ(data.rows, 2u);
  EXPECT_EQ(data.cols, 3u);
  EXPECT_EQ(data.labels, kLabels);
  expect_pixels(data, kPixels);
}

TEST(ReadIdx, GzipIsToldByContentNotName) {
  ScratchDir dir;
  // gzip without ".gz", raw with it.
  const Dataset data = read_idx(dir.file("images", gzip_stored(idx_images(2, 3, kPixels))),
                                dir.file("labels.gz", idx_labels(kLabels)));
  EXPECT_EQ(data.labels, kLabels);
  expect_pixels(data, kPixels);
}

TEST(ReadIdx, GzipOfManyBlocksAndLimit) {
  ScratchDir dir;
  const std::size_t n = 300;  // 300 * 784 bytes: several 64 KiB stored blocks
  const auto pixels = ramp(n * 28 * 28);
  std::vector<std::uint8_t> labels(n);
  for (std::size_t i = 0; i < n; ++i) labels[i] = static_cast<std::uint8_t>(i % 10);
  const auto images = dir.file("i.gz", gzip_stored(idx_images(28, 28, pixels)));
  const auto label_file = dir.file("l.gz", gzip_stored(idx_labels(labels)));

  const Dataset all = read_idx(images, label_file);
  EXPECT_EQ(all.size(), n);
  EXPECT_EQ(all.labels, labels);
  expect_pixels(all, pixels);

  const Dataset some = read_idx(images, label_file, 7);
  EXPECT_EQ(some.size(), 7u);
  EXPECT_EQ(some.rows, 28u);
  EXPECT_EQ(some.labels, std::vector<std::uint8_t>(labels.begin(), labels.begin() + 7));
  expect_pixels(some, std::vector<std::uint8_t>(pixels.begin(), pixels.begin() + 7 * 784));
}

TEST(ReadIdx, Limit) {
  ScratchDir dir;
  const auto images = dir.file("img", idx_images(2, 3, kPixels));
  const auto labels = dir.file("lbl", idx_labels(kLabels));
  const Dataset two = read_idx(images, labels, 2);
  EXPECT_EQ(two.size(), 2u);
  EXPECT_EQ(two.labels, (std::vector<std::uint8_t>{0, 9}));
  expect_pixels(two, std::vector<std::uint8_t>(kPixels.begin(), kPixels.begin() + 12));

  const Dataset none = read_idx(images, labels, 0);
  EXPECT_EQ(none.size(), 0u);
  EXPECT_TRUE(none.pixels.empty());
  EXPECT_EQ(none.rows, 2u);

  EXPECT_EQ(read_idx(images, labels, 1000).size(), 3u);
}

TEST(ReadIdx, EmptyDatasetIsFine) {
  ScratchDir dir;
  const Dataset data = read_idx(dir.file("img", image_header(0, 28, 28)), dir.file("lbl", label_header(0)));
  EXPECT_EQ(data.size(), 0u);
  EXPECT_EQ(data.rows, 28u);
}

// ---- bad files -----------------------------------------------------------------------------------------------------

TEST(ReadIdxErrors, WrongMagicForImages) {
  ScratchDir dir;
  const auto labels = dir.file("lbl", idx_labels(kLabels));
  // The label file given as images: said so.
  const auto swapped = input_error([&] { read_idx(labels, labels); });
  expect_mentions(swapped, {"lbl", "wrong magic", "expected 0x00000803", "got 0x00000801", "label file"});

  const auto junk = dir.file("junk-images", image_header(3, 2, 3, 0x12345678) + std::string(18, '\0'));
  expect_mentions(input_error([&] { read_idx(junk, labels); }),
                  {"junk-images", "wrong magic", "expected 0x00000803", "got 0x12345678"});
}

TEST(ReadIdxErrors, WrongMagicForLabels) {
  ScratchDir dir;
  const auto images = dir.file("img", idx_images(2, 3, kPixels));
  expect_mentions(input_error([&] { read_idx(images, images); }),
                  {"img", "wrong magic", "IDX label file", "expected 0x00000801", "got 0x00000803", "image file"});

  const auto junk = dir.file("junk-labels", label_header(3, 0xdeadbeef) + std::string(3, '\0'));
  expect_mentions(input_error([&] { read_idx(images, junk); }),
                  {"junk-labels", "wrong magic", "expected 0x00000801", "got 0xdeadbeef"});
}

TEST(ReadIdxErrors, TruncatedHeader) {
  ScratchDir dir;
  const auto labels = dir.file("lbl", idx_labels(kLabels));
  const auto images = dir.file("img", idx_images(2, 3, kPixels));

  const auto short_images = dir.file("short-img", image_header(3, 2, 3).substr(0, 10));
  expect_mentions(input_error([&] { read_idx(short_images, labels); }),
                  {"short-img", "truncated header", "expected 16 bytes", "got 10"});

  const auto empty = dir.file("empty-img", "");
  expect_mentions(input_error([&] { read_idx(empty, labels); }),
                  {"empty-img", "truncated header", "expected 16 bytes", "got 0", "empty file"});

  const auto magic_only = dir.file("magic-only", label_header(3).substr(0, 2));
  expect_mentions(input_error([&] { read_idx(images, magic_only); }),
                  {"magic-only", "truncated header", "expected 8 bytes", "got 2"});

  const auto short_labels_gz = dir.file("short-lbl.gz", gzip_stored(label_header(3).substr(0, 6)));
  expect_mentions(input_error([&] { read_idx(images, short_labels_gz); }),
                  {"short-lbl.gz", "truncated header", "expected 8 bytes", "got 6"});
}

TEST(ReadIdxErrors, TruncatedDataRaw) {
  ScratchDir dir;
  const auto labels = dir.file("lbl", idx_labels(kLabels));
  const auto images = dir.file("img", idx_images(2, 3, kPixels));

  const auto short_images = dir.file("cut-img", idx_images(2, 3, kPixels).substr(0, 16 + 10));
  expect_mentions(input_error([&] { read_idx(short_images, labels); }),
                  {"cut-img", "truncated data", "expected 18 bytes", "got 10", "3 images of 2x3"});

  const auto short_labels = dir.file("cut-lbl", idx_labels(kLabels).substr(0, 8 + 1));
  expect_mentions(input_error([&] { read_idx(images, short_labels); }),
                  {"cut-lbl", "truncated data", "expected 3 bytes", "got 1"});
}

// A gzip file cut inside its 8-byte trailer holds all the data, but its CRC and length never came: refused (gzip
// -t says "unexpected end of file"), for 1 to 8 bytes missing.
TEST(ReadIdxErrors, AGzipFileCutInItsTrailer) {
  ScratchDir dir;
  const auto images = dir.file("img", idx_images(2, 3, kPixels));
  const std::string whole = gzip_stored(idx_labels(kLabels));
  for (std::size_t cut = 1; cut <= 8; ++cut) {
    const auto labels = dir.file("lbl" + std::to_string(cut) + ".gz", whole.substr(0, whole.size() - cut));
    expect_mentions(input_error([&] { read_idx(images, labels); }),
                    {"lbl" + std::to_string(cut) + ".gz", "truncated", "cut off", "CRC"});
  }
  EXPECT_EQ(read_idx(images, dir.file("lbl.gz", whole)).size(), 3u);
}

// A header whose count understates the data (or data appended after it) is refused, raw or gzip: the file is not
// what its header says (before: the first `count` records were read and the rest ignored). A limit reads only the
// front, and the rest is not looked at.
TEST(ReadIdxErrors, MoreDataThanTheHeaderSays) {
  ScratchDir dir;
  const auto labels = dir.file("lbl", idx_labels(kLabels));
  const auto images = dir.file("img", idx_images(2, 3, kPixels));
  const auto long_images = dir.file("long-img", idx_images(2, 3, kPixels) + std::string(6, '\x01'));
  expect_mentions(input_error([&] { read_idx(long_images, labels); }),
                  {"long-img", "24 bytes after the 16-byte header", "3 images of 2x3 (18 bytes)", "count is wrong"});
  const auto long_labels = dir.file("long-lbl", idx_labels(kLabels) + std::string(1, '\x02'));
  expect_mentions(input_error([&] { read_idx(images, long_labels); }), {"long-lbl", "count is wrong"});
  const auto long_gz = dir.file("long-img.gz", gzip_stored(idx_images(2, 3, kPixels) + std::string(6, '\x01')));
  expect_mentions(input_error([&] { read_idx(long_gz, labels); }), {"long-img.gz", "data after the 18 bytes"});
  EXPECT_EQ(read_idx(long_gz, labels, 2).size(), 2u);
}

TEST(ReadIdxErrors, TruncatedDataGzip) {
  ScratchDir dir;
  const auto labels = dir.file("lbl", idx_labels(kLabels));
  const auto images = dir.file("img", idx_images(2, 3, kPixels));

  // A complete gzip stream that holds too little.
  const auto short_images = dir.file("short-img.gz", gzip_stored(idx_images(2, 3, kPixels).substr(0, 16 + 10)));
  expect_mentions(input_error([&] { read_idx(short_images, labels); }),
                  {"short-img.gz", "truncated data", "expected 18 bytes", "got 10"});
  const auto short_labels = dir.file("short-lbl.gz", gzip_stored(idx_labels(kLabels).substr(0, 8 + 2)));
  expect_mentions(input_error([&] { read_idx(images, short_labels); }),
                  {"short-lbl.gz", "truncated data", "expected 3 bytes", "got 2"});

  // A gzip file cut off inside its data: 16 header bytes + 10 pixels survive.
  const std::string whole = gzip_stored(idx_images(2, 3, kPixels));
  const auto cut = dir.file("cut-img.gz", whole.substr(0, 10 + 5 + 16 + 10));
  expect_mentions(input_error([&] { read_idx(cut, labels); }),
                  {"cut-img.gz", "truncated data", "expected 18 bytes", "got 10", "cut off"});

  // Not truncated but corrupt: a stored block whose length check fails.
  std::string bad = whole;
  bad[10 + 3] = static_cast<char>(bad[10 + 3] ^ 0x01);
  const auto corrupt = dir.file("corrupt-img.gz", bad);
  expect_mentions(input_error([&] { read_idx(corrupt, labels); }), {"corrupt-img.gz", "corrupt gzip"});
}

TEST(ReadIdxErrors, CountMismatch) {
  ScratchDir dir;
  const auto images = dir.file("three-img", idx_images(2, 3, kPixels));
  const auto labels = dir.file("two-lbl", idx_labels({1, 2}));
  expect_mentions(input_error([&] { read_idx(images, labels); }),
                  {"three-img", "two-lbl", "count mismatch", "2 labels", "3 images"});
}

TEST(ReadIdxErrors, AbsurdDimensions) {
  ScratchDir dir;
  const auto labels = dir.file("lbl", idx_labels(kLabels));
  const auto zero_rows = dir.file("zero-rows", image_header(3, 0, 3));
  expect_mentions(input_error([&] { read_idx(zero_rows, labels); }),
                  {"zero-rows", "absurd dimensions", "3 images of 0x3"});
  const auto wide = dir.file("wide", image_header(3, 2, 5000));
  expect_mentions(input_error([&] { read_idx(wide, labels); }), {"wide", "absurd dimensions", "2x5000"});
  const auto negative = dir.file("negative", image_header(0x80000000u, 28, 28));
  expect_mentions(input_error([&] { read_idx(negative, labels); }), {"negative", "absurd dimensions", "2147483648"});
  const auto negative_labels = dir.file("negative-lbl", label_header(0xffffffffu));
  expect_mentions(input_error([&] { read_idx(dir.file("img", idx_images(2, 3, kPixels)), negative_labels); }),
                  {"negative-lbl", "absurd dimensions", "4294967295 labels"});
}

TEST(ReadIdxErrors, HugeCountInTinyFileAllocatesNothingLarge) {
  ScratchDir dir;
  const std::uint32_t n = 0x7fffffff;  // 2^31-1 images of 28x28: 1.6 TB promised
  const auto labels = dir.file("lbl", label_header(n) + "\x01\x02");
  const auto raw = dir.file("huge-img", image_header(n, 28, 28) + std::string(100, '\0'));
  const auto gz = dir.file("huge-img.gz", gzip_stored(image_header(n, 28, 28) + std::string(100, '\0')));

  largest_allocation = 0;
  expect_mentions(input_error([&] { read_idx(raw, labels); }),
                  {"huge-img", "truncated data", "expected 1683627179248 bytes", "got 100"});
  expect_mentions(input_error([&] { read_idx(gz, labels); }),
                  {"huge-img.gz", "absurd dimensions", "1683627179248 bytes", "gzip"});
  // The labels file lies too, checked on its own.
  const auto images = dir.file("img", idx_images(2, 3, kPixels));
  expect_mentions(input_error([&] { read_idx(images, labels); }),
                  {"lbl", "truncated data", "expected 2147483647 bytes", "got 2"});
  EXPECT_LT(largest_allocation.load(), std::size_t{1} << 16);
}

// A raw file as large as its header says (sparse: it takes no disk) whose pixels as floats pass the memory available
// is refused before anything is allocated, with the bytes named (before: std::bad_alloc, naming no file). Read in a
// child that may take 512 MB more.
TEST(ReadIdxErrors, CountsPastTheMemoryAvailableAreRefusedFirst) {
  ScratchDir dir;
  const std::uint32_t n = 1000000;  // 784 MB of pixels, 3.1 GB as floats
  const fs::path images = dir.file("img", image_header(n, 28, 28));
  const fs::path labels = dir.file("lbl", label_header(n));
  fs::resize_file(images, 16 + std::uint64_t{n} * 28 * 28);
  fs::resize_file(labels, 8 + std::uint64_t{n});
  const std::string message =
      asgd::testing::message_in_limited_child(std::uint64_t{512} << 20, [&] { read_idx(images, labels); });
  EXPECT_EQ(message.rfind(images.string() + ": 1000000 images of 28x28 as floats (4 bytes a pixel) and their labels "
                                            "needs 3.1 GB (3137000000 bytes), more than the ",
                          0),
            0u)
      << message;
}

TEST(ReadIdxErrors, GzipHeaderThatLiesWithinTheRatioBoundAllocatesLittle) {
  ScratchDir dir;
  // 1300 images of 28x28 (1,019,200 bytes) is within what a ~1 KB gzip file
  // could expand to, so only reading finds out; memory must follow what was
  // read (and the fixed-size read buffer), not the header.
  const std::uint32_t n = 1300;
  const auto images = dir.file("liar.gz", gzip_stored(image_header(n, 28, 28) + std::string(1000, '\x07')));
  std::vector<std::uint8_t> labels(n, 1);
  const auto label_file = dir.file("lbl", idx_labels(labels));
  largest_allocation = 0;
  expect_mentions(input_error([&] { read_idx(images, label_file); }),
                  {"liar.gz", "truncated data", "expected 1019200 bytes", "got 1000"});
  EXPECT_LT(largest_allocation.load(), std::size_t{1019200} / 3);
}

TEST(ReadIdxErrors, LabelOutOfRange) {
  ScratchDir dir;
  const auto images = dir.file("img", idx_images(2, 3, kPixels));
  const auto labels = dir.file("bad-lbl", idx_labels({0, 10, 3}));
  expect_mentions(input_error([&] { read_idx(images, labels); }),
                  {"bad-lbl", "label 10", "image 1", "out of range", "0..9"});
  // Past the limit, a bad label is not read.
  EXPECT_EQ(read_idx(images, labels, 1).size(), 1u);
}

TEST(ReadIdxErrors, MissingOrUnreadableFile) {
  ScratchDir dir;
  const auto images = dir.file("img", idx_images(2, 3, kPixels));
  const auto labels = dir.file("lbl", idx_labels(kLabels));
  expect_mentions(input_error([&] { read_idx(dir / "nope-img", labels); }), {"nope-img", "no such file"});
  expect_mentions(input_error([&] { read_idx(images, dir / "nope-lbl"); }), {"nope-lbl", "no such file"});
  expect_mentions(input_error([&] { read_idx(dir.path(), labels); }), {dir.path().string(), "is a directory"});
}

// ---- read_mnist_dir ------------------------------------------------------------------------------------------------

struct MnistFiles {
  std::vector<std::uint8_t> train_pixels = ramp(5 * 4 * 4), test_pixels = ramp(2 * 4 * 4);
  std::vector<std::uint8_t> train_labels = {1, 2, 3, 4, 5}, test_labels = {7, 8};

  // Writes the four files, gzip where `gz` says (train images, train labels,
  // test images, test labels).
  void write(const ScratchDir& dir, std::array<bool, 4> gz) const {
    const std::string contents[4] = {idx_images(4, 4, train_pixels), idx_labels(train_labels),
                                     idx_images(4, 4, test_pixels), idx_labels(test_labels)};
    const char* names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                            "t10k-labels-idx1-ubyte"};
    for (int k = 0; k < 4; ++k) {
      if (gz[k]) {
        dir.file(std::string(names[k]) + ".gz", gzip_stored(contents[k]));
      } else {
        dir.file(names[k], contents[k]);
      }
    }
  }

  void check(const TrainTest& data) const {
    EXPECT_EQ(data.train.size(), 5u);
    EXPECT_EQ(data.test.size(), 2u);
    EXPECT_EQ(data.train.rows, 4u);
    EXPECT_EQ(data.test.cols, 4u);
    EXPECT_EQ(data.train.labels, train_labels);
    EXPECT_EQ(data.test.labels, test_labels);
    expect_pixels(data.train, train_pixels);
    expect_pixels(data.test, test_pixels);
  }
};

TEST(ReadMnistDir, Gzip) {
  ScratchDir dir;
  MnistFiles files;
  files.write(dir, {true, true, true, true});
  files.check(read_mnist_dir(dir.path()));
}

TEST(ReadMnistDir, Raw) {
  ScratchDir dir;
  MnistFiles files;
  files.write(dir, {false, false, false, false});
  files.check(read_mnist_dir(dir.path()));
}

TEST(ReadMnistDir, Mixed) {
  ScratchDir dir;
  MnistFiles files;
  files.write(dir, {true, false, false, true});
  files.check(read_mnist_dir(dir.path()));
}

TEST(ReadMnistDir, MissingFilesAreListed) {
  ScratchDir dir;
  MnistFiles files;
  files.write(dir, {true, true, true, true});
  fs::remove(dir / "train-labels-idx1-ubyte.gz");
  fs::remove(dir / "t10k-images-idx3-ubyte.gz");
  const auto message = input_error([&] { read_mnist_dir(dir.path()); });
  expect_mentions(message, {dir.path().string(), "missing", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte"});
  EXPECT_EQ(message.find("train-images"), std::string::npos) << message;
  EXPECT_EQ(message.find("t10k-labels"), std::string::npos) << message;

  expect_mentions(input_error([&] { read_mnist_dir(dir / "no-such-dir"); }),
                  {"no-such-dir", "not a directory", "train-images-idx3-ubyte"});
}

TEST(ReadMnistDir, TestImagesOfAnotherShape) {
  ScratchDir dir;
  MnistFiles files;
  files.write(dir, {false, false, false, false});
  dir.file("t10k-images-idx3-ubyte", idx_images(8, 4, ramp(64)));
  expect_mentions(input_error([&] { read_mnist_dir(dir.path()); }), {"4x4", "8x4", "t10k-images-idx3-ubyte"});
}

// ---- helpers -------------------------------------------------------------------------------------------------------

TEST(Normalize, ShiftsAndScales) {
  Dataset data;
  data.rows = 1;
  data.cols = 3;
  data.pixels = {0.0f, 0.5f, 1.0f};
  data.labels = {0};
  normalize(data, 0.5f, 0.25f);
  EXPECT_FLOAT_EQ(data.pixels[0], -2.0f);
  EXPECT_FLOAT_EQ(data.pixels[1], 0.0f);
  EXPECT_FLOAT_EQ(data.pixels[2], 2.0f);

  data.pixels = {0.1307f};
  normalize(data);
  EXPECT_NEAR(data.pixels[0], 0.0f, 1e-6f);
  expect_mentions(input_error([&] { normalize(data, 0.0f, 0.0f); }), {"stddev"});
}

TEST(ShuffledIndices, IsADeterministicPermutation) {
  for (std::size_t n : {0u, 1u, 2u, 1000u}) {
    auto order = shuffled_indices(n, 42);
    ASSERT_EQ(order.size(), n);
    EXPECT_EQ(order, shuffled_indices(n, 42));
    std::sort(order.begin(), order.end());
    std::vector<std::size_t> identity(n);
    std::iota(identity.begin(), identity.end(), std::size_t{0});
    EXPECT_EQ(order, identity);
  }
  const auto a = shuffled_indices(1000, 1), b = shuffled_indices(1000, 2);
  EXPECT_NE(a, b);
  std::vector<std::size_t> identity(1000);
  std::iota(identity.begin(), identity.end(), std::size_t{0});
  EXPECT_NE(a, identity);
  // Every position gets every value with about equal odds: over 4000 shuffles
  // of 4, each of the 16 (position, value) pairs ~1000 times.
  std::size_t counts[4][4] = {};
  for (std::uint64_t seed = 0; seed < 4000; ++seed) {
    const auto order = shuffled_indices(4, seed);
    for (std::size_t p = 0; p < 4; ++p) ++counts[p][order[p]];
  }
  for (auto& row : counts) {
    for (std::size_t c : row) {
      EXPECT_GT(c, 850u);
      EXPECT_LT(c, 1150u);
    }
  }
}

TEST(Subset, PicksImagesInOrder) {
  Dataset data;
  data.rows = 2;
  data.cols = 3;
  for (std::uint8_t v : kPixels) data.pixels.push_back(static_cast<float>(v));
  data.labels = kLabels;
  const std::vector<std::size_t> pick = {2, 0, 2};
  const Dataset sub = data.subset(pick);
  EXPECT_EQ(sub.rows, 2u);
  EXPECT_EQ(sub.cols, 3u);
  EXPECT_EQ(sub.classes, 10u);
  EXPECT_EQ(sub.labels, (std::vector<std::uint8_t>{5, 0, 5}));
  ASSERT_EQ(sub.pixels.size(), 18u);
  for (std::size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(sub.image(0)[k], data.image(2)[k]);
    EXPECT_EQ(sub.image(1)[k], data.image(0)[k]);
    EXPECT_EQ(sub.image(2)[k], data.image(2)[k]);
  }
  EXPECT_EQ(data.subset({}).size(), 0u);
  const std::vector<std::size_t> bad = {0, 3};
  EXPECT_THROW(data.subset(bad), std::out_of_range);
}

}  // namespace
}  // namespace asgd::dense
