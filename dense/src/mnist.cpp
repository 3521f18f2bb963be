#include "asgd/dense/mnist.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "asgd/engine/available_memory.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/fingerprint.hpp"
#include "asgd/engine/random.hpp"

namespace asgd::dense {
namespace {

namespace fs = std::filesystem;

constexpr std::uint32_t kImageMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr std::uint32_t kLabelMagic = 0x00000801;  // unsigned byte, 1 dimension
constexpr std::size_t kImageHeader = 16;           // magic, n, rows, cols
constexpr std::size_t kLabelHeader = 8;            // magic, n
constexpr std::uint32_t kMaxSide = 4096;
constexpr std::uint32_t kMaxCount = 0x7fffffff;  // IDX dimensions are signed int32
constexpr std::size_t kClasses = 10;
// Deflate cannot expand by more than about 1032:1 (258-byte matches coded in
// about 2 bits), so a gzip file of S bytes decompresses to at most ~1032 * S:
// a header promising more is lying, whatever the stream holds.
constexpr std::uint64_t kMaxDeflateRatio = 1032;
// Reading is chunked so that the bytes never sit in memory twice (pixels go
// straight to float) and so that a gzip stream that ends early costs no more
// memory than what it really held.
constexpr std::size_t kChunk = std::size_t{256} << 10;

struct FileCloser {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};
struct GzCloser {
  void operator()(gzFile_s* f) const noexcept { gzclose(f); }
};

std::string errno_text(int err) { return std::generic_category().message(err); }

// One IDX file, raw or gzip (told by its first two bytes), read front to back.
class Source {
 public:
  explicit Source(const fs::path& path) : name_(path.string()) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) throw InputError(fmt::format("{}: is a directory, expected an IDX file", name_));
    raw_.reset(std::fopen(name_.c_str(), "rb"));
    if (!raw_) {
      const int err = errno;
      if (err == ENOENT) throw InputError(fmt::format("{}: no such file", name_));
      throw InputError(fmt::format("{}: cannot open for reading: {}", name_, errno_text(err)));
    }
    const auto size = fs::file_size(path, ec);
    if (!ec && fs::is_regular_file(path, ec)) file_size_ = size;
    unsigned char start[2] = {0, 0};
    const std::size_t got = std::fread(start, 1, 2, raw_.get());
    gzip_ = got == 2 && start[0] == 0x1f && start[1] == 0x8b;
    if (gzip_) {
      raw_.reset();
      gz_.reset(gzopen(name_.c_str(), "rb"));
      if (!gz_) throw InputError(fmt::format("{}: cannot open for reading: {}", name_, errno_text(errno)));
      // A larger input buffer than zlib's 8 KiB default: fewer read calls.
      gzbuffer(gz_.get(), 256 * 1024);
    } else if (std::fseek(raw_.get(), 0, SEEK_SET) != 0) {
      // Not seekable (a pipe): the two bytes cannot be put back.
      throw InputError(fmt::format("{}: cannot rewind: {}", name_, errno_text(errno)));
    }
  }

  const std::string& name() const noexcept { return name_; }
  bool gzip() const noexcept { return gzip_; }
  std::optional<std::uint64_t> file_size() const noexcept { return file_size_; }

  // Reads up to `len` bytes; fewer only at the end of the data.
  std::size_t read(unsigned char* dst, std::size_t len) {
    if (!gzip_) {
      const std::size_t got = std::fread(dst, 1, len, raw_.get());
      if (got < len && std::ferror(raw_.get())) {
        throw RuntimeError(fmt::format("{}: read failed: {}", name_, errno_text(errno)));
      }
      return got;
    }
    std::size_t total = 0;
    while (total < len && !ended_) {
      const auto ask = static_cast<unsigned>(std::min<std::size_t>(len - total, INT_MAX / 2));
      const int got = gzread(gz_.get(), dst + total, ask);
      if (got > 0) total += static_cast<std::size_t>(got);
      if (got < 0 || static_cast<unsigned>(got) < ask) {
        int err = Z_OK;
        const char* what = gzerror(gz_.get(), &err);
        // Z_BUF_ERROR is zlib's "unexpected end of file": a cut-off stream,
        // reported by the caller as truncated data with what it did hold.
        if (err == Z_BUF_ERROR) {
          cut_off_ = true;
        } else if (err != Z_OK) {
          throw InputError(fmt::format("{}: corrupt gzip data: {}", name_, what ? what : "unknown zlib error"));
        }
        ended_ = true;
      }
    }
    return total;
  }

  // " (the gzip stream is cut off)" when that is why data ran short.
  std::string_view why_short() const noexcept { return cut_off_ ? " (the gzip stream is cut off)" : ""; }
  bool cut_off() const noexcept { return cut_off_; }

