// The libsvm reader and writer: what parses, what round-trips, and where
// each malformed input is reported.
#include "../common/limited_child.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/sparse/libsvm.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "asgd/engine/errors.hpp"

namespace asgd::sparse {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
using ScratchDir = asgd::testing::ScratchDir;

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The message of the InputError that parsing `text` throws ("" if none).
std::string parse_error(const std::string& text, UnsortedIds unsorted = UnsortedIds::sort) {
  try {
    parse_libsvm(text, "t.svm", unsorted);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_same(const SparseDataset& a, const SparseDataset& b) {
  EXPECT_EQ(a.row_ptr, b.row_ptr);
  EXPECT_EQ(a.index, b.index);
  ASSERT_EQ(a.value.size(), b.value.size());
  for (std::size_t k = 0; k < a.value.size(); ++k) {
    // Bitwise: -0.0 must stay -0.0, and no value may move by an ulp.
    EXPECT_EQ(std::signbit(a.value[k]), std::signbit(b.value[k])) << k;
    EXPECT_EQ(a.value[k], b.value[k]) << k;
  }
  EXPECT_EQ(a.label, b.label);
  EXPECT_EQ(a.num_features, b.num_features);
}

TEST(Libsvm, ParsesLabelsFeaturesAndValues) {
  const auto d = parse_libsvm("+1 1:0.5 3:-2 7:1e-3\n-1 2:+4\n0 0:1\n1\n1.0 5:7.25\n", "t.svm");
  ASSERT_EQ(d.rows(), 5u);
  EXPECT_EQ(d.nnz(), 6u);
  EXPECT_EQ(d.row_ptr, (std::vector<std::uint64_t>{0, 3, 4, 5, 5, 6}));
  EXPECT_EQ(d.index, (std::vector<std::uint32_t>{1, 3, 7, 2, 0, 5}));
  EXPECT_EQ(d.value, (std::vector<float>{0.5f, -2.0f, 1e-3f, 4.0f, 1.0f, 7.25f}));
  // 0 is the {0,1} convention's negative class; a row may have no features.
  EXPECT_EQ(d.label, (std::vector<float>{1, -1, -1, 1, 1}));
  EXPECT_EQ(d.num_features, 8u);
  EXPECT_NO_THROW(d.validate());
}

TEST(Libsvm, ToleratesCrlfCommentsBlankLinesAndTabs) {
  const std::string text =
      "# header comment\r\n"
      "\r\n"
      "   \t \n"
      "1 1:2 # trailing comment 9:9\r\n"
      "\t-1\t4:1.5 \t 6:2\t\r\n"
      "#\n"
      "0 2:3";  // no final newline
  const auto d = parse_libsvm(text, "t.svm");
  ASSERT_EQ(d.rows(), 3u);
  EXPECT_EQ(d.index, (std::vector<std::uint32_t>{1, 4, 6, 2}));
  EXPECT_EQ(d.value, (std::vector<float>{2, 1.5f, 2, 3}));
  EXPECT_EQ(d.label, (std::vector<float>{1, -1, -1}));
  EXPECT_EQ(d.num_features, 7u);
}

// A UTF-8 byte-order mark at the start of the file is skipped (before: "t.svm:1:1: bad label").
TEST(Libsvm, SkipsAByteOrderMarkAtTheStart) {
  expect_same(parse_libsvm("\xEF\xBB\xBF+1 1:2\n-1 3:4\n", "t.svm"), parse_libsvm("+1 1:2\n-1 3:4\n", "t.svm"));
  EXPECT_NE(parse_error("+1 1:2\n\xEF\xBB\xBF-1 3:4\n").find("t.svm:2:"), std::string::npos);  // only there
}

TEST(Libsvm, EmptyAndCommentOnlyInputGiveNoRows) {
  for (const std::string text : {"", "\n\n", "# nothing here\r\n  \n"}) {
    const auto d = parse_libsvm(text, "t.svm");
    EXPECT_EQ(d.rows(), 0u);
    EXPECT_EQ(d.nnz(), 0u);
    EXPECT_EQ(d.num_features, 0u);
  }
}

TEST(Libsvm, AcceptsIdsUpTo2To31Minus1) {
  const auto d = parse_libsvm("1 0:1 2147483647:2\n", "t.svm");
  EXPECT_EQ(d.index, (std::vector<std::uint32_t>{0, 2147483647u}));
  EXPECT_EQ(d.num_features, 2147483648u);
  EXPECT_EQ(parse_error("1 2147483648:1\n"), "t.svm:1:3: expected a feature id in 0..2147483647, got '2147483648'");
  EXPECT_EQ(parse_error("1 99999999999999999999999:1\n"),
            "t.svm:1:3: expected a feature id in 0..2147483647, got '99999999999999999999999'");
}

TEST(Libsvm, SortsUnsortedIdsByDefault) {
  const auto d = parse_libsvm("1 9:0.9 2:0.2 5:0.5\n-1 3:3 1:1\n", "t.svm");
  EXPECT_EQ(d.index, (std::vector<std::uint32_t>{2, 5, 9, 1, 3}));
  // Values travel with their ids.
  EXPECT_EQ(d.value, (std::vector<float>{0.2f, 0.5f, 0.9f, 1, 3}));
  EXPECT_NO_THROW(d.validate());
}

TEST(Libsvm, RejectsUnsortedIdsWhenAsked) {
  EXPECT_NO_THROW(parse_libsvm("1 1:1 2:1 30:1\n", "t.svm", UnsortedIds::reject));
  const std::string message = parse_error("1 1:1 2:1\n-1 3:1 12:1 5:1\n", UnsortedIds::reject);
  EXPECT_EQ(message.rfind("t.svm:2:13: expected feature ids in increasing order, got 5 after 12", 0), 0u) << message;
}

TEST(Libsvm, RejectsDuplicateIds) {
  // Adjacent repeat, in either mode.
  for (const auto mode : {UnsortedIds::sort, UnsortedIds::reject}) {
    EXPECT_EQ(parse_error("1 3:1 3:2\n", mode),
              "t.svm:1:7: expected each feature id at most once per line, got 3 again (first at column 3)");
  }
  // A repeat found only after sorting is still reported where it is written:
  // the first repeat on the line (5 at column 15), not the first id sorted.
  EXPECT_EQ(parse_error("1 5:1 9:1 2:1 5:2 2:7\n"),
            "t.svm:1:15: expected each feature id at most once per line, got 5 again (first at column 3)");
}

struct BadInput {
  const char* text;
  const char* message;
};

TEST(Libsvm, ReportsEachMalformedInputAtItsLineAndColumn) {
  const BadInput cases[] = {
      {"2 1:1\n", "t.svm:1:1: expected a label +1, 1, -1 or 0 (0 means -1), got '2'"},
      {"0.5 1:1\n", "t.svm:1:1: expected a label +1, 1, -1 or 0 (0 means -1), got '0.5'"},
      {"yes 1:1\n", "t.svm:1:1: expected a label +1, 1, -1 or 0 (0 means -1), got 'yes'"},
      {"+-1 1:1\n", "t.svm:1:1: expected a label +1, 1, -1 or 0 (0 means -1), got '+-1'"},
      {"1:1 2:1\n", "t.svm:1:1: expected a label +1, 1, -1 or 0 (0 means -1), got '1:1'"},
      {"1 1:1 7\n", "t.svm:1:7: expected a feature 'id:value', got '7'"},
      {"1 x:1\n", "t.svm:1:3: expected a feature id (an integer in 0..2147483647), got 'x'"},
      {"1 -4:1\n", "t.svm:1:3: expected a feature id (an integer in 0..2147483647), got '-4'"},
      {"1 +4:1\n", "t.svm:1:3: expected a feature id (an integer in 0..2147483647), got '+4'"},
      {"1 :1\n", "t.svm:1:3: expected a feature id (an integer in 0..2147483647), got nothing"},
      {"1 4:\n", "t.svm:1:5: expected a number after ':', got nothing"},
      {"1 4:abc\n", "t.svm:1:5: expected a number after ':', got 'abc'"},
      {"1 4:1.5x\n", "t.svm:1:5: expected a number after ':', got '1.5x'"},
      {"1 4:1:2\n", "t.svm:1:5: expected a number after ':', got '1:2'"},
      {"1 4:0x10\n", "t.svm:1:5: expected a number after ':', got '0x10'"},
      {"1 4:nan\n", "t.svm:1:5: expected a finite float value, got 'nan'"},
      {"1 4:-inf\n", "t.svm:1:5: expected a finite float value, got '-inf'"},
      {"1 4:1e39\n", "t.svm:1:5: expected a finite float value, got '1e39'"},
      {"1 4:-1e400\n", "t.svm:1:5: expected a finite float value, got '-1e400'"},
      // Control bytes are shown escaped, not written to the terminal.
      {"1 4:1\x01\n", "t.svm:1:5: expected a number after ':', got '1\\x01'"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse_error(c.text), c.message) << "input: " << c.text;
  }
}

TEST(Libsvm, ValuesBelowTheFloatRangeBecomeZeroOrDenormal) {
  const auto d = parse_libsvm("1 1:1e-50 2:-1e-400 3:1e-40\n", "t.svm");
  ASSERT_EQ(d.value.size(), 3u);
  EXPECT_EQ(d.value[0], 0.0f);
  EXPECT_EQ(d.value[1], 0.0f);
  EXPECT_TRUE(std::signbit(d.value[1]));
  EXPECT_EQ(d.value[2], 1e-40f);
}

TEST(Libsvm, CountsLinesThroughCommentsBlankLinesAndCrlf) {
  // Line 5, column 10 (columns count bytes from 1, tabs included).
  const std::string text = "# comment\r\n1 1:1\r\n\r\n   \r\n-1\t2:1 3:q\r\n1 1:1\r\n";
  EXPECT_EQ(parse_error(text), "t.svm:5:10: expected a number after ':', got 'q'");
}

TEST(Libsvm, RoundTripsExactly) {
  ScratchDir dir;
  SparseDataset d;
  d.row_ptr = {0};
  std::mt19937_64 rng(3);
  // Values that a decimal writer easily gets wrong by an ulp or a sign.
  const float special[] = {-0.0f, 0.0f, 0.1f, 1.0f / 3.0f, 16777217.0f, 3.4028235e38f,
                           std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                           -1.17549421e-38f};
  std::uint32_t next_special = 0;
  for (int r = 0; r < 300; ++r) {
    std::uint32_t id = static_cast<std::uint32_t>(rng() % 5);
    const int features = static_cast<int>(rng() % 12);  // some rows empty
    for (int k = 0; k < features; ++k) {
      d.index.push_back(id);
      if (next_special < std::size(special)) {
        d.value.push_back(special[next_special++]);
      } else {
        std::uint32_t bits = static_cast<std::uint32_t>(rng());
        float v;
        std::memcpy(&v, &bits, sizeof v);
        d.value.push_back(std::isfinite(v) ? v : 1.5f);
      }
      id += 1 + static_cast<std::uint32_t>(rng() % 1000);
    }
    d.label.push_back(rng() % 2 ? 1.0f : -1.0f);
    d.row_ptr.push_back(d.index.size());
  }
  d.index.push_back(kMaxFeatureId);  // the largest id, in one more row
  d.value.push_back(2.0f);
  d.label.push_back(-1.0f);
  d.row_ptr.push_back(d.index.size());
  std::uint32_t max_id = 0;
  for (auto id : d.index) max_id = std::max(max_id, id);
  d.num_features = max_id + 1;

  const auto path = dir / "data.svm";
  write_libsvm(path, d);
  expect_same(read_libsvm(path, UnsortedIds::reject), d);
  // Only the file itself: no temporary left beside it.
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"data.svm"});
}

TEST(Libsvm, WriteReplacesAnExistingFile) {
  ScratchDir dir;
  const auto path = dir / "data.svm";
  write_text(path, "old contents that are longer than the new ones\n");
  const auto d = parse_libsvm("1 3:1.5\n0 1:2\n", "t.svm");
  write_libsvm(path, d);
  EXPECT_EQ(read_text(path), "+1 3:1.5\n-1 1:2\n");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"data.svm"});
}

