// word2vec training side: vocabulary, corpus reading, samplers, Huffman
// codes, and the model learning planted structure.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>

#include <sys/stat.h>

#include "../common/limited_child.hpp"
#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/row_ops.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/sparse/word2vec/corpus.hpp"
#include "asgd/sparse/word2vec/huffman.hpp"
#include "asgd/sparse/word2vec/model.hpp"
#include "asgd/sparse/word2vec/sampling.hpp"
#include "asgd/sparse/word2vec/vocabulary.hpp"

namespace fs = std::filesystem;
using namespace asgd::sparse::w2v;

namespace {

using TempDir = asgd::testing::ScratchDir;

using asgd::testing::message_of;

}  // namespace

TEST(Vocabulary, CountsSortsAndCuts) {
  TempDir dir;
  TokenReader r(dir.file("c.txt", "b a c a b a\n  d\td b\r\n\n"));
  CorpusStats stats;
  const auto v = count_vocabulary(r, VocabOptions{2, 0}, &stats);
  // a:3 b:3 d:2 (c:1 dropped); ties by word.
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v.word(0), "a");
  EXPECT_EQ(v.word(1), "b");
  EXPECT_EQ(v.word(2), "d");
  EXPECT_EQ(v.count(0), 3u);
  EXPECT_EQ(v.count(2), 2u);
  EXPECT_EQ(v.total_count(), 8u);
  EXPECT_EQ(stats.tokens, 9u);
  EXPECT_EQ(stats.lines, 2u);
  EXPECT_EQ(*v.find("d"), 2u);
  EXPECT_FALSE(v.find("c").has_value());
  TokenReader r2(dir.file("c2.txt", "b a c a b a d d b"));
  EXPECT_EQ(count_vocabulary(r2, VocabOptions{1, 2}).size(), 2u);  // max size
}

// Past its limit of distinct words the counter drops the rarest, as word2vec.c's ReduceVocab: count <= 1 at the
// first prune, <= 2 at the next; a dropped word starts again from 0 when it comes back. Under the limit it counts
// exactly (the default limit, 21M, is word2vec.c's).
TEST(Vocabulary, TheCounterPrunesTheRarestPastItsLimit) {
  Vocabulary::Counter c(4);
  for (const char* t : {"a", "a", "a", "b", "b", "c", "d"}) c.add(t);
  EXPECT_EQ(c.prunes(), 0u);
  c.add("e");  // the fifth distinct word: c, d and e (seen once) go
  EXPECT_EQ(c.prunes(), 1u);
  EXPECT_EQ(c.distinct(), 2u);
  for (const char* t : {"c", "f", "g"}) c.add(t);  // 5 again: counts <= 2 go (b, c, f, g), a stays
  EXPECT_EQ(c.prunes(), 2u);
  EXPECT_EQ(c.tokens(), 11u);
  c.add("a");
  const Vocabulary v = std::move(c).finish({1, 0});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v.word(0), "a");
  EXPECT_EQ(v.count(0), 4u);
}

TEST(Vocabulary, SubsamplingKeepProbabilitiesAsWord2vec) {
  // total 100, sample 0.01: t = 1; keep = sqrt(t/c) + t/c, capped at 1.
  Vocabulary v({"x", "y", "z"}, {64, 25, 11});
  const auto keep = v.keep_probabilities(0.01);
  EXPECT_FLOAT_EQ(keep[0], static_cast<float>(std::sqrt(1.0 / 64) + 1.0 / 64));  // 0.140625
  EXPECT_FLOAT_EQ(keep[1], 0.24f);                                                // 0.2 + 0.04
  EXPECT_FLOAT_EQ(keep[2], static_cast<float>(std::sqrt(1.0 / 11) + 1.0 / 11));
  for (float k : v.keep_probabilities(0.0)) EXPECT_EQ(k, 1.0f);
  Vocabulary rare({"r"}, {1});
  EXPECT_EQ(rare.keep_probabilities(0.5)[0], 1.0f);
}

