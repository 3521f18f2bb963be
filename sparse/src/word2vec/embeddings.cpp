#include "asgd/sparse/word2vec/embeddings.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/available_memory.hpp"
#include "asgd/engine/errors.hpp"
#include "../input.hpp"
#include "../text_util.hpp"

namespace asgd::sparse::w2v {
namespace {

namespace fs = std::filesystem;

// Longer "words" mean we are reading something that is not a vectors file;
// the corpus reader cuts tokens at 1 KiB, so real words never come close.
constexpr std::size_t kMaxWordBytes = 64 * 1024;
// A header line longer than this is not "V D".
constexpr std::size_t kMaxHeaderBytes = 256;

// The characters the corpus reader splits on: none may be part of a word.
using text::is_whitespace;
using text::split_fields;
std::string quote(std::string_view token) { return text::quote_token(token); }

void append_le_floats(std::string& out, const float* values, std::size_t n) {
  if constexpr (std::endian::native == std::endian::little) {
    out.append(reinterpret_cast<const char*>(values), n * sizeof(float));
  } else {
    for (std::size_t k = 0; k < n; ++k) {
      auto bits = std::bit_cast<std::uint32_t>(values[k]);
      for (int b = 0; b < 4; ++b, bits >>= 8) out += static_cast<char>(bits & 0xffu);
    }
  }
}

float float_from_le(const char* bytes) noexcept {
  std::uint32_t bits = 0;
  for (int b = 3; b >= 0; --b) bits = (bits << 8) | static_cast<unsigned char>(bytes[b]);
  return std::bit_cast<float>(bits);
}

// Buffered bytes of a file, with look-ahead: the reader needs to see a whole
// text line or a whole binary vector before it consumes it.
class ByteSource {
 public:
  // "-" is standard input (as `w2v -train -`); gzipped or not (GoogleNews-vectors-negative300.bin.gz as it is).
  explicit ByteSource(const fs::path& path) : file_(path, "a word2vec vectors file"), name_(file_.name()) {}

  const std::string& name() const noexcept { return name_; }
  // Offset in the file of the next unread byte.
  std::uint64_t offset() const noexcept { return consumed_; }
  std::string_view view() const noexcept { return {buffer_.data() + pos_, end_ - pos_}; }
  void consume(std::size_t n) noexcept {
    pos_ += n;
    consumed_ += n;
  }
  // Consumes a line from peek_line and its '\n', if the file has one.
  void consume_line(std::string_view line) noexcept { consume(std::min(line.size() + 1, end_ - pos_)); }

  // Tries to have at least n bytes in view(); fewer only at the end of the file.
  std::size_t fill(std::size_t n) {
    if (end_ - pos_ >= n || eof_) return end_ - pos_;
    if (pos_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + pos_, end_ - pos_);
      end_ -= pos_;
      pos_ = 0;
    }
    // The buffer grows with what is read, doubling, not to n at once: n may come from the file (a header's
    // dimension) and ask for far more than the file holds.
    if (buffer_.size() < kChunk) buffer_.resize(kChunk);
    while (end_ < n && !eof_) {
      if (end_ == buffer_.size()) buffer_.resize(2 * buffer_.size());
      const std::size_t got = file_.read(buffer_.data() + end_, buffer_.size() - end_);
      end_ += got;
      if (got == 0) eof_ = true;
    }
    return end_ - pos_;
  }

  // The bytes up to the next '\n' (not included), or to the end of the file;
  // nullopt when nothing is left. `limit`: give up past this many bytes and
  // return what there is, with `complete` false.
  std::optional<std::string_view> peek_line(std::size_t limit, bool& complete) {
    std::size_t searched = 0;
    for (;;) {
      const auto v = view();
      if (const auto nl = v.find('\n', searched); nl != std::string_view::npos) {
        complete = nl <= limit;
        return v.substr(0, std::min(nl, limit));
      }
      searched = v.size();
      if (v.size() > limit) {
        complete = false;
        return v.substr(0, limit);
      }
      if (fill(v.size() + kChunk) == v.size()) {  // end of file
        complete = true;
        if (v.empty()) return std::nullopt;
        return view();  // fill may have moved the bytes
      }
    }
  }