TEST(Libsvm, WriteRefusesInvalidDataAndLeavesTheOldFile) {
  ScratchDir dir;
  const auto path = dir / "data.svm";
  write_text(path, "1 1:1\n");
  auto d = parse_libsvm("1 3:1.5\n-1 1:2\n", "t.svm");
  d.label[1] = 0.0f;  // not +1/-1
  EXPECT_THROW(write_libsvm(path, d), InputError);
  d.label[1] = -1.0f;
  d.num_features = 3;  // id 3 no longer fits
  EXPECT_THROW(write_libsvm(path, d), InputError);
  EXPECT_EQ(read_text(path), "1 1:1\n");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"data.svm"});
}

TEST(Libsvm, WriteIntoAMissingDirectoryOrOverADirectoryIsAnInputError) {
  ScratchDir dir;
  const auto d = parse_libsvm("1 3:1.5\n", "t.svm");
  EXPECT_THROW(write_libsvm(dir / "no_such_dir" / "data.svm", d), InputError);
  fs::create_directory(dir / "sub");
  EXPECT_THROW(write_libsvm(dir / "sub", d), InputError);
  EXPECT_TRUE(fs::is_directory(dir / "sub"));
}

TEST(Libsvm, ReadErrorsNameTheFile) {
  ScratchDir dir;
  const auto missing = dir / "missing.svm";
  try {
    read_libsvm(missing);
    FAIL() << "no error for a missing file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_libsvm(dir / ""), InputError);  // a directory
  const auto bad = dir / "bad.svm";
  write_text(bad, "1 1:1\n1 2:x\n");
  try {
    read_libsvm(bad);
    FAIL() << "no error for a malformed file";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), bad.string() + ":2:5: expected a number after ':', got 'x'");
  }
}

