#include "asgd/sparse/mf/bpr.hpp"

#include <random>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/random.hpp"

namespace asgd::sparse::mf {
namespace {
// Checked before any member reads them: the seen lists index the ratings' vectors.
const Ratings& checked(const Ratings& positives) {
  if (positives.size() == 0) throw InputError("bpr: no positive interactions");
  positives.check("bpr");
  return positives;
}
}  // namespace

BprMf::BprMf(const Ratings& positives, MfOptions options, std::uint64_t seed,
             const std::vector<std::size_t>* train_rows)
    : seen_(checked(positives), positives.users.size()),
      users_(positives.users.size()),
      items_(positives.items.size()),
      ids_(positives.id_maps_tag()),
      options_(options) {
  options_.validate();
  const std::size_t n = train_rows ? train_rows->size() : positives.size();
  if (n == 0) throw InputError("bpr: no positives to train in this shard");
  entries_.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = train_rows ? (*train_rows)[k] : k;
    if (i >= positives.size()) {
      throw InputError("bpr: training row " + std::to_string(i) + " of " + std::to_string(positives.size()) +
                       " positives");
    }
    entries_[k] = {positives.user[i], positives.item[i]};
  }
  std::mt19937_64 rng(seed);
  shuffle_in_place(std::span<Entry>(entries_), rng);
  f_ = FactorLayout::of(layout());
}

Layout BprMf::layout() const { return FactorLayout::make(users_, items_, options_.factors, false, ids_); }

}  // namespace asgd::sparse::mf