 private:
  static constexpr std::size_t kChunk = std::size_t{1} << 20;
  io::InputFile file_;
  std::string name_;
  std::vector<char> buffer_;
  std::size_t pos_ = 0, end_ = 0;
  std::uint64_t consumed_ = 0;
  bool eof_ = false;
};


struct Header {
  std::uint64_t words = 0;
  std::size_t dim = 0;
};

Header read_header(ByteSource& in) {
  bool complete = false;
  const auto line = in.peek_line(kMaxHeaderBytes, complete);
  auto bad = [&](const std::string& found) {
    return InputError(
        fmt::format("{}:1: expected a header 'V D' (number of words, dimension), found {}", in.name(), found));
  };
  if (!line) throw bad("an empty file");
  if (!complete) throw bad("a first line longer than any header");
  const auto fields = split_fields(*line);
  if (fields.size() != 2) throw bad(fmt::format("{} fields in {}", fields.size(), quote(*line)));
  Header h;
  std::uint64_t dim = 0;
  for (auto [field, out] : {std::pair{fields[0], &h.words}, std::pair{fields[1], &dim}}) {
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), *out);
    if (ec != std::errc() || end != field.data() + field.size()) {
      throw bad(fmt::format("{} (not a non-negative integer)", quote(field)));
    }
  }
  // A larger dimension is certainly a misread file (and V x D must not overflow).
  if (dim == 0 || dim > (std::uint64_t{1} << 24)) {
    throw bad(fmt::format("dimension {} (expected 1 to {})", dim, std::uint64_t{1} << 24));
  }
  h.dim = static_cast<std::size_t>(dim);
  in.consume_line(*line);
  return h;
}

// Bytes a number in text can hold: digits, sign, dot, exponent, and the
// letters of "nan" and "infinity".
bool is_number_char(char c) noexcept {
  return (c >= '0' && c <= '9') || std::string_view("+-.eEnNaAiIfFtTyY").find(c) != std::string_view::npos;
}

// A finite float from a text field; from_chars takes no leading '+'.
bool parse_float(std::string_view field, float& value) {
  if (field.size() >= 2 && field[0] == '+' && field[1] != '-' && field[1] != '+') field.remove_prefix(1);
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (end != field.data() + field.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    // Underflow reads as 0 (as strtof would make it tiny); overflow is an error.
    double wide = 0.0;
    const auto r = std::from_chars(field.data(), field.data() + field.size(), wide);
    if (r.ec != std::errc() || !(std::abs(wide) <= 1.0)) return false;
    value = static_cast<float>(wide);
    return true;
  }
  return ec == std::errc() && std::isfinite(value);
}

// The bytes detect_binary may look at: 16 times a vector's, and a page.
std::size_t detection_window(const Header& h) { return 64 * h.dim + 4096; }

