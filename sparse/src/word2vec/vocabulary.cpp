#include "asgd/sparse/word2vec/vocabulary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/errors.hpp"
#include "../input.hpp"
#include "../text_util.hpp"

namespace asgd::sparse::w2v {

namespace {
constexpr std::string_view kSentenceMarker = "</s>";
}  // namespace

void Vocabulary::Counter::add(std::string_view token) {
  ++tokens_;
  auto it = counts_.find(token);
  if (it != counts_.end()) {
    ++it->second;
  } else {
    counts_.emplace(std::string(token), 1);
    if (counts_.size() > prune_at_) {
      std::erase_if(counts_, [&](const auto& e) { return e.second <= prune_floor_; });
      ++prune_floor_;
    }
  }
}

namespace {
void cut(std::vector<std::pair<std::string, std::uint64_t>>& entries, const VocabOptions& options) {
  std::erase_if(entries, [&](const auto& e) { return e.second < options.min_count; });
  if (options.max_size > 0 && entries.size() > options.max_size) entries.resize(options.max_size);
}
}  // namespace

Vocabulary Vocabulary::Counter::finish(const VocabOptions& options) && {
  // Only the words that reach min_count, moved out of the map node by node (a copy of every word, then a sort of
  // them all, held 20M words twice to keep none).
  std::vector<std::pair<std::string, std::uint64_t>> entries;
  entries.reserve(static_cast<std::size_t>(
      std::count_if(counts_.begin(), counts_.end(), [&](const auto& e) { return e.second >= options.min_count; })));
  while (!counts_.empty()) {
    auto node = counts_.extract(counts_.begin());
    if (node.mapped() >= options.min_count) entries.emplace_back(std::move(node.key()), node.mapped());
  }
  counts_ = decltype(counts_){};  // its buckets too (assigning {} clears and keeps them)
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  cut(entries, options);
  if (entries.empty()) {
    throw InputError(fmt::format("vocabulary: no word occurs at least {} times ({} tokens read); lower VocabOptions::min_count",
                                 options.min_count, tokens_));
  }
  std::vector<std::string> words;
  std::vector<std::uint64_t> counts;
  words.reserve(entries.size());
  counts.reserve(entries.size());
  for (auto& [w, c] : entries) {
    words.push_back(std::move(w));
    counts.push_back(c);
  }
  return Vocabulary(std::move(words), std::move(counts));
}

Vocabulary::Vocabulary(std::vector<std::string> words, std::vector<std::uint64_t> counts)
    : words_(std::move(words)), counts_(std::move(counts)) {
  if (words_.size() != counts_.size()) throw InputError("vocabulary: words and counts differ in number");
  if (words_.size() > std::numeric_limits<std::uint32_t>::max()) throw InputError("vocabulary: too many words");
  index();
}

void Vocabulary::index() {
  ids_.clear();
  ids_.reserve(words_.size());
  total_ = 0;
  for (std::uint32_t i = 0; i < words_.size(); ++i) {
    // A word is a token of the corpus reader's: never empty, never with a blank in it (it could never match, and
    // the vectors file, "word v1 v2 ...", could not be read back).
    if (words_[i].empty() || std::any_of(words_[i].begin(), words_[i].end(), text::is_whitespace)) {
      throw InputError(fmt::format("vocabulary: word {} is {}: empty or with a blank in it", i + 1,
                                   text::quote_token(words_[i])));
    }
    if (!ids_.emplace(words_[i], i).second)
      throw InputError(fmt::format("vocabulary: {} appears twice", text::quote_token(words_[i])));
    if (counts_[i] > std::numeric_limits<std::uint64_t>::max() - total_)
      throw InputError("vocabulary: the counts add up past 2^64");
    total_ += counts_[i];
  }
}

std::optional<std::uint32_t> Vocabulary::find(std::string_view word) const noexcept {
  const auto it = ids_.find(word);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

void Vocabulary::save(const std::filesystem::path& path) const {
  AtomicFile out(path);
  // word2vec.c's first entry is its sentence marker: its -read-vocab takes whatever comes first as one (a word
  // that would end every sentence and never be drawn as a negative), so ours is written with count 0.
  std::string line = std::string(kSentenceMarker) + " 0\n";
  out.write(line);
  for (std::size_t i = 0; i < words_.size(); ++i) {
    line = words_[i];
    line += ' ';
    line += std::to_string(counts_[i]);
    line += '\n';
    out.write(line);
  }
  out.commit();
}

namespace {

// Blanks after the count (a trailing space, a CRLF line end) are no part of it.
std::string_view trim_end(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  return line;
}

// What one line of a vocab file says.
struct VocabLine {
  std::string_view word;
  std::uint64_t count = 0;
};

// "word count", or InputError naming FILE:LINE with the line's bytes escaped (text::quote_token).
VocabLine parse_vocab_line(std::string_view line, const std::string& name, std::uint64_t line_no) {
  const auto where = [&] { return fmt::format("{}:{}", name, line_no); };
  const auto space = line.find_last_of(" \t");
  if (space == std::string_view::npos || space == 0) {
    throw InputError(fmt::format("{}: expected 'word count', got {}", where(), text::quote_token(line, 60)));
  }
  VocabLine v{line.substr(0, space)};
  while (!v.word.empty() && (v.word.back() == ' ' || v.word.back() == '\t')) v.word.remove_suffix(1);
  const std::string_view count_text = line.substr(space + 1);
  const auto [p, ec] = std::from_chars(count_text.data(), count_text.data() + count_text.size(), v.count);
  if (ec != std::errc() || p != count_text.data() + count_text.size()) {
    throw InputError(
        fmt::format("{}: expected a non-negative integer count, got {}", where(), text::quote_token(count_text)));
  }
  if (v.word.empty() || v.word.find_first_of(" \t") != std::string_view::npos) {
    throw InputError(fmt::format("{}: a word may not be empty or contain spaces or tabs", where()));
  }
  if (v.word.find('\0') != std::string_view::npos) {
    throw InputError(
        fmt::format("{}: a word holds a NUL byte: this looks like a binary file, not a vocabulary", where()));
  }
  return v;
}

}  // namespace

Vocabulary Vocabulary::read(const std::filesystem::path& path, const VocabOptions& options, std::size_t* left_out) {
  if (left_out != nullptr) *left_out = 0;
  // "-" is standard input (as -train - is), named stdin in errors; gzipped or not. Streamed line by line: the
  // memory is the words kept, and a line without end is refused after kMaxVocabLineBytes.
  io::LineReader in(path, "a vocabulary file", kMaxVocabLineBytes);
  const std::string& name = in.name();
  std::vector<std::pair<std::string, std::uint64_t>> entries;
  // Every word read and its line, those dropped below too: a word listed twice is an error whichever copy
  // -min-count or a zero count would leave out (which count was meant cannot be told).
  std::unordered_map<std::string, std::size_t> first_line;
  io::GrowthCheck growth;
  std::uint64_t held = 0;  // about the bytes of entries and first_line
  std::string_view raw;
  std::size_t read = 0;
  bool first_entry = true;
  while (in.next(raw)) {
    const std::string_view line = trim_end(raw);
    if (line.empty()) continue;
    const VocabLine v = parse_vocab_line(line, name, in.line_no());
    // word2vec.c's sentence marker as the first entry (its count may be 0); later, "</s>" is a word of the corpus.
    const bool sentence_marker = first_entry && v.word == kSentenceMarker;
    first_entry = false;
    ++read;
    if (sentence_marker) continue;
    if (const auto [it, fresh] = first_line.emplace(v.word, in.line_no()); !fresh) {
      throw InputError(fmt::format("{}:{}: {} appears twice (first on line {})", name, in.line_no(),
                                   text::quote_token(v.word), it->second));
    }
    held += 2 * v.word.size() + 200;  // the word twice, a map node and bucket, an entry and its vector's slack
    growth(held, [&] {
      return fmt::format("{}:{}: a vocabulary of {} words so far, growing,", name, in.line_no(), read);
    });
    // Other whitespace of the corpus reader's (\v, \f, \r: word2vec.c splits on spaces, tabs and newlines only,
    // so its vocab files may hold such words): no token could ever match the word, so it is left out.
    if (std::any_of(v.word.begin(), v.word.end(), text::is_whitespace)) {
      if (left_out != nullptr) ++*left_out;
      continue;
    }
    // A word never seen cannot be trained (word2vec.c drops it below any -min-count).
    if (v.count == 0) continue;
    entries.emplace_back(std::string(v.word), v.count);
  }
  if (read == 0) throw InputError(fmt::format("{}: the vocabulary file is empty", name));
  first_line = {};
  // In any order, as word2vec.c's ReadVocab sorts (words of one count keep the file's order).
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  cut(entries, options);
  if (entries.empty()) throw InputError(fmt::format("{}: no word with count >= {}", name, options.min_count));
  std::vector<std::string> words;
  std::vector<std::uint64_t> counts;
  words.reserve(entries.size());
  counts.reserve(entries.size());
  for (auto& [w, c] : entries) {
    words.push_back(std::move(w));
    counts.push_back(c);
  }
  try {
    return Vocabulary(std::move(words), std::move(counts));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", name, e.what()));
  }
}

std::vector<float> Vocabulary::keep_probabilities(double sample) const {
  std::vector<float> keep(words_.size(), 1.0f);
  if (sample <= 0) return keep;
  const double threshold = sample * static_cast<double>(total_);
  for (std::size_t i = 0; i < words_.size(); ++i) {
    const double ratio = threshold / static_cast<double>(counts_[i]);  // t / f(w)
    keep[i] = static_cast<float>(std::min(1.0, std::sqrt(ratio) + ratio));
  }
  return keep;
}

}  // namespace asgd::sparse::w2v
