// LIBMF 2's training recipe, re-implemented serially, so that our MF can be
// compared with it on exactly the same split (there is no LIBMF binary on
// this machine). The recipe, as LIBMF 2 describes and implements it:
//   - ratings divided by their standard deviation s, L2 divided by s;
//   - no global mean and no biases: r / s ~ p_u . q_i;
//   - P, Q start uniform in [0, 1) / sqrt(k);
//   - users and items randomly relabelled, ratings grouped into bins x bins
//     blocks, blocks visited in random order, ratings inside a block sorted
//     by (user, item) or (item, user), whichever side is longer;
//   - per-row AdaGrad with two accumulators per row (the first 8 factors and
//     the rest), each starting at 1 and growing by the mean squared gradient
//     of its segment; rate eta / sqrt(G);
//   - the first epoch updates only the first 8 factors;
//   - users or items unseen in training are predicted by the training mean.
// Usage: bench_mf_libmf_recipe RATINGS [-r ETA] [-l2 LAMBDA] [-k K] [-t EPOCHS]
//        [--bins B] [--split-seed S] [--test-fraction F] [--seed S (initialisation and order)]
//        [--center] [--no-scale] [--one-accumulator] [--no-slow-start]
// The last four each leave one part of the recipe out (to see what each is
// worth): centre on the mean (prediction mean + p . q), no scaling, one
// accumulator per row over all factors (asgd's --row-adagrad), every factor
// updated from the first epoch.
// Prints the test RMSE on the same random split `asgd mf train
// --test-fraction F --split-seed S` uses.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "asgd/sparse/mf/ratings.hpp"

namespace {
using asgd::sparse::mf::Ratings;

struct Options {
  std::string file;
  float eta = 0.1f, lambda = 0.1f, test_fraction = 0.1f;
  int factors = 32, epochs = 20, bins = 20;
  unsigned long split_seed = 42, seed = 1;
  bool center = false, no_scale = false, one_accumulator = false, no_slow_start = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-r") o.eta = std::strtof(next(), nullptr);
    else if (a == "-l2") o.lambda = std::strtof(next(), nullptr);
    else if (a == "-k") o.factors = std::atoi(next());
    else if (a == "-t") o.epochs = std::atoi(next());
    else if (a == "--bins") o.bins = std::atoi(next());
    else if (a == "--split-seed") o.split_seed = std::strtoul(next(), nullptr, 10);
    else if (a == "--seed") o.seed = std::strtoul(next(), nullptr, 10);
    else if (a == "--test-fraction") o.test_fraction = std::strtof(next(), nullptr);
    else if (a == "--center") o.center = true;
    else if (a == "--no-scale") o.no_scale = true;
    else if (a == "--one-accumulator") o.one_accumulator = true;
    else if (a == "--no-slow-start") o.no_slow_start = true;
    else if (!a.empty() && a[0] != '-' && o.file.empty()) o.file = a;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      std::exit(2);
    }
  }
  if (o.file.empty() || o.factors <= 8 || o.bins < 1 || o.epochs < 1) {
    std::fprintf(stderr, "usage: %s RATINGS [-r ETA] [-l2 L] [-k K>8] [-t EPOCHS] [--bins B] [--split-seed S]\n", argv[0]);
    std::exit(2);
  }
  return o;
}

