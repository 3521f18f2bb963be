// Word vectors on disk: word2vec.c's text and binary formats, written
// atomically and read back with the format detected from the bytes.
//
// Both formats start with a header line "V D\n" (V words of D dimensions),
// then one record per word, in the order given (frequency order for a
// trained model, which is what evaluation's restrict_vocab relies on):
//
//  * text:   "word v1 v2 ... vD \n", each value printed as "%f" (6 decimals)
//            followed by a space, exactly as word2vec.c's "%lf " loop does;
//            gensim's KeyedVectors.load_word2vec_format(binary=False) reads it.
//  * binary: "word " then D float32 in little-endian byte order, then "\n"
//            (word2vec.c's layout; gensim omits the "\n", which the reader
//            accepts too, and word2vec.c's own readers skip).
//
// Words must be non-empty and hold no whitespace (' ', '\t', '\n', '\r',
// '\v', '\f'): a space would end the word early in either format.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace asgd::sparse::w2v {

struct Embeddings {
  std::vector<std::string> words;
  std::size_t dim = 0;
  std::vector<float> vectors;  // words.size() x dim, row-major
  bool binary = false;         // the format read_word2vec found (writing takes it as an argument)

  std::size_t size() const noexcept { return words.size(); }
  std::span<const float> row(std::size_t id) const noexcept { return {vectors.data() + id * dim, dim}; }
};

// Writes V = words.size() rows of `dim` floats, row(i) giving word i's
// vector, without copying the matrix. The file is written beside `path`
// under a temporary name, flushed to disk and renamed over `path`, so a
// reader never sees half a file. InputError for dim 0, an empty word or one
// with whitespace, a path that is a directory or cannot be created;
// RuntimeError for a failed write. Values are written as they are: a
// diverged model's nan/inf get written, and read_word2vec refuses them.
void write_word2vec(const std::filesystem::path& path, bool binary, std::span<const std::string> words, std::size_t dim,
                    const std::function<const float*(std::size_t)>& row);

// The same from an Embeddings (InputError if vectors.size() != V x dim).
void write_word2vec(const std::filesystem::path& path, bool binary, const Embeddings& embeddings);
void write_word2vec_text(const std::filesystem::path& path, const Embeddings& embeddings);
void write_word2vec_binary(const std::filesystem::path& path, const Embeddings& embeddings);

// Reads either format, from a file gzipped or not (offsets are then in the
// unpacked bytes), telling them apart by the first record: text when
// the rest of its line is numbers and blanks (the text reader then insists
// on D of them), binary when it holds a byte no number has (embeddings.cpp
// says how the rare ambiguous case is settled). Words are kept as bytes.
// Reads at most `max_words` records (the first ones; compute-accuracy's
// threshold) and ignores the rest of the file then. InputError, starting
// with "FILE:LINE: " for text and "FILE: byte OFFSET: " for binary, for a
// header that is not "V D" with D >= 1, a file shorter than the header says,
// a vector of the wrong length, a value that is not a finite number, or
// data after the V-th record.
Embeddings read_word2vec(const std::filesystem::path& path,
                         std::size_t max_words = std::numeric_limits<std::size_t>::max());

// True when read_word2vec would read `path` as binary (false for V = 0);
// the same InputError as read_word2vec for a bad header. It reads the start
// of the file, so a pipe is then spent: read it once with read_word2vec and
// ask Embeddings::binary instead.
bool is_word2vec_binary(const std::filesystem::path& path);

}  // namespace asgd::sparse::w2v
