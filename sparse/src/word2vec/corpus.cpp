#include "asgd/sparse/word2vec/corpus.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <cstdlib>
#include <new>

#include "asgd/engine/available_memory.hpp"
#include "asgd/engine/errors.hpp"
#include "../input.hpp"
#include "../text_util.hpp"

namespace asgd::sparse::w2v {
namespace {

constexpr std::size_t kChunk = std::size_t{4} << 20;

enum : unsigned char { kText = 0, kSpace = 1, kNewline = 2, kNul = 3 };
constexpr std::array<unsigned char, 256> make_classes() {
  std::array<unsigned char, 256> c{};
  c[' '] = c['\t'] = c['\r'] = c['\v'] = c['\f'] = kSpace;
  c['\n'] = kNewline;
  c[0] = kNul;
  return c;
}
constexpr auto kClass = make_classes();

// Where to cut a token of more than `len` bytes at about `len`: before the
// UTF-8 character that byte len falls in (a cut inside one leaves a file that
// UTF-8 readers such as gensim refuse), at most 3 bytes back; at `len` when
// the bytes there are not UTF-8.
std::size_t cut_at_character(const char* p, std::size_t len) {
  for (std::size_t back = 0; back < 4 && back < len; ++back)
    if ((static_cast<unsigned char>(p[len - back]) & 0xC0) != 0x80) return len - back;
  return len;
}

}  // namespace

TokenReader::TokenReader(const std::filesystem::path& path)
    : file_(std::make_unique<io::InputFile>(path, "a text corpus")) {
  name_ = file_->name();
  buffer_.resize(kChunk);
  if (!file_->regular()) read_whole();
}

void TokenReader::read_whole() {
  // A pipe, FIFO or device cannot be rewound for the second pass: read it once into memory, judged as it comes
  // (a NUL at its chunk, the memory before each doubling), so that /dev/zero or an endless pipe stops early.
  from_memory_ = true;
  std::size_t n = 0;
  while ((n = file_->read(buffer_.data() + end_, std::min(kChunk, buffer_.size() - end_))) > 0) {
    if (const void* nul = std::memchr(buffer_.data() + end_, 0, n); nul != nullptr) {
      const auto at = static_cast<std::size_t>(static_cast<const char*>(nul) - buffer_.data());
      lines_ = static_cast<std::uint64_t>(std::count(buffer_.data(), buffer_.data() + at, '\n'));
      binary_error(at);
    }
    end_ += n;
    if (end_ == buffer_.size()) {
      // The doubled block whole: realloc may have to copy (ASan's always does) before it frees the old one.
      require_memory(2 * buffer_.size(), fmt::format("{}: a pipe is held in memory to be read twice (a file is "
                                                     "streamed instead); growing it past {}",
                                                     name_, format_bytes(buffer_.size())));
      buffer_.resize(2 * buffer_.size());
    }
  }
  buffer_.resize(end_);
  file_.reset();
  eof_ = true;
}

TokenReader::~TokenReader() = default;

TokenReader::Bytes::~Bytes() { std::free(p_); }

void TokenReader::Bytes::resize(std::size_t n) {
  if (n == n_) return;
  void* p = std::realloc(p_, n > 0 ? n : 1);
  if (p == nullptr) throw std::bad_alloc();
  p_ = static_cast<char*>(p);
  n_ = n;
}

void TokenReader::rewind() {
  pos_ = 0;
  lines_ = 0;
  carry_.clear();
  truncated_ = 0;
  if (from_memory_) return;
  file_->rewind();
  consumed_ = 0;
  end_ = 0;
  eof_ = false;
}

bool TokenReader::refill() {
  if (from_memory_ || eof_) return false;
  consumed_ += end_;
  end_ = file_->read(buffer_.data(), buffer_.size());
  pos_ = 0;
  if (end_ < buffer_.size()) eof_ = true;
  return end_ > 0;
}

void TokenReader::binary_error(std::size_t at) const {
  throw InputError(fmt::format("{}:{}: byte {} is NUL: this looks like a binary file, not text", name_, lines_ + 1,
                               consumed_ + at));
}

TokenReader::Kind TokenReader::next(std::string_view& token) {
  // Skip spaces; report a newline.
  for (;;) {
    if (pos_ == end_ && !refill()) return Kind::end;
    const unsigned char cls = kClass[static_cast<unsigned char>(buffer_[pos_])];
    if (cls == kText) break;
    if (cls == kNul) binary_error(pos_);
    ++pos_;
    if (cls == kNewline) {
      ++lines_;
      return Kind::line_end;
    }
  }
  // A token: usually inside the buffer; across a refill it goes through carry_.
  const std::size_t start = pos_;
  while (pos_ < end_ && kClass[static_cast<unsigned char>(buffer_[pos_])] == kText) ++pos_;
  if (pos_ < end_ || eof_ || from_memory_) {
    if (pos_ < end_ && buffer_[pos_] == 0) binary_error(pos_);
    std::size_t len = pos_ - start;
    if (len > kMaxTokenBytes) {
      len = cut_at_character(buffer_.data() + start, kMaxTokenBytes);
      ++truncated_;
    }
    token = std::string_view(buffer_.data() + start, len);
    return Kind::word;
  }
  carry_.assign(buffer_.data() + start, pos_ - start);
  while (refill()) {
    const std::size_t from = pos_;
    while (pos_ < end_ && kClass[static_cast<unsigned char>(buffer_[pos_])] == kText) ++pos_;
    if (carry_.size() <= kMaxTokenBytes) {  // keep one byte past the limit to know it was cut
      carry_.append(buffer_.data() + from, std::min(pos_ - from, kMaxTokenBytes - carry_.size() + 1));
    }
    if (pos_ < end_) break;
  }
  if (pos_ < end_ && buffer_[pos_] == 0) binary_error(pos_);
  if (carry_.size() > kMaxTokenBytes) {
    carry_.resize(cut_at_character(carry_.data(), kMaxTokenBytes));
    ++truncated_;
  }
  token = carry_;
  return Kind::word;
}

Vocabulary count_vocabulary(TokenReader& reader, const VocabOptions& options, CorpusStats* stats) {
  reader.rewind();
  Vocabulary::Counter counter;
  CorpusStats s;
  std::string_view token;
  bool line_has_text = false;
  for (;;) {
    const auto kind = reader.next(token);
    if (kind == TokenReader::Kind::end) break;
    if (kind == TokenReader::Kind::line_end) {
      s.lines += line_has_text ? 1 : 0;
      line_has_text = false;
      continue;
    }
    line_has_text = true;
    counter.add(token);
  }
  s.lines += line_has_text ? 1 : 0;
  s.tokens = counter.tokens();
  s.truncated_tokens = reader.truncated_tokens();
  s.vocabulary_prunes = counter.prunes();
  if (stats) *stats = s;
  if (s.tokens == 0) throw InputError(fmt::format("{}: no words (empty or only whitespace)", reader.name()));
  Vocabulary vocab = [&] {
    try {
      return std::move(counter).finish(options);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", reader.name(), e.what()));
    }
  }();
  // Unpruned, the vocabulary's total is the tokens this corpus keeps; pruned counts fall short of it.
  if (stats && s.vocabulary_prunes == 0) stats->kept_tokens = vocab.total_count();
  return vocab;
}

EncodedCorpus encode_corpus(TokenReader& reader, const Vocabulary& vocab, std::uint64_t expected_tokens) {
  reader.rewind();
  EncodedCorpus c;
  c.tokens.reserve(expected_tokens);  // then shrink_to_fit below copies nothing
  c.sentence_begin.push_back(0);
  std::string_view token;
  std::size_t in_sentence = 0;  // kept words in the current sentence
  bool line_has_text = false, line_was_split = false;
  auto close_sentence = [&] {
    if (in_sentence > 0) c.sentence_begin.push_back(c.tokens.size());
    in_sentence = 0;
  };
  for (;;) {
    const auto kind = reader.next(token);
    if (kind == TokenReader::Kind::end) break;
    if (kind == TokenReader::Kind::line_end) {
      close_sentence();
      c.stats.lines += line_has_text ? 1 : 0;
      c.stats.split_lines += line_was_split ? 1 : 0;
      line_has_text = line_was_split = false;
      continue;
    }
    line_has_text = true;
    ++c.stats.tokens;
    const auto id = vocab.find(token);
    if (!id) continue;
    if (in_sentence == kMaxSentence) {
      close_sentence();
      line_was_split = true;
    }
    c.tokens.push_back(*id);
    ++in_sentence;
  }
  close_sentence();
  c.stats.lines += line_has_text ? 1 : 0;
  c.stats.split_lines += line_was_split ? 1 : 0;
  c.stats.kept_tokens = c.tokens.size();
  c.stats.truncated_tokens = reader.truncated_tokens();
  if (c.tokens.empty()) throw InputError(fmt::format("{}: no word of the vocabulary occurs in it", reader.name()));
  c.tokens.shrink_to_fit();
  c.sentence_begin.shrink_to_fit();
  return c;
}

EncodedCorpus shard_sentences(const EncodedCorpus& c, std::size_t part, std::size_t parts) {
  const std::size_t S = c.sentences();
  const std::size_t lo = S * part / parts, hi = S * (part + 1) / parts;
  EncodedCorpus out;
  out.stats = c.stats;
  const auto first = c.sentence_begin[lo];
  out.tokens.assign(c.tokens.begin() + static_cast<std::ptrdiff_t>(first),
                    c.tokens.begin() + static_cast<std::ptrdiff_t>(c.sentence_begin[hi]));
  for (std::size_t s = lo; s <= hi; ++s) out.sentence_begin.push_back(c.sentence_begin[s] - first);
  out.stats.kept_tokens = out.tokens.size();
  if (out.sentences() == 0) {
    throw InputError(fmt::format("w2v: {} sentences cannot be shared by {} ranks", S, parts));
  }
  return out;
}

}  // namespace asgd::sparse::w2v
