#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"

namespace {

// Hammers a few shared floats from several threads; returns the final values.
template <class Policy>
std::vector<float> hammer(const Policy& policy, int threads, int adds_per_thread) {
  alignas(64) static float cells[32];
  for (auto& c : cells) asgd::store_param(c, 0.0f);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      const float ones[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                              1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
      for (int i = 0; i < adds_per_thread; ++i) {
        policy.add(cells[i % 4], 1.0f);
        if (i % 8 == 0) policy.add_scaled(cells + 4, ones + 4, 2.0f, 28);
      }
    });
  }
  for (auto& t : pool) t.join();
  std::vector<float> out;
  for (auto& c : cells) out.push_back(asgd::load_param(c));
  return out;
}

}  // namespace

TEST(Consistency, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(asgd::parse_consistency("racy"), asgd::Consistency::racy);
  EXPECT_EQ(asgd::parse_consistency("hogwild"), asgd::Consistency::racy);
  EXPECT_EQ(asgd::parse_consistency("atomic"), asgd::Consistency::atomic);
  EXPECT_EQ(asgd::parse_consistency("locked"), asgd::Consistency::locked);
  EXPECT_THROW(asgd::parse_consistency("lockfree"), asgd::InputError);
  EXPECT_EQ(asgd::to_string(asgd::Consistency::locked), "locked");
}

TEST(Consistency, AtomicNeverLosesAnUpdate) {
  const int threads = 4, adds = 20000;  // counts stay exact in float (< 2^24)
  const auto v = hammer(asgd::Atomic{}, threads, adds);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(v[i], threads * adds / 4.0f);
  for (int i = 4; i < 32; ++i) EXPECT_EQ(v[i], threads * 2.0f * (adds / 8));
}

TEST(Consistency, LockedNeverLosesAnUpdate) {
  const int threads = 4, adds = 20000;
  asgd::Locked locked(7);  // few stripes: neighbours share locks too
  const auto v = hammer(locked, threads, adds);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(v[i], threads * adds / 4.0f);
  for (int i = 4; i < 32; ++i) EXPECT_EQ(v[i], threads * 2.0f * (adds / 8));
}

TEST(Consistency, RacyIsExactWithOneWriterAndBoundedWithMany) {
  const auto one = hammer(asgd::Racy{}, 1, 8000);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(one[i], 2000.0f);
  // With several writers updates may be lost, never invented.
  const auto many = hammer(asgd::Racy{}, 4, 8000);
  for (int i = 0; i < 4; ++i) {
    EXPECT_LE(many[i], 8000.0f);
    EXPECT_GE(many[i], 2000.0f);
  }
}

TEST(Consistency, AddScaledCoversUnalignedRuns) {
  alignas(64) float x[50] = {};
  float d[50];
  for (int i = 0; i < 50; ++i) d[i] = static_cast<float>(i);
  asgd::Locked locked;
  locked.add_scaled(x + 3, d + 3, 0.5f, 45);  // starts mid-line, spans 4 lines
  for (int i = 0; i < 50; ++i) EXPECT_EQ(x[i], (i >= 3 && i < 48) ? 0.5f * i : 0.0f) << i;
}
