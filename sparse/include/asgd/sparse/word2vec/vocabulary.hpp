// The word2vec vocabulary: words with their counts, sorted by frequency,
// cut at a minimum count (and optionally a maximum size), with the
// frequent-word subsampling probabilities derived from the counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace asgd::sparse::w2v {

// The longest line of a vocab file: 64 KiB, as the vectors reader's longest word (the corpus reader cuts words at
// 1 KiB, word2vec.c at 100 bytes).
inline constexpr std::size_t kMaxVocabLineBytes = std::size_t{64} << 10;

struct VocabOptions {
  std::uint64_t min_count = 5;  // words seen fewer times are dropped
  std::size_t max_size = 0;     // keep at most this many words (0: no limit)
};

class Vocabulary {
 public:
  // Counts of raw tokens; call add() per token, then finish().
  class Counter {
   public:
    // Past `prune_at` distinct words, the rarest are dropped as word2vec.c's
    // ReduceVocab does (at 21M, 0.7 of its 30M-slot table): words seen at
    // most once, then at most twice at the next prune, and so on. Their
    // counts so far are lost: a word dropped at every prune and seen again in
    // between can be missing at the end, or counted short. It bounds the
    // memory of a corpus of many rare tokens (about 70 bytes a distinct word:
    // 20M took 1.45 GB, then found none at -min-count 5).
    static constexpr std::size_t kPruneAt = 21'000'000;
    explicit Counter(std::size_t prune_at = kPruneAt) : prune_at_(prune_at) {}
    void add(std::string_view token);
    std::uint64_t tokens() const noexcept { return tokens_; }
    std::size_t distinct() const noexcept { return counts_.size(); }
    // How many prunes there were (the last dropped counts up to that many).
    std::size_t prunes() const noexcept { return prune_floor_ - 1; }
    // Sorted by count (descending), ties by word (bytewise ascending), so the
    // order is the same on every machine. Throws InputError when no word
    // survives min_count.
    Vocabulary finish(const VocabOptions& options) &&;

    // Lets the maps look words up by string_view without a copy.
    struct Hash {
      using is_transparent = void;
      std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };

   private:
    std::unordered_map<std::string, std::uint64_t, Hash, std::equal_to<>> counts_;
    std::uint64_t tokens_ = 0;
    std::size_t prune_at_;
    std::uint64_t prune_floor_ = 1;  // the next prune drops counts up to this
  };

  // From words and counts given in frequency order (e.g. a vocab file).
  // InputError for a word that is empty, holds a blank (the corpus reader's
  // whitespace) or comes twice, and for counts that add up past 2^64.
  Vocabulary(std::vector<std::string> words, std::vector<std::uint64_t> counts);
  Vocabulary() = default;

  // word2vec.c's -save-vocab / -read-vocab format: "word count" per line,
  // its sentence marker "</s>" first (save() writes "</s> 0" there, so that
  // word2vec.c does not take our most frequent word for it). read() skips a
  // first "</s>" line (a later one is a word), then applies
  // min_count/max_size; it throws InputError with file:line for a line that
  // is not "word count", a word with a space or tab in it, a count that is
  // not a non-negative integer, or a duplicate word; counts in any order are
  // sorted (as word2vec.c's ReadVocab), and a word of count 0 is dropped. A
  // word with other whitespace the corpus reader splits
  // on (\v, \f, \r; word2vec.c's files may hold them) is left out: no
  // token could match it; `left_out`, when given, counts those words.
  // read("-") reads standard input. It is streamed line by line and judged
  // as it goes: a line longer than kMaxVocabLineBytes is refused there (a
  // file with no newline, /dev/zero), a word with a NUL byte at its line, and
  // a vocabulary growing past the memory available before it does; bytes of
  // a bad line are shown escaped.
  void save(const std::filesystem::path& path) const;
  static Vocabulary read(const std::filesystem::path& path, const VocabOptions& options = {},
                         std::size_t* left_out = nullptr);

  std::size_t size() const noexcept { return words_.size(); }
  const std::string& word(std::uint32_t id) const noexcept { return words_[id]; }
  const std::vector<std::string>& words() const noexcept { return words_; }
  std::uint64_t count(std::uint32_t id) const noexcept { return counts_[id]; }
  const std::vector<std::uint64_t>& counts() const noexcept { return counts_; }
  std::optional<std::uint32_t> find(std::string_view word) const noexcept;
  // Sum of the kept words' counts: word2vec.c's train_words.
  std::uint64_t total_count() const noexcept { return total_; }

  // Probability of keeping each occurrence of a word under frequent-word
  // subsampling with threshold `sample` (word2vec.c, fastText):
  //   keep(w) = min(1, sqrt(t / f(w)) + t / f(w)),  f(w) = count(w) / total.
  // sample <= 0 keeps everything.
  std::vector<float> keep_probabilities(double sample) const;

 private:
  void index();
  std::vector<std::string> words_;
  std::vector<std::uint64_t> counts_;
  std::unordered_map<std::string, std::uint32_t, Counter::Hash, std::equal_to<>> ids_;
  std::uint64_t total_ = 0;
};

}  // namespace asgd::sparse::w2v
