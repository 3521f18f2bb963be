// Layout: named tensors (name, shape, offset) over one flat float buffer.
// Every tensor starts on a 64-byte boundary; a tensor may pad each row to a
// whole cache line so that two workers on neighbouring rows never share one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <functional>
#include <unordered_map>
#include <vector>

namespace asgd {

enum class RowPadding { none, cache_line };

struct Tensor {
  std::string name;
  std::vector<std::size_t> shape;  // rows = shape[0], cols = product of the rest
  std::size_t offset = 0;          // in floats, from the start of the buffer
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t row_stride = 0;      // floats between row starts (>= cols)

  std::size_t elements() const noexcept { return rows * cols; }
  std::size_t span() const noexcept { return rows * row_stride; }  // with padding
  std::size_t at(std::size_t row, std::size_t col = 0) const noexcept {
    return offset + row * row_stride + col;
  }
};

class Layout {
 public:
  Layout() = default;

  // Appends a tensor; throws InputError for a duplicate or empty name or a
  // zero-sized shape. A 1-D shape is one row.
  Layout& add(std::string name, std::vector<std::size_t> shape,
              RowPadding padding = RowPadding::none);

  const std::vector<Tensor>& tensors() const noexcept { return tensors_; }
  // Throws InputError naming the tensors there are.
  const Tensor& operator[](std::string_view name) const;
  bool contains(std::string_view name) const noexcept;

  // What the rows stand for, beyond their shape (one line of text, set by
  // the model; say a fingerprint of what its rows are): two layouts with other
  // tags hold other parameters, so a shared segment or a model file of one
  // is refused for the other. Empty by default. Throws InputError for a
  // line break.
  Layout& set_tag(std::string tag);
  const std::string& tag() const noexcept { return tag_; }

  // Floats in the buffer, padding included (a multiple of 16).
  std::size_t size() const noexcept { return size_; }
  // Stable over runs and machines: names, shapes, paddings and offsets, and
  // the tag when there is one (an untagged layout hashes as before tags).
  std::uint64_t hash() const noexcept;
  // One line per tensor: "name [r x c] @offset stride s"; then "tag: ...".
  std::string describe() const;

  // A text form that round-trips through parse() (checkpoints keep it).
  std::string serialize() const;
  static Layout parse(std::string_view text);  // throws InputError

  friend bool operator==(const Layout& a, const Layout& b) noexcept { return a.hash() == b.hash(); }

 private:
  // A name's place in tensors_: contains() and operator[] in constant time (a linear scan made parse()
  // quadratic, and a forged checkpoint of 2 MB took over a minute to refuse).
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const noexcept { return std::hash<std::string_view>{}(name); }
  };
  std::vector<Tensor> tensors_;
  std::vector<RowPadding> paddings_;
  std::unordered_map<std::string, std::size_t, NameHash, std::equal_to<>> index_;
  std::size_t size_ = 0;
  std::string tag_;
};

}  // namespace asgd
