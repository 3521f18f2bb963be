// Word vectors in word2vec's text and binary formats (read_word2vec tells them apart by the bytes).
#include <cmath>
#include <cstdint>

#include "asgd/sparse/word2vec/embeddings.hpp"
#include "fuzz_input.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile file("vectors");
  const auto& path = file.write({data, size});
  fuzz::reads({path.string()}, [&] {
    const auto e = sparse::w2v::read_word2vec(path);
    fuzz::require(e.vectors.size() == e.words.size() * e.dim, "vectors are not words x dim");
    fuzz::require(e.dim >= 1, "a dimension of 0");
    for (const auto& w : e.words) fuzz::require(!w.empty(), "an empty word");
    for (const float v : e.vectors) fuzz::require(std::isfinite(v), "a value that is not finite");
    fuzz::require(sparse::w2v::is_word2vec_binary(path) == e.binary || e.words.empty(),
                  "is_word2vec_binary disagrees with read_word2vec");
  });
  // The first record alone, as compute-accuracy's threshold reads a file: the rest is not looked at.
  fuzz::reads({path.string()}, [&] { sparse::w2v::read_word2vec(path, 1); });
  return 0;
}
