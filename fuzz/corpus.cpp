// word2vec's text corpus (TokenReader): a vocabulary counted over the input, then the input encoded with it.
#include <cstdint>

#include "asgd/sparse/word2vec/corpus.hpp"
#include "fuzz_input.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile file("corpus");
  const auto& path = file.write({data, size});
  fuzz::reads({path.string()}, [&] {
    sparse::w2v::TokenReader reader(path);
    sparse::w2v::CorpusStats stats;
    const auto vocab = sparse::w2v::count_vocabulary(reader, {.min_count = 1, .max_size = 0}, &stats);
    reader.rewind();
    const auto corpus = sparse::w2v::encode_corpus(reader, vocab, stats.kept_tokens);
    fuzz::require(corpus.sentence_begin.size() == corpus.sentences() + 1 || corpus.sentence_begin.empty(),
                  "sentence offsets");
    for (std::size_t s = 0; s < corpus.sentences(); ++s) {
      fuzz::require(corpus.sentence_begin[s] <= corpus.sentence_begin[s + 1], "sentence offsets decrease");
      fuzz::require(corpus.sentence_begin[s + 1] - corpus.sentence_begin[s] <= sparse::w2v::kMaxSentence,
                    "a sentence longer than kMaxSentence");
    }
    fuzz::require(corpus.sentence_begin.empty() || corpus.sentence_begin.back() == corpus.tokens.size(),
                  "the last sentence does not end at the last token");
    for (const std::uint32_t id : corpus.tokens) fuzz::require(id < vocab.size(), "a word id past the vocabulary");
    fuzz::require(corpus.tokens.size() == stats.kept_tokens, "encoded another count of tokens than counted");
  });
  return 0;
}
