// End-to-end tests of the `asgd` command: what a user types, what they get.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "asgd/engine/available_memory.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "cli_harness.hpp"
#include "asgd/engine/param_store.hpp"

namespace fs = std::filesystem;

namespace {

using asgd::testing::Child;
using asgd::testing::number_after;
using asgd::testing::Result;

class Cli : public asgd::testing::CliTest {
 protected:
  void generate(const std::string& name, int examples, int features, const std::string& test = "") {
    std::vector<std::string> args = {"linear", "generate", "--out", path(name), "--examples", std::to_string(examples),
                                     "--features", std::to_string(features), "--nnz", "10"};
    if (!test.empty()) args.insert(args.end(), {"--test-out", path(test), "--test-examples", "2000"});
    const auto r = run(args);
    ASSERT_EQ(r.status, 0) << r.output;
  }
  // r.svm, a 6-epoch AdaGrad run of it in "full", and the same run stopped after epoch 3 in checkpoint "ck".
  const std::vector<std::string> kResumeCommon = {"linear", "train", "--workers", "1", "--seed", "5", "--adagrad",
                                                  "--quiet"};
  asgd::testing::Result resume_run(std::vector<std::string> extra, const std::string& data = "r.svm") {
    auto args = kResumeCommon;
    args.insert(args.end(), {"--data", path(data)});
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  }
  void train_and_stop() {
    generate("r.svm", 5000, 2000);
    ASSERT_EQ(resume_run({"--epochs", "6", "--model", path("full")}).status, 0);
    // Stop after epoch 3 of a 6-epoch schedule, to be resumed from its checkpoint.
    ASSERT_EQ(resume_run({"--epochs", "6", "--until-epoch", "3", "--checkpoint", path("ck")}).status, 0);
    ASSERT_EQ(asgd::read_checkpoint(path("ck")).state.epoch, 3u);
  }
};

}  // namespace