// Scoring data with a model of another width: features past the model are left out of the data (weight 0), and
// the data is as wide as the model; a model wider than the data is kept whole.
// Input without end is judged as it streams in and refused after a bounded amount, from a device, a pipe or a
// file alike: before, /dev/zero or a pipe of it was read whole (std::bad_alloc, naming no file). Each read runs in a
// child that may take 512 MB more: reading whole fails there in a second rather than taking the machine's memory.
TEST(Libsvm, BinaryOrEndlessInputIsRefusedAsItStreams) {
  ScratchDir dir;
  constexpr std::uint64_t kRoom = std::uint64_t{512} << 20;
  EXPECT_EQ(asgd::testing::message_in_limited_child(kRoom, [] { read_libsvm("/dev/zero"); }),
            "/dev/zero:1: byte 0 is NUL: this looks like a binary file, not a libsvm file");
  const fs::path fifo = dir / "fifo";
  const std::string rows_then_nul("+1 1:2\n-1 3:0.5\n\0", 17);
  EXPECT_EQ(asgd::testing::message_in_limited_child(kRoom,
                                                    [&] {
                                                      asgd::testing::endless_fifo(fifo, rows_then_nul);
                                                      read_libsvm(fifo);
                                                    }),
            fifo.string() + ":3: byte 16 is NUL: this looks like a binary file, not a libsvm file");
  // No newline for ever: refused once a line passes kMaxLibsvmLineBytes, not after the whole input.
  const std::string message = asgd::testing::message_in_limited_child(kRoom, [&] {
    asgd::testing::endless_fifo(fifo, "+1 1:2 ");
    read_libsvm(fifo);
  });
  EXPECT_EQ(message, fifo.string() + ":1: line longer than 67108864 bytes, the limit for a libsvm file");
}

