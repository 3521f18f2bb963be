// dense::TrainChoices: the staleness bound, compensation, schedule and
// threads in all as a user gives them, read into TrainOptions by the rules
// that tie them to tau and the workers; a bad value names the option.
#include <gtest/gtest.h>

#include <string>

#include "../common/message_of.hpp"
#include "asgd/dense/train_choices.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::dense {
namespace {

using asgd::testing::message_of;

TrainOptions applied(const TrainChoices& c, std::size_t workers = 2) {
  TrainOptions o;
  o.workers = workers;
  c.apply(o);
  return o;
}

TrainChoices with(std::string tau, std::string compensate) {
  TrainChoices c;
  c.tau = std::move(tau);
  c.compensate = std::move(compensate);
  return c;
}

TEST(TrainChoices, CompensationIsOnForABoundedTauUnlessTurnedOff) {
  EXPECT_TRUE(applied(with("4", "auto")).compensate);
  EXPECT_TRUE(applied(with("4", "on")).compensate);
  EXPECT_FALSE(applied(with("4", "off")).compensate);
  EXPECT_EQ(applied(with("4", "auto")).tau, 4u);
  // inf's staleness is set by timing, not by the bound: only when asked.
  EXPECT_FALSE(applied(with("inf", "auto")).compensate);
  EXPECT_TRUE(applied(with("inf", "on")).compensate);
  EXPECT_EQ(applied(with("inf", "on")).tau, kUnbounded);
}

TEST(TrainChoices, TauZeroHasNothingToCompensateWhateverWasAsked) {
  for (const char* mode : {"auto", "on", "off"}) EXPECT_FALSE(applied(with("0", mode)).compensate) << mode;
  EXPECT_TRUE(with("0", "on").compensation_moot());
  EXPECT_FALSE(with("0", "auto").compensation_moot());
  EXPECT_FALSE(with("1", "on").compensation_moot());
  EXPECT_NE(message_of([] { (void)with("x", "on").compensation_moot(); }).find("TrainChoices::tau: "),
            std::string::npos);
}

TEST(TrainChoices, ScheduleByName) {
  TrainChoices c;
  EXPECT_EQ(applied(c).schedule, TrainOptions::Schedule::constant);
  c.schedule = "cosine";
  EXPECT_EQ(applied(c).schedule, TrainOptions::Schedule::cosine);
  c.schedule = "linear";
  EXPECT_EQ(message_of([&] { applied(c); }), "TrainChoices::schedule: expected constant or cosine, got 'linear'");
}

TEST(TrainChoices, ThreadsInAllAreSplitOverTheWorkers) {
  TrainChoices c;
  EXPECT_EQ(applied(c, 3).gemm_threads, 1u);  // 0: one per worker
  c.threads = 6;
  EXPECT_EQ(applied(c, 3).gemm_threads, 2u);
  EXPECT_EQ(applied(c, 6).gemm_threads, 1u);
  EXPECT_EQ(message_of([&] { applied(c, 4); }),
            "TrainChoices::threads 6: must be a multiple of TrainOptions::workers 4");
  EXPECT_EQ(message_of([&] { applied(c, 0); }), "TrainOptions::workers 0: expected at least 1");
  // Past 256 per worker: the trainer's own check, when the options are validated.
  c.threads = 600;
  EXPECT_THROW(applied(c, 2).validate(), InputError);
}

TEST(TrainChoices, BadWordsNameTheOption) {
  EXPECT_EQ(message_of([] { applied(with("4", "maybe")); }),
            "TrainChoices::compensate: expected auto, on or off, got 'maybe'");
  const std::string tau = message_of([] { applied(with("-1", "auto")); });
  EXPECT_EQ(tau.rfind("TrainChoices::tau: ", 0), 0u) << tau;
  EXPECT_THROW(applied(with("", "auto")), InputError);
}

}  // namespace
}  // namespace asgd::dense
