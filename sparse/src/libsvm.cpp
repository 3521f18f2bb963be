#include "asgd/sparse/libsvm.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/fingerprint.hpp"
#include "input.hpp"
#include "text_util.hpp"

namespace asgd::sparse {
namespace {

bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\r'; }

// A token in an error message; an empty one reads "nothing".
std::string quote(std::string_view token) { return token.empty() ? "nothing" : text::quote_token(token); }

// from_chars does not take a leading '+'; libsvm files often have one.
std::string_view skip_plus(std::string_view s) noexcept {
  if (s.size() >= 2 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  return s;
}

enum class ValueStatus { ok, not_a_number, not_finite };

// A float value; magnitudes below the float range become 0 or a denormal as
// a cast would make them (from_chars calls that out of range), magnitudes
// above it, inf and nan are not_finite.
ValueStatus parse_value(std::string_view text, float& value) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, value);
  if (end != last || (ec != std::errc() && ec != std::errc::result_out_of_range)) return ValueStatus::not_a_number;
  if (ec == std::errc()) return std::isfinite(value) ? ValueStatus::ok : ValueStatus::not_finite;
  // Out of float range: too small or too large? Ask double, then (beyond
  // double's range too, so rare that a copy does not matter) strtod, which
  // returns a value of magnitude <= 1 for an underflow.
  double wide = 0.0;
  if (std::from_chars(first, last, wide).ec != std::errc()) {
    const std::string copy(text);
    wide = std::strtod(copy.c_str(), nullptr);
  }
  if (!(std::abs(wide) <= 1.0)) return ValueStatus::not_finite;
  value = static_cast<float>(wide);
  return ValueStatus::ok;
}

// One example's features while its line is parsed; `column` is kept so that
// a duplicate found after sorting can still be reported where it is.
struct Entry {
  std::uint32_t id;
  float value;
  std::uint32_t column;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view source, UnsortedIds unsorted, const FeatureLimit& limit)
      : text_(text),
        source_(source),
        unsorted_(unsorted),
        limit_(limit),
        max_features_(std::min(limit.features, std::uint64_t{kMaxFeatureId} + 1)) {}

  SparseDataset run() {
    // Upper bounds (every ':' could be a feature, every '\n' a row) so the
    // arrays grow once; counting is far cheaper than parsing.
    const auto colons = static_cast<std::size_t>(std::count(text_.begin(), text_.end(), ':'));
    const auto newlines = static_cast<std::size_t>(std::count(text_.begin(), text_.end(), '\n'));
    data_.row_ptr.reserve(newlines + 2);
    data_.label.reserve(newlines + 1);
    data_.index.reserve(colons);
    data_.value.reserve(colons);
    data_.row_ptr.push_back(0);

    std::size_t pos = text_.starts_with(text::kUtf8Bom) ? text::kUtf8Bom.size() : 0;
    while (pos < text_.size()) {
      ++line_no_;
      std::size_t eol = text_.find('\n', pos);
      if (eol == std::string_view::npos) eol = text_.size();
      std::string_view line = text_.substr(pos, eol - pos);
      if (line.size() > kMaxLibsvmLineBytes) [[unlikely]]
        io::refuse_long_line(source_, line_no_, pos, line, kMaxLibsvmLineBytes, "a libsvm file");
      pos = eol + 1;
      if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
      parse_line(line);
    }
    std::uint32_t max_id = 0;
    bool any = false;
    for (const auto id : data_.index) {
      max_id = std::max(max_id, id);
      any = true;
    }
    data_.num_features = any ? max_id + 1 : 0;
    return std::move(data_);
  }

 private:
  [[noreturn]] void fail(std::size_t column, std::string_view what) const {
    throw InputError(fmt::format("{}:{}:{}: {}", source_, line_no_, column, what));
  }

