// Reading a text corpus for word2vec: whitespace-separated tokens, one
// sentence per line, streamed from a file in chunks (or from stdin or a pipe,
// which is buffered once so it can be read twice), gzipped or not (told by its
// first bytes, as gzip -dc does); and the corpus encoded as word ids.
//
// Documented behaviour on odd input:
//  * tokens are byte strings: invalid UTF-8 is kept as it is (as word2vec.c);
//  * a NUL byte means the file is binary: InputError naming the line and
//    offset, where it is found (a pipe or device, such as /dev/zero, is held
//    in memory for the second pass: judged chunk by chunk as it arrives);
//  * a pipe is held whole only while the memory available allows: past it,
//    InputError naming the bytes (an endless pipe ends there);
//  * a line longer than kMaxSentence in-vocabulary words is split into
//    sentences of kMaxSentence words (never truncated);
//  * a token longer than kMaxTokenBytes is cut to that length and counted in
//    CorpusStats::truncated_tokens;
//  * an empty file or one with no words is an InputError.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "asgd/sparse/word2vec/vocabulary.hpp"

namespace asgd::sparse::io {
class InputFile;
}

namespace asgd::sparse::w2v {

inline constexpr std::size_t kMaxSentence = 1000;
inline constexpr std::size_t kMaxTokenBytes = 1024;

class TokenReader {
 public:
  enum class Kind { word, line_end, end };

  // "-" reads standard input: into memory when it is a pipe (read twice),
  // streamed like a file when it is one. Throws InputError when the file
  // cannot be opened.
  explicit TokenReader(const std::filesystem::path& path);
  TokenReader(const TokenReader&) = delete;
  TokenReader& operator=(const TokenReader&) = delete;
  ~TokenReader();

  // The next token (Kind::word, `token` valid until the next call), the end
  // of a line, or the end of the input.
  Kind next(std::string_view& token);
  // Back to the start for another pass.
  void rewind();

  const std::string& name() const noexcept { return name_; }
  std::uint64_t truncated_tokens() const noexcept { return truncated_; }

 private:
  bool refill();
  void read_whole();
  [[noreturn]] void binary_error(std::size_t at) const;

  std::string name_;
  std::unique_ptr<io::InputFile> file_;
  bool from_memory_ = false;
  // Bytes in one malloc'ed block, grown by realloc: a large block grows by remapping its pages, not by a copy
  // beside the old one, and new bytes are not zeroed. (A whole pipe read into a vector<char> peaked at 3x the
  // corpus: the old buffer and the doubled, zeroed new one; and it kept the doubled capacity.)
  class Bytes {
   public:
    Bytes() = default;
    Bytes(const Bytes&) = delete;
    Bytes& operator=(const Bytes&) = delete;
    ~Bytes();
    void resize(std::size_t n);  // new bytes uninitialised; std::bad_alloc when it cannot
    char* data() noexcept { return p_; }
    std::size_t size() const noexcept { return n_; }
    char operator[](std::size_t i) const noexcept { return p_[i]; }

   private:
    char* p_ = nullptr;
    std::size_t n_ = 0;
  };
  Bytes buffer_;
  std::size_t pos_ = 0, end_ = 0;
  std::uint64_t consumed_ = 0;  // bytes before buffer_[0]
  std::uint64_t lines_ = 0;     // newlines before pos_ (for messages)
  bool eof_ = false;
  std::string carry_;
  std::uint64_t truncated_ = 0;
};

struct CorpusStats {
  std::uint64_t lines = 0;
  std::uint64_t tokens = 0;           // all tokens read
  // Tokens in the vocabulary. count_vocabulary's: the tokens the vocabulary it made keeps of this corpus (its
  // total count; 0 when it pruned, and so undercounted), what encode_corpus's expected_tokens asks for.
  std::uint64_t kept_tokens = 0;
  std::uint64_t split_lines = 0;      // lines longer than kMaxSentence kept words
  std::uint64_t truncated_tokens = 0;
  std::size_t vocabulary_prunes = 0;  // count_vocabulary's (Vocabulary::Counter::prunes)
};

// The corpus as word ids (out-of-vocabulary tokens dropped), cut into
// sentences of at most kMaxSentence words.
struct EncodedCorpus {
  std::vector<std::uint32_t> tokens;
  std::vector<std::uint64_t> sentence_begin;  // sentences() + 1 offsets into tokens
  CorpusStats stats;
  std::size_t sentences() const noexcept { return sentence_begin.empty() ? 0 : sentence_begin.size() - 1; }
};

// Sentences [S part / parts, S (part + 1) / parts) of `corpus`: one rank's
// shard (its stats are the whole corpus's but for kept_tokens). InputError
// when the shard would hold no sentence.
EncodedCorpus shard_sentences(const EncodedCorpus& corpus, std::size_t part, std::size_t parts);

// One pass counting every token.
Vocabulary count_vocabulary(TokenReader& reader, const VocabOptions& options, CorpusStats* stats = nullptr);
// One pass encoding with `vocab`. Throws InputError when no token is in it.
// `expected_tokens`: how many tokens it will keep, when known (count_vocabulary's
// CorpusStats::kept_tokens for this corpus), reserved at once instead of
// grown (growing peaked at twice the array, 8 GB for 2^30 tokens).
EncodedCorpus encode_corpus(TokenReader& reader, const Vocabulary& vocab, std::uint64_t expected_tokens = 0);

}  // namespace asgd::sparse::w2v
