// Word vectors on disk: both word2vec formats round-trip, match word2vec.c's
// bytes, load in gensim, and every malformed file gets an error saying where.
#include "../common/limited_child.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/sparse/word2vec/embeddings.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "asgd/engine/errors.hpp"

namespace asgd::sparse::w2v {
namespace {

namespace fs = std::filesystem;

using ScratchDir = asgd::testing::ScratchDir;

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string le_floats(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    for (int b = 0; b < 4; ++b, bits >>= 8) out += static_cast<char>(bits & 0xffu);
  }
  return out;
}

Embeddings random_embeddings(std::size_t n, std::size_t dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  Embeddings e;
  e.dim = dim;
  for (std::size_t i = 0; i < n; ++i) e.words.push_back(std::string("w").append(std::to_string(i)));
  e.words[0] = "</s>";
  if (n > 1) e.words[1] = "caf\xc3\xa9";  // UTF-8 stays bytes
  for (std::size_t k = 0; k < n * dim; ++k) e.vectors.push_back(normal(rng));
  if (n * dim > 3) {
    e.vectors[1] = -0.0f;
    e.vectors[2] = 1e-30f;  // prints as 0.000000 in text
    e.vectors[3] = -123456.78f;
  }
  return e;
}

// The message of the InputError that `f` throws ("" if none).
template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(W2vEmbeddings, BinaryRoundTripsExactly) {
  ScratchDir dir;
  const auto e = random_embeddings(50, 7, 1);
  write_word2vec_binary(dir / "v.bin", e);
  EXPECT_TRUE(is_word2vec_binary(dir / "v.bin"));
  const auto back = read_word2vec(dir / "v.bin");
  EXPECT_EQ(back.words, e.words);
  EXPECT_EQ(back.dim, e.dim);
  ASSERT_EQ(back.vectors.size(), e.vectors.size());
  for (std::size_t k = 0; k < e.vectors.size(); ++k) {
    EXPECT_EQ(std::memcmp(&back.vectors[k], &e.vectors[k], 4), 0) << k;  // -0.0 included
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"v.bin"});  // no temporary left
}

// A pipe is read once: the format is told from the bytes read for the records (Embeddings::binary), and a header
// that promises more words than arrive reserves no more than a little (before: std::bad_alloc).
TEST(W2vEmbeddings, ReadsAPipeOnceInEitherFormat) {
  ScratchDir dir;
  const auto e = random_embeddings(20, 5, 3);
  write_word2vec_binary(dir / "v.bin", e);
  write_word2vec_text(dir / "v.txt", e);
  const auto through_pipe = [&](const std::string& bytes) {
    const fs::path fifo = dir / "fifo";
    fs::remove(fifo);
    EXPECT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::thread writer([&] {
      std::ofstream out(fifo, std::ios::binary);
      out << bytes;
    });
    Embeddings got;
    std::string error = input_error([&] { got = read_word2vec(fifo); });
    writer.join();
    return std::pair{got, error};
  };
  for (const char* name : {"v.bin", "v.txt"}) {
    const auto [got, error] = through_pipe(read_bytes(dir / name));
    ASSERT_EQ(error, "") << name;
    EXPECT_EQ(got.binary, std::string(name) == "v.bin") << name;
    EXPECT_EQ(got.words, e.words) << name;
    EXPECT_EQ(got.vectors.size(), e.vectors.size()) << name;
  }
  const auto [none, error] = through_pipe("4000000000 1\nw 1\n");
  EXPECT_NE(error.find("the header says 4000000000 words"), std::string::npos) << error;
  // Many words of a large dimension: 64 MB reserved, not words x dimension floats.
  const auto [few, big_dim] = through_pipe("100000 16000000\nw 1\n");
  EXPECT_NE(big_dim.find("expected 16000000 values"), std::string::npos) << big_dim;
}

