// dense::measure_floor: the network's FLOPs per training image over the
// measured SGEMM rate, times the workers; the size by default and its limit,
// and counts of 0 refused with the option's name.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "../common/message_of.hpp"
#include "asgd/dense/floor.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::dense {
namespace {

using asgd::testing::message_of;

TEST(Floor, IsTheRateOverTheFlopsTimesTheWorkers) {
  const Network net = lenet5();
  const Floor f = floor_at(net, 64, 3, 10.0, 1);
  EXPECT_EQ(f.flops.training, net.flops_per_sample().training);
  EXPECT_EQ(f.size, 64u);
  EXPECT_EQ(f.repeats, 3u);
  EXPECT_DOUBLE_EQ(f.images_per_second, 10.0 * 1e9 / f.flops.training);
  EXPECT_DOUBLE_EQ(floor_at(net, 64, 3, 10.0, 4).images_per_second, 4 * f.images_per_second);
}

TEST(Floor, MeasuredOnTheCpu) {
  const Network net = lenet5();
  FloorOptions o;
  o.size = 64;
  o.repeats = 2;
  o.workers = 2;
  const Floor f = measure_floor(net, o);
  EXPECT_EQ(f.size, 64u);
  EXPECT_EQ(f.workers, 2u);
  EXPECT_GT(f.gflops, 0.01);  // a real timing
  EXPECT_NEAR(f.images_per_second, 2 * f.gflops * 1e9 / f.flops.training, 1e-6 * f.images_per_second);
}

TEST(Floor, SizeByDefaultAndItsLimit) {
  FloorOptions o;
  EXPECT_EQ(floor_size(o, kCpuFloorSize), kCpuFloorSize);
  EXPECT_EQ(floor_size(o, 4096), 4096u);
  o.size = kMaxFloorSize;
  EXPECT_EQ(floor_size(o, kCpuFloorSize), kMaxFloorSize);
  o.size = kMaxFloorSize + 1;
  EXPECT_EQ(message_of([&] { floor_size(o, kCpuFloorSize); }),
            "FloorOptions::size 16385: at most 16384 (three n x n matrices)");
  EXPECT_THROW(measure_floor(lenet5(), o), InputError);
}

TEST(Floor, CountsOfZeroAreRefused) {
  for (const auto& [field, option] : {std::pair{&FloorOptions::threads, "FloorOptions::threads"},
                                      std::pair{&FloorOptions::workers, "FloorOptions::workers"},
                                      std::pair{&FloorOptions::repeats, "FloorOptions::repeats"}}) {
    FloorOptions o;
    o.*field = 0;
    EXPECT_EQ(message_of([&] { o.validate(); }), std::string(option) + " 0: expected at least 1");
    EXPECT_THROW(measure_floor(lenet5(), o), InputError) << option;
  }
  EXPECT_NO_THROW(FloorOptions().validate());
}

TEST(Floor, SaysWhenTheWorkersNeedMoreCoresThanTheMachineHas) {
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores == 0) GTEST_SKIP() << "the machine's cores are unknown";
  FloorOptions o;
  o.workers = 1;
  o.threads = cores;
  EXPECT_EQ(o.cores_short(), 0u);
  o.workers = 2;
  EXPECT_EQ(o.cores_short(), cores);
}

}  // namespace
}  // namespace asgd::dense