// Tells the formats apart from the first record; consumes nothing.
//  * Text when the rest of the first line is D numbers.
//  * Binary when it holds a byte no number has (a float's top byte, for
//    magnitudes 1e-4 to 1e4, is never a digit, sign, dot or a letter of
//    "nan"/"infinity"), or is empty (the vector's first byte is 0x0a).
//  * Otherwise the line looks like text with the wrong number of values, or
//    a binary vector with a 0x0a byte after a few number-like bytes (about 1
//    in 6,000 vectors): binary if word2vec.c's "\n" sits right after 4 x D
//    bytes, else text, whose reader then reports the count.
bool detect_binary(ByteSource& in, const Header& h) {
  const std::size_t limit = detection_window(h);
  in.fill(limit);
  const auto v = in.view();
  std::size_t k = 0;
  while (k < v.size() && v[k] == '\n') ++k;
  const auto space = v.find_first_of(" \t\n", k);
  // No space after the word: the text reader says what is missing.
  if (space == std::string_view::npos || v[space] == '\n') return false;
  const auto rest = v.substr(space + 1);
  const auto newline = rest.find('\n');
  const auto line = rest.substr(0, std::min(newline, limit));
  // D numbers written with decimal commas ("0,1 0,2") are text: they were taken for binary (',' is no number's
  // byte) and read as garbage; now the text reader says which value is not a number. (A binary vector would
  // need a 0x2c byte, number-like bytes elsewhere and blanks splitting it into exactly D fields.)
  const bool comma_numbers = line.find(',') != std::string_view::npos &&
                             std::all_of(line.begin(), line.end(),
                                         [](char c) { return c == ',' || is_whitespace(c) || is_number_char(c); });
  if (newline != std::string_view::npos && newline < limit && comma_numbers && split_fields(line).size() == h.dim)
    return false;
  for (const char c : line) {
    if (!is_whitespace(c) && !is_number_char(c)) return true;
  }
  if (newline == std::string_view::npos || newline >= limit) return false;  // all numbers, however many
  const auto fields = split_fields(line);
  if (fields.empty()) return true;
  float value = 0.0f;
  if (fields.size() == h.dim &&
      std::all_of(fields.begin(), fields.end(), [&](auto f) { return parse_float(f, value); })) {
    return false;
  }
  const std::size_t vector_bytes = 4 * h.dim;
  // newline == vector_bytes: the vector's bytes hold no 0x0a and word2vec.c's "\n" follows them. Unless they hold
  // a blank: text with the wrong number of values, whose reader then says so (a binary vector with a 0x20 or 0x09
  // byte among number-like ones is then misread as text too, and refused: an error, never a silent misread).
  const bool blank = line.find_first_of(" \t") != std::string_view::npos;
  return (newline < vector_bytes || (newline == vector_bytes && !blank)) && rest.size() > vector_bytes &&
         rest[vector_bytes] == '\n';
}

std::size_t reserve_hint(const fs::path& path, const Header& h, std::size_t max_words) {
  std::error_code ec;
  const auto bytes = fs::file_size(path, ec);
  // Every record takes at least D + 1 bytes, so a lying header cannot make
  // us allocate more than the file could hold. A pipe has no size: reserve a
  // little (64 MB of vectors, 2^20 words at most) and let the vectors grow as
  // records arrive.
  std::uint64_t n = std::min<std::uint64_t>(h.words, max_words);
  n = std::min<std::uint64_t>(
      n, ec ? std::min<std::uint64_t>((std::uint64_t{1} << 24) / h.dim + 1, std::uint64_t{1} << 20)
            : bytes / (h.dim + 1) + 1);
  return static_cast<std::size_t>(std::min<std::uint64_t>(n, std::uint64_t{1} << 32));
}

// What is reserved for the records (reserve_hint's) and detect_binary's window, checked against the memory
// available first: a header whose counts the file can hold and the memory cannot is refused at line 1.
void reserve_records(ByteSource& in, const Header& h, std::size_t hint, Embeddings& out) {
  const std::uint64_t bytes =
      saturating_product(hint, sizeof(std::string) + sizeof(float) * h.dim) + detection_window(h);
  require_memory(bytes, fmt::format("{}:1: {} words of {} dimensions ({} floats a word, as many words as the header "
                                    "says and the file can hold)",
                                    in.name(), hint, h.dim, h.dim));
  out.words.reserve(hint);
  out.vectors.reserve(hint * h.dim);
}

// Before a record past the reserve (from a pipe, or a gzip file): both arrays double, checked against the memory
// available first. `line` (text) or `byte` (binary): where the record starts, as the readers' errors say it.
enum class At { line, byte };
void make_room_for_record(const ByteSource& in, Embeddings& out, At unit, std::uint64_t at) {
  if (out.words.size() < out.words.capacity()) return;
  const std::size_t words = std::max<std::size_t>(64, 2 * out.words.capacity());
  require_memory(saturating_product(words, sizeof(std::string) + sizeof(float) * out.dim),
                 fmt::format("{}{}{}: {} words of {} dimensions so far, growing to {},", in.name(),
                             unit == At::line ? ":" : ": byte ", at, out.words.size(), out.dim, words));
  out.words.reserve(words);
  out.vectors.reserve(words * out.dim);
}