// Every vocabulary's words are tokens the corpus reader could make, and its counts add up: a checkpoint's
// forged vocabulary (a word with a blank, an empty one, counts of 2^64 - 1) used to be taken.
TEST(Vocabulary, RefusesWordsNoTokenCanBeAndCountsPastTwoToThe64) {
  using asgd::testing::message_of;
  EXPECT_NE(message_of([] { Vocabulary({"a", "b c"}, {2, 1}); }).find("word 2 is 'b c': empty or with a blank"),
            std::string::npos);
  EXPECT_NE(message_of([] { Vocabulary({"a", "b\tc"}, {2, 1}); }).find("word 2 is 'b\\x09c'"), std::string::npos);
  EXPECT_NE(message_of([] { Vocabulary({""}, {1}); }).find("word 1 is '': empty"), std::string::npos);
  EXPECT_NE(message_of([] { Vocabulary({"a", "b"}, {~std::uint64_t{0}, 1}); }).find("past 2^64"), std::string::npos);
  EXPECT_EQ(Vocabulary({"a", "b"}, {~std::uint64_t{0} - 1, 1}).size(), 2u);
}

TEST(Vocabulary, SaveReadRoundTripAndBadFiles) {
  TempDir dir;
  Vocabulary v({"the", "of", "zebra"}, {10, 7, 7});
  v.save(dir / "v.txt");
  const auto back = Vocabulary::read(dir / "v.txt");
  EXPECT_EQ(back.words(), v.words());
  EXPECT_EQ(back.counts(), v.counts());
  // word2vec.c writes a "</s>" line first: skipped; so does save(), for word2vec.c's sake.
  EXPECT_EQ(Vocabulary::read(dir.file("w.txt", "</s> 0\nthe 10\n"), {1, 0}).size(), 1u);
  EXPECT_EQ(Vocabulary::read(dir.file("t.txt", "the 10 \nof 7\t\r\n"), {1, 0}).counts(),
            (std::vector<std::uint64_t>{10, 7}));  // blanks after a count
  std::ifstream saved(dir / "v.txt");
  std::string first;
  std::getline(saved, first);
  EXPECT_EQ(first, "</s> 0");
  // A "</s>" that is a word of the corpus (not first) survives the round trip.
  Vocabulary marked({"the", "</s>", "of"}, {10, 8, 7});
  marked.save(dir / "m.txt");
  EXPECT_EQ(Vocabulary::read(dir / "m.txt").words(), marked.words());
  // Words with whitespace the corpus reader splits on, which word2vec.c keeps, are left out: no token matches them.
  for (const char* odd : {"odd\vword 5\n", "\fchapter 5\n", "odd\rword 5\n"}) {
    std::size_t left_out = 7;
    EXPECT_EQ(Vocabulary::read(dir.file("ws", std::string("the 9\n") + odd + "of 5\n"), {}, &left_out).words(),
              (std::vector<std::string>{"the", "of"}))
        << odd;
    EXPECT_EQ(left_out, 1u) << odd;
  }
  EXPECT_NE(message_of([&] { Vocabulary::read(dir.file("sp", "the 9\nodd\tword 5\n")); }).find("sp:2:"),
            std::string::npos);
  EXPECT_NE(message_of([&] { Vocabulary::read(dir.file("b1", "the ten\n")); }).find("b1:1: expected a non-negative"),
            std::string::npos);
  EXPECT_NE(message_of([&] { Vocabulary::read(dir.file("b2", "the 3\nof -2\n")); }).find("b2:2:"), std::string::npos);
  // Any order, as word2vec.c sorts what it reads (before: "counts must be in descending order"); a word of count 0
  // is dropped.
  const Vocabulary sorted = Vocabulary::read(dir.file("b3", "a 3\nnever 0\nb 5\nc 3\n"), {1, 0});
  EXPECT_EQ(sorted.size(), 3u);
  EXPECT_EQ(sorted.word(0), "b");
  EXPECT_EQ(sorted.word(1), "a");
  EXPECT_EQ(sorted.word(2), "c");
  EXPECT_NE(message_of([&] { Vocabulary::read(dir.file("e", "")); }).find("e: the vocabulary file is empty"),
            std::string::npos);
  EXPECT_NE(message_of([&] { Vocabulary::read(dir / ""); }).find("is a directory"), std::string::npos);
  EXPECT_NE(message_of([&] { Vocabulary::read(dir.file("b4", "a 5\na 5\n")); }).find("twice"), std::string::npos);
  // Twice is an error whichever copy -min-count or a zero count leaves out: which count was meant is unknown.
  EXPECT_NE(message_of([&] { Vocabulary::read(dir.file("b6", "a 9\nb 3\na 1\n"), {5, 0}); })
                .find("b6:3: 'a' appears twice (first on line 1)"),
            std::string::npos);
  EXPECT_NE(message_of([&] { Vocabulary::read(dir.file("b7", "a 0\nb 3\na 4\n"), {1, 0}); }).find("b7:3: 'a' appears"),
            std::string::npos);
  // A NUL byte: the corpus reader refuses one, so no token could match; a binary file read by mistake.
  EXPECT_NE(message_of([&] { Vocabulary::read(dir.file("b8", std::string("a 9\nb\0c 3\n", 10)), {1, 0}); })
                .find("b8:2: a word holds a NUL byte"),
            std::string::npos);
  EXPECT_NE(message_of([&] { Vocabulary::read(dir.file("b5", "lonely\n")); }).find("b5:1"), std::string::npos);
  EXPECT_THROW(Vocabulary::read(dir / "missing"), asgd::InputError);
}

