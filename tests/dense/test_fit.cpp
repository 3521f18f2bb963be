// dense::Fit, the whole training run: it learns, a run stopped and resumed
// from its checkpoint equals the uninterrupted one, its CSV log continues,
// and a resume it cannot continue is an error naming the option.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <string>

#include "../common/scratch_dir.hpp"
#include "../common/squares.hpp"
#include "asgd/dense/epoch_log.hpp"
#include "asgd/dense/fit.hpp"
#include "asgd/dense/lenet_file.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::dense {
namespace {

using fixtures::small_net;
using fixtures::squares;

FitOptions options(std::size_t epochs) {
  FitOptions o;
  o.train.epochs = epochs;
  o.train.batch = 32;
  o.train.lr = 0.05f;
  return o;
}

TEST(Fit, LearnsAndStoppedThenResumedEqualsUninterrupted) {
  const asgd::testing::ScratchDir dir;
  const Network net = small_net();
  const Dataset train = squares(600, 1), test = squares(200, 2);
  Fit whole(net, train, &test, options(3));
  const FitReport all = whole.run();
  ASSERT_EQ(all.history.size(), 3u);
  EXPECT_GT(all.history.back().test_accuracy, 0.9);
  EXPECT_EQ(all.images, 3u * 600u);

  FitOptions first = options(3);
  first.until_epoch = 1;
  first.checkpoint = (dir.path() / "ck.asgd").string();
  first.csv = (dir.path() / "log.csv").string();
  Fit stopped(net, train, &test, first);
  EXPECT_EQ(stopped.run().history.size(), 1u);
  FitOptions rest = options(3);
  rest.resume = dir.path() / "ck.asgd";
  rest.csv = first.csv;
  Fit resumed(net, train, &test, rest);
  EXPECT_EQ(resumed.epochs_done(), 1u);
  EXPECT_TRUE(resumed.changes().options.empty());
  EXPECT_EQ(resumed.run().history.size(), 2u);
  EXPECT_EQ(resumed.params().snapshot(), whole.params().snapshot());
  std::ifstream log(first.csv);
  std::size_t lines = 0;
  for (std::string line; std::getline(log, line);) ++lines;
  EXPECT_EQ(lines, 4u);  // the header and epochs 1, 2, 3
}

TEST(Fit, AResumeSaysWhatChangedAndRefusesWhatItCannotContinue) {
  const asgd::testing::ScratchDir dir;
  const Network net = small_net();
  const Dataset train = squares(300, 1);
  FitOptions first = options(2);
  first.until_epoch = 1;
  first.checkpoint = (dir.path() / "ck.asgd").string();
  Fit(net, train, nullptr, first).run();
  EXPECT_EQ(recorded_epochs(first.checkpoint, read_lenet(first.checkpoint, net).metadata), 2u);

  FitOptions other = options(2);
  other.resume = first.checkpoint;
  other.train.lr = 0.02f;
  Fit changed(net, train, nullptr, other);
  ASSERT_EQ(changed.changes().options.size(), 1u);
  EXPECT_EQ(changed.changes().options[0].key, "lr");
  EXPECT_EQ(changed.changes().options[0].before, "0.05");

  FitOptions seed = options(2);
  seed.resume = first.checkpoint;
  seed.seed = 9;
  EXPECT_THROW(
      try { Fit(net, train, nullptr, seed); } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("FitOptions::seed 9"), std::string::npos) << e.what();
        throw;
      },
      InputError);
  FitOptions past = options(2);
  past.until_epoch = 3;
  EXPECT_THROW(past.validate(), InputError);
}

// resume_from reads the checkpoint once, up front; without a count of its own a resume takes the epochs of the
// run it continues, and last_epoch is where this run stops.
TEST(Fit, AResumeFinishesTheRunItContinuesUnlessGivenEpochs) {
  const asgd::testing::ScratchDir dir;
  const Network net = small_net();
  const Dataset train = squares(300, 1);
  FitOptions first = options(3);
  first.until_epoch = 1;
  first.checkpoint = (dir.path() / "ck.asgd").string();
  Fit stopped(net, train, nullptr, first);
  EXPECT_EQ(stopped.last_epoch(), 1u);
  stopped.run();

  FitOptions its = options(10);
  its.resume_from(first.checkpoint, net, true);
  EXPECT_EQ(its.train.epochs, 3u);
  EXPECT_EQ(its.resume, first.checkpoint);
  ASSERT_TRUE(its.resumed.has_value());
  EXPECT_EQ(its.resumed->state.epoch, 1u);
  Fit rest(net, train, nullptr, its);
  EXPECT_EQ(rest.epochs_done(), 1u);
  EXPECT_EQ(rest.last_epoch(), 3u);
  EXPECT_EQ(rest.run().history.size(), 2u);

  FitOptions given = options(5);
  given.resume_from(first.checkpoint, net, false);
  EXPECT_EQ(given.train.epochs, 5u);
  FitOptions missing = options(5);
  EXPECT_THROW(missing.resume_from(dir.path() / "none.asgd", net, true), InputError);
}

// A model file whose kind is of the wrong type is "not a LeNet-5 model", naming the file (before: the JSON
// library's exception, naming nothing).
TEST(Fit, AFileOfAnotherKindNamesTheFile) {
  const asgd::testing::ScratchDir dir;
  const Network net = small_net();
  auto store = ParamStore::on_heap(net.layout());
  for (const char* metadata : {R"({"model": 5})", R"({"model": ["asgd-cnn lenet5 v1"]})", "[1]", "{"}) {
    save_checkpoint(dir / "m", store, {}, {}, metadata);
    std::string message;
    try {
      read_lenet(dir / "m", net);
    } catch (const std::exception& e) {
      message = e.what();
    }
    EXPECT_EQ(message, (dir / "m").string() + ": not a LeNet-5 model written by asgd cnn train") << metadata;
  }
}

// Two fits writing one checkpoint: the second, in another process, is refused at its start while the first runs.
TEST(Fit, ASecondFitOnTheSameCheckpointIsRefused) {
  const asgd::testing::ScratchDir dir;
  const Network net = small_net();
  const Dataset train = squares(64, 1);
  FitOptions o = options(1);
  o.checkpoint = (dir / "ck.asgd").string();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t first = ::fork();
  ASSERT_GE(first, 0);
  if (first == 0) {
    ::close(ready[0]);
    try {
      const Fit holder(net, train, nullptr, o);
      (void)!::write(ready[1], "y", 1);
      for (;;) ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(ready[1]);
  char ok = 'n';
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ::close(ready[0]);
  std::string message;
  try {
    Fit second(net, train, nullptr, o);
  } catch (const InputError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("checkpoint " + o.checkpoint + ": another run is writing it (pid " + std::to_string(first)),
            std::string::npos)
      << message;
  ::kill(first, SIGKILL);
  ::waitpid(first, nullptr, 0);
  Fit after(net, train, nullptr, o);
  EXPECT_EQ(after.run().history.size(), 1u);
  EXPECT_EQ(read_lenet(o.checkpoint, net).state.epoch, 1u);
}

}  // namespace
}  // namespace asgd::dense
