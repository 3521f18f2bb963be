#include "asgd/engine/rank_group.hpp"

#include <numeric>

namespace asgd {

std::vector<std::size_t> RankGroup::shard(std::size_t n, std::string_view /*what*/, bool /*equal*/) const {
  std::vector<std::size_t> all(n);
  std::iota(all.begin(), all.end(), std::size_t{0});
  return all;
}

}  // namespace asgd