 private:
  std::string name_;
  std::unique_ptr<std::FILE, FileCloser> raw_;
  std::unique_ptr<gzFile_s, GzCloser> gz_;
  std::optional<std::uint64_t> file_size_;
  bool gzip_ = false;
  bool ended_ = false;
  bool cut_off_ = false;
};

std::uint32_t big_endian(const unsigned char* p) noexcept {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

struct Header {
  std::uint32_t count = 0, rows = 1, cols = 1;
  std::uint64_t data_bytes = 0;  // count * rows * cols, as the header claims
};

enum class Kind { images, labels };

// Reads and checks the header: magic, dimensions, and that the data it
// announces can be in this file at all (before anything is allocated for it).
Header read_header(Source& src, Kind kind) {
  const bool images = kind == Kind::images;
  const std::size_t header_size = images ? kImageHeader : kLabelHeader;
  const std::uint32_t magic = images ? kImageMagic : kLabelMagic;
  std::array<unsigned char, kImageHeader> bytes{};
  std::size_t got = src.read(bytes.data(), 4);
  auto truncated_header = [&] {
    throw InputError(fmt::format("{}: truncated header: expected {} bytes, got {}{}{}", src.name(), header_size, got,
                                 got == 0 ? " (empty file)" : "", src.why_short()));
  };
  if (got < 4) truncated_header();
  const std::uint32_t found = big_endian(bytes.data());
  if (found != magic) {
    // The commonest mistake is the two files swapped: say so.
    const std::uint32_t other = images ? kLabelMagic : kImageMagic;
    const std::string hint = found == other ? (images ? " (this is an IDX label file)" : " (this is an IDX image file)")
                                            : "";
    throw InputError(fmt::format("{}: wrong magic for an IDX {} file: expected 0x{:08x}, got 0x{:08x}{}", src.name(),
                                 images ? "image" : "label", magic, found, hint));
  }
  got += src.read(bytes.data() + 4, header_size - 4);
  if (got < header_size) truncated_header();

  Header h;
  h.count = big_endian(bytes.data() + 4);
  if (images) {
    h.rows = big_endian(bytes.data() + 8);
    h.cols = big_endian(bytes.data() + 12);
  }
  const std::string what = images ? fmt::format("{} images of {}x{}", h.count, h.rows, h.cols)
                                  : fmt::format("{} labels", h.count);
  if (h.count > kMaxCount) {
    throw InputError(
        fmt::format("{}: absurd dimensions: {} (a count above 2^31-1 is negative in IDX)", src.name(), what));
  }
  if (images && (h.rows == 0 || h.cols == 0 || h.rows > kMaxSide || h.cols > kMaxSide)) {
    throw InputError(
        fmt::format("{}: absurd dimensions: {} (rows and cols must be 1..{})", src.name(), what, kMaxSide));
  }
  // At most 2^31 * 2^12 * 2^12 = 2^55: no overflow in 64 bits.
  h.data_bytes = std::uint64_t{h.count} * h.rows * h.cols;

  if (const auto size = src.file_size()) {
    if (!src.gzip()) {
      const std::uint64_t held = *size > header_size ? *size - header_size : 0;
      if (h.data_bytes > held) {
        throw InputError(fmt::format("{}: truncated data: expected {} bytes after the {}-byte header ({}), got {}",
                                     src.name(), h.data_bytes, header_size, what, held));
      }
      if (h.data_bytes < held) {
        throw InputError(fmt::format("{}: {} bytes after the {}-byte header, but the header says {} ({} bytes): "
                                     "its count is wrong, or something was appended",
                                     src.name(), held, header_size, what, h.data_bytes));
      }
    } else if (h.data_bytes > *size * kMaxDeflateRatio + 1024) {
      throw InputError(fmt::format(
          "{}: absurd dimensions: {} need {} bytes, but a gzip file of {} bytes decompresses to at most about {}",
          src.name(), what, h.data_bytes, *size, *size * kMaxDeflateRatio));
    }
  }
  if (h.data_bytes > std::numeric_limits<std::size_t>::max() / sizeof(float)) {
    throw InputError(fmt::format("{}: absurd dimensions: {} do not fit in memory", src.name(), what));
  }
  return h;
}

// Reads exactly `bytes` data bytes in chunks, handing each to `take`; throws
// "truncated data" if the file ends first. With `whole`, the file must end
// there too (a raw file's size was checked with its header; this finds more
// data in a gzip one); without, bytes after them are not read: a limit needs
// only the front of the file.
void read_data(Source& src, std::size_t header_size, const std::string& what, std::uint64_t bytes, bool whole,
               auto&& take) {
  std::vector<unsigned char> chunk(static_cast<std::size_t>(std::min<std::uint64_t>(bytes, kChunk)));
  std::uint64_t done = 0;
  while (done < bytes) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(bytes - done, chunk.size()));
    const std::size_t got = src.read(chunk.data(), want);
    take(std::span<const unsigned char>(chunk.data(), got));
    done += got;
    if (got < want) {
      throw InputError(fmt::format("{}: truncated data: expected {} bytes after the {}-byte header ({}), got {}{}",
                                   src.name(), bytes, header_size, what, done, src.why_short()));
    }
  }
  unsigned char more = 0;
  if (whole && (src.gzip() || !src.file_size()) && src.read(&more, 1) != 0) {
    throw InputError(fmt::format("{}: data after the {} bytes the header says ({}): its count is wrong, or "
                                 "something was appended",
                                 src.name(), bytes, what));
  }
  // All the data came, but the stream's end did not: a gzip file cut inside its 8-byte trailer (CRC and length),
  // so nothing checked what was read.
  if (whole && src.cut_off()) {
    throw InputError(fmt::format("{}: truncated: the gzip stream is cut off after its {} bytes of data ({}), before "
                                 "its CRC and length",
                                 src.name(), bytes, what));
  }
}