// A vocab file is streamed and judged line by line: /dev/zero, a pipe that repeats itself or never ends a line, or
// one of words without end, is refused after a bounded amount (before: read whole, then judged). Each read runs in
// a child that may take 256 MB more.
TEST(Vocabulary, BinaryOrEndlessInputIsRefusedAsItStreams) {
  TempDir dir;
  constexpr std::uint64_t kRoom = std::uint64_t{256} << 20;
  const fs::path fifo = dir / "fifo";
  const auto read_in_child = [&](const fs::path& path, const std::function<void()>& before) {
    return asgd::testing::message_in_limited_child(kRoom, [&] {
      before();
      Vocabulary::read(path);
    });
  };
  EXPECT_EQ(read_in_child("/dev/zero", [] {}),
            "/dev/zero:1: line longer than 65536 bytes, the limit for a vocabulary file; byte 0 is NUL: this looks "
            "like a binary file");
  EXPECT_EQ(read_in_child(fifo, [&] { asgd::testing::endless_fifo(fifo, "w 1\n"); }),
            fifo.string() + ":2: 'w' appears twice (first on line 1)");
  EXPECT_EQ(read_in_child(fifo, [&] { asgd::testing::endless_fifo(fifo, "w"); }),
            fifo.string() + ":1: line longer than 65536 bytes, the limit for a vocabulary file");
  // New words for ever: refused before the vocabulary passes the memory available.
  const std::string message = read_in_child(fifo, [&] {
    std::filesystem::remove(fifo);
    ::mkfifo(fifo.c_str(), 0600);
    std::thread([&fifo] {
      std::ofstream out(fifo);
      for (std::uint64_t k = 0; out; ++k) out << "w" << k << " 1\n";
    }).detach();
  });
  EXPECT_NE(message.find("words so far, growing, needs"), std::string::npos) << message;
  EXPECT_NE(message.find("of memory available (RLIMIT_AS, ulimit -v)"), std::string::npos) << message;
}