// A header's counts size memory only as far as the file can hold them and the memory available allows, and a record
// is read no further than a record can be long: a pipe with no newline after its header, one of records without
// end, or a file as large as its header says but larger than the memory there is, is refused after a bounded amount
// with the bytes named (before: each grew until std::bad_alloc). Each read runs in a child that may take 512 MB more.
TEST(W2vEmbeddings, HeaderCountsAndEndlessRecordsAreCheckedAgainstTheMemory) {
  ScratchDir dir;
  constexpr std::uint64_t kRoom = std::uint64_t{512} << 20;
  const fs::path fifo = dir / "fifo";
  const auto read_in_child = [&](const fs::path& path, const std::function<void()>& before) {
    return asgd::testing::message_in_limited_child(kRoom, [&] {
      before();
      read_word2vec(path);
    });
  };
  // No newline after the header: a text record is a word of at most 64 KiB and D values of at most 64 bytes.
  EXPECT_EQ(read_in_child(fifo, [&] { asgd::testing::endless_fifo(fifo, "w", "1 3\n"); }),
            fifo.string() + ":2: line longer than 69824 bytes, the limit for a text vectors file of dimension 3");
  // Records for ever, after a header that promises them: refused before the arrays grow past the memory.
  std::string message =
      read_in_child(fifo, [&] { asgd::testing::endless_fifo(fifo, "w 1\n", "1000000000 1\n"); });
  EXPECT_EQ(message.rfind(fifo.string() + ":", 0), 0u) << message;
  EXPECT_NE(message.find(" words of 1 dimensions so far, growing to "), std::string::npos) << message;
  EXPECT_NE(message.find("of memory available (RLIMIT_AS, ulimit -v)"), std::string::npos) << message;
  // A file as large as its header says (sparse: it takes no disk), larger than the memory there is.
  const fs::path big = dir / "big.txt";
  write_bytes(big, "2500000 1000\n");
  fs::resize_file(big, std::uint64_t{10} << 30);
  message = read_in_child(big, [] {});
  EXPECT_EQ(message.rfind(big.string() + ":1: 2500000 words of 1000 dimensions (1000 floats a word, as many words as "
                                         "the header says and the file can hold) needs 10.1 GB (10080068096 bytes), "
                                         "more than the ",
                          0),
            0u)
      << message;
}

// Dimension 1, a value whose four bytes read "A75A" (11.33): number-like bytes and no 0x0a inside, word2vec.c's
// newline right after them. Binary, as written (before: misread as text with the value 'A75A').
TEST(W2vEmbeddings, ATinyBinaryVectorOfNumberLikeBytesIsBinary) {
  ScratchDir dir;
  float v = 0;
  std::memcpy(&v, "A75A", 4);
  Embeddings e;
  e.dim = 1;
  e.words = {"w0", "w1"};
  e.vectors = {v, -0.5f};
  write_word2vec_binary(dir / "d1.bin", e);
  EXPECT_EQ(read_bytes(dir / "d1.bin").substr(0, 11), "2 1\nw0 A75A");
  const auto back = read_word2vec(dir / "d1.bin");
  EXPECT_TRUE(back.binary);
  EXPECT_EQ(back.vectors, e.vectors);
  // Text with the wrong number of values that happens to fill 4 x D bytes ("1.5 2 3." for D = 2) stays text, whose
  // reader says what is wrong.
  const auto wrong = dir / "wrong.txt";
  write_bytes(wrong, "1 2\nw 1.5 2 3.\n");
  EXPECT_NE(input_error([&] { read_word2vec(wrong); }).find("expected 2 values"), std::string::npos);
}

TEST(W2vEmbeddings, TextRoundTripsToSixDecimals) {
  ScratchDir dir;
  const auto e = random_embeddings(50, 7, 2);
  write_word2vec_text(dir / "v.txt", e);
  EXPECT_FALSE(is_word2vec_binary(dir / "v.txt"));
  const auto back = read_word2vec(dir / "v.txt");
  EXPECT_EQ(back.words, e.words);
  EXPECT_EQ(back.dim, e.dim);
  ASSERT_EQ(back.vectors.size(), e.vectors.size());
  for (std::size_t k = 0; k < e.vectors.size(); ++k) {
    // %f rounds to 1e-6; large values are also limited by float precision.
    EXPECT_NEAR(back.vectors[k], e.vectors[k], 5e-7 + 1e-7 * std::abs(e.vectors[k])) << k;
  }
}