TEST_F(Cli, GenerateTrainEvalRoundTrip) {
  generate("train.svm", 20000, 5000, "test.svm");
  auto r = run({"linear", "train", "--data", path("train.svm"), "--test", path("test.svm"), "--epochs", "5",
                "--workers", "2", "--model", path("m.asgd"), "--reference"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("epoch   5"), std::string::npos) << r.output;
  const double gap = number_after(r.output, "objective ");
  EXPECT_GT(gap, 0.0);
  const double test_accuracy = number_after(r.output, "accuracy ");
  EXPECT_GT(test_accuracy, 0.55) << r.output;  // chance is 0.5
  r = run({"linear", "eval", "--data", path("test.svm"), "--model", path("m.asgd")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_DOUBLE_EQ(number_after(r.output, "accuracy "), test_accuracy) << r.output;
}

// --one-based writes LIBSVM's ids (from 1, which LIBLINEAR needs), the same
// examples one id up: a model trained on them is one (unused) weight wider
// and as good. A test file that is the training file is refused.
TEST_F(Cli, GenerateWritesOneBasedIdsWhenAsked) {
  const std::vector<std::string> args = {"linear", "generate", "--examples", "500", "--features", "40", "--nnz", "5"};
  const auto with = [&](std::vector<std::string> extra) {
    auto a = args;
    a.insert(a.end(), extra.begin(), extra.end());
    return run(a);
  };
  ASSERT_EQ(with({"--out", path("zero.svm")}).status, 0);
  ASSERT_EQ(with({"--out", path("one.svm"), "--one-based"}).status, 0);
  std::istringstream zero(slurp("zero.svm")), one(slurp("one.svm"));
  std::size_t lines = 0;
  bool saw_zero = false;
  for (std::string a, b; std::getline(zero, a) && std::getline(one, b); ++lines) {
    std::istringstream fa(a), fb(b);
    std::string ta, tb;
    fa >> ta;
    fb >> tb;
    ASSERT_EQ(ta, tb);  // the label
    while (fa >> ta) {
      ASSERT_TRUE(fb >> tb) << b;
      const auto ca = ta.find(':'), cb = tb.find(':');
      saw_zero = saw_zero || std::stoul(ta.substr(0, ca)) == 0;
      EXPECT_EQ(std::stoul(tb.substr(0, cb)), std::stoul(ta.substr(0, ca)) + 1) << a << " | " << b;
      EXPECT_EQ(tb.substr(cb), ta.substr(ca));
    }
  }
  EXPECT_EQ(lines, 500u);
  EXPECT_TRUE(saw_zero);  // the default file has id 0, the one-based none
  const auto r = with({"--out", path("same.svm"), "--test-examples", "5", "--test-out", path("same.svm")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--test-out: " + path("same.svm") + " is also --out's file"), std::string::npos) << r.output;
}

// One number in the input no longer sets the allocation, a width asked for is checked against the memory, and
// binary data is refused as it is read: before, `1 3:1.5 2147483647:2` allocated 8.6 GB and died of std::bad_alloc
// naming neither file nor line, an id of 200000000 silently took 1.5 GB and wrote an 800 MB model, and /dev/zero was
// read whole.
TEST_F(Cli, OneIdOrAWidthCannotSizeTheModelAndBinaryDataIsRefused) {
  std::ofstream(path("huge.svm")) << "1 3:1.5 2147483647:2\n";
  std::ofstream(path("wide.svm")) << "-1 1:1\n1 3:1.5 200000000:2\n";
  auto r = run({"linear", "train", "--data", path("huge.svm"), "--epochs", "1", "--model", path("m")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("asgd: error: " + path("huge.svm") + ":1:9: feature id 2147483647 would make the model "
                          "2147483648 features wide, more than the 134217728 (2^27) a model takes from its data: give "
                          "--features (above 2147483647) to train a model that wide (25.8 GB to train, 12 bytes a "
                          "feature), or remap the ids"),
            std::string::npos)
      << r.output;
  r = run({"linear", "train", "--data", path("wide.svm"), "--epochs", "1", "--model", path("m")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(path("wide.svm") + ":2:9: feature id 200000000 would make the model 200000001 features wide"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(path("m")));
  for (const auto& [data, input] : {std::pair{"/dev/zero", "/dev/null"}, std::pair{"-", "/dev/zero"}}) {
    r = run({"linear", "train", "--data", data, "--epochs", "1"}, input);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(":1: byte 0 is NUL: this looks like a binary file, not a libsvm file"), std::string::npos)
        << r.output;
  }
  // With L-BFGS's vectors a feature takes 212 bytes to train: 455 GB for 2^31 - 1 of them.
  const std::uint64_t reference_bytes = std::uint64_t{2147483647} * 212;
  if (asgd::available_memory().bytes >= reference_bytes) GTEST_SKIP() << "this machine has 455 GB to spare";
  r = run({"linear", "train", "--data", path("wide.svm"), "--features", "2147483647", "--reference", "--epochs", "1"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("asgd: error: --features 2147483647: a model of 2147483647 features (212 bytes a feature to "
                          "train) needs 455 GB (455266533164 bytes), more than the "),
            std::string::npos)
      << r.output;
}

TEST_F(Cli, BadInputExitsTwoWithWhereAndWhat) {
  std::ofstream(path("bad.svm")) << "+1 3:1.0 5:2.0\n-1 4:x\n";
  auto r = run({"linear", "train", "--data", path("bad.svm")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("asgd: error: " + path("bad.svm") + ":2:"), std::string::npos) << r.output;
  r = run({"linear", "train", "--data", path("missing.svm")});
  EXPECT_EQ(r.status, 2) << r.output;
  generate("ok.svm", 100, 50);
  r = run({"linear", "train", "--data", path("ok.svm"), "--policy", "optimistic"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("racy"), std::string::npos) << r.output;
  r = run({"linear", "train", "--data", path("ok.svm"), "--tau", "-3"});
  EXPECT_EQ(r.status, 2) << r.output;
  r = run({"linear", "train", "--data", path("ok.svm"), "--epochs", "2000000"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--epochs 2000000: expected 1 to 1000000"), std::string::npos) << r.output;
  // mpirun's flags in one process: checked, and said to do nothing (before: passed over in silence).
  r = run({"linear", "train", "--data", path("ok.svm"), "--epochs", "1", "--average-every", "4", "--quiet"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("note: --average-every only applies under mpirun"), std::string::npos) << r.output;
  r = run({"linear", "train", "--data", path("ok.svm"), "--epochs", "1", "--average-every", "0", "--quiet"});
  EXPECT_EQ(r.status, 2) << r.output;
  r = run({"linear", "train", "--no-such-flag"});
  EXPECT_EQ(r.status, 2) << r.output;
  // Errors name the flag (before: "tau 'x': ...", "generate_sparse: nnz_per_example must be in 1..features",
  // "format 'foo'", "/nonexist/r.svm: cannot write here"), and two outputs on stdout are refused.
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"cnn", "train", "--tau", "x"}, "--tau: tau 'x'"},
           {{"bench", "staleness", "--taus", "0,x", "--out", path("st")}, "--taus: tau 'x'"},
           {{"mf", "train", path("ok.svm"), "--format", "foo"}, "--format: format 'foo'"},
           {{"linear", "generate", "--out", path("g.svm"), "--features", "10", "--nnz", "20"},
            "--nnz 20: expected 1 to --features (10)"},
           {{"demo", "--features", "100", "--nnz", "200"}, "--nnz 200: expected 1 to --features (100)"},
           {{"bench", "staleness", "--features", "10", "--out", path("st")}, "--nnz 20: expected 1 to --features"},
           {{"linear", "generate", "--out", path("no/such/dir/g.svm")}, "--out: "},
           {{"mf", "generate", path("no/such/dir/r.txt")}, "out: "},
           {{"linear", "generate", "--out", "-", "--test-out", "-", "--test-examples", "5"},
            "--test-out: stdout is --out's already"},
           // Standard input read by two inputs: the second found it spent (an empty test set, no pairs scored).
           {{"linear", "train", "--data", "-", "--test", "-"},
            "--data - and --test -: only one of them can read standard input"},
           {{"mf", "train", "-", "-v", "-"}, "TRAIN_FILE - and -v -: only one of them"},
           {{"mf", "eval", "-", path("m"), "--exclude", "-"}, "test_file - and --exclude -: only one of them"},
           {{"w2v-eval", "--vectors", "-", "--analogies", "-"}, "--vectors - and --analogies -: only one of them"}}) {
    r = run(args);
    EXPECT_EQ(r.status, 2) << args[0] << ": " << r.output;
    EXPECT_NE(r.output.find("asgd: error: " + message), std::string::npos) << args[0] << ": " << r.output;
    EXPECT_EQ(r.output.find("asgd demo:"), std::string::npos) << "printed before refusing: " << r.output;
  }
  // A negative count for an unsigned option is refused in every command (CLI11 read -1 as 2^64 - 1: cnn trained
  // with --batch -1, w2v-eval -k -1 printed every neighbour).
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"cnn", "train", "--batch", "-1"}, {"linear", "train", "--workers", "-2"},
        {"mf", "train", path("ok.svm"), path("m"), "-k", "-1"}, {"w2v-eval", "--vectors", path("v"), "-k", "-1"},
        {"w2v-eval", "--vectors", path("v"), "--restrict", "-30000"}}) {
    r = run(args);
    EXPECT_EQ(r.status, 2) << args[0] << ": " << r.output;
    EXPECT_NE(r.output.find("expected a non-negative integer"), std::string::npos) << args[0] << ": " << r.output;
  }
  r = run({"linear", "eval", "--data", path("ok.svm"), "--model", path("bad.svm")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("not an asgd checkpoint"), std::string::npos) << r.output;
  // A negative --l2 is refused by eval as by train (before: eval took it for "not given", the model's l2).
  ASSERT_EQ(run({"linear", "train", "--data", path("ok.svm"), "--epochs", "1", "-q", "--model", path("ok.model")})
                .status,
            0);
  r = run({"linear", "eval", "--data", path("ok.svm"), "--model", path("ok.model"), "--l2", "-3"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("l2 must be finite and >= 0, got -3"), std::string::npos) << r.output;
  // train says so before it reads the data (here: before it finds it missing).
  r = run({"linear", "train", "--data", path("missing.svm"), "--l2", "-3"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--l2 -3: expected finite and >= 0"), std::string::npos) << r.output;
  // Features the model never saw weigh 0 and are left out: one line with feature 2^31 - 1 used to widen the
  // weights to 8 GB. The score is that of the line without the feature.
  std::ofstream(path("far.svm")) << "+1 2147483647:1\n";
  std::ofstream(path("near.svm")) << "+1\n";
  r = run({"linear", "eval", "--data", path("far.svm"), "--model", path("ok.model")});
  const auto near = run({"linear", "eval", "--data", path("near.svm"), "--model", path("ok.model")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, near.output);
  // Eval scores with the `weights` tensor alone, wherever the layout puts it: the same weights behind another
  // tensor (and with padding after) give the same output as the model itself.
  {
    const auto d = asgd::read_checkpoint(path("ok.model"));
    const asgd::Tensor& w = d.layout["weights"];
    asgd::Layout other;
    other.add("other", {5}).add("weights", {w.elements()}).add("after", {3});
    auto store = asgd::ParamStore::on_heap(other);
    std::vector<float> params(store.size(), 7.0f);
    std::copy_n(d.params.begin() + static_cast<std::ptrdiff_t>(w.offset), w.elements(),
                params.begin() + static_cast<std::ptrdiff_t>(other["weights"].offset));
    store.assign(params);
    asgd::save_checkpoint(path("other.model"), store, d.state, {}, d.metadata);
    r = run({"linear", "eval", "--data", path("ok.svm"), "--model", path("other.model")});
    const auto plain = run({"linear", "eval", "--data", path("ok.svm"), "--model", path("ok.model")});
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output, plain.output);
    // The same weights as a column whose rows are padded to a cache line: the padding is no weight (before,
    // eval read the first elements() floats, padding and all).
    asgd::Layout padded;
    padded.add("weights", {w.elements(), 1}, asgd::RowPadding::cache_line);
    auto column = asgd::ParamStore::on_heap(padded);
    std::vector<float> values(column.size(), 7.0f);
    for (std::size_t i = 0; i < w.elements(); ++i) values[padded["weights"].at(i)] = d.params[w.offset + i];
    column.assign(values);
    asgd::save_checkpoint(path("padded.model"), column, d.state, {}, d.metadata);
    ASSERT_GT(padded["weights"].row_stride, 1u);
    r = run({"linear", "eval", "--data", path("ok.svm"), "--model", path("padded.model")});
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output, plain.output);
  }
  // A test file asked for without a size would not be written: refused (before: exit 0, no file).
  r = run({"linear", "generate", "--out", path("g.svm"), "--examples", "10", "--features", "5", "--nnz", "2",
           "--test-out", path("t.svm")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--test-out needs --test-examples"), std::string::npos) << r.output;
}

// An output no file can be written to is refused before training, not after
// it: every command that trains checks its outputs first.
TEST_F(Cli, UnwritableOutputsFailBeforeTraining) {
  generate("o.svm", 200, 50);
  const std::string nowhere = path("no-such-folder") + "/out";
  struct Case {
    std::vector<std::string> args;
    std::string flag;
  };
  const std::vector<Case> cases = {
      {{"linear", "train", "--data", path("o.svm"), "--model", nowhere}, "--model"},
      {{"linear", "train", "--data", path("o.svm"), "--checkpoint", path("")}, "--checkpoint"},
      {{"linear", "train", "--data", path("o.svm"), "--test", path("missing.svm")}, path("missing.svm")},
      {{"mf", "train", path("o.svm"), nowhere}, "MODEL_FILE"},
      {{"w2v", "-train", path("o.svm"), "-output", nowhere}, "-output"},
      {{"w2v", "-train", path("o.svm"), "-output", path("v.txt"), "-checkpoint", nowhere}, "-checkpoint"},
      {{"cnn", "train", "--data", path("no-mnist"), "--model", nowhere}, "--model"},
      {{"cnn", "train", "--data", path("no-mnist"), "--checkpoint", nowhere}, "--checkpoint"},
      // Rewritten after every epoch: a stream would get one checkpoint after another.
      {{"linear", "train", "--data", path("o.svm"), "--checkpoint", "-"}, "--checkpoint: -: rewritten"},
      {{"cnn", "train", "--data", path("no-mnist"), "--checkpoint", "/dev/stdout"}, "--checkpoint"},
      {{"w2v", "-train", path("o.svm"), "-output", path("v.txt"), "-checkpoint", "/dev/null"}, "-checkpoint"},
      {{"mf", "train", path("o.svm"), "-", "--shm", "asgd-test-never-made"}, "MODEL_FILE (with --shm)"},
      // An output that is an input (here through a link too), or another output of another format.
      {{"linear", "train", "--data", path("o.svm"), "--model", path("o.svm")}, "--model: " + path("o.svm") + " is also --data's"},
      {{"w2v", "-train", path("o.svm"), "-output", path("link.svm")}, "-output: " + path("link.svm") + " is also -train's"},
      {{"w2v", "-train", path("o.svm"), "-output", path("v.txt"), "-checkpoint", path("v.txt")}, "-output"},
      {{"mf", "train", path("o.svm"), path("o.svm")}, "MODEL_FILE: " + path("o.svm") + " is also TRAIN_FILE's"},
      {{"mf", "predict", path("o.svm"), path("m"), path("o.svm")}, "output_file"},
      {{"cnn", "train", "--data", path("no-mnist"), "--model", path("m"), "--csv", path("m")}, "--csv"},
  };
  fs::create_symlink(path("o.svm"), path("link.svm"));
  const std::string data_before = slurp("o.svm");
  for (const auto& c : cases) {
    const auto r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args[0] << ": " << r.output;
    EXPECT_NE(r.output.find("asgd: error: " + c.flag), std::string::npos) << c.args[0] << ": " << r.output;
    // Refused before reading the data or training: nothing was trained.
    EXPECT_EQ(r.output.find("epoch"), std::string::npos) << c.args[0] << ": " << r.output;
  }
  EXPECT_FALSE(fs::exists(path("v.txt")));
  EXPECT_EQ(slurp("o.svm"), data_before);
}

// `--model -` puts the model on stdout: the report goes to stderr then, so
// that what a pipe gets is the model and nothing else.
TEST_F(Cli, AModelOnStdoutIsTheWholeOfStdout) {
  generate("s.svm", 500, 50);
  auto r = run_to("model.out", {"linear", "train", "--data", path("s.svm"), "--epochs", "2", "--model", "-"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("model written to -"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("trained:"), std::string::npos) << r.output;
  EXPECT_EQ(asgd::read_checkpoint(path("model.out")).state.epoch, 2u);
  // As for any name of stdout, and for a link to one.
  fs::create_symlink("/dev/stdout", path("to-stdout"));
  r = run_to("model2.out", {"linear", "train", "--data", path("s.svm"), "--epochs", "1", "--model", path("to-stdout")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("model written to"), std::string::npos) << r.output;
  EXPECT_EQ(asgd::read_checkpoint(path("model2.out")).state.epoch, 1u);
  EXPECT_TRUE(fs::is_symlink(path("to-stdout")));
  r = run_to("ratings.out", {"mf", "generate", "-", "--users", "40", "--items", "10", "--ratings", "200"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("wrote 200 ratings"), std::string::npos) << r.output;
  std::ifstream ratings(path("ratings.out"));
  int lines = 0;
  for (std::string line; std::getline(ratings, line); ++lines)
    EXPECT_EQ(std::count(line.begin(), line.end(), '\t') + std::count(line.begin(), line.end(), ' '), 2) << line;
  EXPECT_EQ(lines, 200);
  r = run_to("mf.out", {"mf", "train", path("ratings.out"), "-", "-t", "2", "-k", "4"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("model written to -"), std::string::npos) << r.output;
  EXPECT_EQ(asgd::read_checkpoint(path("mf.out")).state.epoch, 2u);
  // Every command that writes data: generated examples, BPR models, predictions, recommendations.
  r = run_to("examples.out", {"linear", "generate", "--out", "-", "--examples", "30", "--features", "20"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("wrote 30 examples"), std::string::npos) << r.output;
  const std::string examples = slurp("examples.out");
  EXPECT_EQ(std::count(examples.begin(), examples.end(), '\n'), 30) << examples;
  EXPECT_EQ(examples.find("wrote"), std::string::npos);
  r = run_to("bpr.out", {"mf", "train", path("ratings.out"), "-", "--loss", "bpr", "-t", "1", "-k", "4"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("model written to -"), std::string::npos) << r.output;
  EXPECT_EQ(asgd::read_checkpoint(path("bpr.out")).state.epoch, 1u);
  r = run_to("predicted.out", {"mf", "predict", path("ratings.out"), path("mf.out"), "-"});
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string predicted = slurp("predicted.out");
  EXPECT_EQ(std::count(predicted.begin(), predicted.end(), '\n'), 200) << predicted;
  EXPECT_EQ(predicted.find_first_not_of("0123456789.e+-\n"), std::string::npos) << predicted;
  r = run_to("top.out", {"mf", "recommend", path("mf.out"), "--all-users", "-", "-k", "3"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("top-3 for"), std::string::npos) << r.output;
  EXPECT_EQ(slurp("top.out").find("top-3"), std::string::npos);
  // With the model in a file, the report stays on stdout.
  r = run_to("report.out", {"linear", "train", "--data", path("s.svm"), "--epochs", "1", "--model", path("m")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(slurp("report.out").find("model written to"), std::string::npos) << slurp("report.out");
}

// The linear SVMs: the squared hinge ends near its L-BFGS optimum; a hinge model's file says its loss, so eval
// scores it with the hinge; a resume with another loss is refused, and L-BFGS has no reference for the hinge.
TEST_F(Cli, LinearSvmLosses) {
  generate("svm.svm", 5000, 1000);
  // One worker: the result does not depend on how the machine schedules two (measured: 1.8e-4).
  auto r = run({"linear", "train", "--data", path("svm.svm"), "--loss", "squared-hinge", "--epochs", "20",
                "--workers", "1", "--reference", "-q"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("lr 0.1 "), std::string::npos) << r.output;  // the hinges' default rate
  EXPECT_LT(number_after(r.output, "ours is "), 2e-3) << r.output;
  // Fewer examples than features, no l2: a hyperplane separates them and the optimum is 0 at infinity, so the gap
  // is given absolute (before: "4.08e+08 relative above").
  generate("separable.svm", 200, 5000);
  r = run({"linear", "train", "--data", path("separable.svm"), "--l2", "0", "--reference", "-q"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("above (absolute: the optimum is too near 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no finite optimum"), std::string::npos) << r.output;
  // The squared hinge reaches 0 at a finite point: the same absolute gap, without the clause.
  r = run({"linear", "train", "--data", path("separable.svm"), "--loss", "squared-hinge", "--l2", "0", "--reference",
           "-q"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("no finite optimum"), std::string::npos) << r.output;
  r = run({"linear", "train", "--data", path("svm.svm"), "--loss", "hinge", "--epochs", "5", "-q", "--model",
           path("hinge.asgd")});
  ASSERT_EQ(r.status, 0) << r.output;
  const double trained = number_after(r.output, "train: 5000 examples, objective ");
  r = run({"linear", "eval", "--data", path("svm.svm"), "--model", path("hinge.asgd")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(number_after(r.output, "objective "), trained) << r.output;
  r = run({"linear", "eval", "--data", path("svm.svm"), "--model", path("hinge.asgd"), "--loss", "logistic"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(number_after(r.output, "objective "), trained) << r.output;
  r = run({"linear", "train", "--data", path("svm.svm"), "--epochs", "6", "--resume", path("hinge.asgd")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("trained with --loss hinge, not logistic"), std::string::npos) << r.output;
  r = run({"linear", "train", "--data", path("svm.svm"), "--loss", "hinge", "--reference"});
  EXPECT_EQ(r.status, 2) << r.output;
  r = run({"linear", "train", "--data", path("svm.svm"), "--loss", "svm"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--loss: loss 'svm'"), std::string::npos) << r.output;
}

// (With the logistic loss even a rate of 1e30 stays finite: the regulariser's
// implicit step bounds the weights. The squared hinge's slope grows with them.)
TEST_F(Cli, DivergenceStopsWithExitOne) {
  generate("d.svm", 2000, 100);
  auto r = run({"linear", "train", "--data", path("d.svm"), "--lr", "1e30", "--schedule", "constant", "--loss",
                "squared-hinge"});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("diverged"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lower the learning rate, or the L2"), std::string::npos) << r.output;
  // Into a segment: it keeps the NaN, and `linear eval` printed "objective -nan" with exit 0.
  const std::string shm = "asgd-cli-diverged-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  r = run({"linear", "train", "--data", path("d.svm"), "--lr", "1e30", "--schedule", "constant", "--loss",
           "squared-hinge", "--shm", shm});
  EXPECT_EQ(r.status, 1) << r.output;
  r = run({"linear", "eval", "--data", path("d.svm"), "--shm", shm});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("a run that trained into it diverged"), std::string::npos) << r.output;
  asgd::ParamStore::remove_shared(shm);
  // An AdaGrad sum past float's range (a feature of 1e20: its squared gradient is 1e40) left the model finite,
  // and the run failed only when writing it, as "checkpoint ...: optimizer value 1 is inf".
  std::ofstream(path("big.svm")) << "+1 1:1e20 2:1\n-1 1:1 3:1\n+1 2:0.5\n-1 3:2\n";
  r = run({"linear", "train", "--data", path("big.svm"), "--epochs", "3", "--workers", "1", "--adagrad", "--model",
           path("big.model")});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("the AdaGrad sum of parameter"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("scale the input's values down"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("big.model")));
  // The same with a checkpoint after each epoch: said before the write refuses the sum (it said "checkpoint ...:
  // optimizer value 1 is inf; refusing to save a diverged model").
  r = run({"linear", "train", "--data", path("big.svm"), "--epochs", "3", "--workers", "1", "--adagrad",
           "--checkpoint", path("big.ck")});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("the AdaGrad sum of parameter"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("refusing to save"), std::string::npos) << r.output;
}

TEST_F(Cli, ResumedTrainingEqualsUninterrupted) {
  train_and_stop();
  const auto with = [&](std::vector<std::string> extra) { return resume_run(std::move(extra)); };
  // Fewer epochs than it holds: refused naming --epochs, before it says it resumed (before: the engine's "trainer:
  // 3 epochs are done already, past epoch 2" after "resumed from" and a warning).
  auto r = with({"--epochs", "2", "--resume", path("ck")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("3 epochs are done already; --epochs is the run's total"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("resumed from"), std::string::npos) << r.output;
  r = with({"--epochs", "6", "--resume", path("ck"), "--model", path("again")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
  EXPECT_EQ(asgd::read_checkpoint(path("again")).params, asgd::read_checkpoint(path("full")).params);
  // The model file says which AdaGrad wrote its sums, as the checkpoints do.
  EXPECT_EQ(asgd::read_checkpoint(path("full")).optimizer_kind, asgd::OptimizerKind::adagrad);
  EXPECT_EQ(asgd::read_checkpoint(path("ck")).optimizer_kind, asgd::OptimizerKind::adagrad);
  // A rank count that is no count (1e30 was converted undefined: "an AdaGrad job of -2147483648 rank(s)").
  for (const char* ranks : {"1e30", "0", "1.5"}) {
    asgd::CheckpointData forged = asgd::read_checkpoint(path("ck"));
    ASSERT_EQ(forged.metadata.front(), '{') << forged.metadata;
    forged.metadata.insert(1, std::string("\"ranks\":") + ranks + ",");
    auto store = asgd::ParamStore::on_heap(forged.layout);
    store.assign(forged.params);
    asgd::save_checkpoint(path("ranks"), store, forged.state, forged.optimizer_state, forged.metadata,
                          forged.optimizer_kind);
    r = with({"--epochs", "6", "--resume", path("ranks")});
    EXPECT_EQ(r.status, 2) << ranks << ": " << r.output;
    EXPECT_NE(r.output.find("not a number of ranks"), std::string::npos) << r.output;
  }
}

// A resume with other settings: the ones that change the run are said (warned) or refused, naming the flag.
TEST_F(Cli, ResumeSaysWhatChangedOrRefusesIt) {
  train_and_stop();
  const auto with = [&](std::vector<std::string> extra) { return resume_run(std::move(extra)); };
  asgd::testing::Result r;
  // Another rate or schedule is said (before: taken in silence, and the result differed from the uninterrupted
  // run's); the run goes on with what was given.
  r = with({"--epochs", "6", "--resume", path("ck"), "--lr", "0.05", "--schedule", "constant", "--policy", "hogwild",
            "--lr-floor", "0.5"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: --lr 0.05 now, 0.5 in the run " + path("ck") + " continues"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("warning: --schedule constant now, linear in the run"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("--epochs"), std::string::npos) << r.output;  // constant: epochs do not shape the rates
  EXPECT_EQ(r.output.find("--lr-floor"), std::string::npos) << r.output;  // nor does the linear schedule's floor
  EXPECT_EQ(r.output.find("--policy"), std::string::npos) << r.output;    // hogwild is racy
  // Fewer epochs than the checkpoint holds: refused, nothing written (before: it wrote epoch 2 and trained
  // epochs 3 on again next time).
  r = with({"--epochs", "6", "--until-epoch", "2", "--resume", path("ck"), "--model", path("back")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("3 epochs are done already; --until-epoch is the last to train"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(path("back")));
  r = with({"--epochs", "2", "--resume", path("ck"), "--model", path("back")});
  EXPECT_EQ(r.status, 2) << r.output;
  // The step rule goes on as it was: AdaGrad's sums are not dropped, nor started from zero mid-run.
  r = run({"linear", "train", "--data", path("r.svm"), "--epochs", "6", "--resume", path("ck"), "--quiet"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("holds AdaGrad sums and this run does not use AdaGrad"), std::string::npos) << r.output;
  ASSERT_EQ(run({"linear", "train", "--data", path("r.svm"), "--epochs", "6", "--until-epoch", "3", "--checkpoint",
                 path("plain"), "--seed", "5", "--quiet"})
                .status,
            0);
  r = with({"--epochs", "6", "--resume", path("plain")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("holds no AdaGrad sums and this run uses AdaGrad"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;  // not "the run continues" first
  // A resume keeps the run's seed, and must have epochs left to train; a stop with nothing to resume from is
  // refused (before: each was run, and said nothing).
  r = run({"linear", "train", "--data", path("r.svm"), "--workers", "1", "--seed", "7", "--adagrad", "--quiet",
           "--epochs", "6", "--resume", path("ck")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--seed 7: " + path("ck") + " was trained with seed 5"), std::string::npos) << r.output;
  r = with({"--epochs", "3", "--resume", path("ck")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("3 epochs are done already; --epochs is the run's total"), std::string::npos) << r.output;
  r = with({"--epochs", "6", "--until-epoch", "2"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--until-epoch: give --checkpoint FILE"), std::string::npos) << r.output;
  // Another --l2 is another objective: refused (before: the run went on towards another optimum).
  r = with({"--epochs", "6", "--resume", path("ck"), "--l2", "0.1"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("trained with --l2 0.0001, not 0.1"), std::string::npos) << r.output;
  // Other data goes on, warned (before: in silence; cnn and w2v warned): here 100 examples more.
  {
    std::ifstream in(path("r.svm"));
    std::ofstream out(path("more.svm"));
    std::string line;
    for (int i = 0; std::getline(in, line); ++i) out << line << "\n" << (i < 100 ? line + "\n" : "");
  }
  r = run({"linear", "train", "--data", path("more.svm"), "--workers", "1", "--adagrad", "--quiet", "--epochs", "6",
           "--resume", path("ck")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: examples 5100 now, 5000 in the run " + path("ck")), std::string::npos)
      << r.output;
  // The same number of examples but other data (one label flipped): said in words.
  {
    std::ifstream in(path("r.svm"));
    std::ofstream out(path("flipped.svm"));
    std::string line;
    for (bool first = true; std::getline(in, line); first = false)
      out << (first ? (line[0] == '-' ? "+1" + line.substr(2) : "-1" + line.substr(line.find(' '))) : line) << "\n";
  }
  r = run({"linear", "train", "--data", path("flipped.svm"), "--workers", "1", "--adagrad", "--quiet", "--epochs",
           "6", "--resume", path("ck")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: the training examples differ from those of the run " + path("ck") +
                          " continues (same number)"),
            std::string::npos)
      << r.output;
  // Data with more features: the message says what to give (before: "holds another model: weights [...]").
  std::ofstream(path("more.svm"), std::ios::app) << "+1 2500:1\n";
  r = run({"linear", "train", "--data", path("more.svm"), "--adagrad", "--epochs", "6", "--resume", path("ck")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("features, and this run has 2501 (from --data's largest feature id): give --features"),
            std::string::npos)
      << r.output;
  // Another kind of model is said to be one (an mf model's was "loss 'bpr': expected logistic, ...").
  ASSERT_EQ(run({"mf", "generate", path("ratings.txt"), "--users", "50", "--items", "40", "--ratings", "500"}).status,
            0);
  ASSERT_EQ(run({"mf", "train", "-q", "-t", "1", "--loss", "bpr", path("ratings.txt"), path("mf.model")}).status, 0);
  r = with({"--epochs", "6", "--resume", path("mf.model")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--resume " + path("mf.model") + ": not a linear model (its kind: "), std::string::npos)
      << r.output;
  // A model whose metadata holds a value of the wrong kind: exit 2 and say so (before: exit 1, a JSON exception).
  const auto d = asgd::read_checkpoint(path("full"));
  auto store = asgd::ParamStore::on_heap(d.layout);
  store.assign(d.params);
  asgd::save_checkpoint(path("odd"), store, d.state, {}, R"({"model": "logistic", "l2": "abc", "features": 2000})");
  r = run({"linear", "eval", "--data", path("r.svm"), "--model", path("odd")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("metadata is malformed"), std::string::npos) << r.output;
}

// Two trainers writing one --checkpoint path: the second is refused while the first runs (before: both wrote it).
TEST_F(Cli, ASecondTrainerOnACheckpointIsRefusedUntilTheFirstIsKilled) {
  generate("s.svm", 2000, 100);
  const std::vector<std::string> common = {"linear", "train", "--data", path("s.svm"), "--workers", "1", "--quiet",
                                           "--checkpoint", path("ck")};
  auto first = common, second = common;
  first.insert(first.end(), {"--epochs", "100000"});
  second.insert(second.end(), {"--epochs", "2"});
  expect_second_writer_refused(first, second, "ck");
}

// A test or data file with no examples is named (before: "linear model: the dataset has no examples", after
// training for a test file).
TEST_F(Cli, DataWithNoExamplesIsNamed) {
  generate("s.svm", 200, 10);
  std::ofstream(path("empty.svm")) << "# nothing\n";
  auto r = run({"linear", "train", "--data", path("empty.svm"), "--quiet"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--data " + path("empty.svm") + ": no examples to train"), std::string::npos) << r.output;
  r = run({"linear", "train", "--data", path("s.svm"), "--test", path("empty.svm"), "--quiet"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--test " + path("empty.svm") + ": no examples to score"), std::string::npos) << r.output;
  ASSERT_EQ(run({"linear", "train", "--data", path("s.svm"), "--quiet", "--model", path("m")}).status, 0);
  r = run({"linear", "eval", "--data", path("empty.svm"), "--model", path("m")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(path("empty.svm") + ": no examples to score"), std::string::npos) << r.output;
}

TEST_F(Cli, TwoProcessesTrainOneSegmentWhileAThirdReads) {
  generate("s.svm", 30000, 5000);
  const std::string shm = "asgd-cli-test-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  // 150 epochs: each trainer runs about a second, so a reader (a process
  // start plus parsing the data) fits inside the window where both write.
  const std::vector<std::string> train = {"linear", "train", "--data", path("s.svm"), "--shm", shm, "--workers", "1",
                                          "--epochs", "150", "--quiet", "--reference"};
  Child a(train, dir_ / "a.log");
  Child b(train, dir_ / "b.log");
  auto running = [](const Child& c) { return ::waitpid(c.pid(), nullptr, WNOHANG) == 0; };
  // A reader attached read-only while both write.
  int reads_while_both_ran = 0;
  for (int i = 0; i < 300 && reads_while_both_ran < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!asgd::ParamStore::exists_shared(shm)) continue;
    const auto r = run({"linear", "eval", "--data", path("s.svm"), "--shm", shm});
    if (r.status == 0 && running(a) && running(b)) ++reads_while_both_ran;
  }
  const auto ra = a.wait(), rb = b.wait();
  EXPECT_GE(reads_while_both_ran, 1);
  ASSERT_EQ(ra.status, 0) << ra.output;
  ASSERT_EQ(rb.status, 0) << rb.output;
  // Once both are done, the shared parameters sit at the optimum.
  const double optimum = number_after(ra.output, "objective ");  // the reference line comes last
  ASSERT_GT(optimum, 0.0) << ra.output;
  const auto r = run({"linear", "eval", "--data", path("s.svm"), "--shm", shm});
  ASSERT_EQ(r.status, 0) << r.output;
  const double ours = number_after(r.output, "objective ");
  EXPECT_LT((ours - optimum) / optimum, 2e-3) << r.output << ra.output;
  const auto info = asgd::ParamStore::inspect_shared(shm);
  EXPECT_TRUE(info.writers.empty());
  EXPECT_FALSE(info.stale());
  asgd::ParamStore::remove_shared(shm);
}

TEST_F(Cli, KilledMidRunThenResumedWithOneWorkerEqualsUninterrupted) {
  generate("k.svm", 20000, 3000);
  const std::vector<std::string> common = {"linear", "train", "--data", path("k.svm"), "--workers", "1",
                                           "--epochs", "12", "--seed", "3", "--quiet"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_killed_and_resumed_is_whole(with);
}

// Ctrl-C stops at the next step: the command dies of SIGINT (a script sees it interrupted), writes nothing, and
// the last checkpoint resumes the run to the uninterrupted result.
TEST_F(Cli, CtrlCMidRunThenResumedWithOneWorkerEqualsUninterrupted) {
  generate("k.svm", 20000, 3000);
  // 100 epochs of about 10 ms: the signal comes in one of the first few.
  const std::vector<std::string> common = {"linear", "train", "--data", path("k.svm"), "--workers", "1",
                                           "--epochs", "100", "--seed", "3", "--quiet"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_killed_and_resumed_is_whole(with, SIGINT);
}

// Stopped by SIGTERM (or Ctrl-C), a trainer detaches from its segment as a finished one does: not stale, so the
// next trainer attaches without --shm-recover. Before, any signal left it "trained by a process that died".
TEST_F(Cli, ATrainerStoppedBySigtermDetachesFromItsSegment) {
  generate("k.svm", 20000, 3000);
  const std::string shm = "asgd-cli-term-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  Child t({"linear", "train", "--data", path("k.svm"), "--shm", shm, "--workers", "2", "--epochs", "100000",
           "--model", path("m"), "--quiet"},
          dir_ / "t.log");
  for (int i = 0; i < 500 && !asgd::ParamStore::exists_shared(shm); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  t.kill_now(SIGTERM);
  const auto start = std::chrono::steady_clock::now();
  auto r = t.wait();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  EXPECT_EQ(r.status, 128 + SIGTERM) << r.output;
  EXPECT_NE(r.output.find("asgd linear train: interrupted (SIGTERM) in epoch "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("shared segment '" + shm + "' keeps the parameters"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("m")));
  r = run({"shm", "info", shm});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("DEAD"), std::string::npos) << r.output;
  r = run({"linear", "train", "--data", path("k.svm"), "--shm", shm, "--epochs", "1"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("attached to shared segment"), std::string::npos) << r.output;
  r = run({"shm", "remove", shm});
  EXPECT_EQ(r.status, 0) << r.output;
}

// Processes that train one segment train one objective: another --loss or --l2 is refused (before: trained
// into it, mixing two problems); `shm info` shows what the segment trains.
TEST_F(Cli, ASegmentRefusesAWriterOfAnotherObjective) {
  generate("k.svm", 2000, 300);
  const std::string shm = "asgd-cli-objective-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  auto r = run({"linear", "train", "--data", path("k.svm"), "--shm", shm, "--epochs", "1", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"shm", "info", shm});
  EXPECT_NE(r.output.find("trained with: --loss logistic --l2 "), std::string::npos) << r.output;
  for (const std::vector<std::string>& other : {std::vector<std::string>{"--loss", "hinge"},
                                               std::vector<std::string>{"--l2", "0.5"}}) {
    std::vector<std::string> args = {"linear", "train", "--data", path("k.svm"), "--shm", shm, "--epochs", "1"};
    args.insert(args.end(), other.begin(), other.end());
    r = run(args);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("must train one objective"), std::string::npos) << r.output;
  }
  r = run({"linear", "train", "--data", path("k.svm"), "--shm", shm, "--epochs", "1", "--quiet"});
  EXPECT_EQ(r.status, 0) << r.output;
  // A shard whose largest feature id differs sizes the weights otherwise: the refusal says to give --features.
  std::ofstream(path("narrow.svm")) << "+1 0:1\n-1 1:1\n";
  r = run({"linear", "train", "--data", path("narrow.svm"), "--shm", shm, "--epochs", "1", "--quiet"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("holds another layout"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("give every process the same --features N"), std::string::npos) << r.output;
  asgd::ParamStore::remove_shared(shm);
  // `linear eval --shm` scores with the segment's objective (before: logistic and --l2 1e-4, whatever it trained).
  r = run({"linear", "train", "--data", path("k.svm"), "--shm", shm, "--epochs", "1", "--quiet", "--loss", "hinge",
           "--l2", "0.01"});
  ASSERT_EQ(r.status, 0) << r.output;
  const auto from_segment = run({"linear", "eval", "--data", path("k.svm"), "--shm", shm});
  const auto given = run({"linear", "eval", "--data", path("k.svm"), "--shm", shm, "--loss", "hinge", "--l2", "0.01"});
  EXPECT_EQ(from_segment.status, 0) << from_segment.output;
  EXPECT_EQ(from_segment.output.find("the training default"), std::string::npos) << from_segment.output;
  EXPECT_EQ(number_after(from_segment.output, "objective "), number_after(given.output, "objective "))
      << from_segment.output << given.output;
  asgd::ParamStore::remove_shared(shm);
}

TEST_F(Cli, AKilledTrainerLeavesASegmentThatIsReportedStale) {
  generate("k.svm", 20000, 3000);
  const std::string shm = "asgd-cli-kill-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  Child t({"linear", "train", "--data", path("k.svm"), "--shm", shm, "--workers", "1", "--epochs", "100000",
           "--quiet"},
          dir_ / "t.log");
  for (int i = 0; i < 500 && !asgd::ParamStore::exists_shared(shm); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  t.kill_now();
  t.wait();
  auto r = run({"shm", "info", shm});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("DEAD writers: " + std::to_string(t.pid())), std::string::npos) << r.output;
  // A reader is told (it served the dead trainer's last writes without a word).
  r = run({"linear", "eval", "--data", path("k.svm"), "--shm", shm});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: segment '" + shm + "' was trained by process " + std::to_string(t.pid()) +
                          " that died without detaching"),
            std::string::npos)
      << r.output;
  r = run({"linear", "train", "--data", path("k.svm"), "--shm", shm, "--epochs", "1", "--quiet"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("died without detaching"), std::string::npos) << r.output;
  r = run({"linear", "train", "--data", path("k.svm"), "--shm", shm, "--epochs", "1", "--quiet", "--shm-recover"});
  EXPECT_EQ(r.status, 0) << r.output;
  r = run({"shm", "remove", shm});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(asgd::ParamStore::exists_shared(shm));
}

// Shared memory of another program under the name (Open MPI's vader segments, a database's) is not removed
// without --force (before: removed, and "removed NAME" printed).
TEST_F(Cli, ShmRemoveLeavesOtherProgramsMemoryUnlessForced) {
  const std::string name = "asgd-cli-foreign-" + std::to_string(::getpid());
  const fs::path object = fs::path("/dev/shm") / name;
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  std::ofstream(object) << "not an asgd segment\n";
  auto r = run({"shm", "remove", name});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("is not an asgd parameter segment"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("pass --force"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(object));
  r = run({"shm", "remove", name, "--force"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(fs::exists(object));
  r = run({"shm", "remove", name});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("no shared segment"), std::string::npos) << r.output;
  r = run({"shm", "remove", "bad/name"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_EQ(r.output.find("no shared segment"), std::string::npos) << r.output;  // the naming rule instead
  fs::remove(object);
}

// `asgd ARGS...` run as user `uid` (root forks, drops to it and execs), output to `log`: its exit status (128 + a
// signal's) and output.
asgd::testing::Result run_as(uid_t uid, const std::vector<std::string>& args, const fs::path& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(126);
    std::vector<std::string> copy = args;
    std::vector<char*> argv;
    std::string bin = ASGD_BINARY;
    argv.push_back(bin.data());
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), text.str()};
}

// `shm remove` of a segment the user may not remove (another user's: only its owner or root may) says whose it is
// and suggests nothing that cannot help (before: "pass --force", and --force then said there was no such segment).
// Root removing another user's segment is told whose it is, and --force removes it.
TEST_F(Cli, ShmRemoveOfAnotherUsersSegmentSaysWhoseItIs) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run as another user and give a segment to one";
  constexpr uid_t kOther = 65534;
  const std::string shm = "asgd-cli-owner-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  { asgd::ParamStore made = asgd::ParamStore::create_shared(shm, asgd::Layout().add("w", {10})); }
  for (const bool force : {false, true}) {
    std::vector<std::string> args = {"shm", "remove", shm};
    if (force) args.push_back("--force");
    const auto r = run_as(kOther, args, dir_ / ("as-other" + std::to_string(force)));
    if (r.status == 126 || r.status == 127) GTEST_SKIP() << "cannot run asgd as uid " << kOther << ": " << r.output;
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("shared segment '" + shm + "' belongs to user root (uid 0, mode 0600)"), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("only its owner or root may remove it"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("--force"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("no shared segment"), std::string::npos) << r.output;
    EXPECT_TRUE(asgd::ParamStore::exists_shared(shm));
  }
  {
    const int fd = ::shm_open(("/" + shm).c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fchown(fd, kOther, kOther), 0);
    ::close(fd);
  }
  auto r = run({"shm", "info", shm});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("shared segment '" + shm + "' belongs to user "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(uid 65534, mode 0600)"), std::string::npos) << r.output;
  r = run({"shm", "remove", shm});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("(uid 65534, mode 0600)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("pass --force"), std::string::npos) << r.output;
  EXPECT_TRUE(asgd::ParamStore::exists_shared(shm));
  r = run({"shm", "remove", shm, "--force"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(asgd::ParamStore::exists_shared(shm));
}

// A creator killed while it sizes the segment (here by SIGXFSZ, as under `ulimit -f 100`) leaves one that names
// it: recovery replaces it and `shm remove` removes it (before: an object without a header that both refused).
TEST_F(Cli, ACreatorKilledWhileSizingLeavesASegmentThatRecoveryReplaces) {
  generate("z.svm", 2000, 1000);
  const std::string shm = "asgd-cli-sizing-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  const std::vector<std::string> train = {"linear", "train", "--data", path("z.svm"), "--shm", shm,
                                          "--features", "1000000", "--epochs", "1", "--quiet"};
  auto killed_while_sizing = [&] {
    rlimit old{}, no_core{0, 0};
    ::getrlimit(RLIMIT_FSIZE, &old);
    rlimit small = old;
    small.rlim_cur = 100 * 1024;  // the header fits, the 4 MB of parameters do not
    ::setrlimit(RLIMIT_FSIZE, &small);
    rlimit old_core{};
    ::getrlimit(RLIMIT_CORE, &old_core);
    ::setrlimit(RLIMIT_CORE, &no_core);
    Child c(train, dir_ / ("sizing" + std::to_string(runs_++)));
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::setrlimit(RLIMIT_CORE, &old_core);
    return c.wait();
  };
  auto r = killed_while_sizing();
  ASSERT_EQ(r.status, 128 + SIGXFSZ) << r.output;
  r = run({"shm", "info", shm});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("(NOT READY)"), std::string::npos) << r.output;
  r = run(train);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("died before it was ready"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--shm-recover"), std::string::npos) << r.output;
  r = run({"shm", "remove", shm});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(asgd::ParamStore::exists_shared(shm));
  r = killed_while_sizing();
  ASSERT_EQ(r.status, 128 + SIGXFSZ) << r.output;
  auto recover = train;
  recover.push_back("--shm-recover");
  r = run(recover);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(asgd::ParamStore::inspect_shared(shm).ready);
  asgd::ParamStore::remove_shared(shm);
}

// An object a creator killed before writing the header left (forged: 0 bytes) is removed by `shm remove` once
// no process has it open; while one has (a creator about to write the header), it is refused.
TEST_F(Cli, ShmRemoveRemovesWhatACreatorLeftBeforeItsHeader) {
  if (!fs::is_directory("/proc/self/fd")) GTEST_SKIP() << "no /proc";
  const std::string name = "asgd-cli-headerless-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(name);
  const int fd = ::shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  auto r = run({"shm", "remove", name});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("pass --force"), std::string::npos) << r.output;
  EXPECT_TRUE(asgd::ParamStore::exists_shared(name));
  // Made a minute ago (one made in the last 2 s may be a creator's on its way).
  const timespec times[2] = {{0, UTIME_OMIT}, {::time(nullptr) - 60, 0}};
  ASSERT_EQ(::futimens(fd, times), 0);
  ::close(fd);
  r = run({"shm", "remove", name});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("removed " + name + " (its creator died before writing its header)"), std::string::npos)
      << r.output;
  EXPECT_FALSE(asgd::ParamStore::exists_shared(name));
}

// `asgd shm remove -x` would take the name for an option: such a name is refused before anything is made.
TEST_F(Cli, ASegmentNameStartingWithADashIsRefused) {
  generate("d.svm", 2000, 300);
  const std::string shm = "-asgd-cli-dash-" + std::to_string(::getpid());
  const auto r = run({"linear", "train", "--data", path("d.svm"), "--shm=" + shm, "--epochs", "1", "--quiet"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("may not start with '-'"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists("/dev/shm/" + shm));
  fs::remove("/dev/shm/" + shm);
}

TEST_F(Cli, AFailedRunRemovesTheSegmentItCreatedOnly) {
  generate("f.svm", 2000, 300);
  const std::string shm = "asgd-cli-fail-" + std::to_string(::getpid());
  asgd::ParamStore::remove_shared(shm);
  // It fails after making the segment (the checkpoint to resume from is missing): nothing is left behind.
  const std::vector<std::string> failing = {"linear", "train", "--data", path("f.svm"), "--shm", shm, "--epochs", "1",
                                            "--quiet", "--resume", path("missing.ckpt")};
  auto r = run(failing);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_FALSE(asgd::ParamStore::exists_shared(shm)) << r.output;
  // A segment it only attached to stays, with what an earlier run trained into it.
  r = run({"linear", "train", "--data", path("f.svm"), "--shm", shm, "--epochs", "1", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.output;
  const auto before = asgd::ParamStore::attach_shared_any(shm).snapshot();
  r = run(failing);
  EXPECT_EQ(r.status, 2) << r.output;
  ASSERT_TRUE(asgd::ParamStore::exists_shared(shm)) << r.output;
  EXPECT_EQ(asgd::ParamStore::attach_shared_any(shm).snapshot(), before);
  asgd::ParamStore::remove_shared(shm);
  // A run that fails after training (here its model cannot be written: /dev/full) keeps the segment it made: it
  // holds the trained parameters.
  r = run({"linear", "train", "--data", path("f.svm"), "--shm", shm, "--epochs", "1", "--quiet", "--model",
           "/dev/full"});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("trained:"), std::string::npos) << r.output;
  EXPECT_TRUE(asgd::ParamStore::exists_shared(shm)) << r.output;
  asgd::ParamStore::remove_shared(shm);
}

TEST_F(Cli, StalenessBenchWritesCsvAndPlot) {
  const auto r = run({"bench", "staleness", "--examples", "5000", "--features", "2000", "--nnz", "10", "--epochs",
                      "8", "--workers", "1,2", "--taus", "0,inf", "--policies", "racy,locked", "--l2", "2e-4", "--out", path("st")});
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream csv(path("st/staleness_linear.csv"));
  std::string line;
  int rows = 0;
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("problem,policy,workers,tau,epoch,seconds,objective,relative_gap", 0), 0u);
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, 2 * 2 * 2 * 8);
  if (fs::exists("/usr/bin/python3") && std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") == 0) {
    EXPECT_GT(fs::file_size(path("st/staleness_linear.png")), 10000u);
  }
}

// A sweep's flags are checked before anything runs: a flag of another problem (it used to be ignored, and with
// cnn --policies ran one setting three times), 0 for a count (it meant the default), more workers than the
// engine takes (refused only when that setting came up), a sweep with nothing to run, a CSV that cannot be
// written (reported after the whole sweep), an mf split with no test ratings (RMSE nan).
TEST_F(Cli, StalenessBenchRefusesWhatItWouldIgnoreBeforeRunning) {
  const auto bench = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {"bench", "staleness", "--no-plot"};
    a.insert(a.end(), extra.begin(), extra.end());
    if (std::find(a.begin(), a.end(), "--out") == a.end()) a.insert(a.end(), {"--out", path("st")});
    return run(a);
  };
  std::ofstream(path("two.txt")) << "u1 i1 5\nu2 i2 3\n";
  fs::create_directories(path("blocked/staleness_linear.csv"));
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--problem", "mf", "--l2", "0.5"}, "--l2: does nothing with --problem mf (it is for linear)"},
      {{"--problem", "cnn", "--policies", "racy,atomic"}, "--policies: does nothing with --problem cnn"},
      {{"--problem", "w2v", "--corpus", "x", "--data", "builtin"}, "--data: does nothing with --problem w2v"},
      {{"--epochs", "0"}, "--epochs 0: expected 1 to"},
      {{"--step", "0"}, "--step 0: expected at least 1"},
      {{"--workers", "1,2000"}, "--workers: '2000': expected 1 to 1024"},
      {{"--problem", "cnn", "--taus", "0,inf", "--compensation", "on"}, "nothing to run"},
      {{"--examples", "100", "--out", path("blocked")}, "cannot write the CSV: " + path("blocked/staleness_linear.csv")},
      {{"--problem", "mf", "--ratings", path("two.txt")}, "leave 0 for the test split"},
  };
  // A previous sweep's CSV is left as it was by a sweep refused for its input (it was truncated to a header).
  fs::create_directories(path("st"));
  std::ofstream(path("st/staleness_mf.csv")) << "problem,old\nmf,row\n";
  for (const auto& [extra, message] : cases) {
    const auto r = bench(extra);
    EXPECT_EQ(r.status, 2) << extra[0] << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("optimum (L-BFGS)"), std::string::npos) << "ran before refusing: " << r.output;
  }
  std::ifstream kept(path("st/staleness_mf.csv"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "problem,old\nmf,row\n");
}