// A bad line's bytes are shown escaped, as the ratings and libsvm readers show theirs (before: raw control bytes,
// which a terminal obeys).
TEST(Vocabulary, ABadLinesControlBytesAreShownEscaped) {
  TempDir dir;
  EXPECT_EQ(message_of([&] { Vocabulary::read(dir.file("v1", "the 5\nca\x1b[31mt\n")); }),
            (dir / "v1").string() + ":2: expected 'word count', got 'ca\\x1b[31mt'");
  EXPECT_EQ(message_of([&] { Vocabulary::read(dir.file("v2", "the 5\ncat 3\x07\n")); }),
            (dir / "v2").string() + ":2: expected a non-negative integer count, got '3\\x07'");
  EXPECT_EQ(message_of([&] { Vocabulary::read(dir.file("v3", "ca\x1bt 5\nca\x1bt 3\n")); }),
            (dir / "v3").string() + ":2: 'ca\\x1bt' appears twice (first on line 1)");
}

// A device or pipe is held in memory for the second pass, judged as it arrives: /dev/zero is refused at its first
// chunk, a NUL where it comes, and a pipe without end before holding it passes the memory available (before: read
// whole, 4.2 GB and std::bad_alloc naming no file). Each read runs in a child that may take 512 MB more.
TEST(Corpus, BinaryOrEndlessInputIsRefusedAsItStreams) {
  TempDir dir;
  constexpr std::uint64_t kRoom = std::uint64_t{512} << 20;
  const fs::path fifo = dir / "fifo";
  EXPECT_EQ(asgd::testing::message_in_limited_child(kRoom, [] { TokenReader r("/dev/zero"); }),
            "/dev/zero:1: byte 0 is NUL: this looks like a binary file, not text");
  EXPECT_EQ(asgd::testing::message_in_limited_child(kRoom,
                                                    [&] {
                                                      asgd::testing::endless_fifo(
                                                          fifo, std::string("the cat\nsat\n\0", 13));
                                                      TokenReader r(fifo);
                                                    }),
            fifo.string() + ":3: byte 12 is NUL: this looks like a binary file, not text");
  const std::string message = asgd::testing::message_in_limited_child(kRoom, [&] {
    asgd::testing::endless_fifo(fifo, "the cat sat on the mat\n");
    TokenReader r(fifo);
  });
  EXPECT_EQ(message.rfind(fifo.string() + ": a pipe is held in memory to be read twice (a file is streamed "
                                          "instead); growing it past ",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find("of memory available (RLIMIT_AS, ulimit -v)"), std::string::npos) << message;
  // A file is streamed: the NUL is refused on its line.
  EXPECT_EQ(message_of([&] {
              TokenReader r(dir.file("bin", std::string("a b\nc\0d", 7)));
              count_vocabulary(r, {1, 0});
            }),
            (dir / "bin").string() + ":2: byte 5 is NUL: this looks like a binary file, not text");
}

TEST(Corpus, EncodesDropsUnknownWordsAndSplitsLongLines) {
  TempDir dir;
  std::string text = "a b zz a\n\n";
  for (int i = 0; i < 2500; ++i) text += (i % 2 ? "a " : "b ");  // one 2,500-word line
  text += "\nb";
  TokenReader r(dir.file("c.txt", text));
  CorpusStats counted;
  const auto v = count_vocabulary(r, VocabOptions{2, 0}, &counted);
  // Counted from this corpus: its total is what it keeps, reserved at once (what that saves is measured in
  // bench/RESULTS.md, not here); the tokens are those of a corpus grown token by token.
  EXPECT_EQ(v.total_count(), 3u + 2500 + 1);
  EXPECT_EQ(counted.kept_tokens, v.total_count());
  const auto c = encode_corpus(r, v, counted.kept_tokens);
  EXPECT_EQ(c.tokens.size(), 3u + 2500 + 1);
  EXPECT_EQ(c.tokens, encode_corpus(r, v).tokens);
  ASSERT_EQ(c.sentences(), 1u + 3 + 1);  // 3 / 1000,1000,500 / 1
  EXPECT_EQ(c.sentence_begin[1], 3u);
  EXPECT_EQ(c.sentence_begin[2] - c.sentence_begin[1], kMaxSentence);
  EXPECT_EQ(c.sentence_begin[4] - c.sentence_begin[3], 500u);
  EXPECT_EQ(c.stats.split_lines, 1u);
  EXPECT_EQ(c.stats.lines, 3u);
}

// A UTF-8 byte-order mark at the start of a corpus or vocabulary file is no part of the first word (word2vec.c and
// fastText read it into it: "\xEF\xBB\xBFthe" became a word of its own), from a file, a pipe and on the second pass.
TEST(Corpus, AByteOrderMarkAtTheStartIsSkipped) {
  TempDir dir;
  const std::string bom = "\xEF\xBB\xBF";
  const auto path = dir.file("bom.txt", bom + "the cat the\nthe " + bom + "cat\n");
  auto words_of = [](const fs::path& p) {
    TokenReader r(p);
    std::vector<std::vector<std::string>> passes(2);
    for (auto& pass : passes) {
      std::string_view token;
      for (TokenReader::Kind k; (k = r.next(token)) != TokenReader::Kind::end;) {
        if (k == TokenReader::Kind::word) pass.emplace_back(token);
      }
      r.rewind();
    }
    return passes;
  };
  const std::vector<std::string> expected = {"the", "cat", "the", "the", bom + "cat"};  // only at the start
  for (const auto& pass : words_of(path)) EXPECT_EQ(pass, expected);
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << bom << "the cat the\nthe " << bom << "cat\n"; });
  const auto from_pipe = words_of(fifo);
  writer.join();
  for (const auto& pass : from_pipe) EXPECT_EQ(pass, expected);
  const auto v = Vocabulary::read(dir.file("v.txt", bom + "</s> 0\nthe 5\ncat 2\n"), {1, 0});
  EXPECT_EQ(v.words(), (std::vector<std::string>{"the", "cat"}));
}