// One AdaGrad step on factors [begin, end) of p and q for residual `err`.
void segment_step(float* p, float* q, float& p_acc, float& q_acc, int begin, int end, float err, float eta,
                  float lambda) {
  const float eta_p = eta / std::sqrt(p_acc), eta_q = eta / std::sqrt(q_acc);
  float p_sq = 0, q_sq = 0;
  for (int d = begin; d < end; ++d) {
    const float gp = lambda * p[d] - err * q[d];
    const float gq = lambda * q[d] - err * p[d];
    p_sq += gp * gp;
    q_sq += gq * gq;
    p[d] -= eta_p * gp;
    q[d] -= eta_q * gq;
  }
  p_acc += p_sq / static_cast<float>(end - begin);
  q_acc += q_sq / static_cast<float>(end - begin);
}
}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  const Ratings all = asgd::sparse::mf::read_ratings(o.file);
  const auto split = asgd::sparse::mf::random_split(all, o.test_fraction, o.split_seed);
  const Ratings& train = split.train;
  const std::size_t users = all.users.size(), items = all.items.size(), k = o.factors;
  constexpr int kSlow = 8;

  double mean = 0, var = 0;
  for (float r : train.rating) mean += r;
  mean /= static_cast<double>(train.size());
  for (float r : train.rating) var += (r - mean) * (r - mean);
  const float scale =
      o.no_scale ? 1.0f : static_cast<float>(std::max(1e-4, std::sqrt(var / static_cast<double>(train.size()))));
  const float offset = o.center ? static_cast<float>(mean) : 0.0f;
  const float lambda = o.lambda / scale;

  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<float> uniform(0.f, 1.f);
  std::vector<float> P(users * k), Q(items * k), PG(users * 2, 1.f), QG(items * 2, 1.f);
  const float init = 1.f / std::sqrt(static_cast<float>(k));
  for (float& x : P) x = uniform(rng) * init;
  for (float& x : Q) x = uniform(rng) * init;

  // Random relabelling, then the bins x bins grid with sorted blocks.
  std::vector<std::uint32_t> pmap(users), qmap(items);
  for (std::size_t i = 0; i < users; ++i) pmap[i] = static_cast<std::uint32_t>(i);
  for (std::size_t i = 0; i < items; ++i) qmap[i] = static_cast<std::uint32_t>(i);
  std::shuffle(pmap.begin(), pmap.end(), rng);
  std::shuffle(qmap.begin(), qmap.end(), rng);
  const std::size_t bins = o.bins, seg_p = (users + bins - 1) / bins, seg_q = (items + bins - 1) / bins;
  std::vector<std::vector<std::uint32_t>> blocks(bins * bins);
  for (std::size_t j = 0; j < train.size(); ++j)
    blocks[(pmap[train.user[j]] / seg_p) * bins + qmap[train.item[j]] / seg_q].push_back(static_cast<std::uint32_t>(j));
  const bool by_user = users > items;
  for (auto& b : blocks)
    std::sort(b.begin(), b.end(), [&](std::uint32_t a, std::uint32_t c) {
      const auto ka = std::pair(pmap[train.user[a]], qmap[train.item[a]]);
      const auto kc = std::pair(pmap[train.user[c]], qmap[train.item[c]]);
      return by_user ? ka < kc : std::pair(ka.second, ka.first) < std::pair(kc.second, kc.first);
    });

  std::vector<std::size_t> visit(bins * bins);
  for (std::size_t b = 0; b < visit.size(); ++b) visit[b] = b;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    std::shuffle(visit.begin(), visit.end(), rng);
    const bool slow_only = epoch == 0 && !o.no_slow_start;
    for (std::size_t b : visit)
      for (std::uint32_t j : blocks[b]) {
        const std::uint32_t u = train.user[j], i = train.item[j];
        float* p = &P[u * k];
        float* q = &Q[i * k];
        float dot = 0;
        for (std::size_t d = 0; d < k; ++d) dot += p[d] * q[d];
        const float err = (train.rating[j] - offset) / scale - dot;
        if (o.one_accumulator) {
          segment_step(p, q, PG[2 * u], QG[2 * i], 0, slow_only ? kSlow : o.factors, err, o.eta, lambda);
          continue;
        }
        segment_step(p, q, PG[2 * u], QG[2 * i], 0, kSlow, err, o.eta, lambda);
        if (!slow_only) segment_step(p, q, PG[2 * u + 1], QG[2 * i + 1], kSlow, o.factors, err, o.eta, lambda);
      }
  }

  std::vector<int> seen_user(users), seen_item(items);
  for (std::size_t j = 0; j < train.size(); ++j) {
    seen_user[train.user[j]] = 1;
    seen_item[train.item[j]] = 1;
  }
  double sq = 0;
  const Ratings& test = split.test;
  for (std::size_t j = 0; j < test.size(); ++j) {
    const std::uint32_t u = test.user[j], i = test.item[j];
    double prediction = mean;
    if (seen_user[u] && seen_item[i]) {
      float dot = 0;
      for (std::size_t d = 0; d < k; ++d) dot += P[u * k + d] * Q[i * k + d];
      prediction = static_cast<double>(dot) * scale + offset;
    }
    sq += (test.rating[j] - prediction) * (test.rating[j] - prediction);
  }
  std::printf("libmf-recipe%s%s%s%s: k %d, %d epochs, eta %g, l2 %g, bins %d, split seed %lu, seed %lu: test RMSE %.4f "
              "(%zu ratings)\n",
              o.center ? " --center" : "", o.no_scale ? " --no-scale" : "", o.one_accumulator ? " --one-accumulator" : "",
              o.no_slow_start ? " --no-slow-start" : "", o.factors, o.epochs, o.eta, o.lambda, o.bins, o.split_seed, o.seed,
              std::sqrt(sq / static_cast<double>(test.size())), test.size());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_mf_libmf_recipe: %s\n", e.what());
  return 1;
}