  void parse_line(std::string_view line) {
    std::size_t p = 0;
    auto next_token = [&](std::size_t& column) -> std::string_view {
      while (p < line.size() && is_space(line[p])) ++p;
      const std::size_t start = p;
      while (p < line.size() && !is_space(line[p])) ++p;
      column = start + 1;
      return line.substr(start, p - start);
    };

    std::size_t column = 0;
    const std::string_view label_token = next_token(column);
    if (label_token.empty()) return;  // blank or comment-only line
    const float label = parse_label(label_token, column);

    entries_.clear();
    bool sorted = true;
    for (;;) {
      const std::string_view token = next_token(column);
      if (token.empty()) break;
      const Entry e = parse_feature(token, column);
      if (!entries_.empty() && sorted && e.id <= entries_.back().id) {
        if (e.id == entries_.back().id) duplicate(e, entries_.back());
        if (unsorted_ == UnsortedIds::reject) {
          fail(column, fmt::format("expected feature ids in increasing order, got {} after {} "
                                   "(unsorted ids are rejected here)",
                                   e.id, entries_.back().id));
        }
        sorted = false;
      }
      entries_.push_back(e);
    }
    if (!sorted) {
      std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
        return a.id != b.id ? a.id < b.id : a.column < b.column;
      });
      // Report the repeat that comes first on the line, as a reader would.
      const Entry* first_repeat = nullptr;
      const Entry* its_original = nullptr;
      for (std::size_t k = 1; k < entries_.size(); ++k) {
        if (entries_[k].id == entries_[k - 1].id &&
            (first_repeat == nullptr || entries_[k].column < first_repeat->column)) {
          first_repeat = &entries_[k];
          its_original = &entries_[k - 1];
          while (its_original != entries_.data() && (its_original - 1)->id == first_repeat->id) --its_original;
        }
      }
      if (first_repeat != nullptr) duplicate(*first_repeat, *its_original);
    }
    for (const Entry& e : entries_) {
      data_.index.push_back(e.id);
      data_.value.push_back(e.value);
    }
    data_.label.push_back(label);
    data_.row_ptr.push_back(data_.index.size());
  }

  // An id past kMaxFeatureId (or not a number: `id` past it too), or past the caller's limit. Out of line: the
  // parser's loop stays as small as it was without the caller's limit.
  [[noreturn]] [[gnu::cold]] [[gnu::noinline]] void bad_id(std::size_t column, std::string_view id_text,
                                                           std::uint64_t id) const {
    if (id > kMaxFeatureId)
      fail(column, fmt::format("expected a feature id in 0..{}, got {}", kMaxFeatureId, quote(id_text)));
    fail(column, limit_.why ? limit_.why(static_cast<std::uint32_t>(id))
                            : fmt::format("feature id {} is past the limit of {} features", id, limit_.features));
  }

  [[noreturn]] void duplicate(const Entry& repeat, const Entry& original) const {
    fail(repeat.column, fmt::format("expected each feature id at most once per line, got {} again "
                                    "(first at column {})",
                                    repeat.id, original.column));
  }

  float parse_label(std::string_view token, std::size_t column) const {
    const std::string_view number = skip_plus(token);
    double v = 0.0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
    if (ec == std::errc() && end == number.data() + number.size()) {
      if (v == 1.0) return 1.0f;
      if (v == -1.0 || v == 0.0) return -1.0f;
    }
    fail(column, fmt::format("expected a label +1, 1, -1 or 0 (0 means -1), got {}", quote(token)));
  }

  Entry parse_feature(std::string_view token, std::size_t column) const {
    const std::size_t colon = token.find(':');
    if (colon == std::string_view::npos) {
      fail(column, fmt::format("expected a feature 'id:value', got {}", quote(token)));
    }
    const std::string_view id_text = token.substr(0, colon);
    // Digits only: no sign, no '0x', nothing from_chars would stop short at.
    const bool all_digits = !id_text.empty() && std::all_of(id_text.begin(), id_text.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    if (!all_digits) {
      fail(column, fmt::format("expected a feature id (an integer in 0..{}), got {}", kMaxFeatureId,
                               quote(id_text)));
    }
    std::uint64_t id = 0;
    const auto [id_end, id_ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
    // One comparison per feature for both limits: the format's and the caller's (no more than the format's).
    const bool parsed = id_ec == std::errc() && id_end == id_text.data() + id_text.size();
    if (!parsed || id >= max_features_) bad_id(column, id_text, parsed ? id : std::uint64_t{kMaxFeatureId} + 1);

    const std::string_view value_token = token.substr(colon + 1);
    const std::string_view number = skip_plus(value_token);
    const std::size_t value_column = column + colon + 1;
    float value = 0.0f;
    switch (parse_value(number, value)) {
      case ValueStatus::ok:
        break;
      case ValueStatus::not_a_number:
        fail(value_column, fmt::format("expected a number after ':', got {}", quote(value_token)));
      case ValueStatus::not_finite:
        fail(value_column, fmt::format("expected a finite float value, got {}", quote(value_token)));
    }
    return Entry{static_cast<std::uint32_t>(id), value, static_cast<std::uint32_t>(column)};
  }

  std::string_view text_;
  std::string_view source_;
  UnsortedIds unsorted_;
  const FeatureLimit& limit_;
  std::uint64_t max_features_;  // ids from here on are refused
  std::size_t line_no_ = 0;
  std::vector<Entry> entries_;  // reused for every line
  SparseDataset data_;
};

}  // namespace