TEST(W2vEmbeddings, TextBytesAreWord2vecCs) {
  // word2vec.c: fprintf("%lld %lld\n"), then per word fprintf("%s ", word),
  // fprintf("%lf ", value) per value, fprintf("\n").
  ScratchDir dir;
  const auto e = random_embeddings(20, 5, 3);
  write_word2vec_text(dir / "v.txt", e);
  std::string expected = "20 5\n";
  char number[64];
  for (std::size_t i = 0; i < 20; ++i) {
    expected += e.words[i] + " ";
    for (std::size_t k = 0; k < 5; ++k) {
      std::snprintf(number, sizeof number, "%lf ", static_cast<double>(e.vectors[i * 5 + k]));
      expected += number;
    }
    expected += "\n";
  }
  EXPECT_EQ(read_bytes(dir / "v.txt"), expected);
}

TEST(W2vEmbeddings, BinaryBytesAreWord2vecCs) {
  ScratchDir dir;
  Embeddings e;
  e.words = {"the", "of"};
  e.dim = 2;
  e.vectors = {1.0f, -2.5f, 0.125f, 3.0f};
  write_word2vec_binary(dir / "v.bin", e);
  const std::string expected =
      "2 2\nthe " + le_floats({1.0f, -2.5f}) + "\nof " + le_floats({0.125f, 3.0f}) + "\n";
  EXPECT_EQ(read_bytes(dir / "v.bin"), expected);
}

TEST(W2vEmbeddings, RowWriterMatchesTheMatrixWriter) {
  ScratchDir dir;
  const auto e = random_embeddings(30, 4, 4);
  // Rows kept apart, in reverse order in memory: only the callback knows.
  std::vector<std::vector<float>> rows(30);
  for (std::size_t i = 0; i < 30; ++i) rows[29 - i].assign(e.vectors.begin() + i * 4, e.vectors.begin() + i * 4 + 4);
  for (const bool binary : {false, true}) {
    write_word2vec(dir / "rows", binary, e.words, 4, [&](std::size_t i) { return rows[29 - i].data(); });
    write_word2vec(dir / "matrix", binary, e);
    EXPECT_EQ(read_bytes(dir / "rows"), read_bytes(dir / "matrix")) << binary;
  }
}