// What to reserve for `bytes` of data: all of it when the file is raw (its
// size was checked), a guess bounded by the file otherwise, so that a gzip
// header that lies cannot make a huge allocation; vectors grow from there.
std::size_t reserve_for(const Source& src, std::uint64_t bytes) {
  if (!src.gzip() && src.file_size()) return static_cast<std::size_t>(bytes);
  const std::uint64_t guess = src.file_size() ? *src.file_size() * 8 : kChunk;
  return static_cast<std::size_t>(std::min(bytes, guess));
}

}  // namespace

Dataset Dataset::subset(std::span<const std::size_t> indices) const {
  Dataset out;
  out.rows = rows;
  out.cols = cols;
  out.classes = classes;
  const std::size_t stride = image_size();
  out.pixels.resize(indices.size() * stride);
  out.labels.resize(indices.size());
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const std::size_t i = indices[k];
    if (i >= size()) {
      throw std::out_of_range(fmt::format("Dataset::subset: index {} out of range for {} images", i, size()));
    }
    std::copy_n(pixels.begin() + static_cast<std::ptrdiff_t>(i * stride), stride,
                out.pixels.begin() + static_cast<std::ptrdiff_t>(k * stride));
    out.labels[k] = labels[i];
  }
  return out;
}

std::uint64_t Dataset::checksum() const noexcept {
  // The float bits folded word by word: 60,000 images in a few tens of milliseconds.
  std::uint64_t h = fold(fold(fold(kFoldStart, rows), cols), size());
  for (const float p : pixels) h = fold(h, std::bit_cast<std::uint32_t>(p));
  for (const std::uint8_t l : labels) h = fold(h, l);
  return h;
}

Dataset read_idx(const fs::path& images, const fs::path& labels, std::size_t limit) {
  // Both headers first: a wrong or mismatched file is reported before any
  // data is read.
  Source image_src(images);
  const Header ih = read_header(image_src, Kind::images);
  Source label_src(labels);
  const Header lh = read_header(label_src, Kind::labels);
  if (ih.count != lh.count) {
    throw InputError(fmt::format("{}: image/label count mismatch: {} labels, but {} holds {} images", label_src.name(),
                                 lh.count, image_src.name(), ih.count));
  }

  Dataset data;
  data.rows = ih.rows;
  data.cols = ih.cols;
  data.classes = kClasses;
  const std::size_t kept = std::min<std::size_t>(ih.count, limit);
  const std::string label_what = fmt::format("{} labels", kept);
  // The header's counts size what is read (checked against the file above where it has a size): against the memory
  // there is too, before any of it is allocated (a gzip file or pipe can claim far more than the memory holds).
  require_memory(std::uint64_t{kept} * ih.rows * ih.cols * sizeof(float) + kept,
                 fmt::format("{}: {} images of {}x{} as floats (4 bytes a pixel) and their labels", image_src.name(),
                             kept, ih.rows, ih.cols));

  data.labels.reserve(reserve_for(label_src, kept));
  const bool whole = kept == ih.count;
  read_data(label_src, kLabelHeader, label_what, kept, whole, [&](std::span<const unsigned char> bytes) {
    data.labels.insert(data.labels.end(), bytes.begin(), bytes.end());
  });
  for (std::size_t i = 0; i < data.labels.size(); ++i) {
    if (data.labels[i] >= kClasses) {
      throw InputError(fmt::format("{}: label {} of image {} is out of range (expected 0..{})", label_src.name(),
                                   data.labels[i], i, kClasses - 1));
    }
  }

  // A table rather than a division per pixel; v / 255 exactly as a float.
  std::array<float, 256> scale{};
  for (std::size_t v = 0; v < scale.size(); ++v) scale[v] = static_cast<float>(v) / 255.0f;
  const std::uint64_t pixel_bytes = std::uint64_t{kept} * ih.rows * ih.cols;
  const std::string image_what = fmt::format("{} images of {}x{}", kept, ih.rows, ih.cols);
  data.pixels.reserve(reserve_for(image_src, pixel_bytes));
  read_data(image_src, kImageHeader, image_what, pixel_bytes, whole, [&](std::span<const unsigned char> bytes) {
    const std::size_t old = data.pixels.size();
    data.pixels.resize(old + bytes.size());
    float* out = data.pixels.data() + old;
    for (std::size_t k = 0; k < bytes.size(); ++k) out[k] = scale[bytes[k]];
  });
  return data;
}