TEST(Libsvm, ALineLongerThanTheLimitIsRefusedInTextToo) {
  std::string text = "+1 1:1\n-1";
  text.resize(text.size() + (std::size_t{64} << 20), ' ');
  text += "2:1\n";
  EXPECT_EQ(parse_error(text), "t.svm:2: line longer than 67108864 bytes, the limit for a libsvm file");
}

// A caller that sizes memory by the largest id refuses an id past its limit at the id's line, with its reason.
TEST(Libsvm, AFeatureLimitRefusesAnIdAtItsLine) {
  FeatureLimit limit;
  limit.features = 100;
  limit.why = [](std::uint32_t id) { return "feature id " + std::to_string(id) + " is too wide here"; };
  EXPECT_EQ(parse_libsvm("+1 99:1\n-1 3:1\n", "t.svm", UnsortedIds::sort, limit).num_features, 100u);
  try {
    parse_libsvm("+1 99:1\n-1 3:1 100:2\n+1 200:1\n", "t.svm", UnsortedIds::sort, limit);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "t.svm:2:8: feature id 100 is too wide here");
  }
}

TEST(Libsvm, NarrowToWeightsDropsFeaturesTheModelNeverSaw) {
  SparseDataset d;
  d.row_ptr = {0, 2, 4};
  d.index = {1, 7, 0, 3};
  d.value = {1.0f, 2.0f, 3.0f, 4.0f};
  d.label = {1, -1};
  d.num_features = 8;
  const auto w = narrow_to_weights(d, {0.5f, 0.25f, 0.0f, 2.0f});
  EXPECT_EQ(w.size(), 4u);
  EXPECT_EQ(d.num_features, 4u);
  EXPECT_EQ(d.row_ptr, (std::vector<std::uint64_t>{0, 1, 3}));
  EXPECT_EQ(d.index, (std::vector<std::uint32_t>{1, 0, 3}));
  EXPECT_EQ(d.value, (std::vector<float>{1.0f, 3.0f, 4.0f}));
  d.validate();
  EXPECT_EQ(narrow_to_weights(d, std::vector<float>(10, 1.0f)).size(), 10u);
  EXPECT_EQ(d.num_features, 10u);
  EXPECT_EQ(d.index.size(), 3u);
}