TEST(Corpus, ATokenStraddlingTheReadChunkStaysWhole) {
  TempDir dir;
  constexpr std::size_t kChunk = std::size_t{4} << 20;  // TokenReader's read size
  for (std::size_t before : {std::size_t{1}, std::size_t{3}, std::size_t{1023}, std::size_t{1024}}) {
    // A token of 10 (or 2,000) bytes starting `before` bytes ahead of the chunk end.
    for (std::size_t len : {std::size_t{10}, std::size_t{2000}}) {
      std::string text(kChunk - before, ' ');
      text.replace(0, 5, "head ");
      const std::string token(len, 'q');
      text += token + " tail\n";
      TokenReader r(dir.file("s.txt", text));
      CorpusStats stats;
      const auto v = count_vocabulary(r, {1, 0}, &stats);
      const std::string kept = len > kMaxTokenBytes ? token.substr(0, kMaxTokenBytes) : token;
      EXPECT_TRUE(v.find(kept).has_value()) << before << " " << len;
      EXPECT_TRUE(v.find("tail").has_value());
      EXPECT_EQ(v.size(), 3u);
      EXPECT_EQ(stats.truncated_tokens, len > kMaxTokenBytes ? 1u : 0u) << before << " " << len;
    }
  }
}

// A long token is cut before the UTF-8 character that its 1,024th byte falls in, not inside it (a vectors file
// with half a character is refused by UTF-8 readers such as gensim), inside the read chunk and across it.
TEST(Corpus, ALongTokenIsCutAtACharacter) {
  TempDir dir;
  constexpr std::size_t kChunk = std::size_t{4} << 20;
  std::string euros;
  for (int k = 0; k < 400; ++k) euros += "\xe2\x82\xac";  // U+20AC, 3 bytes: 1,024 falls inside the 342nd
  const std::string kept = euros.substr(0, 341 * 3);
  for (const std::size_t before : {std::size_t{0}, std::size_t{100}}) {
    std::string text = before == 0 ? std::string("head ") : std::string(kChunk - before, ' ');
    text += euros + " tail\n";
    TokenReader r(dir.file("e.txt", text));
    CorpusStats stats;
    const auto v = count_vocabulary(r, {1, 0}, &stats);
    EXPECT_TRUE(v.find(kept).has_value()) << before;
    EXPECT_EQ(stats.truncated_tokens, 1u) << before;
  }
  // Bytes that are not UTF-8 are cut at 1,024 as before.
  TokenReader r(dir.file("x.txt", std::string(2000, '\x80') + " tail\n"));
  const auto v = count_vocabulary(r, {1, 0});
  EXPECT_TRUE(v.find(std::string(kMaxTokenBytes, '\x80')).has_value());
}

