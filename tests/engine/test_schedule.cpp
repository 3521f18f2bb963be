#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/schedule.hpp"

using asgd::Schedule;
using asgd::ScheduleKind;

TEST(Schedule, ConstantLinearInverseSqrt) {
  Schedule s;
  s.lr = 0.5f;
  EXPECT_FLOAT_EQ(s.rate(0.7, 3.0, 0), 0.5f);
  s.kind = ScheduleKind::linear;
  s.floor = 0.1f;
  EXPECT_FLOAT_EQ(s.rate(0.0, 0.0, 0), 0.5f);
  EXPECT_FLOAT_EQ(s.rate(0.5, 1.0, 0), 0.25f);
  EXPECT_FLOAT_EQ(s.rate(0.99, 2.0, 0), 0.05f);  // floored at lr * floor
  s.kind = ScheduleKind::inverse_sqrt;
  s.decay = 1.0f;
  EXPECT_FLOAT_EQ(s.rate(0.5, 3.0, 0), 0.25f);  // 0.5 / sqrt(4)
}

TEST(Schedule, WarmupRampsFromStartFraction) {
  Schedule s;
  s.lr = 1.0f;
  s.warmup = 0.2f;
  s.warmup_start = 0.1f;
  EXPECT_FLOAT_EQ(s.rate(0.0, 0, 0), 0.1f);
  EXPECT_FLOAT_EQ(s.rate(0.1, 0, 0), 0.55f);
  EXPECT_FLOAT_EQ(s.rate(0.2, 0, 0), 1.0f);
  EXPECT_FLOAT_EQ(s.rate(0.9, 0, 0), 1.0f);
}

TEST(Schedule, StalenessAwareDividesByStalenessPlusOne) {
  Schedule s;
  s.lr = 0.3f;
  s.staleness_aware = true;
  EXPECT_FLOAT_EQ(s.rate(0.1, 0, 0), 0.3f);
  EXPECT_FLOAT_EQ(s.rate(0.1, 0, 2), 0.1f);
}

TEST(Schedule, ValidateNamesTheBadField) {
  Schedule s;
  s.lr = 0.0f;
  EXPECT_THROW(s.validate(), asgd::InputError);
  s.lr = 0.1f;
  s.floor = 2.0f;
  EXPECT_THROW(s.validate(), asgd::InputError);
  s.floor = 0.0f;
  s.warmup = 1.0f;
  EXPECT_THROW(s.validate(), asgd::InputError);
  s.warmup = 0.0f;
  EXPECT_NO_THROW(s.validate());
  // Infinite decay or eps: a NaN or zero rate, reported later as divergence (before: accepted).
  s.decay = std::numeric_limits<float>::infinity();
  EXPECT_THROW(s.validate(), asgd::InputError);
  s.decay = 0.0f;
  s.adagrad_eps = std::numeric_limits<float>::infinity();
  EXPECT_THROW(s.validate(), asgd::InputError);
  s.adagrad_eps = 1e-8f;
  EXPECT_NO_THROW(s.validate());
  EXPECT_EQ(asgd::parse_schedule_kind("inverse-sqrt"), ScheduleKind::inverse_sqrt);
  EXPECT_THROW(asgd::parse_schedule_kind("cosine"), asgd::InputError);
}
