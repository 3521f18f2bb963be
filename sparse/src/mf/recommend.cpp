#include "asgd/sparse/mf/recommend.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/row_ops.hpp"
#include "asgd/sparse/mf/model.hpp"

namespace asgd::sparse::mf {

SeenItems::SeenItems(const Ratings& r, std::size_t users) : begin_(users + 1, 0) {
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (r.user[i] < users) ++begin_[r.user[i] + 1];
  }
  for (std::size_t u = 0; u < users; ++u) begin_[u + 1] += begin_[u];
  items_.resize(begin_[users]);
  std::vector<std::uint64_t> next(begin_.begin(), begin_.end() - 1);
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (r.user[i] < users) items_[next[r.user[i]]++] = r.item[i];
  }
  // Each user's items sorted, once each (a ratings file may repeat a pair): counts of what is excluded are
  // counts of distinct items.
  std::uint64_t kept = 0;
  for (std::size_t u = 0; u < users; ++u) {
    const auto first = items_.begin() + static_cast<std::ptrdiff_t>(begin_[u]);
    const auto last = items_.begin() + static_cast<std::ptrdiff_t>(begin_[u + 1]);
    std::sort(first, last);
    const auto end = std::unique(first, last);
    begin_[u] = kept;
    kept = static_cast<std::uint64_t>(std::copy(first, end, items_.begin() + static_cast<std::ptrdiff_t>(kept)) -
                                      items_.begin());
  }
  begin_[users] = kept;
  items_.resize(kept);
}

std::span<const std::uint32_t> SeenItems::of(std::uint32_t user) const noexcept {
  if (user + 1 >= begin_.size()) return {};
  return {items_.data() + begin_[user], begin_[user + 1] - begin_[user]};
}

bool SeenItems::contains(std::uint32_t user, std::uint32_t item) const noexcept {
  const auto s = of(user);
  return std::binary_search(s.begin(), s.end(), item);
}

std::vector<std::vector<Recommendation>> recommend(const ParamStore& store, const RatingScale& given, const SeenItems* seen,
                                                   std::span<const std::uint32_t> users, std::size_t k,
                                                   std::size_t batch, std::span<const std::uint32_t> never,
                                                   std::span<const std::uint32_t> cold_users) {
  const FactorLayout f = FactorLayout::of(store.layout());
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>> q(store.data() + f.q, static_cast<Eigen::Index>(f.items),
                                                              static_cast<Eigen::Index>(f.factors),
                                                              Eigen::OuterStride<>(static_cast<Eigen::Index>(f.stride)));
  const Eigen::Map<const Eigen::VectorXf> item_bias(store.data() + f.item_bias, static_cast<Eigen::Index>(f.items));
  const bool user_bias = f.has_user_bias;
  if (!std::is_sorted(never.begin(), never.end())) throw InputError("recommend: `never` must be sorted");
  if (!std::is_sorted(cold_users.begin(), cold_users.end())) throw InputError("recommend: `cold_users` must be sorted");
  for (const std::uint32_t u : users) {
    if (u >= f.users) throw InputError(fmt::format("recommend: user {}: the model has {} users", u, f.users));
  }
  // A user past the seen lists would have nothing excluded, silently.
  if (seen != nullptr && seen->users() < f.users) {
    throw InputError(fmt::format("recommend: the seen items cover {} users, the model has {}: build them with the "
                                 "model's user count",
                                 seen->users(), f.users));
  }
  // Not centred: cold users' scores measure item biases from the mean of the trained items'.
  const RatingScale rs = with_bias_means(given, store, cold_users, never);
  // The items of `never` the model has, once each.
  std::vector<std::uint32_t> never_here;
  for (const std::uint32_t i : never) {
    if (i < f.items && (never_here.empty() || never_here.back() != i)) never_here.push_back(i);
  }
  std::vector<std::vector<Recommendation>> out(users.size());
  batch = std::max<std::size_t>(1, batch);
  const std::size_t batches = (users.size() + batch - 1) / batch;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, batches), [&](const tbb::blocked_range<std::size_t>& range) {
    RowMajor p, scores;
    std::vector<std::uint32_t> order(f.items);
    for (std::size_t b = range.begin(); b < range.end(); ++b) {
      const std::size_t first = b * batch, n = std::min(batch, users.size() - first);
      p.resize(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(f.factors));
      for (std::size_t r = 0; r < n; ++r) {
        const std::uint32_t u = users[first + r];
        rows::load(store.data() + f.p + static_cast<std::size_t>(u) * f.stride, p.row(static_cast<Eigen::Index>(r)).data(),
                   f.factors);
      }
      scores.noalias() = p * q.transpose();  // n x items, one blocked product
      for (std::size_t r = 0; r < n; ++r) {
        const std::uint32_t u = users[first + r];
        float* row = scores.row(static_cast<Eigen::Index>(r)).data();
        // Excluded items the model has (an --exclude file may name others), each counted once: a score is
        // -inf only once excluded. A store read while another process trains it may hold a NaN or -inf (asgd's
        // readers refuse a segment that does when they attach, not one that diverges later): such a score is
        // ranked last, so that the sort's order stays strict and -inf means excluded.
        constexpr float kExcluded = -std::numeric_limits<float>::infinity();
        const auto ranked = [](float score) {
          return score > kExcluded ? score : std::numeric_limits<float>::lowest();
        };
        if (std::binary_search(cold_users.begin(), cold_users.end(), u)) {
          for (std::size_t i = 0; i < f.items; ++i)
            row[i] = ranked(rs.unknown(std::nullopt, item_bias[static_cast<Eigen::Index>(i)]));
        } else {
          // offset + scale (p . q + b_i + b_u), summed as before the scale was there (at scale 1, bit for bit).
          const float offset = rs.offset + rs.scale * (user_bias ? store.load(f.user_bias + u) : 0.0f);
          for (std::size_t i = 0; i < f.items; ++i)
            row[i] = ranked(rs.scale * row[i] + (rs.scale * item_bias[static_cast<Eigen::Index>(i)] + offset));
        }
        for (const std::uint32_t i : never_here) row[i] = kExcluded;
        std::size_t excluded = never_here.size();
        if (seen) {
          for (const std::uint32_t i : seen->of(u)) {
            if (i < f.items && row[i] != kExcluded) {
              row[i] = kExcluded;
              ++excluded;
            }
          }
        }
        const std::size_t unseen = f.items - std::min(f.items, excluded);
        const std::size_t take = std::min(k, unseen);
        for (std::uint32_t i = 0; i < f.items; ++i) order[i] = i;
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take), order.end(),
                          [&](std::uint32_t a, std::uint32_t c) { return row[a] > row[c] || (row[a] == row[c] && a < c); });
        auto& list = out[first + r];
        list.reserve(take);
        for (std::size_t j = 0; j < take; ++j) list.push_back({order[j], row[order[j]]});
      }
    }
  });
  return out;
}

}  // namespace asgd::sparse::mf
