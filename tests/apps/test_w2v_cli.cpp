// End-to-end tests of `asgd w2v` and `asgd w2v-eval` as a user runs them.
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <random>
#include <string>
#include <thread>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/sparse/word2vec/embeddings.hpp"
#include "cli_harness.hpp"

namespace {

using asgd::testing::Result;
namespace fs = std::filesystem;

class W2vCli : public asgd::testing::CliTest {
 protected:
  // Sentences from one of three topics of 20 words each (w0..w59).
  std::string topics_corpus(int sentences) {
    std::mt19937 rng(11);
    std::string text;
    for (int s = 0; s < sentences; ++s) {
      const int topic = static_cast<int>(rng() % 3);
      for (int k = 0; k < 10; ++k) text += "w" + std::to_string(topic * 20 + static_cast<int>(rng() % 20)) + " ";
      text += "\n";
    }
    return text;
  }
  std::string write(const std::string& name, const std::string& content) {
    std::ofstream(path(name), std::ios::binary) << content;
    return path(name);
  }
  Result w2v(std::vector<std::string> args) {
    args.insert(args.begin(), "w2v");
    return run(args);
  }
};

}  // namespace

TEST_F(W2vCli, OneThreadWithASeedIsByteForByteReproducible) {
  const auto corpus = write("c.txt", topics_corpus(2000));
  const std::vector<std::string> flags = {"-train", corpus, "-size", "16", "-iter", "2", "-threads", "1", "-seed",
                                          "9", "-min-count", "1", "-cbow", "0", "-sample", "1e-2"};
  auto args = flags;
  args.insert(args.end(), {"-output", path("a.txt")});
  ASSERT_EQ(w2v(args).status, 0);
  args = flags;
  args.insert(args.end(), {"-output", path("b.txt")});
  ASSERT_EQ(w2v(args).status, 0);
  EXPECT_EQ(slurp("a.txt"), slurp("b.txt"));
  args = flags;
  args[9] = "10";  // another -seed gives other vectors
  args.insert(args.end(), {"-output", path("c.txt.vec")});
  ASSERT_EQ(w2v(args).status, 0);
  EXPECT_NE(slurp("a.txt"), slurp("c.txt.vec"));
}

TEST_F(W2vCli, WritesBothFormatsAndEvaluatesThem) {
  const auto corpus = write("c.txt", topics_corpus(3000));
  for (const char* binary : {"0", "1"}) {
    const auto out = path(std::string("v") + binary);
    auto r = w2v({"-train", corpus, "-output", out, "-binary", binary, "-size", "20", "-iter", "3", "-min-count",
                  "1", "-threads", "2", "-save-vocab", path("vocab.txt")});
    ASSERT_EQ(r.status, 0) << r.output;
    const auto e = asgd::sparse::w2v::read_word2vec(out);
    EXPECT_EQ(e.size(), 60u);
    EXPECT_EQ(e.dim, 20u);
    r = run({"w2v-eval", "--vectors", out, "--neighbours", "w0", "-k", "5"});
    ASSERT_EQ(r.status, 0) << r.output;
    // The five nearest neighbours of w0 are from its own topic (w0..w19).
    const auto line = r.output.substr(r.output.find("w0:"));
    int same_topic = 0;
    for (int k = 1; k < 20; ++k) same_topic += line.find(" w" + std::to_string(k) + " (") != std::string::npos;
    EXPECT_GE(same_topic, 4) << line;
  }
  // -read-vocab uses the saved vocabulary.
  const auto r = w2v({"-train", corpus, "-read-vocab", path("vocab.txt"), "-size", "8", "-iter", "1", "-output",
                      path("r.txt"), "-min-count", "1"});
  ASSERT_EQ(r.status, 0) << r.output;
}