TEST(Corpus, TokensAcrossChunkBoundariesStayWhole) {
  TempDir dir;
  // 6 MB of "word<k> " tokens: some straddle the 4 MB read chunk.
  std::string text;
  std::map<std::string, std::uint64_t> expected;
  for (int i = 0; text.size() < (6u << 20); ++i) {
    const std::string w = "w" + std::to_string(i % 997);
    text += w + (i % 50 == 49 ? "\n" : " ");
    ++expected[w];
  }
  TokenReader r(dir.file("big.txt", text));
  const auto v = count_vocabulary(r, VocabOptions{1, 0});
  ASSERT_EQ(v.size(), expected.size());
  for (const auto& [w, n] : expected) EXPECT_EQ(v.count(*v.find(w)), n) << w;
}

TEST(Corpus, OddInputGetsClearErrorsOrDocumentedBehaviour) {
  TempDir dir;
  EXPECT_NE(message_of([&] {
              TokenReader r(dir.file("empty", ""));
              count_vocabulary(r, {});
            }).find("no words"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              TokenReader r(dir.file("spaces", "  \n\t\n"));
              count_vocabulary(r, {});
            }).find("no words"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              TokenReader r(dir.file("bin", std::string("abc def\0\x01\x02 ghi", 14)));
              count_vocabulary(r, {1, 0});
            }).find("binary"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              TokenReader r(dir.file("one", "hello"));
              count_vocabulary(r, {5, 0});
            }).find("no word occurs at least 5 times"),
            std::string::npos);
  EXPECT_THROW(TokenReader(dir / "missing"), asgd::InputError);
  EXPECT_THROW(TokenReader(dir / ""), asgd::InputError);  // a directory
  {
    // Invalid UTF-8 is kept as bytes.
    TokenReader r(dir.file("utf", "caf\xc3 \xff\xfe caf\xc3\n"));
    const auto v = count_vocabulary(r, {1, 0});
    EXPECT_EQ(v.count(*v.find("caf\xc3")), 2u);
    EXPECT_TRUE(v.find("\xff\xfe").has_value());
  }
  {
    // A 1 MB token is cut to kMaxTokenBytes and counted.
    TokenReader r(dir.file("long", std::string(1 << 20, 'x') + " y"));
    CorpusStats stats;
    const auto v = count_vocabulary(r, {1, 0}, &stats);
    EXPECT_EQ(stats.truncated_tokens, 1u);
    EXPECT_TRUE(v.find(std::string(kMaxTokenBytes, 'x')).has_value());
  }
}

TEST(Sampling, AliasTableIsExactAndDrawsMatch) {
  const std::vector<std::uint64_t> counts = {1000, 300, 300, 50, 7, 1};
  const auto s = AliasSampler::unigram(counts, 0.75);
  double sum = 0;
  for (auto c : counts) sum += std::pow(static_cast<double>(c), 0.75);
  std::vector<double> hits(counts.size(), 0);
  asgd::FastRng rng(3);
  const int draws = 2000000;
  for (int i = 0; i < draws; ++i) hits[s.sample(rng.next())] += 1;
  for (std::uint32_t i = 0; i < counts.size(); ++i) {
    const double p = std::pow(static_cast<double>(counts[i]), 0.75) / sum;
    EXPECT_NEAR(s.probability(i), p, 1e-8) << i;
    EXPECT_NEAR(hits[i] / draws, p, 4 * std::sqrt(p * (1 - p) / draws) + 1e-5) << i;
  }
  EXPECT_THROW(AliasSampler(std::vector<double>{}), asgd::InputError);
  EXPECT_THROW(AliasSampler(std::vector<double>{0, 0}), asgd::InputError);
}

