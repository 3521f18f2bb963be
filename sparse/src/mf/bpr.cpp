#include "asgd/sparse/mf/bpr.hpp"

#include <random>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/random.hpp"

namespace asgd::sparse::mf {

BprMf::BprMf(const Ratings& positives, MfOptions options, std::uint64_t seed)
    : seen_(positives, positives.users.size()),
      users_(positives.users.size()),
      items_(positives.items.size()),
      options_(options) {
  options_.validate();
  if (positives.size() == 0) throw InputError("bpr: no positive interactions");
  entries_.resize(positives.size());
  for (std::size_t i = 0; i < positives.size(); ++i) {
    if (positives.user[i] >= users_ || positives.item[i] >= items_) {
      throw InputError("bpr: positive " + std::to_string(i) + " has an id outside its id maps");
    }
    entries_[i] = {positives.user[i], positives.item[i]};
  }
  std::mt19937_64 rng(seed);
  shuffle_in_place(std::span<Entry>(entries_), rng);
  f_ = FactorLayout::of(layout());
}

Layout BprMf::layout() const { return FactorLayout::make(users_, items_, options_.factors, false); }

}  // namespace asgd::sparse::mf