TEST(Libsvm, ValidateFindsInconsistentData) {
  const auto good = parse_libsvm("1 3:1.5 4:1\n-1 1:2\n", "t.svm");
  EXPECT_NO_THROW(good.validate());
  EXPECT_NO_THROW(SparseDataset{}.validate());
  auto broken = [&](auto change) {
    auto d = good;
    change(d);
    EXPECT_THROW(d.validate(), InputError);
  };
  broken([](SparseDataset& d) { d.label.pop_back(); });
  broken([](SparseDataset& d) { d.value.pop_back(); });
  broken([](SparseDataset& d) { d.row_ptr.back() = 2; });
  broken([](SparseDataset& d) { d.row_ptr.front() = 1; });
  broken([](SparseDataset& d) { std::swap(d.index[0], d.index[1]); });
  broken([](SparseDataset& d) { d.index[1] = 3; });  // repeat within a row
  broken([](SparseDataset& d) { d.value[0] = std::numeric_limits<float>::quiet_NaN(); });
  broken([](SparseDataset& d) { d.label[0] = 0.0f; });
  broken([](SparseDataset& d) { d.num_features = 4; });
}

// What to do with unsorted ids, by name (the CLI's --unsorted).
TEST(Libsvm, UnsortedIdsAreParsedByName) {
  EXPECT_EQ(parse_unsorted_ids("sort"), UnsortedIds::sort);
  EXPECT_EQ(parse_unsorted_ids("reject"), UnsortedIds::reject);
  EXPECT_THROW(parse_unsorted_ids("keep"), InputError);
}

}  // namespace
}  // namespace asgd::sparse
