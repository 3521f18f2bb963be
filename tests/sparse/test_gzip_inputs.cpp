// Every reader of sparse/ takes its file gzipped as it is (told by the first bytes, as gzip -dc does): the same
// data as the plain file, from a file and a pipe, on a corpus's second pass too; a cut-off or corrupt stream is
// an InputError that says so.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/sparse/libsvm.hpp"
#include "asgd/sparse/mf/ratings.hpp"
#include "asgd/sparse/word2vec/corpus.hpp"
#include "asgd/sparse/word2vec/embeddings.hpp"
#include "asgd/sparse/word2vec/evaluation.hpp"
#include "asgd/sparse/word2vec/vocabulary.hpp"

namespace asgd::sparse {
namespace {

namespace fs = std::filesystem;
using asgd::testing::message_of;
using ScratchDir = asgd::testing::ScratchDir;

// `text` gzipped, as `members` gzip members written one after another (what `cat a.gz b.gz` makes).
std::string gzipped(const std::string& text, int members = 1) {
  std::string out;
  const std::size_t step = (text.size() + members - 1) / members;
  for (std::size_t from = 0; from < text.size() || (from == 0 && text.empty()); from += step) {
    const std::string part = text.substr(from, step);
    z_stream z{};
    EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);  // 15 + 16: gzip
    std::string buffer(deflateBound(&z, part.size()) + 64, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(part.data()));
    z.avail_in = static_cast<uInt>(part.size());
    z.next_out = reinterpret_cast<Bytef*>(buffer.data());
    z.avail_out = static_cast<uInt>(buffer.size());
    EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    out.append(buffer.data(), z.total_out);
    deflateEnd(&z);
    if (text.empty()) break;
  }
  return out;
}

std::vector<std::vector<std::string>> two_passes(const fs::path& path) {
  w2v::TokenReader r(path);
  std::vector<std::vector<std::string>> passes(2);
  for (auto& pass : passes) {
    std::string_view token;
    for (w2v::TokenReader::Kind k; (k = r.next(token)) != w2v::TokenReader::Kind::end;) {
      pass.emplace_back(k == w2v::TokenReader::Kind::word ? std::string(token) : std::string("\n"));
    }
    r.rewind();
  }
  return passes;
}

TEST(GzipInputs, ACorpusReadsTheSameOnBothPassesFromAFileAndAPipe) {
  ScratchDir dir;
  std::string text;
  // 4.9 MB: more than the reader's 4 MB chunk, so a pipe's buffer grows and a file is read in two chunks.
  for (int i = 0; i < 600000; ++i) text += "w" + std::to_string(i % 977) + (i % 13 == 0 ? "\n" : " ");
  const auto plain = two_passes(dir.file("c.txt", text));
  ASSERT_EQ(plain[0].size(), 600000u + 600000 / 13 + 1);
  EXPECT_EQ(two_passes(dir.file("c.txt.gz", gzipped(text))), plain);
  EXPECT_EQ(two_passes(dir.file("multi.gz", gzipped(text, 3))), plain);  // three members, one text
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string packed = gzipped(text);
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << packed; });
  const auto piped = two_passes(fifo);
  writer.join();
  EXPECT_EQ(piped, plain);
}

TEST(GzipInputs, EveryReaderTakesItsFileGzipped) {
  ScratchDir dir;
  const std::string svm = "+1 1:0.5 3:2\n-1 2:1\n";
  EXPECT_EQ(read_libsvm(dir.file("d.svm.gz", gzipped(svm))).index, read_libsvm(dir.file("d.svm", svm)).index);
  const std::string ratings = "u1 i1 4\nu2 i2 3.5\nu1 i2 2\n";
  const auto r = mf::read_ratings(dir.file("r.txt.gz", gzipped(ratings)));
  EXPECT_EQ(r.rating, mf::read_ratings(dir.file("r.txt", ratings)).rating);
  const std::string vectors = "2 3\nthe 1 2 3\nof 4 5 6\n";
  EXPECT_EQ(w2v::read_word2vec(dir.file("v.txt.gz", gzipped(vectors))).vectors,
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
  w2v::Embeddings e;
  e.words = {"the", "of"};
  e.dim = 2;
  e.vectors = {1.5f, -2, 3, 4.25f};
  w2v::write_word2vec_binary(dir / "v.bin", e);
  std::ifstream in(dir / "v.bin", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto binary = w2v::read_word2vec(dir.file("v.bin.gz", gzipped(bytes)));
  EXPECT_TRUE(binary.binary);
  EXPECT_EQ(binary.vectors, e.vectors);
  EXPECT_EQ(w2v::Vocabulary::read(dir.file("vocab.gz", gzipped("</s> 0\nthe 5\nof 3\n")), {1, 0}).words(),
            (std::vector<std::string>{"the", "of"}));
  EXPECT_EQ(w2v::read_analogy_questions(dir.file("q.gz", gzipped(": s\na b c d\n")))[0].questions.size(), 1u);
  EXPECT_EQ(w2v::read_similarity_pairs(dir.file("p.gz", gzipped("a b 7\n"))).size(), 1u);
}

TEST(GzipInputs, ACutOffOrCorruptStreamIsRefused) {
  ScratchDir dir;
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "u" + std::to_string(i % 97) + " i" + std::to_string(i % 89) + " 3\n";
  const std::string packed = gzipped(text);
  // Cut inside the data, or inside the 8-byte trailer (all the text came, its CRC did not).
  for (const std::size_t keep : {packed.size() / 2, packed.size() - 4}) {
    const auto cut = dir.file("cut.gz", packed.substr(0, keep));
    EXPECT_NE(message_of([&] { mf::read_ratings(cut); }).find("cut.gz: truncated: the gzip stream is cut off"),
              std::string::npos)
        << keep;
    EXPECT_NE(message_of([&] { two_passes(cut); }).find("truncated"), std::string::npos) << keep;
  }
  std::string corrupt = packed;
  corrupt[corrupt.size() / 2] ^= 0x55;
  const std::string bad = message_of([&] { mf::read_ratings(dir.file("bad.gz", corrupt)); });
  EXPECT_NE(bad.find("bad.gz: corrupt gzip data: "), std::string::npos) << bad;
  EXPECT_EQ(bad.find("<fd:"), std::string::npos) << bad;  // zlib's name for the file, not the user's
  EXPECT_THROW(mf::read_ratings(dir.file("bad.gz", corrupt)), InputError);
}

}  // namespace
}  // namespace asgd::sparse