TEST_F(W2vCli, ReadsStandardInputAndPipes) {
  const auto corpus = write("c.txt", topics_corpus(300));
  const std::vector<std::string> flags = {"-size", "8", "-iter", "1", "-min-count", "1", "-threads", "1"};
  auto with = [&](const std::string& train, const std::string& out) {
    auto a = flags;
    a.insert(a.begin(), {"w2v", "-train", train, "-output", path(out)});
    return a;
  };
  ASSERT_EQ(run(with(corpus, "file.txt")).status, 0);
  auto r = run(with("-", "stdin.txt"), corpus);
  ASSERT_EQ(r.status, 0) << r.output;
  // /dev/stdin cannot be rewound: read once into memory like "-".
  r = run(with("/dev/stdin", "devstdin.txt"), corpus);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp("stdin.txt"), slurp("file.txt"));
  EXPECT_EQ(slurp("devstdin.txt"), slurp("file.txt"));
  r = run(with("-", "empty.txt"));  // stdin is /dev/null: no words
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("no words"), std::string::npos) << r.output;
  // -read-vocab - reads the vocabulary from stdin (it was "-: cannot open the vocabulary file"); stdin can feed
  // one of them only.
  ASSERT_EQ(run({"w2v", "-train", corpus, "-save-vocab", path("v.txt"), "-size", "8", "-iter", "1", "-min-count",
                 "1", "-threads", "1", "-output", path("counted.txt")})
                .status,
            0);
  auto vocab_args = with(corpus, "vocab-stdin.txt");
  vocab_args.insert(vocab_args.end(), {"-read-vocab", "-"});
  r = run(vocab_args, path("v.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp("vocab-stdin.txt"), slurp("counted.txt"));
  r = run(vocab_args, path("c.txt"));  // a corpus is no vocabulary: the error names stdin and the line
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("stdin:1: "), std::string::npos) << r.output;
  for (const char* other : {"-", "/dev/stdin"}) {
    vocab_args = with("-", "both.txt");
    vocab_args.insert(vocab_args.end(), {"-read-vocab", other});
    r = run(vocab_args, path("v.txt"));
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("only one of them can read standard input"), std::string::npos) << r.output;
  }
}