std::uint64_t SparseDataset::checksum() const noexcept {
  std::uint64_t h = fold(fold(kFoldStart, rows()), nnz());
  for (const std::uint64_t r : row_ptr) h = fold(h, r);
  for (std::size_t k = 0; k < index.size(); ++k)
    h = fold(h, std::uint64_t{index[k]} << 32 | std::bit_cast<std::uint32_t>(value[k]));
  for (const float l : label) h = fold(h, std::bit_cast<std::uint32_t>(l));
  return h;
}

void SparseDataset::validate() const {
  auto bad = [](const std::string& what) { throw InputError("sparse dataset: " + what); };
  if (row_ptr.empty()) {
    if (!label.empty() || !index.empty() || !value.empty()) {
      bad("row_ptr is empty but there are labels or features");
    }
    return;
  }
  if (row_ptr.front() != 0) bad(fmt::format("row_ptr[0] is {}, expected 0", row_ptr.front()));
  if (label.size() != rows()) bad(fmt::format("{} labels for {} rows", label.size(), rows()));
  if (value.size() != index.size()) bad(fmt::format("{} values for {} ids", value.size(), index.size()));
  if (row_ptr.back() != index.size()) {
    bad(fmt::format("row_ptr ends at {}, expected nnz {}", row_ptr.back(), index.size()));
  }
  if (num_features > std::uint64_t{kMaxFeatureId} + 1) {
    bad(fmt::format("num_features {} exceeds 2^31", num_features));
  }
  for (std::size_t r = 0; r < rows(); ++r) {
    if (label[r] != 1.0f && label[r] != -1.0f) bad(fmt::format("row {}: label {}, expected +1 or -1", r, label[r]));
    if (row_ptr[r + 1] < row_ptr[r]) bad(fmt::format("row_ptr decreases at row {}", r));
    for (std::uint64_t k = row_ptr[r]; k < row_ptr[r + 1]; ++k) {
      if (index[k] >= num_features) {
        bad(fmt::format("row {}: feature id {} is not below num_features {}", r, index[k], num_features));
      }
      if (k > row_ptr[r] && index[k] <= index[k - 1]) {
        bad(fmt::format("row {}: feature ids not strictly increasing ({} after {})", r, index[k], index[k - 1]));
      }
      if (!std::isfinite(value[k])) bad(fmt::format("row {}: feature {} has a non-finite value", r, index[k]));
    }
  }
}

SparseDataset parse_libsvm(std::string_view text, std::string_view source_name, UnsortedIds unsorted,
                           const FeatureLimit& limit) {
  return Parser(text, source_name, unsorted, limit).run();
}

SparseDataset read_libsvm(const std::filesystem::path& path, UnsortedIds unsorted, const FeatureLimit& limit) {
  // One read of the whole file (not a stream per line): parsing then runs over memory. Gzipped or not.
  return parse_libsvm(io::read_all(path, "a libsvm file", kMaxLibsvmLineBytes), io::display_name(path), unsorted,
                      limit);
}