TEST(Huffman, PrefixFreeCodesShorterForFrequentWords) {
  const std::vector<std::uint64_t> counts = {50, 20, 10, 10, 5, 3, 1, 1};
  HuffmanTree t(counts);
  EXPECT_EQ(t.inner_nodes(), counts.size() - 1);
  std::set<std::string> codes;
  double kraft = 0;
  for (std::uint32_t w = 0; w < counts.size(); ++w) {
    std::string code;
    for (auto b : t.code(w)) code += static_cast<char>('0' + b);
    for (auto p : t.points(w)) EXPECT_LT(p, t.inner_nodes());
    EXPECT_EQ(t.points(w).front(), t.inner_nodes() - 1);  // the root first
    kraft += std::pow(2.0, -static_cast<double>(code.size()));
    for (const auto& other : codes) {
      EXPECT_NE(code.rfind(other, 0), 0u);
      EXPECT_NE(other.rfind(code, 0), 0u);
    }
    codes.insert(code);
  }
  EXPECT_DOUBLE_EQ(kraft, 1.0);  // a full binary tree
  EXPECT_LE(t.code(0).size(), t.code(7).size());
}

namespace {

// Sentences each drawn from one of `topics` topics of `per_topic` words.
struct PlantedCorpus {
  Vocabulary vocab;
  EncodedCorpus corpus;
  std::size_t topics, per_topic;
  std::size_t topic_of(const std::string& w) const { return static_cast<std::size_t>(std::stoi(w.substr(1))) / per_topic; }
};

PlantedCorpus planted(std::size_t topics, std::size_t per_topic, std::size_t sentences) {
  std::mt19937_64 rng(7);
  Vocabulary::Counter counter;
  std::vector<std::vector<std::string>> text(sentences);
  for (auto& s : text) {
    const std::size_t topic = rng() % topics;
    for (int k = 0; k < 12; ++k) {
      s.push_back("w" + std::to_string(topic * per_topic + rng() % per_topic));
      counter.add(s.back());
    }
  }
  PlantedCorpus p{std::move(counter).finish({1, 0}), {}, topics, per_topic};
  p.corpus.sentence_begin.push_back(0);
  for (const auto& s : text) {
    for (const auto& w : s) p.corpus.tokens.push_back(*p.vocab.find(w));
    p.corpus.sentence_begin.push_back(p.corpus.tokens.size());
  }
  return p;
}

// Mean cosine within topics minus mean cosine across topics.
double topic_margin(const PlantedCorpus& p, const asgd::ParamStore& store) {
  const auto& in = store.layout()["input"];
  const std::size_t n = p.vocab.size(), dim = in.cols;
  std::vector<std::vector<float>> v(n, std::vector<float>(dim));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < dim; ++k) v[i][k] = store.load(in.at(i, k));
    const float norm = std::sqrt(asgd::rows::dot(v[i].data(), v[i].data(), dim));
    for (auto& x : v[i]) x /= norm;
  }
  double same = 0, cross = 0;
  std::size_t n_same = 0, n_cross = 0;
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = a + 1; b < n; ++b) {
      const double c = asgd::rows::dot(v[a].data(), v[b].data(), dim);
      if (p.topic_of(p.vocab.word(static_cast<std::uint32_t>(a))) ==
          p.topic_of(p.vocab.word(static_cast<std::uint32_t>(b)))) {
        same += c;
        ++n_same;
      } else {
        cross += c;
        ++n_cross;
      }
    }
  }
  return same / static_cast<double>(n_same) - cross / static_cast<double>(n_cross);
}

