// The allreduce algorithms with ranks as threads of this process: every
// algorithm equals the closed-form sum for P in {1, 2, 3, 4, 5, 8} and sizes
// {0, 1, 7, 1000, 2^20 + 3}, and the ring's bytes on the wire meet the
// bandwidth-optimal bound.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "asgd/engine/errors.hpp"
#include "asgd/net/allreduce.hpp"

namespace asgd::net {
namespace {

// Rank r holds (r + 1) * (i % 7 + 1): small integers, so every order of
// float additions gives the exact sum P (P + 1) / 2 * (i % 7 + 1).
float value(int rank, std::size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1)); }

// Counts what each endpoint sends, around another transport.
class Counting final : public Transport {
 public:
  explicit Counting(Transport& inner) : inner_(inner) {}
  int rank() const noexcept override { return inner_.rank(); }
  int size() const noexcept override { return inner_.size(); }
  void send(std::span<const float> d, int dst) override {
    floats_sent += d.size();
    ++messages;
    inner_.send(d, dst);
  }
  void recv(std::span<float> d, int src) override { inner_.recv(d, src); }
  void sendrecv(std::span<const float> s, int dst, std::span<float> r, int src) override {
    floats_sent += s.size();
    ++messages;
    inner_.sendrecv(s, dst, r, src);
  }
  std::size_t floats_sent = 0, messages = 0;

 private:
  Transport& inner_;
};

struct Traffic {
  std::vector<std::size_t> floats_sent;
  std::vector<std::size_t> messages;
};

Traffic run_all(Algorithm a, int P, std::size_t n, std::size_t chunk = 1 << 14) {
  LocalFabric fabric(P);
  Traffic run{std::vector<std::size_t>(static_cast<std::size_t>(P)), std::vector<std::size_t>(static_cast<std::size_t>(P))};
  std::atomic<int> wrong{0};
  {
    std::vector<std::jthread> ranks;
    for (int r = 0; r < P; ++r)
      ranks.emplace_back([&, r] {
        Counting t(fabric.endpoint(r));
        std::vector<float> data(n);
        for (std::size_t i = 0; i < n; ++i) data[i] = value(r, i);
        make_allreduce(a, t, chunk)->sum(data);
        const float ranks_sum = static_cast<float>(P * (P + 1) / 2);
        for (std::size_t i = 0; i < n; ++i)
          if (data[i] != ranks_sum * static_cast<float>(i % 7 + 1)) {
            ++wrong;
            break;
          }
        run.floats_sent[static_cast<std::size_t>(r)] = t.floats_sent;
        run.messages[static_cast<std::size_t>(r)] = t.messages;
      });
  }
  EXPECT_EQ(wrong.load(), 0) << to_string(a) << " P " << P << " n " << n;
  return run;
}

TEST(Allreduce, EveryAlgorithmSumsForEveryRankCountAndSize) {
  for (Algorithm a : {Algorithm::ring, Algorithm::tree, Algorithm::native})
    for (int P : {1, 2, 3, 4, 5, 8})
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000},
                            (std::size_t{1} << 20) + 3})
        run_all(a, P, n);
}

TEST(Allreduce, TreeWithChunksThatDoNotDivideTheBuffer) {
  for (int P : {3, 5, 8})
    for (std::size_t chunk : {std::size_t{1}, std::size_t{3}, std::size_t{64}}) run_all(Algorithm::tree, P, 1000, chunk);
}

TEST(Allreduce, RingSendsTheBandwidthOptimalAmount) {
  // Each rank sends 2 (P - 1) segments of about n / P floats: 2 (P-1)/P n.
  for (int P : {2, 3, 4, 5, 8}) {
    const std::size_t n = 1000003;
    const Traffic run = run_all(Algorithm::ring, P, n);
    const double bound = 2.0 * (P - 1) / P * static_cast<double>(n);
    for (int r = 0; r < P; ++r) {
      EXPECT_LE(std::abs(static_cast<double>(run.floats_sent[static_cast<std::size_t>(r)]) - bound), 2.0 * P)
          << "P " << P << " rank " << r;
      EXPECT_EQ(run.messages[static_cast<std::size_t>(r)], static_cast<std::size_t>(2 * (P - 1)));
    }
  }
}

TEST(Allreduce, TreeSendsEachChunkUpOnceAndDownToEachChild) {
  // Rank 0 of 8 has children 1, 2 and swaps its sums with the other root,
  // 4: it sends the whole buffer 3 times; a leaf (7) sends it once (up).
  // At P = 2 the two roots swap each chunk in one message each way.
  const std::size_t n = 100000, chunk = 1 << 14;
  const Traffic run = run_all(Algorithm::tree, 8, n, chunk);
  EXPECT_EQ(run.floats_sent[0], 3 * n);
  EXPECT_EQ(run.floats_sent[7], n);
  EXPECT_EQ(run.floats_sent[6], 2 * n);  // up once, down to 7
  EXPECT_EQ(run.messages[7], (n + chunk - 1) / chunk);
  EXPECT_EQ(run.floats_sent[4], 3 * n);  // the second root: to 5, 6 and 0
  const Traffic pair = run_all(Algorithm::tree, 2, n, chunk);
  for (int r : {0, 1}) {
    EXPECT_EQ(pair.floats_sent[r], n);
    EXPECT_EQ(pair.messages[r], (n + chunk - 1) / chunk);
  }
}

TEST(Allreduce, RingSegmentsCoverTheBuffer) {
  for (std::size_t n : {0u, 1u, 7u, 10u, 1000u})
    for (int P : {1, 2, 3, 8}) {
      std::size_t next = 0;
      for (int i = 0; i < P; ++i) {
        const Segment s = ring_segment(n, P, i);
        EXPECT_EQ(s.offset, next);
        EXPECT_LE(s.size, n / static_cast<std::size_t>(P) + 1);
        next += s.size;
      }
      EXPECT_EQ(next, n);
    }
}

TEST(Allreduce, NamesParse) {
  EXPECT_EQ(parse_algorithm("ring"), Algorithm::ring);
  EXPECT_EQ(parse_algorithm("tree"), Algorithm::tree);
  EXPECT_EQ(parse_algorithm("native"), Algorithm::native);
  EXPECT_THROW(parse_algorithm("butterfly"), InputError);
}

TEST(Allreduce, MismatchedSizesAreAnErrorNotAHang) {
  LocalFabric fabric(2);
  std::vector<float> small(3, 1.0f);
  fabric.endpoint(0).send(small, 1);
  std::vector<float> big(4);
  EXPECT_THROW(fabric.endpoint(1).recv(big, 0), RuntimeError);
}

}  // namespace
}  // namespace asgd::net