TEST(W2vEmbeddings, ReadsGensimBinaryWithoutNewlinesAndLooseText) {
  ScratchDir dir;
  // gensim's binary writer leaves out the "\n" after each vector.
  write_bytes(dir / "g.bin", "2 2\nthe " + le_floats({1.0f, 2.0f}) + "of " + le_floats({3.0f, 4.0f}));
  auto e = read_word2vec(dir / "g.bin");
  EXPECT_EQ(e.words, (std::vector<std::string>{"the", "of"}));
  EXPECT_EQ(e.vectors, (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
  // Text with tabs, CRLF, no trailing space, no final newline, '+' and exponents.
  write_bytes(dir / "t.txt", "2 3\r\nthe\t1 +2.5 -3e-1\r\nof 4 5 6");
  e = read_word2vec(dir / "t.txt");
  EXPECT_EQ(e.words, (std::vector<std::string>{"the", "of"}));
  EXPECT_EQ(e.vectors, (std::vector<float>{1.0f, 2.5f, -0.3f, 4.0f, 5.0f, 6.0f}));
  // A UTF-8 byte-order mark before the header, in either format.
  write_bytes(dir / "bom.txt", "\xEF\xBB\xBF" "2 3\nthe 1 2.5 -0.3\nof 4 5 6\n");
  EXPECT_EQ(read_word2vec(dir / "bom.txt").vectors, e.vectors);
  write_bytes(dir / "bom.bin", "\xEF\xBB\xBF" "2 2\nthe " + le_floats({1.0f, 2.0f}) + "of " + le_floats({3.0f, 4.0f}));
  EXPECT_EQ(read_word2vec(dir / "bom.bin").words, (std::vector<std::string>{"the", "of"}));
  // An empty model.
  write_bytes(dir / "empty.txt", "0 100\n");
  e = read_word2vec(dir / "empty.txt");
  EXPECT_TRUE(e.words.empty());
  EXPECT_EQ(e.dim, 100u);
}

TEST(W2vEmbeddings, MaxWordsReadsTheMostFrequentOnly) {
  ScratchDir dir;
  const auto e = random_embeddings(40, 3, 5);
  for (const bool binary : {false, true}) {
    write_word2vec(dir / "v", binary, e);
    const auto head = read_word2vec(dir / "v", 10);
    ASSERT_EQ(head.words.size(), 10u);
    EXPECT_EQ(head.words.back(), e.words[9]);
    EXPECT_EQ(head.vectors.size(), 30u);
  }
  // The rest is not even looked at.
  write_bytes(dir / "junk.txt", "3 1\na 1\nb 2\nthis is not a vector\n");
  EXPECT_EQ(read_word2vec(dir / "junk.txt", 2).words.size(), 2u);
}

TEST(W2vEmbeddings, WriterRejectsWhatTheFormatsCannotHold) {
  ScratchDir dir;
  write_bytes(dir / "v", "old");
  Embeddings e;
  e.dim = 2;
  e.words = {"fine", "two words"};
  e.vectors = {1, 2, 3, 4};
  EXPECT_NE(input_error([&] { write_word2vec_text(dir / "v", e); }).find("'two words'"), std::string::npos);
  e.words[1] = "";
  EXPECT_NE(input_error([&] { write_word2vec_binary(dir / "v", e); }).find("empty"), std::string::npos);
  e.words[1] = "tab\there";
  EXPECT_NE(input_error([&] { write_word2vec_binary(dir / "v", e); }).find("whitespace"), std::string::npos);
  e.words[1] = "ok";
  e.vectors.pop_back();
  EXPECT_NE(input_error([&] { write_word2vec_text(dir / "v", e); }).find("expected 2 words x 2"), std::string::npos);
  e.vectors.push_back(4);
  e.dim = 0;
  e.vectors.clear();
  EXPECT_NE(input_error([&] { write_word2vec_text(dir / "v", e); }).find("dimension 0"), std::string::npos);
  e.dim = 2;
  e.vectors = {1, 2, 3, 4};
  EXPECT_NE(input_error([&] { write_word2vec_text(dir.path(), e); }).find("directory"), std::string::npos);
  EXPECT_NE(input_error([&] { write_word2vec_text(dir / "missing" / "v", e); }).find("cannot write"),
            std::string::npos);
  // The old file is untouched and nothing is left behind.
  EXPECT_EQ(read_bytes(dir / "v"), "old");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"v"});
  write_word2vec_text(dir / "v", e);
  EXPECT_EQ(read_word2vec(dir / "v").words, e.words);
}

struct BadFile {
  const char* name;
  std::string bytes;
  std::string expected;  // part of the message, after the file name
};

