#include "asgd/sparse/word2vec/classes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/sparse/word2vec/evaluation.hpp"
#include "../text_util.hpp"

namespace asgd::sparse::w2v {

WordClasses word_classes(std::size_t n, std::size_t dim, const std::function<const float*(std::size_t)>& row,
                         std::size_t k, std::size_t max_rounds) {
  if (n == 0) throw InputError("word classes: no words");
  if (k == 0 || k > n)
    throw InputError(fmt::format("word classes: {} classes of {} words (expected 1 to {})", k, n, n));
  if (dim == 0) throw InputError("word classes: vectors of dimension 0");
  if (max_rounds == 0) throw InputError("word classes: at least one round");
  // Classes and candidates are 32-bit ids; best_candidates answers n_candidates for "none".
  if (k >= std::numeric_limits<std::uint32_t>::max())
    throw InputError(fmt::format("word classes: {} classes is too many", k));

  WordClasses out;
  out.of.resize(n);
  for (std::size_t i = 0; i < n; ++i) out.of[i] = static_cast<std::uint32_t>(i % k);

  std::vector<double> sums(k * dim);
  std::vector<std::size_t> size(k);  // words in each class
  std::vector<float> centres;          // the classes with a centre, unit length, one row each
  std::vector<std::uint32_t> centre_of;  // candidate index -> class
  // No word has a class to skip: best_candidates' exclusions name a class no candidate has.
  constexpr std::uint32_t kNoClass = std::numeric_limits<std::uint32_t>::max();
  const std::vector<std::array<std::uint32_t, 3>> excluded(n, {kNoClass, kNoClass, kNoClass});
  while (out.rounds < max_rounds) {
    std::fill(sums.begin(), sums.end(), 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      const float* v = row(i);
      double* s = sums.data() + out.of[i] * dim;
      for (std::size_t d = 0; d < dim; ++d) s[d] += v[d];
    }
    centres.clear();
    centre_of.clear();
    for (std::size_t c = 0; c < k; ++c) {
      const double* s = sums.data() + c * dim;
      double norm = 0;
      for (std::size_t d = 0; d < dim; ++d) norm += s[d] * s[d];
      norm = std::sqrt(norm);
      // An empty class sums to zero; so may one whose vectors cancel. Neither has a direction.
      if (!(norm > 0) || !std::isfinite(norm)) continue;
      for (std::size_t d = 0; d < dim; ++d) centres.push_back(static_cast<float>(s[d] / norm));
      centre_of.push_back(static_cast<std::uint32_t>(c));
    }
    const auto best = detail::best_candidates(
        n, [&](std::size_t i, float* q) { std::memcpy(q, row(i), dim * sizeof(float)); }, centres, centre_of,
        excluded, dim);
    ++out.rounds;
    bool moved = false;
    std::fill(size.begin(), size.end(), 0);
    for (std::size_t i = 0; i < n; ++i) {
      if (best[i] < centre_of.size()) {  // else no finite best dot: it stays
        const std::uint32_t c = centre_of[best[i]];
        moved = moved || c != out.of[i];
        out.of[i] = c;
      }
      ++size[out.of[i]];
    }
    // A class left empty takes the word least like its own centre (lowest cosine) from a class that keeps
    // another, so that k classes are k classes (word2vec.c leaves them empty). The next round's centres follow.
    std::vector<std::uint32_t> empty;
    for (std::size_t c = 0; c < k; ++c)
      if (size[c] == 0) empty.push_back(static_cast<std::uint32_t>(c));
    if (!empty.empty()) {
      std::vector<std::uint32_t> candidate_of(k, kNoClass);  // class -> its row in `centres`
      for (std::size_t j = 0; j < centre_of.size(); ++j) candidate_of[centre_of[j]] = static_cast<std::uint32_t>(j);
      std::vector<std::pair<float, std::uint32_t>> fit(n);  // (cosine to its centre, word)
      for (std::size_t i = 0; i < n; ++i) {
        const float* v = row(i);
        const std::uint32_t j = candidate_of[out.of[i]];
        double dot = 0, norm = 0;
        for (std::size_t d = 0; d < dim; ++d) {
          norm += static_cast<double>(v[d]) * v[d];
          if (j != kNoClass) dot += static_cast<double>(v[d]) * centres[j * dim + d];
        }
        // No centre, or a zero or non-finite vector: first to go.
        const double cosine = j != kNoClass && norm > 0 ? dot / std::sqrt(norm) : -2.0;
        fit[i] = {std::isfinite(cosine) ? static_cast<float>(cosine) : -2.0f, static_cast<std::uint32_t>(i)};
      }
      std::sort(fit.begin(), fit.end());
      std::size_t next = 0;
      for (const std::uint32_t c : empty) {
        while (next < n && size[out.of[fit[next].second]] < 2) ++next;
        if (next == n) break;  // cannot happen with k <= n: the classes hold n >= k words
        const std::uint32_t i = fit[next++].second;
        --size[out.of[i]];
        out.of[i] = c;
        size[c] = 1;
      }
      ++out.reseeded;
      moved = true;
    }
    if (!moved) {
      out.settled = true;
      break;
    }
  }
  return out;
}

void write_word_classes(const std::filesystem::path& path, std::span<const std::string> words,
                        std::span<const std::uint32_t> classes) {
  const std::string name = path.string();
  if (words.size() != classes.size()) {
    throw InputError(fmt::format("{}: {} words but {} classes", name, words.size(), classes.size()));
  }
  text::require_plain_words(name, words, "\"word class\" lines");
  AtomicFile file(path);
  std::string buffer;
  constexpr std::size_t kFlushAt = std::size_t{1} << 20;
  for (std::size_t i = 0; i < words.size(); ++i) {
    buffer += words[i];
    fmt::format_to(std::back_inserter(buffer), " {}\n", classes[i]);
    if (buffer.size() >= kFlushAt) {
      file.write(buffer);
      buffer.clear();
    }
  }
  file.write(buffer);
  file.commit();
}

}  // namespace asgd::sparse::w2v
