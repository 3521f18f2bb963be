#include "asgd/sparse/word2vec/evaluation.hpp"

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <sstream>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "asgd/engine/errors.hpp"
#include "../input.hpp"
#include "../text_util.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define ASGD_W2V_X86 1
#endif

namespace asgd::sparse::w2v {
namespace {

namespace fs = std::filesystem;

using text::is_whitespace;
using text::split_fields;

// The whole file (these are small), gzipped or not.
std::istringstream open_text(const fs::path& path, const char* what) {
  return std::istringstream(std::string(io::read_all(path, what).view()));
}

// The fields of a comma-separated line, each without the blanks around it
// (a field left empty counts as none).
std::vector<std::string_view> split_commas(std::string_view line) {
  std::vector<std::string_view> fields;
  while (true) {
    const auto comma = line.find(',');
    std::string_view field = line.substr(0, comma);
    while (!field.empty() && text::is_whitespace(field.front())) field.remove_prefix(1);
    while (!field.empty() && text::is_whitespace(field.back())) field.remove_suffix(1);
    if (!field.empty()) fields.push_back(field);
    if (comma == std::string_view::npos) return fields;
    line.remove_prefix(comma + 1);
  }
}

bool parse_double(std::string_view field, double& value) {
  if (field.size() >= 2 && field[0] == '+' && field[1] != '-' && field[1] != '+') field.remove_prefix(1);
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  return ec == std::errc() && end == field.data() + field.size() && std::isfinite(value);
}

double ratio(std::size_t num, std::size_t den) noexcept {
  return den ? static_cast<double>(num) / static_cast<double>(den) : 0.0;
}

// ---- the blocked argmax -------------------------------------------------
//
// Scores are a (queries x candidates) matrix product computed tile by tile:
// kRows queries against a panel of kCols candidates stored dimension-major,
// so the inner step is kRows broadcasts and 2 x kRows vector FMAs. A task
// owns a range of query tiles and sweeps the candidates in chunks that stay
// in L2, keeping a running best per query; nothing is allocated per tile.

constexpr std::size_t kRows = 6;
constexpr std::size_t kCols = 16;
constexpr std::size_t kChunkBytes = std::size_t{512} << 10;
constexpr std::size_t kTilesPerTask = 16;

using TileFn = void (*)(const float* queries, std::size_t dim, const float* panel, float* out) noexcept;

// Baseline ISA (SSE2 on x86-64, NEON on AArch64) through GCC/Clang vector
// types: plain loops get vectorised along the wrong axis. Two query rows at
// a time keep 8 accumulators and the 4 panel vectors in registers.
using Float4 = float __attribute__((vector_size(16)));

inline Float4 load4(const float* p) noexcept {
  Float4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void tile_portable(const float* q, std::size_t dim, const float* panel, float* out) noexcept {
  static_assert(kRows % 2 == 0 && kCols == 16, "the portable tile takes rows in pairs of 16 columns");
  for (std::size_t i = 0; i < kRows; i += 2) {
    Float4 a0 = {}, a1 = {}, a2 = {}, a3 = {}, b0 = {}, b1 = {}, b2 = {}, b3 = {};
    const float* qa = q + i * dim;
    const float* qb = qa + dim;
    for (std::size_t d = 0; d < dim; ++d) {
      const float* p = panel + d * kCols;
      const Float4 p0 = load4(p), p1 = load4(p + 4), p2 = load4(p + 8), p3 = load4(p + 12);
      const float x = qa[d], y = qb[d];
      a0 += x * p0;
      a1 += x * p1;
      a2 += x * p2;
      a3 += x * p3;
      b0 += y * p0;
      b1 += y * p1;
      b2 += y * p2;
      b3 += y * p3;
    }
    float* o = out + i * kCols;
    std::memcpy(o, &a0, 16);
    std::memcpy(o + 4, &a1, 16);
    std::memcpy(o + 8, &a2, 16);
    std::memcpy(o + 12, &a3, 16);
    std::memcpy(o + 16, &b0, 16);
    std::memcpy(o + 20, &b1, 16);
    std::memcpy(o + 24, &b2, 16);
    std::memcpy(o + 28, &b3, 16);
  }
}

#ifdef ASGD_W2V_X86
__attribute__((target("avx2,fma"))) void tile_avx2(const float* q, std::size_t dim, const float* panel,
                                                   float* out) noexcept {
  static_assert(kRows == 6 && kCols == 16, "the AVX2 tile is 6 x 16");
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps(),
         c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(), c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(),
         c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  const float *q0 = q, *q1 = q + dim, *q2 = q + 2 * dim, *q3 = q + 3 * dim, *q4 = q + 4 * dim, *q5 = q + 5 * dim;
  for (std::size_t d = 0; d < dim; ++d) {
    const __m256 p0 = _mm256_loadu_ps(panel + d * kCols);
    const __m256 p1 = _mm256_loadu_ps(panel + d * kCols + 8);
    __m256 a = _mm256_broadcast_ss(q0 + d);
    c00 = _mm256_fmadd_ps(a, p0, c00);
    c01 = _mm256_fmadd_ps(a, p1, c01);
    a = _mm256_broadcast_ss(q1 + d);
    c10 = _mm256_fmadd_ps(a, p0, c10);
    c11 = _mm256_fmadd_ps(a, p1, c11);
    a = _mm256_broadcast_ss(q2 + d);
    c20 = _mm256_fmadd_ps(a, p0, c20);
    c21 = _mm256_fmadd_ps(a, p1, c21);
    a = _mm256_broadcast_ss(q3 + d);
    c30 = _mm256_fmadd_ps(a, p0, c30);
    c31 = _mm256_fmadd_ps(a, p1, c31);
    a = _mm256_broadcast_ss(q4 + d);
    c40 = _mm256_fmadd_ps(a, p0, c40);
    c41 = _mm256_fmadd_ps(a, p1, c41);
    a = _mm256_broadcast_ss(q5 + d);
    c50 = _mm256_fmadd_ps(a, p0, c50);
    c51 = _mm256_fmadd_ps(a, p1, c51);
  }
  _mm256_storeu_ps(out + 0, c00);
  _mm256_storeu_ps(out + 8, c01);
  _mm256_storeu_ps(out + 16, c10);
  _mm256_storeu_ps(out + 24, c11);
  _mm256_storeu_ps(out + 32, c20);
  _mm256_storeu_ps(out + 40, c21);
  _mm256_storeu_ps(out + 48, c30);
  _mm256_storeu_ps(out + 56, c31);
  _mm256_storeu_ps(out + 64, c40);
  _mm256_storeu_ps(out + 72, c41);
  _mm256_storeu_ps(out + 80, c50);
  _mm256_storeu_ps(out + 88, c51);
}

bool have_avx2_fma() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

TileFn pick_tile(detail::ScoreKernel kernel) noexcept {
#ifdef ASGD_W2V_X86
  static const bool avx2 = have_avx2_fma();
  if (kernel == detail::ScoreKernel::automatic && avx2) return tile_avx2;
#else
  (void)kernel;
#endif
  return tile_portable;
}

}  // namespace

// ---- EmbeddingIndex -----------------------------------------------------

std::string ascii_lowercase(std::string_view word) {
  std::string out(word);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

EmbeddingIndex::EmbeddingIndex(Embeddings e) {
  if (e.vectors.size() != e.words.size() * e.dim) {
    throw InputError(fmt::format("embeddings hold {} floats, expected {} words x {} dimensions", e.vectors.size(),
                                 e.words.size(), e.dim));
  }
  if (e.words.size() >= std::numeric_limits<std::uint32_t>::max()) {
    throw InputError(fmt::format("{} words: at most 2^32 - 2 are supported", e.words.size()));
  }
  words_ = std::move(e.words);
  dim_ = e.dim;
  unit_ = std::move(e.vectors);
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, words_.size(), 1024), [&](const auto& r) {
    for (std::size_t i = r.begin(); i != r.end(); ++i) {
      float* v = unit_.data() + i * dim_;
      double sq = 0.0;
      for (std::size_t k = 0; k < dim_; ++k) sq += static_cast<double>(v[k]) * v[k];
      if (sq > 0.0) {
        // Scaled in double: a vector of subnormal floats (a norm below 1 / FLT_MAX) has an inverse norm past
        // float's range, which made its unit vector inf (NaN where a value was 0) and won every argmax.
        const double inv = 1.0 / std::sqrt(sq);
        for (std::size_t k = 0; k < dim_; ++k) v[k] = static_cast<float>(v[k] * inv);
      }
    }
  });
  lower_.reserve(words_.size());
  canonical_.resize(words_.size());
  for (std::size_t i = 0; i < words_.size(); ++i) {
    canonical_[i] = static_cast<std::uint32_t>(lower_.try_emplace(ascii_lowercase(words_[i]), i).first->second);
  }
}

std::optional<std::size_t> EmbeddingIndex::find(std::string_view word) const {
  const auto it = lower_.find(ascii_lowercase(word));
  if (it == lower_.end()) return std::nullopt;
  return it->second;
}

std::size_t EmbeddingIndex::at(std::string_view word) const {
  const auto id = find(word);
  if (!id) throw InputError(fmt::format("'{}' is not in the vocabulary", word));
  if (words_[*id] == word) return *id;
  // Another spelling is more frequent; prefer the exact one if it exists.
  for (std::size_t i = *id + 1; i < words_.size(); ++i) {
    if (words_[i] == word) return i;
  }
  return *id;
}

std::vector<std::pair<std::string, float>> EmbeddingIndex::nearest(std::size_t id, std::size_t k) const {
  std::vector<std::pair<float, std::uint32_t>> scored;
  scored.reserve(words_.size());
  const auto query = unit(id);
  for (std::size_t c = 0; c < words_.size(); ++c) {
    if (c == id) continue;
    const auto v = unit(c);
    float s = 0.0f;
    for (std::size_t d = 0; d < dim_; ++d) s += query[d] * v[d];
    scored.emplace_back(s, static_cast<std::uint32_t>(c));
  }
  k = std::min(k, scored.size());
  std::partial_sort(
      scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(k), scored.end(),
      [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  std::vector<std::pair<std::string, float>> out;
  out.reserve(k);
  for (std::size_t i = 0; i < k; ++i) out.emplace_back(words_[scored[i].second], scored[i].first);
  return out;
}

void EmbeddingIndex::check_id(std::size_t id) const {
  if (id >= words_.size())
    throw InputError(fmt::format("word id {}: expected an id below the vocabulary's {} words", id, words_.size()));
}

float EmbeddingIndex::similarity(std::size_t a, std::size_t b) const {
  check_id(a);
  check_id(b);
  const auto x = unit(a), y = unit(b);
  double s = 0.0;
  for (std::size_t d = 0; d < dim_; ++d) s += static_cast<double>(x[d]) * y[d];
  return static_cast<float>(s);
}

std::vector<std::pair<std::size_t, float>> EmbeddingIndex::most_similar(std::span<const std::size_t> positive,
                                                                        std::span<const std::size_t> negative,
                                                                        std::size_t k) const {
  if (positive.empty() && negative.empty()) throw InputError("most_similar: give at least one word");
  // The query: the weighted mean of the unit vectors, normalised (gensim's get_mean_vector with
  // pre_normalize and post_normalize; the mean's scale does not change the ranking, only the cosines).
  std::vector<double> mean(dim_, 0.0);
  std::vector<char> excluded(words_.size(), 0);
  for (const auto& [ids, weight] : {std::pair{positive, 1.0}, std::pair{negative, -1.0}}) {
    for (const std::size_t id : ids) {
      check_id(id);
      excluded[id] = 1;
      const auto v = unit(id);
      for (std::size_t d = 0; d < dim_; ++d) mean[d] += weight * v[d];
    }
  }
  double sq = 0.0;
  for (const double m : mean) sq += m * m;
  const double inv = sq > 0.0 ? 1.0 / std::sqrt(sq) : 0.0;
  std::vector<float> query(dim_);
  for (std::size_t d = 0; d < dim_; ++d) query[d] = static_cast<float>(mean[d] * inv);
  std::vector<std::pair<float, std::uint32_t>> scored;
  scored.reserve(words_.size());
  for (std::size_t c = 0; c < words_.size(); ++c) {
    if (excluded[c]) continue;
    const auto v = unit(c);
    float s = 0.0f;
    for (std::size_t d = 0; d < dim_; ++d) s += query[d] * v[d];
    scored.emplace_back(s, static_cast<std::uint32_t>(c));
  }
  k = std::min(k, scored.size());
  std::partial_sort(
      scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(k), scored.end(),
      [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  std::vector<std::pair<std::size_t, float>> out;
  out.reserve(k);
  for (std::size_t i = 0; i < k; ++i) out.emplace_back(scored[i].second, scored[i].first);
  return out;
}

// ---- analogies ----------------------------------------------------------

std::vector<AnalogySectionQuestions> read_analogy_questions(const fs::path& path) {
  auto in = open_text(path, "an analogy questions file");
  std::vector<AnalogySectionQuestions> sections;
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view text(line);
    while (!text.empty() && is_whitespace(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_whitespace(text.back())) text.remove_suffix(1);
    if (text.empty()) continue;
    if (text.front() == ':') {
      text.remove_prefix(1);
      while (!text.empty() && is_whitespace(text.front())) text.remove_prefix(1);
      if (text.empty())
        throw InputError(fmt::format("{}:{}: expected a section name after ':'", io::display_name(path), line_no));
      sections.push_back({std::string(text), {}});
      continue;
    }
    const auto fields = split_fields(text);
    if (fields.size() != 4) {
      throw InputError(fmt::format("{}:{}: expected 4 words (a b c d) or ': section', found {} fields",
                                   io::display_name(path), line_no, fields.size()));
    }
    if (sections.empty()) sections.push_back({"", {}});
    sections.back().questions.push_back(
        {std::string(fields[0]), std::string(fields[1]), std::string(fields[2]), std::string(fields[3])});
  }
  return sections;
}

AnalogyReport evaluate_analogies(const EmbeddingIndex& index, std::span<const AnalogySectionQuestions> questions,
                                 std::size_t restrict_vocab) {
  const std::size_t limit = restrict_vocab == 0 ? index.size() : std::min(restrict_vocab, index.size());
  const std::size_t dim = index.dim();
  AnalogyReport report;
  report.restrict_vocab = limit;

  struct Seen {
    std::size_t section;
    std::array<std::uint32_t, 4> ids;
  };
  std::vector<Seen> seen;
  for (std::size_t s = 0; s < questions.size(); ++s) {
    AnalogySection section;
    section.name = questions[s].name;
    section.syntactic = section.name.starts_with("gram");
    section.total = questions[s].questions.size();
    for (const auto& q : questions[s].questions) {
      std::array<std::uint32_t, 4> ids{};
      bool known = true;
      for (std::size_t w = 0; w < 4 && known; ++w) {
        const auto id = index.find(q[w]);
        known = id && *id < limit;
        if (known) ids[w] = static_cast<std::uint32_t>(*id);
      }
      if (!known) continue;
      ++section.seen;
      seen.push_back({s, ids});
    }
    report.sections.push_back(std::move(section));
  }

  std::vector<std::uint32_t> group(limit);
  for (std::size_t c = 0; c < limit; ++c) group[c] = index.canonical(c);
  // The queries (b - a + c) are made as they are scored, a few tiles at a time (all of them at once take
  // questions x dim floats: for a few words of a very wide model repeated in many questions, gigabytes).
  std::vector<std::array<std::uint32_t, 3>> excluded;
  excluded.reserve(seen.size());
  for (const auto& q : seen) excluded.push_back({q.ids[0], q.ids[1], q.ids[2]});
  const auto best = detail::best_candidates(
      seen.size(),
      [&](std::size_t q, float* out) {
        const auto& ids = seen[q].ids;
        const auto a = index.unit(ids[0]), b = index.unit(ids[1]), c = index.unit(ids[2]);
        for (std::size_t d = 0; d < dim; ++d) out[d] = b[d] - a[d] + c[d];
      },
      index.units().first(limit * dim), group, excluded, dim);
  for (std::size_t q = 0; q < seen.size(); ++q) {
    if (best[q] < limit && group[best[q]] == seen[q].ids[3]) ++report.sections[seen[q].section].correct;
  }

  for (const auto& section : report.sections) {
    report.correct += section.correct;
    report.seen += section.seen;
    report.total += section.total;
    (section.syntactic ? report.syntactic_correct : report.semantic_correct) += section.correct;
    (section.syntactic ? report.syntactic_seen : report.semantic_seen) += section.seen;
  }
  report.semantic_accuracy = ratio(report.semantic_correct, report.semantic_seen);
  report.syntactic_accuracy = ratio(report.syntactic_correct, report.syntactic_seen);
  return report;
}

AnalogyReport evaluate_analogies(const EmbeddingIndex& index, const fs::path& questions, std::size_t restrict_vocab) {
  const auto sections = read_analogy_questions(questions);
  return evaluate_analogies(index, sections, restrict_vocab);
}

AnalogyReport evaluate_analogies(const Embeddings& embeddings, const fs::path& questions, std::size_t restrict_vocab) {
  const auto sections = read_analogy_questions(questions);
  return evaluate_analogies(EmbeddingIndex(embeddings), sections, restrict_vocab);
}

// ---- similarity ---------------------------------------------------------

std::vector<SimilarityPair> read_similarity_pairs(const fs::path& path) {
  auto in = open_text(path, "a word-pair similarity file");
  std::vector<SimilarityPair> pairs;
  std::string line;
  std::size_t line_no = 0;
  bool first_data_line = true;
  while (std::getline(in, line)) {
    ++line_no;
    // Whitespace-separated (wordsim353.tsv, SimLex's .txt) or comma-separated (WordSim-353's combined.csv: a
    // line of three or more fields between commas; "a b 7,35" stays a whitespace line with a bad score).
    auto fields = split_commas(line);
    if (fields.size() < 3) fields = split_fields(line);
    if (fields.empty() || fields[0].front() == '#') continue;
    if (fields.size() < 3) {
      throw InputError(fmt::format("{}:{}: expected 'word1 word2 score', found {} field{}", io::display_name(path),
                                   line_no, fields.size(), fields.size() == 1 ? "" : "s"));
    }
    double score = 0.0;
    const bool numeric = parse_double(fields[2], score);
    // A header names its columns ("Word 1,Word 2,Human (mean)"): a score that starts with a letter and is no
    // number at all. A mistyped or non-finite number on the first line ("7.35x", "7,35", "nan") is an error
    // like anywhere else, not a header to drop.
    const bool header = first_data_line && !numeric &&
                        std::isalpha(static_cast<unsigned char>(fields[2].front())) && !text::is_any_number(fields[2]);
    first_data_line = false;
    if (header) continue;
    if (!numeric) {
      throw InputError(fmt::format("{}:{}: expected a finite number as the score, found '{}'", io::display_name(path),
                                   line_no, fields[2]));
    }
    pairs.push_back({std::string(fields[0]), std::string(fields[1]), score});
  }
  return pairs;
}

SimilarityReport evaluate_similarity(const EmbeddingIndex& index, std::span<const SimilarityPair> pairs) {
  SimilarityReport report;
  report.pairs_total = pairs.size();
  std::vector<double> human, model;
  for (const auto& p : pairs) {
    const auto a = index.find(p.first), b = index.find(p.second);
    if (!a || !b) continue;
    const auto u = index.unit(*a), v = index.unit(*b);
    double dot = 0.0;
    for (std::size_t d = 0; d < index.dim(); ++d) dot += static_cast<double>(u[d]) * v[d];
    human.push_back(p.score);
    model.push_back(dot);
  }
  report.pairs_used = human.size();
  report.spearman = spearman(human, model);
  return report;
}

SimilarityReport evaluate_similarity(const EmbeddingIndex& index, const fs::path& pairs) {
  const auto list = read_similarity_pairs(pairs);
  return evaluate_similarity(index, list);
}

SimilarityReport evaluate_similarity(const Embeddings& embeddings, const fs::path& pairs) {
  const auto list = read_similarity_pairs(pairs);
  return evaluate_similarity(EmbeddingIndex(embeddings), list);
}

namespace {

// 1-based ranks, ties sharing the average of the positions they span.
std::vector<double> average_ranks(std::span<const double> v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i + 1;
    while (j < order.size() && v[order[j]] == v[order[i]]) ++j;
    const double average = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (std::size_t k = i; k < j; ++k) rank[order[k]] = average;
    i = j;
  }
  return rank;
}

}  // namespace

double spearman(std::span<const double> x, std::span<const double> y) {
  if (x.size() != y.size()) throw std::invalid_argument("spearman: x and y differ in length");
  const std::size_t n = x.size();
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  const auto rx = average_ranks(x), ry = average_ranks(y);
  const double mean = (static_cast<double>(n) + 1.0) / 2.0;  // of ranks 1..n, ties averaged or not
  double sxy = 0.0, sxx = 0.0, syy = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double dx = rx[i] - mean, dy = ry[i] - mean;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx == 0.0 || syy == 0.0) return std::numeric_limits<double>::quiet_NaN();
  return sxy / std::sqrt(sxx * syy);
}

// ---- neighbours ---------------------------------------------------------

std::vector<std::pair<std::string, float>> nearest_neighbours(const Embeddings& embeddings, std::string_view word,
                                                              std::size_t k) {
  const EmbeddingIndex index(embeddings);
  return index.nearest(index.at(word), k);
}

// ---- the kernel ---------------------------------------------------------

namespace detail {

std::vector<std::uint32_t> best_candidates(std::span<const float> queries, std::span<const float> candidates,
                                           std::span<const std::uint32_t> group,
                                           std::span<const std::array<std::uint32_t, 3>> excluded, std::size_t dim,
                                           ScoreKernel kernel) {
  if (dim == 0 || queries.size() != excluded.size() * dim) {
    throw std::invalid_argument("best_candidates: sizes do not match");
  }
  return best_candidates(
      excluded.size(), [&](std::size_t q, float* out) { std::copy_n(queries.data() + q * dim, dim, out); }, candidates,
      group, excluded, dim, kernel);
}

std::vector<std::uint32_t> best_candidates(std::size_t n_queries,
                                           const std::function<void(std::size_t, float*)>& make_query,
                                           std::span<const float> candidates, std::span<const std::uint32_t> group,
                                           std::span<const std::array<std::uint32_t, 3>> excluded, std::size_t dim,
                                           ScoreKernel kernel) {
  const std::size_t n_candidates = group.size();
  if (dim == 0 || excluded.size() != n_queries || candidates.size() != n_candidates * dim) {
    throw std::invalid_argument("best_candidates: sizes do not match");
  }
  if (n_candidates >= std::numeric_limits<std::uint32_t>::max()) {
    throw std::invalid_argument("best_candidates: too many candidates");
  }
  const auto none = static_cast<std::uint32_t>(n_candidates);
  std::vector<std::uint32_t> best(n_queries, none);
  if (n_queries == 0 || n_candidates == 0) return best;

  // Candidates in panels of kCols, dimension-major, zero-padded.
  const std::size_t n_panels = (n_candidates + kCols - 1) / kCols;
  std::vector<float> packed(n_panels * dim * kCols, 0.0f);
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n_panels, 64), [&](const auto& r) {
    for (std::size_t p = r.begin(); p != r.end(); ++p) {
      for (std::size_t j = 0; j < kCols && p * kCols + j < n_candidates; ++j) {
        const float* src = candidates.data() + (p * kCols + j) * dim;
        float* dst = packed.data() + p * dim * kCols + j;
        for (std::size_t d = 0; d < dim; ++d) dst[d * kCols] = src[d];
      }
    }
  });
  const std::size_t n_tiles = (n_queries + kRows - 1) / kRows;
  const std::size_t chunk_panels = std::max<std::size_t>(1, kChunkBytes / (kCols * dim * sizeof(float)));
  // A task's queries are made into its own buffer: kTilesPerTask tiles, fewer when they would pass 8 MB (a
  // very wide model), so the memory is a few tiles' worth per thread.
  const std::size_t tiles_per_task =
      std::clamp<std::size_t>((std::size_t{8} << 20) / (kRows * dim * sizeof(float)), 1, kTilesPerTask);
  const TileFn tile = pick_tile(kernel);

  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, n_tiles, tiles_per_task),
      [&](const tbb::blocked_range<std::size_t>& r) {
        const std::size_t first_row = r.begin() * kRows;
        const std::size_t rows = std::min(r.end() * kRows, n_queries) - first_row;
        // This task's queries, padded with zero rows to whole tiles.
        std::vector<float> padded(r.size() * kRows * dim, 0.0f);
        for (std::size_t i = 0; i < rows; ++i) make_query(first_row + i, padded.data() + i * dim);
        std::vector<float> best_score(rows, -std::numeric_limits<float>::infinity());
        std::vector<std::uint32_t> best_id(rows, none);
        alignas(32) float out[kRows * kCols];
        for (std::size_t chunk = 0; chunk < n_panels; chunk += chunk_panels) {
          const std::size_t chunk_end = std::min(chunk + chunk_panels, n_panels);
          for (std::size_t t = r.begin(); t != r.end(); ++t) {
            const float* q = padded.data() + (t - r.begin()) * kRows * dim;
            const std::size_t tile_rows = std::min(kRows, n_queries - t * kRows);
            for (std::size_t p = chunk; p != chunk_end; ++p) {
              tile(q, dim, packed.data() + p * dim * kCols, out);
              for (std::size_t i = 0; i < tile_rows; ++i) {
                const float* s = out + i * kCols;
                const std::size_t local = t * kRows + i - first_row;
                float top = s[0];
                for (std::size_t j = 1; j < kCols; ++j) top = std::max(top, s[j]);
                if (!(top > best_score[local])) continue;
                const auto& skip = excluded[t * kRows + i];
                for (std::size_t j = 0; j < kCols; ++j) {
                  const std::size_t c = p * kCols + j;
                  if (c >= n_candidates) break;
                  if (!(s[j] > best_score[local])) continue;
                  const auto g = group[c];
                  if (g == skip[0] || g == skip[1] || g == skip[2]) continue;
                  best_score[local] = s[j];
                  best_id[local] = static_cast<std::uint32_t>(c);
                }
              }
            }
          }
        }
        std::copy(best_id.begin(), best_id.end(), best.begin() + static_cast<std::ptrdiff_t>(first_row));
      },
      tbb::simple_partitioner());
  return best;
}

const char* score_kernel_name() { return pick_tile(ScoreKernel::automatic) == tile_portable ? "portable" : "avx2+fma"; }

}  // namespace detail

}  // namespace asgd::sparse::w2v