TEST(W2vEmbeddings, MalformedFilesSayWhereAndWhat) {
  ScratchDir dir;
  const std::vector<BadFile> cases = {
      {"empty", "", ":1: expected a header 'V D' (number of words, dimension), found an empty file"},
      {"one_field", "3\n", ":1: expected a header 'V D'"},
      {"three_fields", "3 2 1\n", ":1: expected a header 'V D'"},
      {"not_a_number", "three 2\n", "'three' (not a non-negative integer)"},
      {"negative", "-3 2\n", "'-3' (not a non-negative integer)"},
      {"dim_zero", "3 0\n", "dimension 0"},
      {"no_header_line", std::string(1000, 'x'), "longer than any header"},
      {"short_text", "3 2\na 1 2\nb 3 4\n", ":4: the header says 3 words, the file ends after 2"},
      {"few_values", "2 3\na 1 2 3\nb 3 4\n", ":3: expected 3 values after 'b', found 2"},
      {"many_values", "2 2\na 1 2 3\nb 3 4\n", ":2: expected 2 values after 'a', found 3"},
      {"word_only", "2 2\na\nb 3 4\n", ":2: expected 2 values after 'a', found 0"},
      {"not_numeric", "2 2\na 1 2\nb 3 x4\n", ":3: value 2 of 'b': expected a finite number, found 'x4'"},
      {"nan_text", "1 2\na nan 1\n", ":2: value 1 of 'a': expected a finite number, found 'nan'"},
      // Decimal commas: text, said so (before: read as binary garbage, exit 0).
      {"decimal_comma", "2 3\na 0,1 0,2 0,3\nb 0,3 0,2 0,1\n", ":2: value 1 of 'a': expected a finite number, found '0,1'"},
      {"overflow_text", "1 2\na 1e39 1\n", ":2: value 1 of 'a': expected a finite number"},
      {"extra_lines", "1 2\na 1 2\nb 3 4\n", ":3: the header says 1 words, but more lines follow"},
      {"short_binary", "2 2\na " + le_floats({1, 2}) + "\n", "the header says 2 words, the file ends after 1"},
      {"cut_vector", "2 2\na " + le_floats({1, 2}) + "\nb " + le_floats({3}),
       ": byte 17: expected 2 floats (8 bytes) for 'b', the file ends after 4 bytes"},
      {"nan_binary", "1 2\na " + le_floats({1, std::numeric_limits<float>::quiet_NaN()}) + "\n",
       ": byte 10: value 2 of 'a' is nan, expected a finite number"},
      {"binary_junk", "1 2\na " + le_floats({1, 2}) + "\nmore",
       ": byte 15: the header says 1 words, but more data follows"},
  };
  for (const auto& c : cases) {
    const auto path = dir / c.name;
    write_bytes(path, c.bytes);
    const auto message = input_error([&] { (void)read_word2vec(path); });
    EXPECT_EQ(message.rfind(path.string(), 0), 0u) << c.name << ": " << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.name << ": " << message;
  }
  EXPECT_NE(input_error([&] { (void)read_word2vec(dir / "absent"); }).find("cannot open"), std::string::npos);
  EXPECT_NE(input_error([&] { (void)read_word2vec(dir.path()); }).find("is a directory"), std::string::npos);
}

// ---- gensim --------------------------------------------------------------

bool have_gensim() { return std::system("/usr/bin/python3 -c 'import gensim' >/dev/null 2>&1") == 0; }

struct PipeCloser {
  void operator()(std::FILE* f) const noexcept { ::pclose(f); }
};

std::string run(const std::string& command) {
  std::unique_ptr<std::FILE, PipeCloser> pipe(::popen(command.c_str(), "r"));
  if (!pipe) return "";
  std::string out;
  char buffer[4096];
  while (const auto n = std::fread(buffer, 1, sizeof buffer, pipe.get())) out.append(buffer, n);
  return out;
}

TEST(W2vEmbeddings, GensimLoadsBothFormats) {
  if (!have_gensim()) GTEST_SKIP() << "/usr/bin/python3 with gensim not found (Debian: apt install python3-gensim)";
  ScratchDir dir;
  auto e = random_embeddings(300, 12, 6);
  e.words[5] = "someword";
  for (const bool binary : {false, true}) {
    const auto path = dir / (binary ? "v.bin" : "v.txt");
    write_word2vec(path, binary, e);
    const std::string script =
        "from gensim.models import KeyedVectors as K; k=K.load_word2vec_format('" + path.string() +
        "', binary=" + (binary ? "True" : "False") +
        "); print(len(k.index_to_key), k.vector_size, k['someword'][0], k.index_to_key[-1], "
        "float(k[k.index_to_key[-1]][-1]), k.index_to_key[1] == 'caf\\u00e9')";
    const auto output = run("/usr/bin/python3 -c \"" + script + "\" 2>&1");
    std::istringstream fields(output);
    std::size_t words = 0, dim = 0;
    double first = 0.0, last = 0.0;
    std::string last_word, utf8;
    fields >> words >> dim >> first >> last_word >> last >> utf8;
    ASSERT_FALSE(fields.fail()) << (binary ? "binary" : "text") << ": " << output;
    EXPECT_EQ(words, 300u);
    EXPECT_EQ(dim, 12u);
    EXPECT_NEAR(first, e.vectors[5 * 12], binary ? 1e-6 : 1e-6);
    EXPECT_EQ(last_word, e.words.back());
    EXPECT_NEAR(last, e.vectors.back(), 1e-6);
    EXPECT_EQ(utf8, "True");
  }
}

}  // namespace
}  // namespace asgd::sparse::w2v