TEST_F(W2vCli, OutputToANonRegularFileIsWrittenInPlace) {
  const auto corpus = write("c.txt", topics_corpus(200));
  // /dev/null must stay a device; "-" goes to stdout.
  auto r = run({"w2v", "-train", corpus, "-size", "4", "-iter", "1", "-min-count", "1", "-output", "/dev/null"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(fs::is_regular_file("/dev/null"));
  r = run({"w2v", "-train", corpus, "-size", "4", "-iter", "1", "-min-count", "1", "-output", "-", "-quiet", "1"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("\n60 4\n"), std::string::npos) << r.output.substr(0, 300);
  // word2vec.c's -debug is taken (it was an unknown flag; -debug 0 is -quiet 1, which only shows on a terminal),
  // and its value checked.
  for (const char* level : {"0", "2"}) {
    const auto debug = run({"w2v", "-train", corpus, "-size", "4", "-iter", "1", "-min-count", "1", "-output",
                            path("debug.txt"), "-debug", level});
    EXPECT_EQ(debug.status, 0) << debug.output;
  }
  const auto bad = run({"w2v", "-train", corpus, "-output", path("debug.txt"), "-debug", "x"});
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("-debug 'x': expected a number"), std::string::npos) << bad.output;
  // A symlink's target is replaced; the link stays a link.
  std::ofstream(path("target.txt")) << "old";
  fs::create_symlink(path("target.txt"), path("link.txt"));
  r = run({"w2v", "-train", corpus, "-size", "4", "-iter", "1", "-min-count", "1", "-output", path("link.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::is_symlink(path("link.txt")));
  EXPECT_EQ(slurp("target.txt").substr(0, 5), "60 4\n");
  // A dangling link gets its target created and stays a link.
  fs::create_symlink(path("new.txt"), path("dangling.txt"));
  r = run({"w2v", "-train", corpus, "-size", "4", "-iter", "1", "-min-count", "1", "-output", path("dangling.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::is_symlink(path("dangling.txt")));
  EXPECT_EQ(slurp("new.txt").substr(0, 5), "60 4\n");
  // /dev/stdout is written through a copy of descriptor 1, wherever that
  // goes (here a pipe: the link would end in "pipe:[N]", no file to replace).
  // For the shell: every path in single quotes (TMPDIR may hold spaces).
  const auto q = [](const std::string& s) {
    std::string out = "'";
    for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  };
  const std::string piped = q(ASGD_BINARY) + " w2v -train " + q(corpus) +
                            " -size 4 -iter 1 -min-count 1 -quiet 1 -output /dev/stdout | cat > " + q(path("piped.txt"));
  ASSERT_EQ(std::system(piped.c_str()), 0);
  EXPECT_EQ(slurp("piped.txt").substr(0, 5), "60 4\n");
  // Into a file opened for appending, it appends: the file is not replaced.
  std::ofstream(path("appended.txt")) << "HEADER\n";
  const std::string appended = q(ASGD_BINARY) + " w2v -train " + q(corpus) +
                               " -size 4 -iter 1 -min-count 1 -quiet 1 -output /dev/stdout >> " + q(path("appended.txt"));
  ASSERT_EQ(std::system(appended.c_str()), 0);
  EXPECT_EQ(slurp("appended.txt").substr(0, 12), "HEADER\n60 4\n");
}

TEST_F(W2vCli, BadInputGetsAClearErrorNeverACrash) {
  const auto good = write("good.txt", topics_corpus(50));
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{"-train", write("empty.txt", "")}, "no words"},
      {{"-train", write("one.txt", "hello\n")}, "no word occurs at least 5 times"},
      {{"-train", write("bin.dat", std::string("\x7f" "ELF\0\0\x01 abc", 10))}, "binary"},
      {{"-train", good, "-size", "0"}, "-size 0"},
      {{"-train", good, "-window", "-1"}, "-window"},
      {{"-train", good, "-window", "0"}, "-window 0"},
      {{"-train", good, "-negative", "0"}, "nothing to train"},
      {{"-train", good, "-cbow", "2"}, "-cbow"},
      {{"-train", good, "-threads", "0"}, "-threads 0"},
      {{"-train", good, "-size", "5", "-size", "7"}, "-size: given twice"},
      {{"-train", good, "-alpha", "inf"}, "-alpha inf: expected a finite rate"},
      {{"-train", good, "-alpha", "1e39"}, "-alpha 1e39: out of range"},
      {{"-train", good, "-classes", "10"}, "-classes: give -output"},
      {{"-train", good, "-classes", "10", "-output", path("cl"), "-binary", "1"}, "-binary 1 does not apply"},
      // Refused once the vocabulary is known (60 words), before training: no file is left.
      {{"-train", good, "-classes", "1000", "-min-count", "1", "-output", path("cl")},
       "-classes 1000: more classes than the vocabulary's"},
      {{"-train", good, "-debug", "0", "-quiet", "1"}, "-debug and -quiet: give one of them"},
      {{"-train", good, "-size", "-3"}, "-size -3: must not be negative"},
      {{"-train", good, "-help"}, "-help goes alone"},
      {{"-train", good, "-allreduce", "x"}, "asgd: error: -allreduce: expected tree, ring or native"},  // not --
      {{"-train", good, "-iter", "100000000000"}, "-iter 100000000000: expected 1 to 1000000"},  // was bad_alloc
      {{"-train", good, "-alpha", "x"}, "-alpha"},
      {{"-train", good, "-policy", "optimistic"}, "-policy: consistency 'optimistic'"},
      {{"-train", good, "-tau", "-2"}, "-tau: "},
      {{"-train", good, "-read-vocab", write("v.txt", "a 5\nb x\n")}, "v.txt:2"},
      {{"-train", good, "-bogus", "1"}, "unknown flag"},
      {{"-train", good, "-size"}, "expects a value"},
      {{"-train", path("missing.txt")}, "cannot open"},
      {{"-train", path("missing.txt"), "-alpha", "0"}, "-alpha 0: expected a finite rate"},  // before the corpus
      {{"-output", path("o")}, "-train"},
  };
  for (const auto& c : cases) {
    const auto r = w2v(c.args);
    EXPECT_EQ(r.status, 2) << c.args[0] << " " << c.args.back() << "\n" << r.output;
    EXPECT_NE(r.output.find("asgd: error:"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << r.output;
  }
}

// Input without end is refused after a bounded amount, naming it: before, `-train /dev/zero` (a device, held in
// memory for the second pass) grew to 4.2 GB and died of std::bad_alloc naming no file; a vocab file was read whole
// before a line of it was judged, and a bad line's control bytes reached the terminal raw.
TEST_F(W2vCli, BinaryOrEndlessInputIsRefusedNamingIt) {
  const auto good = write("good.txt", topics_corpus(50));
  const std::string ctl = write("ctl.txt", "the 5\nca\x1b[31mt\n");
  struct Case {
    std::vector<std::string> args;
    std::string input, expect;
  };
  const std::vector<Case> cases = {
      {{"-train", "/dev/zero"}, "/dev/null", "/dev/zero:1: byte 0 is NUL: this looks like a binary file, not text"},
      {{"-train", "-"}, "/dev/zero", "stdin:1: byte 0 is NUL: this looks like a binary file, not text"},
      {{"-train", good, "-read-vocab", "/dev/zero"}, "/dev/null",
       "/dev/zero:1: line longer than 65536 bytes, the limit for a vocabulary file; byte 0 is NUL"},
      {{"-train", good, "-read-vocab", "-"}, "/dev/zero", "stdin:1: line longer than 65536 bytes"},
      {{"-train", good, "-read-vocab", ctl}, "/dev/null", ctl + ":2: expected 'word count', got 'ca\\x1b[31mt'"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"w2v"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), {"-output", path("v.txt")});
    const auto r = run(args, c.input);
    EXPECT_EQ(r.status, 2) << c.args[1] << "\n" << r.output;
    EXPECT_NE(r.output.find("asgd: error: " + c.expect), std::string::npos) << "expected '" << c.expect << "' in: "
                                                                              << r.output;
    EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(path("v.txt")));
  }
}

TEST_F(W2vCli, ClassesAreWrittenInsteadOfTheVectors) {
  // word2vec.c's -classes: "word class" lines, one per word in the vocabulary's order. Three topics of 20 words
  // each, in 3 classes: each topic's words share a class.
  const auto corpus = write("c.txt", topics_corpus(3000));
  const std::vector<std::string> flags = {"-train", corpus, "-size", "20", "-iter", "3", "-min-count", "1",
                                          "-threads", "1", "-cbow", "0", "-sample", "1e-2", "-checkpoint",
                                          path("ck")};
  auto args = flags;
  args.insert(args.end(), {"-output", path("classes.txt"), "-classes", "3"});
  auto r = w2v(args);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("3 word classes by K-means"), std::string::npos) << r.output;
  std::ifstream in(path("classes.txt"));
  std::map<std::string, int> class_of;
  std::string word;
  int c = -1;
  while (in >> word >> c) class_of[word] = c;
  ASSERT_EQ(class_of.size(), 60u) << slurp("classes.txt");
  std::set<int> topic_classes;
  for (int topic = 0; topic < 3; ++topic) {
    std::set<int> seen;
    for (int k = 0; k < 20; ++k) seen.insert(class_of.at("w" + std::to_string(topic * 20 + k)));
    EXPECT_EQ(seen.size(), 1u) << "topic " << topic << " is split across classes:\n" << slurp("classes.txt");
    topic_classes.insert(*seen.begin());
  }
  EXPECT_EQ(topic_classes, (std::set<int>{0, 1, 2})) << slurp("classes.txt");
  // The first line is the most frequent word's, as word2vec.c writes them (no header).
  const std::string text = slurp("classes.txt");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 60);
  // A finished run's checkpoint gives classes of any count again without -train; 60 classes is one word each.
  r = w2v({"-resume", path("ck"), "-output", path("sixty.txt"), "-classes", "60"});
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream sixty(path("sixty.txt"));
  std::set<int> classes;
  while (sixty >> word >> c) classes.insert(c);
  EXPECT_EQ(classes.size(), 60u) << slurp("sixty.txt");
  r = w2v({"-resume", path("ck"), "-output", path("more.txt"), "-classes", "61"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("-classes 61: more classes than the vocabulary's 60 words"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("more.txt")));
}

TEST_F(W2vCli, OddButValidInputHasDocumentedBehaviour) {
  // A 1 MB line: split into 1,000-word sentences, never truncated.
  std::string line;
  for (int i = 0; line.size() < (1u << 20); ++i) line += "w" + std::to_string(i % 40) + " ";
  auto r = w2v({"-train", write("long.txt", line + "\n"), "-size", "8", "-iter", "1", "-output", path("o.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("1 line(s) split at 1000 words"), std::string::npos) << r.output;
  // A -read-vocab word with \v in it (word2vec.c writes such words) is left out, and the count is said.
  r = w2v({"-train", write("short.txt", "w1 w2 w1 w2\n"), "-read-vocab", write("v.txt", "w1 2\nw\v3 2\nw2 2\n"),
           "-min-count", "1", "-size", "4", "-iter", "1", "-output", path("v.vec")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("vocabulary 2 words"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 -read-vocab word(s) with \\v, \\f or \\r left out"), std::string::npos) << r.output;
  // Invalid UTF-8 is kept as bytes: the word appears in the output as it was.
  r = w2v({"-train", write("utf.txt", std::string(20, ' ') + "caf\xc3 ok\n" + "caf\xc3 ok\ncaf\xc3 ok\n"), "-size", "4",
           "-iter", "1", "-min-count", "1", "-output", path("u.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(slurp("u.txt").find("caf\xc3 "), std::string::npos);
  // One word repeated: a one-word vocabulary trains (nothing to contrast) and writes one vector.
  r = w2v({"-train", write("same.txt", "a a a a a a\n"), "-size", "4", "-iter", "1", "-output", path("a.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp("a.txt").substr(0, 4), "1 4\n");
}

TEST_F(W2vCli, CheckpointLetsTrainingGoOnForMoreEpochs) {
  const auto corpus = write("c.txt", topics_corpus(1000));
  const std::vector<std::string> common = {"-train", corpus, "-size", "8", "-threads", "1", "-min-count", "1",
                                           "-seed", "4"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = common;
    a.insert(a.end(), extra.begin(), extra.end());
    return w2v(a);
  };
  auto r = with({"-iter", "2", "-checkpoint", path("ck"), "-output", path("two.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  // Resuming with nothing left to train gives back exactly what was saved.
  r = w2v({"-train", corpus, "-threads", "1", "-iter", "2", "-resume", path("ck"), "-output", path("again.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp("again.txt"), slurp("two.txt"));
  // And says so (before: "0 words in 0.00 s ... loss 0.0000").
  EXPECT_NE(r.output.find("holds all 2 epochs: nothing left to train"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("0 words in"), std::string::npos) << r.output;
  // Without the corpus too: a finished run needs none to be written again (before: "-train FILE is required").
  r = w2v({"-resume", path("ck"), "-output", path("no-corpus.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp("no-corpus.txt"), slurp("two.txt"));
  // -checkpoint elsewhere gets the finished checkpoint (it used to be left unwritten), byte for byte; the same file
  // is left as it is.
  r = w2v({"-resume", path("ck"), "-checkpoint", path("ck-copy")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("writing it to -checkpoint " + path("ck-copy")), std::string::npos) << r.output;
  EXPECT_EQ(slurp("ck-copy"), slurp("ck"));
  r = w2v({"-resume", path("ck"), "-checkpoint", path("ck")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("writing it to"), std::string::npos) << r.output;
  EXPECT_EQ(slurp("ck-copy"), slurp("ck"));
  // Fewer epochs than it holds: refused naming -iter (before: the engine's "trainer: 2 epochs are done already").
  r = w2v({"-train", corpus, "-threads", "1", "-iter", "1", "-resume", path("ck"), "-output", path("one.txt")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("-iter 1: " + path("ck") + " holds 2 epochs already"), std::string::npos) << r.output;
  r = w2v({"-resume", path("ck"), "-iter", "3", "-output", path("no-corpus.txt")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("-train FILE is required to continue training"), std::string::npos) << r.output;
  r = w2v({"-train", corpus, "-threads", "1", "-iter", "5", "-resume", path("ck"), "-output", path("five.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("epochs 3-5"), std::string::npos) << r.output;
  EXPECT_NE(slurp("two.txt"), slurp("five.txt"));
  // Without -iter a resume finishes the checkpointed run (its -iter 2: nothing left), not a default of 5 epochs.
  r = w2v({"-train", corpus, "-threads", "1", "-resume", path("ck"), "-output", path("own.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp("own.txt"), slurp("two.txt")) << r.output;
  // Flags that would change the model are refused on resume.
  r = w2v({"-train", corpus, "-iter", "5", "-resume", path("ck"), "-size", "300"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("-size 300: " + path("ck") + " was trained with 8"), std::string::npos) << r.output;
  r = w2v({"-train", corpus, "-iter", "5", "-resume", path("ck"), "-seed", "5"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("-seed 5: " + path("ck") + " was trained with 4"), std::string::npos) << r.output;
  r = w2v({"-train", corpus, "-iter", "5", "-resume", path("ck"), "-min-count", "2"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("-min-count 2: " + path("ck") + " was made with -min-count 1; the vocabulary comes from "
                          "the checkpoint"),
            std::string::npos)
      << r.output;
  // The first run's model flags again (its command with -resume added) are no change (before: refused, and
  // -min-count was refused whatever its value).
  r = w2v({"-train", corpus, "-size", "8", "-threads", "1", "-seed", "4", "-min-count", "1", "-iter", "5", "-resume",
           path("ck"), "-output", path("five-again.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp("five-again.txt"), slurp("five.txt"));
  // A resume takes the run's -threads, -policy and -tau unless given (before: -threads was all cores, and the
  // vectors were another run's), and warns about another value of those or of -alpha.
  r = w2v({"-train", corpus, "-iter", "5", "-resume", path("ck"), "-output", path("five-own.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(" 1 threads,"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
  EXPECT_EQ(slurp("five-own.txt"), slurp("five.txt"));
  r = w2v({"-train", corpus, "-iter", "5", "-resume", path("ck"), "-threads", "2", "-policy", "atomic", "-tau", "3",
           "-alpha", "0.1"});
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* changed : {"-threads 2 now, 1 in the run", "-policy atomic now, racy in the run",
                              "-tau 3 now, inf in the run", "-alpha 0.1 now, 0.05 in the run"})
    EXPECT_NE(r.output.find(changed), std::string::npos) << changed << "\n" << r.output;
  // -read-vocab of the run's own vocabulary is no change; another is refused.
  r = w2v({"-train", corpus, "-min-count", "1", "-iter", "1", "-save-vocab", path("vocab.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  r = w2v({"-train", corpus, "-iter", "5", "-resume", path("ck"), "-read-vocab", path("vocab.txt"), "-output",
           path("five-vocab.txt")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp("five-vocab.txt"), slurp("five.txt"));
  r = w2v({"-train", corpus, "-iter", "5", "-resume", path("ck"), "-read-vocab", write("other.txt", "w0 5\nw1 4\n")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("not the vocabulary of " + path("ck")), std::string::npos) << r.output;
  // A checkpoint of another kind is refused.
  r = run({"linear", "generate", "--out", path("l.svm"), "--examples", "100", "--features", "10", "--nnz", "3"});
  r = run({"linear", "train", "--data", path("l.svm"), "--model", path("lin.ckpt"), "--epochs", "1"});
  ASSERT_EQ(r.status, 0) << r.output;
  r = w2v({"-train", corpus, "-iter", "5", "-resume", path("lin.ckpt")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("not a word2vec checkpoint"), std::string::npos) << r.output;
}

// Ctrl-C mid-run: w2v dies of SIGINT, writes no vectors, names the checkpoint that resumes it, and the resume
// finishes the run.
TEST_F(W2vCli, CtrlCStopsAndTheCheckpointResumes) {
  const auto corpus = write("c.txt", topics_corpus(2000));
  const std::vector<std::string> flags = {"w2v", "-train", corpus, "-size", "16", "-iter", "2000", "-threads", "2",
                                          "-min-count", "1", "-checkpoint", path("ck")};
  auto args = flags;
  args.insert(args.end(), {"-output", path("v.txt")});
  Result victim;
  const auto epoch = killed_after_first_checkpoint(args, "ck", SIGINT, &victim);
  ASSERT_GE(epoch, 1u);
  EXPECT_EQ(victim.status, 128 + SIGINT) << victim.output;
  EXPECT_NE(victim.output.find("asgd w2v: interrupted (SIGINT) in epoch "), std::string::npos) << victim.output;
  EXPECT_NE(victim.output.find("-resume " + path("ck") + " goes on from the end of epoch"), std::string::npos)
      << victim.output;
  EXPECT_FALSE(fs::exists(path("v.txt")));
  const auto r = w2v({"-train", corpus, "-iter", std::to_string(epoch + 1), "-threads", "2", "-resume", path("ck"),
                      "-output", path("v.txt")});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::exists(path("v.txt")));
}

// The w2v staleness sweep puts each setting's analogy accuracy in the CSV, on its last epoch's row (it used to
// print it only).
TEST_F(W2vCli, StalenessSweepWritesAnalogyAccuracyInTheCsv) {
  const auto corpus = write("c.txt", topics_corpus(1000));
  write("q.txt", ": topic\nw0 w1 w20 w21\nw0 w2 w40 w42\n");
  const auto r = run({"bench", "staleness", "--problem", "w2v", "--corpus", corpus, "--analogies", path("q.txt"),
                      "--epochs", "2", "--workers", "1", "--policies", "racy", "--no-plot", "--out", path("st")});
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream csv(slurp("st/staleness_w2v.csv"));
  std::string header, first, last;
  std::getline(csv, header);
  std::getline(csv, first);
  std::getline(csv, last);
  EXPECT_EQ(header.substr(header.rfind(',') + 1), "analogy_accuracy");
  EXPECT_EQ(first.back(), ',') << first;  // epoch 1 of 2: not scored
  const double accuracy = std::stod(last.substr(last.rfind(',') + 1));
  EXPECT_GE(accuracy, 0.0);
  EXPECT_LE(accuracy, 1.0);
}

// A checkpoint's vocabulary lines are checked (its CRC and layout hash fit a forged or foreign file): a word with
// a blank used to train the whole run and fail writing the vectors; a count of -1 was read as 2^64 - 1.
TEST_F(W2vCli, ACheckpointsVocabularyIsChecked) {
  const auto corpus = write("c.txt", topics_corpus(200));
  ASSERT_EQ(w2v({"-train", corpus, "-size", "4", "-iter", "1", "-min-count", "1", "-threads", "1", "-checkpoint",
                 path("ck")})
                .status,
            0);
  const asgd::CheckpointData good = asgd::read_checkpoint(path("ck"));
  const auto line = good.metadata.find("\nw");  // the first vocabulary line, "wN count"
  ASSERT_NE(line, std::string::npos) << good.metadata;
  const auto forge = [&](const std::string& name, const std::string& replacement) {
    std::string metadata = good.metadata;
    const auto end = metadata.find('\n', line + 1);  // the whole line
    metadata.replace(line + 1, end - line - 1, replacement);
    auto store = asgd::ParamStore::on_heap(good.layout);
    store.assign(good.params);
    asgd::save_checkpoint(path(name), store, good.state, {}, metadata);
    return path(name);
  };
  // Its header's whole numbers too: 4.5 was read as 4, -1 as 2^64 - 1.
  const auto forge_header = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::string metadata = good.metadata;
    const auto at = metadata.find(from);
    EXPECT_LT(at, line) << from << " in " << metadata.substr(0, line);
    metadata.replace(at, from.size(), to);
    auto store = asgd::ParamStore::on_heap(good.layout);
    store.assign(good.params);
    asgd::save_checkpoint(path(name), store, good.state, {}, metadata);
    return path(name);
  };
  const std::pair<std::string, std::string> cases[] = {
      {forge("blank.ck", "a\tb 3"), "empty or with a blank in it"},
      {forge("minus.ck", "w0 -1"), "not 'word count'"},
      {forge_header("dim.ck", "\"dim\":4", "\"dim\":4.5"), "dim is 4.5, not a whole number"},
      {forge_header("window.ck", "\"window\":5", "\"window\":-1"), "window is -1, not a whole number"},
      // A key missing: said in plain words (before: "[json.exception.out_of_range.403] key 'window' not found").
      {forge_header("nowindow.ck", "\"window\":5,", ""), "nowindow.ck: its metadata has no 'window'"},
  };
  for (const auto& [ck, message] : cases) {
    const auto r = w2v({"-train", corpus, "-resume", ck, "-iter", "2", "-threads", "1"});
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("words in"), std::string::npos) << "trained first: " << r.output;
  }
}

// Two runs writing one -checkpoint path: the second is refused while the first runs (before: both wrote it).
TEST_F(W2vCli, ASecondRunOnACheckpointIsRefusedUntilTheFirstIsKilled) {
  const auto corpus = write("c.txt", topics_corpus(300));
  const std::vector<std::string> common = {"w2v", "-train", corpus, "-size", "4", "-min-count", "1", "-threads", "1",
                                           "-checkpoint", path("ck")};
  auto first = common, second = common;
  first.insert(first.end(), {"-iter", "1000000"});
  second.insert(second.end(), {"-iter", "1"});
  expect_second_writer_refused(first, second, "ck");
}

TEST_F(W2vCli, EvalReportsAndErrors) {
  const auto corpus = write("c.txt", topics_corpus(1000));
  ASSERT_EQ(w2v({"-train", corpus, "-size", "8", "-iter", "1", "-min-count", "1", "-output", path("v.txt")}).status,
            0);
  write("q.txt", ": topic\nw0 w1 w20 w21\nw0 w1 nothere w3\n");
  write("s.tsv", "# comment\nw0\tw1\t9\nw0\tw20\t1\nw0\tw40\t2\n");
  auto r = run({"w2v-eval", "--vectors", path("v.txt"), "--analogies", path("q.txt"), "--similarity", path("s.tsv")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("analogies: accuracy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Questions seen / total: 1 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("similarity: Spearman rho"), std::string::npos) << r.output;
  // One known pair has no rank correlation (before: "Spearman rho nan").
  write("one.tsv", "w0\tw1\t9\nw0\tnothere\t1\n");
  r = run({"w2v-eval", "--vectors", path("v.txt"), "--similarity", path("one.tsv")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("no Spearman rho: 1 of 2 pairs"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("nan"), std::string::npos) << r.output;
  // A report that cannot be written is a failure (before: exit 0 with everything lost).
  if (fs::exists("/dev/full")) {
    r = run_to("/dev/full", {"w2v-eval", "--vectors", path("v.txt"), "--neighbours", "w0"});
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("writing standard output"), std::string::npos) << r.output;
  }
  // --vectors through a pipe: read once (before, the format sniff ate the pipe and the reader found it empty).
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  {
    const std::string vectors = slurp("v.txt");
    std::jthread writer([&] { std::ofstream(path("fifo"), std::ios::binary) << vectors; });
    r = run({"w2v-eval", "--vectors", path("fifo"), "--neighbours", "w0"});
  }
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("(text)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("w0:"), std::string::npos) << r.output;
  r = run({"w2v-eval", "--vectors", path("c.txt"), "--neighbours", "w0"});
  EXPECT_EQ(r.status, 2) << r.output;
  r = run({"w2v-eval", "--vectors", path("v.txt"), "--neighbours", "unknownword"});
  EXPECT_EQ(r.status, 2) << r.output;
  // "-" is stdin, as for `w2v -train -`; WordSim-353's comma-separated file (header and all) gives what its
  // tab-separated form gives.
  r = run({"w2v-eval", "--vectors", "-", "--neighbours", "w0"}, path("v.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("vectors: -:"), std::string::npos) << r.output;
  write("s.csv", "Word 1,Word 2,Human (mean)\nw0,w1,9\nw0, w20,1\nw0,w40,2\n");
  const auto tsv = run({"w2v-eval", "--vectors", path("v.txt"), "--similarity", path("s.tsv")});
  r = run({"w2v-eval", "--vectors", path("v.txt"), "--similarity", path("s.csv")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.substr(r.output.find("similarity:")), tsv.output.substr(tsv.output.find("similarity:")));
}

// The vectors and the vocabulary both on stdout would be one unreadable stream: refused before training.
TEST_F(W2vCli, TwoOutputsOnStdoutAreRefused) {
  const auto corpus = write("c.txt", topics_corpus(100));
  for (const auto& [vectors, vocab] : {std::pair{"-", "-"}, std::pair{"/dev/stdout", "-"}}) {
    const auto r = w2v({"-train", corpus, "-min-count", "1", "-iter", "1", "-output", vectors, "-save-vocab", vocab});
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("-save-vocab: stdout is -output's already"), std::string::npos) << r.output;
  }
}
