// word2vec's vocabulary file (-read-vocab, -save-vocab's format): Vocabulary::read.
#include <cstdint>

#include "asgd/sparse/word2vec/vocabulary.hpp"
#include "fuzz_input.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile file("vocabulary");
  const auto& path = file.write({data, size});
  fuzz::reads({path.string()}, [&] {
    std::size_t left_out = 0;
    const auto vocab = sparse::w2v::Vocabulary::read(path, {.min_count = 1, .max_size = 0}, &left_out);
    std::uint64_t total = 0;
    for (std::uint32_t id = 0; id < vocab.size(); ++id) {
      fuzz::require(!vocab.word(id).empty(), "an empty word");
      fuzz::require(vocab.find(vocab.word(id)) == id, "a word that find() does not find at its id");
      fuzz::require(id == 0 || vocab.count(id) <= vocab.count(id - 1), "counts out of order");
      total += vocab.count(id);
    }
    fuzz::require(total == vocab.total_count(), "total_count is not the sum of the counts");
  });
  return 0;
}
