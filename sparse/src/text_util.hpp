// Small text helpers shared by sparse/'s readers (private to the library).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "asgd/engine/errors.hpp"

namespace asgd::sparse::text {

// A UTF-8 byte-order mark (Notepad and Excel's "CSV UTF-8" start files with one). io::InputFile skips it at the
// start of every file; parse_libsvm and parse_ratings skip it at the start of the text they are given.
inline constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

// Any ASCII whitespace, newline included.
inline bool is_whitespace(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// The whitespace-separated fields of a line.
inline std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t k = 0;
  while (k < line.size()) {
    while (k < line.size() && is_whitespace(line[k])) ++k;
    const std::size_t start = k;
    while (k < line.size() && !is_whitespace(line[k])) ++k;
    if (k > start) fields.push_back(line.substr(start, k - start));
  }
  return fields;
}

// True when from_chars reads all of `field` as a number, nan and inf included ("Information" is a word).
inline bool is_any_number(std::string_view field) {
  double value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  return ec == std::errc() && end == field.data() + field.size();
}

// A token as it appears in an error message: quoted, control and non-ASCII
// bytes escaped (they would garble a terminal), long tokens cut.
inline std::string quote_token(std::string_view token, std::size_t max_shown = 40) {
  std::string out = "'";
  for (std::size_t k = 0; k < token.size() && k < max_shown; ++k) {
    const auto c = static_cast<unsigned char>(token[k]);
    if (c < 0x20 || c >= 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (token.size() > max_shown) out += "...";
  out += "'";
  return out;
}

// InputError naming `file` for an empty word or one holding whitespace, which would end the word early in a
// file of "word ..." records; `formats` names those records in the message.
inline void require_plain_words(std::string_view file, std::span<const std::string> words,
                                std::string_view formats) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    const auto& w = words[i];
    if (w.empty() || std::any_of(w.begin(), w.end(), is_whitespace)) {
      throw InputError(fmt::format("{}: word {} is {}: {} need non-empty words without whitespace", file, i,
                                   w.empty() ? std::string("empty") : quote_token(w), formats));
    }
  }
}

}  // namespace asgd::sparse::text
