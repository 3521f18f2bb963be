// Evaluating word vectors: analogies as compute-accuracy scores them (hand-made
// vectors with known answers), Spearman with ties, similarity files, nearest
// neighbours, and the blocked argmax kernel against brute force.
#include "../common/scratch_dir.hpp"
#include "asgd/sparse/word2vec/evaluation.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "asgd/engine/errors.hpp"

namespace asgd::sparse::w2v {
namespace {

namespace fs = std::filesystem;

using ScratchDir = asgd::testing::ScratchDir;

fs::path write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return path;
}

template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Dimensions: royal, gender, fruit, plural. Frequency order as listed.
Embeddings royal_fruit() {
  Embeddings e;
  e.dim = 4;
  auto add = [&](const char* w, std::vector<float> v) {
    e.words.push_back(w);
    e.vectors.insert(e.vectors.end(), v.begin(), v.end());
  };
  add("man", {0, 1, 0, 0});
  add("woman", {0, -1, 0, 0});
  add("King", {1, 1, 0, 0});  // stored capitalised: matching ignores case
  add("queen", {1, -1, 0, 0});
  add("apple", {0, 0, 1, 0});
  add("apples", {0, 0, 1, 1});
  add("car", {0, 0, -1, 0});
  add("cars", {0, 0, -1, 1});
  add("WOMAN", {0, -1, 0, 0});      // another spelling of woman
  add("empress", {1, -1.8284271f, 0, 0});  // exactly king - man + woman: wins when not cut
  return e;
}

const char* kQuestions =
    ": royal\n"
    "man king woman queen\n"  // 1. king - man + woman = queen (or empress)
    "MAN KING WOMAN QUEEN\n"  // 2. the same, upper case
    "king queen man woman\n"  // 3. man + (queen - king) = woman
    "man woman king apple\n"  // 4. wrong answer in the file: never correct
    "man king girl queen\n"   // 5. girl is unknown: not seen
    "\n"
    ": gram-plural\n"
    "apple apples car cars\n"
    "car cars apple apples\n";

TEST(W2vAnalogies, CountsSectionsCoverageAndAccuracy) {
  ScratchDir dir;
  const auto questions = write_text(dir / "q.txt", kQuestions);
  const auto report = evaluate_analogies(royal_fruit(), questions, 9);  // empress cut
  ASSERT_EQ(report.sections.size(), 2u);
  EXPECT_EQ(report.sections[0].name, "royal");
  EXPECT_FALSE(report.sections[0].syntactic);
  EXPECT_EQ(report.sections[0].total, 5u);
  EXPECT_EQ(report.sections[0].seen, 4u);
  EXPECT_EQ(report.sections[0].correct, 3u);
  EXPECT_EQ(report.sections[1].name, "gram-plural");
  EXPECT_TRUE(report.sections[1].syntactic);
  EXPECT_EQ(report.sections[1].total, 2u);
  EXPECT_EQ(report.sections[1].seen, 2u);
  EXPECT_EQ(report.sections[1].correct, 2u);
  EXPECT_EQ(report.correct, 5u);
  EXPECT_EQ(report.seen, 6u);
  EXPECT_EQ(report.total, 7u);
  EXPECT_DOUBLE_EQ(report.accuracy(), 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(report.coverage(), 6.0 / 7.0);
  EXPECT_DOUBLE_EQ(report.semantic_accuracy, 3.0 / 4.0);
  EXPECT_DOUBLE_EQ(report.syntactic_accuracy, 1.0);
  EXPECT_EQ(report.restrict_vocab, 9u);
}

// Very wide vectors: each task makes its own queries, here one tile of 6 at a time (at most 8 MB of them), so
// the questions are spread over many tasks: the same counts as at dimension 4.
TEST(W2vAnalogies, WideVectorsGiveTheSameCountsAcrossQueryBlocks) {
  ScratchDir dir;
  std::string many;
  for (int i = 0; i < 15; ++i) many += kQuestions;  // 105 questions, 90 seen: 15 tiles
  const auto questions = write_text(dir / "q.txt", many);
  const auto narrow = royal_fruit();
  Embeddings wide;
  wide.words = narrow.words;
  wide.dim = (std::size_t{1} << 19) + 3;
  wide.vectors.assign(wide.size() * wide.dim, 0.0f);
  for (std::size_t w = 0; w < wide.size(); ++w) {
    for (std::size_t d = 0; d < narrow.dim; ++d) wide.vectors[w * wide.dim + 5 * d + 1] = narrow.row(w)[d];
  }
  const auto report = evaluate_analogies(wide, questions, 9);
  ASSERT_EQ(report.sections.size(), 30u);
  EXPECT_EQ(report.seen, 90u);
  EXPECT_EQ(report.correct, 75u);
  for (std::size_t s = 0; s < report.sections.size(); ++s) EXPECT_EQ(report.sections[s].correct, s % 2 ? 2u : 3u);
}

TEST(W2vAnalogies, RestrictionLimitsCandidatesAndCoverage) {
  ScratchDir dir;
  const auto questions = write_text(dir / "q.txt", kQuestions);
  const auto e = royal_fruit();
  // All 10 words: empress beats queen in questions 1 and 2.
  auto report = evaluate_analogies(e, questions, 0);
  EXPECT_EQ(report.restrict_vocab, 10u);
  EXPECT_EQ(report.sections[0].seen, 4u);
  EXPECT_EQ(report.sections[0].correct, 1u);
  EXPECT_EQ(report.correct, 3u);
  EXPECT_EQ(report.seen, 6u);
  // A restriction beyond the vocabulary is the whole vocabulary.
  EXPECT_EQ(evaluate_analogies(e, questions, 1000).correct, 3u);
  // The first 7 words: "cars" is out, so is the plural section.
  report = evaluate_analogies(e, questions, 7);
  EXPECT_EQ(report.sections[1].seen, 0u);
  EXPECT_EQ(report.sections[1].total, 2u);
  EXPECT_EQ(report.seen, 4u);
  EXPECT_EQ(report.correct, 3u);
  EXPECT_DOUBLE_EQ(report.syntactic_accuracy, 0.0);
  EXPECT_DOUBLE_EQ(report.coverage(), 4.0 / 7.0);
  // The first 3: every question needs queen or apple.
  report = evaluate_analogies(e, questions, 3);
  EXPECT_EQ(report.seen, 0u);
  EXPECT_EQ(report.total, 7u);
  EXPECT_DOUBLE_EQ(report.accuracy(), 0.0);
}

TEST(W2vAnalogies, OtherSpellingsOfQuestionWordsAreExcludedToo) {
  ScratchDir dir;
  Embeddings e;
  e.dim = 2;
  e.words = {"x", "y", "X", "z"};
  e.vectors = {1, 0, 0, 1, 1, 0, 0.6f, 0.8f};
  // y - y + x = x: X is x, so the best other word is z.
  const auto report = evaluate_analogies(e, write_text(dir / "q.txt", "y y x z\n"), 0);
  ASSERT_EQ(report.sections.size(), 1u);
  EXPECT_EQ(report.sections[0].name, "");
  EXPECT_EQ(report.correct, 1u);
  // An answer given in another spelling is the same word.
  EXPECT_EQ(evaluate_analogies(e, write_text(dir / "q2.txt", ": s\ny y z X\n"), 0).correct, 1u);
}

TEST(W2vAnalogies, MalformedQuestionFilesSayWhere) {
  ScratchDir dir;
  auto message = input_error([&] { (void)read_analogy_questions(write_text(dir / "a", ": s\na b c d\na b c\n")); });
  EXPECT_NE(message.find("/a:3: expected 4 words"), std::string::npos) << message;
  message = input_error([&] { (void)read_analogy_questions(write_text(dir / "b", ":  \na b c d\n")); });
  EXPECT_NE(message.find("/b:1: expected a section name"), std::string::npos) << message;
  message = input_error([&] { (void)read_analogy_questions(dir / "missing"); });
  EXPECT_NE(message.find("cannot open"), std::string::npos) << message;
  // CRLF and surrounding blanks are fine.
  const auto sections = read_analogy_questions(write_text(dir / "c", ": s\r\n  a b c d \r\n\r\n"));
  ASSERT_EQ(sections.size(), 1u);
  EXPECT_EQ(sections[0].name, "s");
  ASSERT_EQ(sections[0].questions.size(), 1u);
  EXPECT_EQ(sections[0].questions[0][3], "d");
}

// Brute-force argmax in double for each query, honouring the exclusions.
TEST(W2vAnalogies, BlockedKernelsAgreeWithBruteForce) {
  const std::size_t dim = 37, n_candidates = 1001, n_queries = 203;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> candidates(n_candidates * dim), queries(n_queries * dim);
  for (auto& x : candidates) x = normal(rng);
  for (auto& x : queries) x = normal(rng);
  std::vector<std::uint32_t> group(n_candidates);
  for (std::uint32_t c = 0; c < n_candidates; ++c) group[c] = (c % 50 == 1) ? c - 1 : c;
  auto score = [&](std::size_t q, std::size_t c) {
    double s = 0.0;
    for (std::size_t d = 0; d < dim; ++d) s += static_cast<double>(queries[q * dim + d]) * candidates[c * dim + d];
    return s;
  };
  // Odd queries exclude their two best candidates (by group: the best's other
  // spelling goes too); even ones three random groups.
  std::vector<std::array<std::uint32_t, 3>> excluded(n_queries);
  std::uniform_int_distribution<std::uint32_t> pick(0, n_candidates - 1);
  for (std::size_t q = 0; q < n_queries; ++q) {
    excluded[q] = {group[pick(rng)], group[pick(rng)], group[pick(rng)]};
    if (q % 2 == 0) continue;
    std::vector<std::pair<double, std::uint32_t>> ranked;
    for (std::uint32_t c = 0; c < n_candidates; ++c) ranked.emplace_back(score(q, c), c);
    std::partial_sort(ranked.begin(), ranked.begin() + 2, ranked.end(), std::greater<>());
    excluded[q][0] = group[ranked[0].second];
    excluded[q][1] = group[ranked[1].second];
  }
  std::vector<double> best_score(n_queries, -1e300);
  std::size_t exclusions_that_mattered = 0;
  for (std::size_t q = 0; q < n_queries; ++q) {
    double unrestricted = -1e300;
    for (std::size_t c = 0; c < n_candidates; ++c) {
      const double s = score(q, c);
      unrestricted = std::max(unrestricted, s);
      const auto g = group[c];
      if (g == excluded[q][0] || g == excluded[q][1] || g == excluded[q][2]) continue;
      best_score[q] = std::max(best_score[q], s);
    }
    exclusions_that_mattered += unrestricted > best_score[q];
  }
  EXPECT_GE(exclusions_that_mattered, n_queries / 2);
  for (const auto kernel : {detail::ScoreKernel::automatic, detail::ScoreKernel::portable}) {
    const auto best = detail::best_candidates(queries, candidates, group, excluded, dim, kernel);
    ASSERT_EQ(best.size(), n_queries);
    for (std::size_t q = 0; q < n_queries; ++q) {
      ASSERT_LT(best[q], n_candidates);
      const auto g = group[best[q]];
      EXPECT_TRUE(g != excluded[q][0] && g != excluded[q][1] && g != excluded[q][2]) << q;
      EXPECT_NEAR(score(q, best[q]), best_score[q], 1e-4) << "query " << q << " kernel " << static_cast<int>(kernel);
    }
  }
  std::printf("kernel: %s; exclusions changed the answer of %zu of %zu queries\n", detail::score_kernel_name(),
              exclusions_that_mattered, n_queries);
  // With every candidate excluded there is no answer.
  const std::vector<float> three = {1, 0, 0, 1, 1, 1}, one_query = {1, 1};
  const std::vector<std::uint32_t> ids = {0, 1, 2};
  const std::vector<std::array<std::uint32_t, 3>> all = {{0, 1, 2}};
  EXPECT_EQ(detail::best_candidates(one_query, three, ids, all, 2), std::vector<std::uint32_t>{3});
}

// A UTF-8 byte-order mark at the start of a questions or pairs file is skipped (an Excel CSV starts with one).
TEST(W2vEvaluationFiles, AByteOrderMarkAtTheStartIsSkipped) {
  ScratchDir dir;
  const auto questions = read_analogy_questions(write_text(dir / "q.txt", "\xEF\xBB\xBF: royal\na b c d\n"));
  ASSERT_EQ(questions.size(), 1u);
  EXPECT_EQ(questions[0].name, "royal");
  const auto pairs = read_similarity_pairs(write_text(dir / "p.csv", "\xEF\xBB\xBFWord 1,Word 2,Human\na,b,7.5\n"));
  ASSERT_EQ(pairs.size(), 1u);  // the header is still told from the data
  EXPECT_EQ(pairs[0].first, "a");
}

// ---- similarity -----------------------------------------------------------

TEST(W2vSimilarity, SpearmanAveragesTiedRanks) {
  // x ranks 1, 2.5, 2.5, 4, 5; y ranks 2, 1, 3.5, 3.5, 5: rho = 7.25 / 9.5
  // (scipy.stats.spearmanr agrees: 0.7631578947368421).
  const std::vector<double> x = {1, 2, 2, 3, 4}, y = {2, 1, 3, 3, 5};
  EXPECT_NEAR(spearman(x, y), 7.25 / 9.5, 1e-12);
  const std::vector<double> up = {1, 2, 3, 4}, squares = {1, 4, 9, 16}, down = {4, 3, 2, 1}, flat = {2, 2, 2, 2};
  EXPECT_NEAR(spearman(up, squares), 1.0, 1e-12);
  EXPECT_NEAR(spearman(up, down), -1.0, 1e-12);
  EXPECT_TRUE(std::isnan(spearman(up, flat)));
  EXPECT_TRUE(std::isnan(spearman(std::vector<double>{1}, std::vector<double>{2})));
}

// w0..w4 at angles 0, 10, 30, 60, 90 degrees.
Embeddings angles() {
  Embeddings e;
  e.dim = 2;
  int k = 0;
  for (const double degrees : {0.0, 10.0, 30.0, 60.0, 90.0}) {
    e.words.push_back(std::string("w").append(std::to_string(k++)));
    e.vectors.push_back(static_cast<float>(2.0 * std::cos(degrees * std::numbers::pi / 180.0)));
    e.vectors.push_back(static_cast<float>(2.0 * std::sin(degrees * std::numbers::pi / 180.0)));
  }
  return e;
}

TEST(W2vSimilarity, SkipsCommentsHeaderAndUnknownWords) {
  ScratchDir dir;
  const auto file = write_text(dir / "ws.tsv",
                               "# a comment\n"
                               "Word 1\tWord 2\tHuman (mean)\n"
                               "w0\tw1\t9.0\n"
                               "W0 w2   7\n"
                               "w0\tw3\t7.0\n"
                               "\n"
                               "w0\tw4\t1.0\r\n"
                               "w1\tw4\t2\textra\n"
                               "w0\tunknown\t5.0\n");
  const auto report = evaluate_similarity(angles(), file);
  EXPECT_EQ(report.pairs_total, 6u);
  EXPECT_EQ(report.pairs_used, 5u);
  // Human ranks 5, 3.5, 3.5, 1, 2; cosine ranks 5, 4, 3, 1, 2: rho = 9.5 / sqrt(9.5 * 10).
  EXPECT_NEAR(report.spearman, 9.5 / std::sqrt(95.0), 1e-12);
}

TEST(W2vSimilarity, MalformedFilesSayWhere) {
  ScratchDir dir;
  auto message = input_error([&] { (void)read_similarity_pairs(write_text(dir / "a", "a b 1\nc d\n")); });
  EXPECT_NE(message.find("/a:2: expected 'word1 word2 score', found 2 fields"), std::string::npos) << message;
  message = input_error([&] { (void)read_similarity_pairs(write_text(dir / "b", "a b 1\nc d high\n")); });
  EXPECT_NE(message.find("/b:2: expected a finite number as the score, found 'high'"), std::string::npos) << message;
  message = input_error([&] { (void)read_similarity_pairs(write_text(dir / "c", "#\nx y score\na b 1\n")); });
  EXPECT_EQ(message, "");  // a first line with a word for the score is the header...
  message = input_error([&] { (void)read_similarity_pairs(write_text(dir / "i", "w1 w2 Information\na b 1\n")); });
  EXPECT_EQ(message, "");  // (a word that starts as "inf" does too)
  message = input_error([&] { (void)read_similarity_pairs(write_text(dir / "d", "x y z\na b nan\n")); });
  EXPECT_NE(message.find("/d:2:"), std::string::npos) << message;  // ...but only the first,
  // and a number gone wrong is not a header, on the first line too.
  for (const char* first : {"a b 7.35x\n", "a b 7,35\n", "a b nan\n", "a b -\n"}) {
    message = input_error([&] { (void)read_similarity_pairs(write_text(dir / "e", first)); });
    EXPECT_NE(message.find("/e:1: expected a finite number as the score"), std::string::npos) << first << message;
  }
}

// ---- neighbours ------------------------------------------------------------

TEST(W2vNeighbours, NearestByCosineWithoutTheWordItself) {
  const auto e = angles();
  const auto near = nearest_neighbours(e, "w0", 3);
  ASSERT_EQ(near.size(), 3u);
  EXPECT_EQ(near[0].first, "w1");
  EXPECT_NEAR(near[0].second, std::cos(10.0 * std::numbers::pi / 180.0), 1e-6);
  EXPECT_EQ(near[1].first, "w2");
  EXPECT_EQ(near[2].first, "w3");
  EXPECT_NEAR(near[2].second, 0.5, 1e-6);
  EXPECT_EQ(nearest_neighbours(e, "W3", 100).size(), 4u);  // case-insensitive, at most V - 1
  EXPECT_EQ(nearest_neighbours(e, "w3", 1)[0].first, "w2");
  EXPECT_NE(input_error([&] { (void)nearest_neighbours(e, "w9", 3); }).find("'w9' is not in the vocabulary"),
            std::string::npos);
}

TEST(W2vNeighbours, MostSimilarRanksByTheMeanOfPositiveMinusNegative) {
  const EmbeddingIndex index(royal_fruit());
  // King + woman - man (unit vectors): empress is exactly that direction; the words asked are left out, another
  // spelling of one of them (WOMAN) is not (gensim's rule).
  const std::size_t positive[] = {2, 1}, negative[] = {0};
  const auto near = index.most_similar(positive, negative, 3);
  ASSERT_EQ(near.size(), 3u);
  EXPECT_EQ(near[0].first, 9u);  // empress
  EXPECT_NEAR(near[0].second, 1.0, 1e-6);
  EXPECT_EQ(near[1].first, 3u);  // queen: (1, -1) / sqrt 2 against (0.48, -0.877)
  EXPECT_NEAR(near[1].second, (1.0 + 1.8284271) / std::sqrt(2.0) / std::sqrt(1.0 + 1.8284271 * 1.8284271), 1e-5);
  EXPECT_EQ(near[2].first, 8u);  // WOMAN
  // One positive word is nearest(); k past the vocabulary gives every other word.
  const std::size_t apple[] = {4};
  const auto by_mean = index.most_similar(apple, {}, 100);
  const auto by_nearest = index.nearest(4, 100);
  ASSERT_EQ(by_mean.size(), 9u);
  for (std::size_t i = 0; i < by_mean.size(); ++i) {
    EXPECT_EQ(index.word(by_mean[i].first), by_nearest[i].first);
    EXPECT_FLOAT_EQ(by_mean[i].second, by_nearest[i].second);
  }
  EXPECT_NE(input_error([&] { (void)index.most_similar({}, {}, 3); }).find("at least one word"), std::string::npos);
  const std::size_t past[] = {10};
  EXPECT_NE(input_error([&] { (void)index.most_similar(past, {}, 3); }).find("word id 10"), std::string::npos);
}

TEST(W2vNeighbours, SimilarityIsTheCosine) {
  const EmbeddingIndex index(royal_fruit());
  EXPECT_NEAR(index.similarity(0, 1), -1.0, 1e-6);  // man, woman
  EXPECT_NEAR(index.similarity(2, 3), 0.0, 1e-6);   // King, queen
  EXPECT_NEAR(index.similarity(4, 5), std::sqrt(0.5), 1e-6);  // apple, apples
  EXPECT_NEAR(index.similarity(5, 5), 1.0, 1e-6);
  EXPECT_NE(input_error([&] { (void)index.similarity(0, 10); }).find("word id 10"), std::string::npos);
}

TEST(W2vNeighbours, AVectorOfSubnormalValuesIsAUnitVectorToo) {
  // Its norm is below 1 / FLT_MAX: an inverse norm in float was inf, and the word won every argmax with
  // cosine inf (NaN where a value was 0, which misordered the sort).
  auto e = angles();
  e.words.push_back("tiny");
  e.vectors.insert(e.vectors.end(), {1e-40f, 0.0f});  // the direction of w0
  ASSERT_EQ(e.dim, 2u);
  const auto near = nearest_neighbours(e, "w1", 2);
  for (const auto& [word, cosine] : near) EXPECT_TRUE(std::isfinite(cosine)) << word;
  EXPECT_EQ(near[0].first, "w0");
  EXPECT_EQ(near[1].first, "tiny");
  EXPECT_NEAR(near[1].second, near[0].second, 1e-6);
  EXPECT_NEAR(nearest_neighbours(e, "tiny", 1)[0].second, 1.0, 1e-6);
}

TEST(W2vNeighbours, ExactSpellingWinsOverCase) {
  Embeddings e;
  e.dim = 1;
  e.words = {"Apple", "apple", "pear"};
  e.vectors = {1, -1, 1};
  const EmbeddingIndex index(e);
  EXPECT_EQ(index.find("apple"), 0u);
  EXPECT_EQ(index.at("apple"), 1u);
  EXPECT_EQ(index.at("APPLE"), 0u);
  EXPECT_EQ(index.canonical(1), 0u);
  EXPECT_EQ(index.canonical(2), 2u);
  EXPECT_EQ(nearest_neighbours(e, "apple", 1)[0].second, -1.0f);
}

// ---- the real files, when present ----------------------------------------

fs::path shared_text(const char* name) {
  if (const char* env = std::getenv("ASGD_SHARED_DATA")) return fs::path(env) / "text" / name;
  return fs::path(__FILE__).parent_path() / "../../../shared/data/text" / name;
}

TEST(W2vSharedData, QuestionsWordsAndWordSim353Parse) {
  const auto questions = shared_text("questions-words.txt"), pairs = shared_text("wordsim353.tsv");
  if (!fs::exists(questions) || !fs::exists(pairs)) {
    GTEST_SKIP() << "shared data not found at " << questions.parent_path() << " (set ASGD_SHARED_DATA)";
  }
  const auto sections = read_analogy_questions(questions);
  ASSERT_EQ(sections.size(), 14u);
  std::size_t total = 0, semantic = 0;
  for (const auto& s : sections) {
    total += s.questions.size();
    semantic += !s.name.starts_with("gram");
  }
  EXPECT_EQ(total, 19544u);
  EXPECT_EQ(semantic, 5u);
  EXPECT_EQ(sections.front().name, "capital-common-countries");
  EXPECT_EQ(read_similarity_pairs(pairs).size(), 353u);
}

}  // namespace
}  // namespace asgd::sparse::w2v
