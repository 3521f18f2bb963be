// Word classes: word2vec.c's -classes, the words grouped by K-means over
// their vectors, written as "word class" lines instead of the vectors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace asgd::sparse::w2v {

struct WordClasses {
  std::vector<std::uint32_t> of;  // each word's class, in [0, k)
  std::size_t rounds = 0;         // assignment rounds run
  bool settled = false;           // the last round moved no word
  std::size_t reseeded = 0;       // rounds that left a class empty and refilled it
};

// K-means on the vectors' directions, as word2vec.c's -classes runs it, for
// n words of `dim` floats (row(i): word i's). Word i starts in class i mod k
// (a trained vocabulary is in frequency order, so every class starts with
// frequent and rare words alike). Each round a class's centre is the
// direction of the sum of its words' vectors, and every word moves to the
// centre with the largest dot product: the largest cosine, since a word's
// own length scales all its dots alike; ties go to the lower class. It stops
// after `max_rounds` rounds (word2vec.c runs 10) or once no word moves.
// Unlike word2vec.c, no class ends empty: a class that loses all its words
// takes the word least like its own class's centre (the lowest cosine, from
// a class that keeps another word), so that asking for k classes gives k.
// A class whose vectors sum to zero has no centre for that round. A word
// with no finite best dot (a NaN in its vector) stays where it is.
//
// The centres are summed in double in word order and each word's best
// centre depends only on the centres, so the classes are the same for any
// number of threads. InputError for k = 0, k > n, dim = 0 or max_rounds = 0.
// Costs n x k x dim multiply-adds a round (a tiled kernel, on all cores).
WordClasses word_classes(std::size_t n, std::size_t dim, const std::function<const float*(std::size_t)>& row,
                         std::size_t k, std::size_t max_rounds = 10);

// "word class\n" for each word in order, the classes in decimal: what
// word2vec.c writes for -classes (sort -k 2 -n groups them). Written
// atomically, as the vectors are. InputError for words and classes of
// different lengths, an empty word or one with whitespace.
void write_word_classes(const std::filesystem::path& path, std::span<const std::string> words,
                        std::span<const std::uint32_t> classes);

}  // namespace asgd::sparse::w2v