std::array<fs::path, 4> mnist_files(const fs::path& dir, bool test_only) {
  static constexpr std::array<std::string_view, 4> kNames = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                                             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
  std::error_code ec;
  const std::size_t first = test_only ? 2 : 0;
  if (!fs::is_directory(dir, ec)) {
    std::string names;
    for (std::size_t k = first; k < kNames.size(); ++k) names += fmt::format("{}{}[.gz]", k > first ? ", " : "", kNames[k]);
    throw InputError(fmt::format("{}: not a directory; expected one holding {}", dir.string(), names));
  }
  std::array<fs::path, 4> found;
  std::string missing;
  for (std::size_t k = first; k < kNames.size(); ++k) {
    // The raw file first when both exist (`gunzip -k` leaves both): it reads faster.
    const fs::path raw = dir / kNames[k];
    const fs::path gz = dir / (std::string(kNames[k]) + ".gz");
    if (fs::is_regular_file(raw, ec)) {
      found[k] = raw;
    } else if (fs::is_regular_file(gz, ec)) {
      found[k] = gz;
    } else {
      missing += fmt::format("{}{}[.gz]", missing.empty() ? "" : ", ", kNames[k]);
    }
  }
  if (!missing.empty()) throw InputError(fmt::format("{}: missing MNIST files: {}", dir.string(), missing));
  return found;
}

Dataset read_mnist_test(const fs::path& dir) {
  const auto found = mnist_files(dir, true);
  return read_idx(found[2], found[3]);
}

namespace {
// An empty set would report its accuracy as the "no test set" marker (-100 %), or train nothing.
void expect_images(const Dataset& set, const fs::path& dir, const char* name) {
  if (set.size() == 0) throw InputError(fmt::format("{}: the {} files hold no images", dir.string(), name));
}
}  // namespace

TrainTest load_mnist(const fs::path& dir, std::size_t limit) {
  TrainTest tt = read_mnist_dir(dir);
  expect_images(tt.train, dir, "train");
  expect_images(tt.test, dir, "t10k");
  if (limit > 0 && limit < tt.train.size()) {
    std::vector<std::size_t> first(limit);
    for (std::size_t i = 0; i < limit; ++i) first[i] = i;
    tt.train = tt.train.subset(first);
  }
  normalize(tt.train);
  normalize(tt.test);
  return tt;
}

Dataset load_mnist_test(const fs::path& dir) {
  Dataset test = read_mnist_test(dir);
  expect_images(test, dir, "t10k");
  normalize(test);
  return test;
}

TrainTest read_mnist_dir(const fs::path& dir) {
  const auto found = mnist_files(dir);
  TrainTest out{read_idx(found[0], found[1]), read_idx(found[2], found[3])};
  // A model is built for the training images' shape; test images of another
  // shape would be read out of bounds.
  if (out.train.rows != out.test.rows || out.train.cols != out.test.cols) {
    throw InputError(fmt::format("{}: training images are {}x{} but test images ({}) are {}x{}", dir.string(),
                                 out.train.rows, out.train.cols, found[2].string(), out.test.rows, out.test.cols));
  }
  return out;
}

void normalize(Dataset& data, float mean, float stddev) {
  if (!std::isfinite(mean) || !std::isfinite(stddev) || !(stddev > 0.0f)) {
    throw InputError(fmt::format("normalize: mean must be finite and stddev positive and finite, got mean {} stddev {}",
                                 mean, stddev));
  }
  const float inv = 1.0f / stddev;
  for (float& x : data.pixels) x = (x - mean) * inv;
}

std::vector<std::size_t> shuffled_indices(std::size_t n, std::uint64_t seed) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 rng(seed);
  shuffle_in_place(std::span<std::size_t>(order), rng);
  return order;
}

}  // namespace asgd::dense