// A text record is a word and D values of at most 64 bytes each ("%f" of the largest float is 47): a longer line
// is not one, and reading stops there (a file with no newline after its header, /dev/zero).
std::size_t max_text_line(const Header& h) { return kMaxWordBytes + 64 * h.dim + 4096; }

// The next line (peek_line's), refused when longer than a record; `line_no`: its number.
std::optional<std::string_view> peek_text_line(ByteSource& in, const Header& h, std::uint64_t line_no) {
  bool complete = false;
  const auto line = in.peek_line(max_text_line(h), complete);
  if (line && !complete) {
    io::refuse_long_line(in.name(), line_no, in.offset(), *line, max_text_line(h),
                         fmt::format("a text vectors file of dimension {}", h.dim));
  }
  return line;
}

void read_text_records(ByteSource& in, const Header& h, std::size_t wanted, Embeddings& out) {
  std::uint64_t line_no = 1;
  while (out.words.size() < wanted) {
    const auto line = peek_text_line(in, h, line_no + 1);
    if (!line) {
      throw InputError(fmt::format("{}:{}: the header says {} words, the file ends after {}", in.name(), line_no + 1,
                                   h.words, out.words.size()));
    }
    ++line_no;
    const auto fields = split_fields(*line);
    in.consume_line(*line);
    if (fields.empty()) continue;
    if (fields[0].size() > kMaxWordBytes) {
      throw InputError(fmt::format("{}:{}: a word of {} bytes, expected a word2vec vectors file", in.name(), line_no,
                                   fields[0].size()));
    }
    if (fields.size() != h.dim + 1) {
      throw InputError(fmt::format("{}:{}: expected {} values after {}, found {}", in.name(), line_no, h.dim,
                                   quote(fields[0]), fields.size() - 1));
    }
    make_room_for_record(in, out, At::line, line_no);
    out.words.emplace_back(fields[0]);
    for (std::size_t k = 1; k <= h.dim; ++k) {
      float value = 0.0f;
      if (!parse_float(fields[k], value)) {
        throw InputError(fmt::format("{}:{}: value {} of {}: expected a finite number, found {}", in.name(), line_no, k,
                                     quote(fields[0]), quote(fields[k])));
      }
      out.vectors.push_back(value);
    }
  }
  if (out.words.size() < h.words) return;  // max_words: the rest is not read
  while (const auto line = peek_text_line(in, h, line_no + 1)) {
    ++line_no;
    if (!split_fields(*line).empty()) {
      throw InputError(
          fmt::format("{}:{}: the header says {} words, but more lines follow", in.name(), line_no, h.words));
    }
    in.consume_line(*line);
  }
}

