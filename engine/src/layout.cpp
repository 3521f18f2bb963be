#include "asgd/engine/layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>

#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/fingerprint.hpp"

namespace asgd {
namespace {

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

Layout& Layout::add(std::string name, std::vector<std::size_t> shape, RowPadding padding) {
  // (No whitespace or control character at all: parse() splits the text form at any whitespace.)
  const bool odd = std::any_of(name.begin(), name.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return std::isspace(u) || std::iscntrl(u) || c == '[' || c == ']';
  });
  if (name.empty() || odd || name.front() == '#') {
    throw InputError(fmt::format(
        "layout: tensor name '{}' must be non-empty without spaces, control characters or brackets, not starting "
        "with #",
        name));
  }
  if (contains(name)) throw InputError(fmt::format("layout: tensor '{}' added twice", name));
  if (shape.empty()) throw InputError(fmt::format("layout: tensor '{}' has no shape", name));
  std::size_t cols = 1;
  for (std::size_t k = 1; k < shape.size(); ++k) {
    if (shape[k] != 0 && cols > (std::size_t{1} << 40) / shape[k]) {
      throw InputError(fmt::format("layout: tensor '{}' is too large", name));
    }
    cols *= shape[k];
  }
  if (shape[0] == 0 || cols == 0) throw InputError(fmt::format("layout: tensor '{}' has a zero dimension", name));
  // Every count below 2^40 floats, before any is rounded up (a forged 2^64 - 1 wrapped to 0 and divided by it).
  if (shape[0] > (std::size_t{1} << 40)) throw InputError(fmt::format("layout: tensor '{}' is too large", name));
  if (shape.size() == 1) cols = shape[0];
  Tensor t;
  t.name = std::move(name);
  t.rows = shape.size() == 1 ? 1 : shape[0];
  t.cols = cols;
  t.row_stride = padding == RowPadding::cache_line ? round_up(cols, kFloatsPerLine) : cols;
  if (t.rows > (std::size_t{1} << 40) / t.row_stride) {
    throw InputError(fmt::format("layout: tensor '{}' is too large", t.name));
  }
  t.offset = size_;
  t.shape = std::move(shape);
  size_ = round_up(t.offset + t.span(), kFloatsPerLine);
  index_.emplace(t.name, tensors_.size());
  tensors_.push_back(std::move(t));
  paddings_.push_back(padding);
  return *this;
}

const Tensor& Layout::operator[](std::string_view name) const {
  if (const auto at = index_.find(name); at != index_.end()) return tensors_[at->second];
  std::string names;
  for (const auto& t : tensors_) {
    if (!names.empty()) names += ", ";
    names += t.name;
  }
  throw InputError(fmt::format("layout: no tensor '{}' (have: {})", name, names));
}

Layout& Layout::set_tag(std::string tag) {
  if (tag.find_first_of("\r\n") != std::string::npos) throw InputError("layout: a tag is one line of text");
  tag_ = std::move(tag);
  return *this;
}

bool Layout::contains(std::string_view name) const noexcept { return index_.find(name) != index_.end(); }

std::uint64_t Layout::hash() const noexcept {
  std::uint64_t h = kFnv1aStart;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    h = fnv1a(h, t.name.data(), t.name.size());
    h = fnv1a_u64(h, t.shape.size());
    for (auto d : t.shape) h = fnv1a_u64(h, d);
    h = fnv1a_u64(h, t.offset);
    h = fnv1a_u64(h, t.row_stride);
    h = fnv1a_u64(h, static_cast<std::uint64_t>(paddings_[i]));
  }
  h = fnv1a_u64(h, size_);
  if (!tag_.empty()) h = fnv1a(fnv1a(h, "tag"), tag_);
  return h;
}

std::string Layout::describe() const {
  std::string out;
  for (const auto& t : tensors_) {
    std::string dims;
    for (auto d : t.shape) {
      if (!dims.empty()) dims += " x ";
      dims += std::to_string(d);
    }
    out += fmt::format("{} [{}] @{} stride {}\n", t.name, dims, t.offset, t.row_stride);
  }
  if (!tag_.empty()) out += fmt::format("tag: {}\n", tag_);
  return out;
}

std::string Layout::serialize() const {
  std::string out = tag_.empty() ? std::string() : "#tag " + tag_ + "\n";
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    out += t.name;
    out += paddings_[i] == RowPadding::cache_line ? " padded" : " dense";
    for (auto d : t.shape) {
      out += ' ';
      out += std::to_string(d);
    }
    out += "\n";
  }
  return out;
}

Layout Layout::parse(std::string_view text) {
  Layout layout;
  std::istringstream in{std::string(text)};
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    if (line.starts_with("#tag ")) {
      layout.set_tag(line.substr(5));
      continue;
    }
    std::istringstream fields(line);
    std::string name, pad;
    fields >> name >> pad;
    if (pad != "padded" && pad != "dense") {
      throw InputError(fmt::format("layout text line {}: expected 'NAME padded|dense DIMS...'", line_no));
    }
    std::vector<std::size_t> shape;
    std::string dim;
    while (fields >> dim) {
      std::size_t d = 0;
      auto [p, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), d);
      if (ec != std::errc() || p != dim.data() + dim.size()) {
        throw InputError(fmt::format("layout text line {}: '{}' is not a dimension", line_no, dim));
      }
      shape.push_back(d);
    }
    layout.add(name, shape, pad == "padded" ? RowPadding::cache_line : RowPadding::none);
  }
  return layout;
}

}  // namespace asgd