// Mean sigmoid(input_a . output_b) over word pairs from different topics.
double cross_topic_score(const PlantedCorpus& p, const asgd::ParamStore& store) {
  const auto& in = store.layout()["input"];
  const auto& out = store.layout()["output"];
  double sum = 0;
  std::size_t n = 0;
  for (std::uint32_t a = 0; a < p.vocab.size(); ++a) {
    for (std::uint32_t b = 0; b < p.vocab.size(); ++b) {
      if (p.topic_of(p.vocab.word(a)) == p.topic_of(p.vocab.word(b))) continue;
      double dot = 0;
      for (std::size_t k = 0; k < in.cols; ++k) dot += store.load(in.at(a, k)) * store.load(out.at(b, k));
      sum += 1.0 / (1.0 + std::exp(-dot));
      ++n;
    }
  }
  return sum / static_cast<double>(n);
}

std::vector<float> train(const PlantedCorpus& p, ModelOptions m, std::size_t workers, double* margin = nullptr,
                         double* cross = nullptr) {
  const Word2Vec model(p.corpus, p.vocab, m);
  auto store = asgd::ParamStore::on_heap(model.layout());
  model.initialize(store, 5);
  asgd::TrainerOptions o;
  o.workers = workers;
  o.epochs = 5;
  o.seed = 5;
  o.step_examples = 4;
  o.schedule.kind = asgd::ScheduleKind::linear;
  o.schedule.lr = m.cbow ? 0.05f : 0.025f;
  asgd::Trainer(store, o).run(model);
  if (margin) *margin = topic_margin(p, store);
  if (cross) *cross = cross_topic_score(p, store);
  return store.snapshot();
}

}  // namespace

TEST(Word2Vec, LearnsPlantedTopicsWithEveryObjective) {
  const auto p = planted(4, 25, 3000);
  for (bool cbow : {false, true}) {
    for (bool hs : {false, true}) {
      ModelOptions m;
      m.cbow = cbow;
      m.hs = hs;
      m.negative = hs ? 0 : 5;
      m.dim = 20;
      m.sample = 0;
      double margin = 0, cross = 0;
      train(p, m, 2, &margin, hs ? nullptr : &cross);
      EXPECT_GT(margin, 0.3) << (cbow ? "cbow" : "skip-gram") << (hs ? " hs" : " ns");
      // Only negatives push a word's output away from other topics' inputs.
      if (!hs) {
        EXPECT_LT(cross, 0.35) << (cbow ? "cbow" : "skip-gram") << " sigmoid(in . out) across topics";
      }
    }
  }
  ModelOptions hogbatch;
  hogbatch.cbow = false;
  hogbatch.batch = true;
  hogbatch.dim = 20;
  hogbatch.sample = 0;
  double margin = 0, cross = 0;
  train(p, hogbatch, 2, &margin, &cross);
  EXPECT_GT(margin, 0.3) << "HogBatch skip-gram";
  EXPECT_LT(cross, 0.35) << "HogBatch sigmoid(in . out) across topics";
}

TEST(Word2Vec, OneWorkerWithASeedIsReproducible) {
  const auto p = planted(3, 10, 500);
  ModelOptions m;
  m.cbow = false;
  m.dim = 16;
  m.sample = 1e-2;  // subsampling draws random numbers too
  const auto a = train(p, m, 1), b = train(p, m, 1);
  EXPECT_EQ(a, b);
}

TEST(Word2Vec, RejectsBadOptions) {
  const auto p = planted(2, 5, 10);
  ModelOptions m;
  m.dim = 0;
  EXPECT_THROW(Word2Vec(p.corpus, p.vocab, m), asgd::InputError);
  m = ModelOptions{};
  m.window = 0;
  EXPECT_THROW(Word2Vec(p.corpus, p.vocab, m), asgd::InputError);
  m = ModelOptions{};
  m.negative = 0;
  m.hs = false;
  EXPECT_THROW(Word2Vec(p.corpus, p.vocab, m), asgd::InputError);
  m = ModelOptions{};
  m.batch = true;  // CBOW by default: HogBatch is skip-gram only
  EXPECT_THROW(Word2Vec(p.corpus, p.vocab, m), asgd::InputError);
}