void read_binary_records(ByteSource& in, const Header& h, std::size_t wanted, Embeddings& out) {
  const std::size_t vector_bytes = 4 * h.dim;
  while (out.words.size() < wanted) {
    // word2vec.c ends a record with '\n', gensim does not: skip it if there.
    for (;;) {
      if (in.fill(1) == 0) {
        throw InputError(fmt::format("{}: byte {}: the header says {} words, the file ends after {}", in.name(),
                                     in.offset(), h.words, out.words.size()));
      }
      if (in.view().front() != '\n') break;
      in.consume(1);
    }
    const std::uint64_t word_offset = in.offset();
    std::size_t space = std::string_view::npos;
    for (std::size_t want = 256;; want *= 2) {
      const auto available = in.fill(want);
      space = in.view().substr(0, std::min(available, kMaxWordBytes + 1)).find(' ');
      if (space != std::string_view::npos || available < want || available > kMaxWordBytes) break;
    }
    if (space == std::string_view::npos) {
      throw InputError(fmt::format("{}: byte {}: expected a word and a space (record {} of {}), found {}", in.name(),
                                   word_offset, out.words.size() + 1, h.words,
                                   in.view().size() > kMaxWordBytes ? "no space in 64 KiB" : "the end of the file"));
    }
    if (space == 0) {
      throw InputError(fmt::format("{}: byte {}: expected a word (record {} of {}), found an empty one", in.name(),
                                   word_offset, out.words.size() + 1, h.words));
    }
    std::string word(in.view().substr(0, space));
    in.consume(space + 1);
    const auto available = in.fill(vector_bytes);
    if (available < vector_bytes) {
      throw InputError(fmt::format("{}: byte {}: expected {} floats ({} bytes) for {}, the file ends after {} bytes",
                                   in.name(), in.offset(), h.dim, vector_bytes, quote(word), available));
    }
    make_room_for_record(in, out, At::byte, word_offset);
    const char* bytes = in.view().data();
    for (std::size_t k = 0; k < h.dim; ++k) {
      const float value = float_from_le(bytes + 4 * k);
      if (!std::isfinite(value)) {
        throw InputError(fmt::format("{}: byte {}: value {} of {} is {}, expected a finite number", in.name(),
                                     in.offset() + 4 * k, k + 1, quote(word), value));
      }
      out.vectors.push_back(value);
    }
    in.consume(vector_bytes);
    out.words.push_back(std::move(word));
  }
  if (out.words.size() < h.words) return;
  for (;;) {
    const auto available = in.fill(4096);
    if (available == 0) return;
    const auto v = in.view();
    const auto junk = v.find_first_not_of(" \t\r\n");
    if (junk != std::string_view::npos) {
      throw InputError(fmt::format("{}: byte {}: the header says {} words, but more data follows", in.name(),
                                   in.offset() + junk, h.words));
    }
    in.consume(v.size());
  }
}

}  // namespace

void write_word2vec(const fs::path& path, bool binary, std::span<const std::string> words, std::size_t dim,
                    const std::function<const float*(std::size_t)>& row) {
  const std::string name = path.string();
  if (dim == 0) throw InputError(fmt::format("{}: cannot write vectors of dimension 0", name));
  text::require_plain_words(name, words, "the word2vec formats");
  AtomicFile file(path);
  std::string buffer;
  constexpr std::size_t kFlushAt = std::size_t{1} << 20;
  buffer.reserve(kFlushAt + 32 * dim + 1024);
  fmt::format_to(std::back_inserter(buffer), "{} {}\n", words.size(), dim);
  for (std::size_t i = 0; i < words.size(); ++i) {
    const float* values = row(i);
    buffer += words[i];
    buffer += ' ';
    if (binary) {
      append_le_floats(buffer, values, dim);
    } else {
      // word2vec.c: fprintf(fo, "%lf ", value) for each value.
      for (std::size_t k = 0; k < dim; ++k) fmt::format_to(std::back_inserter(buffer), "{:.6f} ", values[k]);
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

void write_word2vec(const fs::path& path, bool binary, const Embeddings& e) {
  if (e.vectors.size() != e.words.size() * e.dim) {
    throw InputError(fmt::format("{}: embeddings hold {} floats, expected {} words x {} dimensions", path.string(),
                                 e.vectors.size(), e.words.size(), e.dim));
  }
  write_word2vec(path, binary, e.words, e.dim, [&](std::size_t i) { return e.vectors.data() + i * e.dim; });
}

void write_word2vec_text(const fs::path& path, const Embeddings& e) { write_word2vec(path, false, e); }
void write_word2vec_binary(const fs::path& path, const Embeddings& e) { write_word2vec(path, true, e); }

Embeddings read_word2vec(const fs::path& path, std::size_t max_words) {
  ByteSource in(path);
  const Header h = read_header(in);
  Embeddings out;
  out.dim = h.dim;
  const auto wanted = static_cast<std::size_t>(std::min<std::uint64_t>(h.words, max_words));
  reserve_records(in, h, reserve_hint(path, h, max_words), out);
  out.binary = h.words > 0 && detect_binary(in, h);
  if (out.binary) {
    read_binary_records(in, h, wanted, out);
  } else {
    read_text_records(in, h, wanted, out);
  }
  return out;
}

bool is_word2vec_binary(const fs::path& path) {
  ByteSource in(path);
  const Header h = read_header(in);
  return h.words > 0 && detect_binary(in, h);
}

}  // namespace asgd::sparse::w2v