void write_libsvm(const std::filesystem::path& path, const SparseDataset& data, std::uint32_t first_id) {
  data.validate();
  if (first_id > kMaxFeatureId ||
      (data.num_features > 0 && data.num_features - 1 > kMaxFeatureId - first_id)) {
    throw InputError(fmt::format("{}: feature ids from {} would pass {}, the largest a reader takes", path.string(),
                                 first_id, kMaxFeatureId));
  }
  AtomicFile file(path);
  std::string buffer;
  constexpr std::size_t kFlushAt = std::size_t{1} << 20;
  buffer.reserve(kFlushAt + 256);
  char number[64];
  for (std::size_t r = 0; r < data.rows(); ++r) {
    buffer += data.label[r] > 0.0f ? "+1" : "-1";
    for (std::uint64_t k = data.row_ptr[r]; k < data.row_ptr[r + 1]; ++k) {
      buffer += ' ';
      auto res = std::to_chars(number, number + sizeof number, data.index[k] + first_id);
      *res.ptr++ = ':';
      // Shortest representation that reads back to the same float.
      res = std::to_chars(res.ptr, number + sizeof number, data.value[k]);
      buffer.append(number, res.ptr);
    }
    buffer += '\n';
    if (buffer.size() >= kFlushAt) {
      file.write(buffer);
      buffer.clear();
    }
  }
  file.write(buffer);
  file.commit();
}

SparseDataset slice_rows(const SparseDataset& data, std::size_t begin, std::size_t end) {
  SparseDataset out;
  out.num_features = data.num_features;
  const auto first = data.row_ptr[begin], last = data.row_ptr[end];
  out.row_ptr.reserve(end - begin + 1);
  for (std::size_t r = begin; r <= end; ++r) out.row_ptr.push_back(data.row_ptr[r] - first);
  out.index.assign(data.index.begin() + static_cast<std::ptrdiff_t>(first),
                   data.index.begin() + static_cast<std::ptrdiff_t>(last));
  out.value.assign(data.value.begin() + static_cast<std::ptrdiff_t>(first),
                   data.value.begin() + static_cast<std::ptrdiff_t>(last));
  out.label.assign(data.label.begin() + static_cast<std::ptrdiff_t>(begin),
                   data.label.begin() + static_cast<std::ptrdiff_t>(end));
  return out;
}

SparseDataset select_rows(const SparseDataset& data, std::span<const std::size_t> rows) {
  SparseDataset out;
  out.num_features = data.num_features;
  out.row_ptr.reserve(rows.size() + 1);
  out.row_ptr.push_back(0);
  for (const std::size_t r : rows) {
    for (auto k = data.row_ptr[r]; k < data.row_ptr[r + 1]; ++k) {
      out.index.push_back(data.index[k]);
      out.value.push_back(data.value[k]);
    }
    out.row_ptr.push_back(out.index.size());
    out.label.push_back(data.label[r]);
  }
  return out;
}

std::vector<float> narrow_to_weights(SparseDataset& data, std::vector<float> w) {
  if (data.num_features > w.size()) {
    std::uint64_t kept = 0;
    for (std::size_t r = 0; r < data.rows(); ++r) {
      const std::uint64_t begin = data.row_ptr[r], end = data.row_ptr[r + 1];
      data.row_ptr[r] = kept;
      for (std::uint64_t k = begin; k < end; ++k) {
        if (data.index[k] >= w.size()) continue;
        data.index[kept] = data.index[k];
        data.value[kept] = data.value[k];
        ++kept;
      }
    }
    data.row_ptr[data.rows()] = kept;
    data.index.resize(kept);
    data.value.resize(kept);
  }
  data.num_features = static_cast<std::uint32_t>(w.size());
  return w;
}

UnsortedIds parse_unsorted_ids(std::string_view name) {
  if (name == "sort") return UnsortedIds::sort;
  if (name == "reject") return UnsortedIds::reject;
  throw InputError(fmt::format("unsorted ids '{}': expected sort or reject", name));
}

}  // namespace asgd::sparse
