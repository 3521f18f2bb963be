#include "asgd/sparse/mf/generator.hpp"

#include <fmt/format.h>

#include <cmath>
#include <unordered_set>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/random.hpp"
#include "asgd/sparse/word2vec/sampling.hpp"

namespace asgd::sparse::mf {

void RatingsGeneratorOptions::validate() const {
  if (users == 0 || items == 0) throw InputError("generate: --users and --items must be at least 1");
  // Each user and item gets a factor row and a name, rated or not (20M users took 2.8 GB for one rating; 2^32
  // failed with a bare bad_alloc).
  if (users > kMostIds || items > kMostIds) {
    throw InputError(fmt::format("generate: --users {} and --items {}: at most {} each", users, items, kMostIds));
  }
  const double half = 0.5 * static_cast<double>(users) * static_cast<double>(items);
  if (ratings == 0 || static_cast<double>(ratings) > half) {
    throw InputError(fmt::format("generate: --ratings {} must be between 1 and half of users x items ({:.0f})",
                                 ratings, std::floor(half)));
  }
  if (rank == 0 || rank > 1024) throw InputError(fmt::format("generate: --rank {}: expected 1 to 1024", rank));
  // The planted factors and the ratings drawn, in memory at once.
  if (static_cast<double>(users + items) * static_cast<double>(rank) > static_cast<double>(kMostFactorValues)) {
    throw InputError(fmt::format("generate: (--users + --items) x --rank = {} x {}: at most {} factor values",
                                 users + items, rank, kMostFactorValues));
  }
  if (ratings > kMostRatings)
    throw InputError(fmt::format("generate: --ratings {}: at most {}", ratings, kMostRatings));
  if (!(noise >= 0) || !std::isfinite(noise)) throw InputError("generate: --noise must be >= 0");
  if (!(zipf >= 0) || !std::isfinite(zipf)) throw InputError("generate: --zipf must be >= 0");
}

Ratings generate_ratings(const RatingsGeneratorOptions& o) {
  o.validate();
  FastRng rng(FastRng::mix(o.seed, 0x4d46, 0));
  auto normal = [&] {
    // Box-Muller on our own uniform draws: the same numbers on every library.
    const double u1 = (static_cast<double>(rng.next() >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    const double u2 = static_cast<double>(rng.next() >> 11) * (1.0 / 9007199254740992.0);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  };
  const double factor_sd = 1.0 / std::sqrt(static_cast<double>(o.rank));
  std::vector<float> p(o.users * o.rank), q(o.items * o.rank), bu(o.users), bi(o.items);
  for (auto& x : p) x = static_cast<float>(normal() * factor_sd);
  for (auto& x : q) x = static_cast<float>(normal() * factor_sd);
  for (auto& x : bu) x = static_cast<float>(0.3 * normal());
  for (auto& x : bi) x = static_cast<float>(0.3 * normal());
  std::vector<double> popularity(o.items);
  for (std::size_t i = 0; i < o.items; ++i) popularity[i] = std::pow(static_cast<double>(i + 1), -o.zipf);
  const w2v::AliasSampler item_sampler(popularity);

  Ratings r;
  for (std::size_t u = 0; u < o.users; ++u) r.users.intern(fmt::format("u{}", u));
  for (std::size_t i = 0; i < o.items; ++i) r.items.intern(fmt::format("i{}", i));
  std::unordered_set<std::uint64_t> seen;
  seen.reserve(o.ratings * 2);
  r.user.reserve(o.ratings);
  r.item.reserve(o.ratings);
  r.rating.reserve(o.ratings);
  r.timestamp.reserve(o.ratings);
  // A steep Zipf over few users concentrates the draws on pairs already drawn: past 100 draws a rating, the
  // distinct pairs asked for are out of reach (--zipf 4 over 10 users: the rarest item has chance 1e-12).
  const std::uint64_t most_draws = 100 * static_cast<std::uint64_t>(o.ratings) + 1000000;
  for (std::uint64_t draws = 0; r.size() < o.ratings; ++draws) {
    if (draws == most_draws)
      throw InputError(fmt::format("generate: --zipf {} makes {} distinct (user, item) pairs of {} x {} out of reach "
                                   "({} found in {} draws); lower --zipf or --ratings",
                                   o.zipf, o.ratings, o.users, o.items, r.size(), draws));
    const auto u = rng.below(static_cast<std::uint32_t>(o.users));
    const auto i = item_sampler.sample(rng.next());
    if (!seen.insert(static_cast<std::uint64_t>(u) * o.items + i).second) continue;
    double value = o.mean + bu[u] + bi[i];
    for (std::size_t d = 0; d < o.rank; ++d) value += static_cast<double>(p[u * o.rank + d]) * q[i * o.rank + d];
    value += o.noise * normal();
    r.user.push_back(u);
    r.item.push_back(i);
    r.rating.push_back(static_cast<float>(value));
    r.timestamp.push_back(static_cast<std::int64_t>(r.size()));
  }
  return r;
}

}  // namespace asgd::sparse::mf
