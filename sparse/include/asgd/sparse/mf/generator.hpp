// Synthetic ratings with a planted low-rank model, Zipf item popularity and
// known Gaussian noise: the noise is the best RMSE any model can reach.
#pragma once

#include <cstdint>

#include "asgd/sparse/mf/ratings.hpp"

namespace asgd::sparse::mf {

struct RatingsGeneratorOptions {
  // Users and items each: every one gets a factor row and a name, rated or not.
  static constexpr std::size_t kMostIds = std::size_t{1} << 25;
  // The planted factors ((users + items) x rank floats: 8 GiB) and the ratings (with the set of pairs drawn,
  // about 60 bytes each) are held in memory.
  static constexpr std::size_t kMostFactorValues = std::size_t{1} << 31;
  static constexpr std::size_t kMostRatings = std::size_t{1} << 30;
  std::size_t users = 2000;
  std::size_t items = 1000;
  std::size_t ratings = 100000;  // distinct (user, item) pairs
  std::size_t rank = 8;          // of the planted P Q^T
  double noise = 0.5;            // standard deviation of the Gaussian noise
  double zipf = 0.8;             // item popularity ~ 1 / rank^zipf (0: uniform)
  double mean = 3.5;
  std::uint64_t seed = 1;
  void validate() const;         // InputError naming the option
};

// r(u, i) = mean + b_u + b_i + p_u . q_i + noise, with b ~ N(0, 0.3^2) and
// factor entries ~ N(0, 1 / rank) so that p_u . q_i has variance about 1.
// Ids are "u<k>" and "i<k>"; timestamps increase with the draw order.
Ratings generate_ratings(const RatingsGeneratorOptions& options);

}  // namespace asgd::sparse::mf
