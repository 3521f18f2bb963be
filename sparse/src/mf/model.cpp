#include "asgd/sparse/mf/model.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_reduce.h>

#include <algorithm>
#include <limits>
#include <random>

#include "asgd/engine/block_scheduler.hpp"
#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/random.hpp"

namespace asgd::sparse::mf {

void MfOptions::validate() const {
  if (factors == 0 || factors > BiasedMf::kMaxFactors) {
    throw InputError(fmt::format("MfOptions::factors {}: expected 1 to {} factors", factors, BiasedMf::kMaxFactors));
  }
  if (!(l2 >= 0) || !std::isfinite(l2)) throw InputError(fmt::format("MfOptions::l2 {}: expected >= 0", l2));
  if (!(bias_l2 >= 0) || !std::isfinite(bias_l2))
    throw InputError(fmt::format("MfOptions::bias_l2 {}: expected >= 0", bias_l2));
  if (!(init_scale > 0) || !std::isfinite(init_scale))
    throw InputError(fmt::format("MfOptions::init_scale {}: expected > 0", init_scale));
  if (bins > BlockScheduler::kMostBins)
    throw InputError(fmt::format("MfOptions::bins {}: at most {}", bins, BlockScheduler::kMostBins));
}

FactorLayout FactorLayout::of(const Layout& l) {
  FactorLayout f;
  const Tensor& p = l["P"];
  const Tensor& q = l["Q"];
  f.users = p.rows;
  f.items = q.rows;
  f.factors = p.cols;
  f.stride = p.row_stride;
  f.p = p.offset;
  f.q = q.offset;
  if (q.row_stride != f.stride || q.cols != f.factors) throw InputError("layout: P and Q differ in width");
  // A model file's layout is checked as a whole (hash and text), not that it makes sense: each part is checked
  // here before anything indexes with it.
  if (f.factors == 0 || f.factors > BiasedMf::kMaxFactors) {
    throw InputError(fmt::format("layout: {} factors; expected 1 to {}", f.factors, BiasedMf::kMaxFactors));
  }
  f.has_user_bias = l.contains("user_bias");
  if (f.has_user_bias) {
    const Tensor& b = l["user_bias"];
    if (b.elements() != f.users)
      throw InputError(fmt::format("layout: {} user biases for {} users", b.elements(), f.users));
    f.user_bias = b.offset;
  }
  const Tensor& item_bias = l["item_bias"];
  if (item_bias.elements() != f.items)
    throw InputError(fmt::format("layout: {} item biases for {} items", item_bias.elements(), f.items));
  f.item_bias = item_bias.offset;
  return f;
}

Layout FactorLayout::make(std::size_t users, std::size_t items, std::size_t factors, bool user_bias,
                          std::string tag) {
  Layout l;
  l.set_tag(std::move(tag));
  l.add("P", {std::max<std::size_t>(users, 1), factors}, RowPadding::cache_line);
  l.add("Q", {std::max<std::size_t>(items, 1), factors}, RowPadding::cache_line);
  if (user_bias) l.add("user_bias", {std::max<std::size_t>(users, 1)});
  l.add("item_bias", {std::max<std::size_t>(items, 1)});
  return l;
}

namespace {
// Which of `users` and `items` have a rating in `r` (1) or none (0); all 1 without `r`.
struct RatedRows {
  std::vector<char> users, items;
  RatedRows(std::size_t user_count, std::size_t item_count, const Ratings* r)
      : users(user_count, r ? 0 : 1), items(item_count, r ? 0 : 1) {
    for (std::size_t i = 0; r && i < r->size(); ++i) {
      if (r->user[i] < user_count) users[r->user[i]] = 1;
      if (r->item[i] < item_count) items[r->item[i]] = 1;
    }
  }
};
}  // namespace

void initialize_factors(ParamStore& store, std::uint64_t seed, float scale, const Ratings* trained) {
  const FactorLayout f = FactorLayout::of(store.layout());
  if (trained != nullptr) check_model_ids(store.layout(), *trained, "initialize factors");
  const RatedRows rated(f.users, f.items, trained);
  // The same seed gives the same start everywhere; a zeroed row still draws its values.
  FastRng rng(seed * 0x9e3779b97f4a7c15ULL + 1);
  const float s = scale / std::sqrt(static_cast<float>(f.factors));
  float* data = store.data();
  auto fill = [&](std::size_t first, std::size_t rows, const std::vector<char>& trained_row) {
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < f.factors; ++c) {
        const float v = rng.uniform() * s;
        store_param(data[first + r * f.stride + c], trained_row[r] ? v : 0.0f);
      }
    }
  };
  fill(f.p, f.users, rated.users);
  fill(f.q, f.items, rated.items);
}

void copy_factor_rows(const ParamStore& from, ParamStore& to) {
  const FactorLayout a = FactorLayout::of(from.layout()), b = FactorLayout::of(to.layout());
  if (a.factors != b.factors || a.has_user_bias != b.has_user_bias || a.users > b.users || a.items > b.items) {
    throw InputError(fmt::format("copy factor rows: a model of {} users, {} items and {} factors{} does not fit "
                                 "in one of {}, {} and {}{} (the same factors and biases, at least the rows)",
                                 a.users, a.items, a.factors, a.has_user_bias ? " with user biases" : "", b.users,
                                 b.items, b.factors, b.has_user_bias ? " with user biases" : ""));
  }
  float* data = to.data();
  const auto rows = [&](std::size_t from_first, std::size_t to_first, std::size_t count, std::size_t width,
                        std::size_t from_stride, std::size_t to_stride) {
    for (std::size_t r = 0; r < count; ++r)
      for (std::size_t c = 0; c < width; ++c)
        store_param(data[to_first + r * to_stride + c], from.load(from_first + r * from_stride + c));
  };
  rows(a.p, b.p, a.users, a.factors, a.stride, b.stride);
  rows(a.q, b.q, a.items, a.factors, a.stride, b.stride);
  rows(a.item_bias, b.item_bias, a.items, 1, 1, 1);
  if (a.has_user_bias) rows(a.user_bias, b.user_bias, a.users, 1, 1, 1);
}

ColdIds cold_ids(std::size_t users, std::size_t items, const Ratings& trained) {
  const RatedRows rated(users, items, &trained);
  ColdIds cold;
  for (std::uint32_t u = 0; u < users; ++u)
    if (!rated.users[u]) cold.users.push_back(u);
  for (std::uint32_t i = 0; i < items; ++i)
    if (!rated.items[i]) cold.items.push_back(i);
  return cold;
}

bool has_model_ids(const Layout& layout, const IdMap& users, const IdMap& items) {
  if (!is_id_maps_tag(layout.tag())) return true;
  const FactorLayout f = FactorLayout::of(layout);
  return users.size() >= f.users && items.size() >= f.items &&
         id_maps_tag(users, items, f.users, f.items) == layout.tag();
}

void check_model_ids(const Layout& layout, const Ratings& ratings, std::string_view what) {
  if (has_model_ids(layout, ratings.users, ratings.items)) return;
  const FactorLayout f = FactorLayout::of(layout);
  const bool fewer = ratings.users.size() < f.users || ratings.items.size() < f.items;
  throw InputError(fmt::format("{}: the ratings' ids are not the model's ({} users and {} items in their maps, "
                               "{} and {} in the model's, {}): read them with the training set's id maps "
                               "(read_ratings' id_maps_from) or remap_ids them",
                               what, ratings.users.size(), ratings.items.size(), f.users, f.items,
                               fewer ? "fewer" : "the names differ"));
}

float predict(const ParamStore& store, const FactorLayout& f, const RatingScale& rs, std::uint32_t user,
              std::uint32_t item) {
  if (user >= f.users || item >= f.items) {
    throw InputError(fmt::format("predict: user {} and item {}: the model has {} users and {} items", user, item,
                                 f.users, f.items));
  }
  float p[BiasedMf::kMaxFactors], q[BiasedMf::kMaxFactors];
  rows::load(store.data() + f.p + user * f.stride, p, f.factors);
  rows::load(store.data() + f.q + item * f.stride, q, f.factors);
  // offset + scale (p . q + b_i + b_u), summed in this order (at scale 1, as before the scale was there).
  float r = rs.offset + rs.scale * rows::dot(p, q, f.factors);
  r += rs.scale * store.load(f.item_bias + item);
  if (f.has_user_bias) r += rs.scale * store.load(f.user_bias + user);
  return r;
}

float predict_or_fallback(const ParamStore& store, const FactorLayout& f, const RatingScale& rs, std::uint32_t user,
                          std::uint32_t item, const ColdIds* cold) {
  const bool user_known = user < f.users && !(cold && cold->has_user(user));
  const bool item_known = item < f.items && !(cold && cold->has_item(item));
  if (user_known && item_known) return predict(store, f, rs, user, item);
  std::optional<float> b_u, b_i;
  if (item_known) b_i = store.load(f.item_bias + item);
  if (user_known && f.has_user_bias) b_u = store.load(f.user_bias + user);
  return rs.unknown(b_u, b_i);
}

RatingScale with_bias_means(RatingScale rs, const ParamStore& store, std::span<const std::uint32_t> cold_users,
                            std::span<const std::uint32_t> cold_items) {
  if (rs.centred()) return rs;
  const FactorLayout f = FactorLayout::of(store.layout());
  auto mean_of = [&](std::size_t first, std::size_t n, std::span<const std::uint32_t> skip) {
    double sum = 0;
    std::size_t count = 0;
    for (std::uint32_t k = 0; k < n; ++k) {
      if (std::binary_search(skip.begin(), skip.end(), k)) continue;
      sum += store.load(first + k);
      ++count;
    }
    return count ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
  };
  rs.item_bias_mean = mean_of(f.item_bias, f.items, cold_items);
  rs.user_bias_mean = f.has_user_bias ? mean_of(f.user_bias, f.users, cold_users) : 0.0f;
  return rs;
}

BiasedMf::BiasedMf(const Ratings& train, MfOptions options, std::uint64_t seed)
    : users_(train.users.size()), items_(train.items.size()), ids_(train.id_maps_tag()), options_(options) {
  options_.validate();
  if (train.size() == 0) throw InputError("mf: no training ratings");
  train.check("mf");
  const float mean = options_.mean ? *options_.mean : static_cast<float>(train.mean());
  // LIBMF's floor, so that ratings all alike do not divide by 0.
  const float deviation = options_.deviation ? *options_.deviation : static_cast<float>(train.deviation());
  scale_ = RatingScale(mean, options_.center ? mean : 0.0f, options_.scale_ratings ? std::max(1e-4f, deviation) : 1.0f);
  offset_ = scale_.offset / scale_.scale;
  l2_ = options_.l2 / scale_.scale;
  bias_l2_ = options_.bias_l2 / scale_.scale;
  loss_scale_ = static_cast<double>(scale_.scale) * scale_.scale;
  entries_.resize(train.size());
  for (std::size_t i = 0; i < train.size(); ++i)
    entries_[i] = {train.user[i], train.item[i], train.rating[i] / scale_.scale};
  std::mt19937_64 rng(seed);
  shuffle_in_place(std::span<Entry>(entries_), rng);
  if (options_.bins > 0) {
    // Users and items go to groups of contiguous ids holding nearly equal numbers of ratings; ratings are then
    // grouped by block, keeping the shuffled order inside each block. Contiguous, so that the rows of one
    // worker's block are not interleaved with another's: the biases lie 16 to a cache line, and with random
    // groups every bias update bounced a line between the workers (2 workers took 7.1 s where 1 took 2.9 s on
    // 10M ratings; LIBMF keeps its blocks contiguous by renumbering its ids).
    const std::size_t bins = options_.bins;
    const std::uint64_t total = entries_.size();
    auto groups = [&](std::size_t n, auto id_of) {
      std::vector<std::uint64_t> count(n, 0);
      for (const Entry& e : entries_) ++count[id_of(e)];
      std::vector<std::uint16_t> group(n);
      std::uint64_t before = 0;  // ratings of the ids below k
      for (std::size_t k = 0; k < n; ++k) {
        group[k] = static_cast<std::uint16_t>(std::min<std::uint64_t>(bins - 1, before * bins / total));
        before += count[k];
      }
      return group;
    };
    const auto user_group = groups(users_, [](const Entry& e) { return e.user; });
    const auto item_group = groups(items_, [](const Entry& e) { return e.item; });
    auto block_of = [&](const Entry& e) { return user_group[e.user] * bins + item_group[e.item]; };
    block_begin_.assign(bins * bins + 1, 0);
    for (const auto& e : entries_) ++block_begin_[block_of(e) + 1];
    for (std::size_t b = 0; b < bins * bins; ++b) block_begin_[b + 1] += block_begin_[b];
    std::vector<Entry, LargeArrayAllocator<Entry>> grouped(entries_.size());
    std::vector<std::uint64_t> next(block_begin_.begin(), block_begin_.end() - 1);
    for (const auto& e : entries_) grouped[next[block_of(e)]++] = e;
    entries_ = std::move(grouped);
  }
  f_ = FactorLayout::of(layout());
}

Layout BiasedMf::layout() const { return FactorLayout::make(users_, items_, options_.factors, true, ids_); }

ErrorMetrics evaluate_errors(const ParamStore& store, const RatingScale& given, const Ratings& test, float lo,
                             float hi, const ColdIds* cold) {
  const FactorLayout f = FactorLayout::of(store.layout());
  check_model_ids(store.layout(), test, "evaluate");
  const RatingScale rs = with_bias_means(given, store, cold);
  struct Sums {
    double squared = 0, absolute = 0;
    std::size_t count = 0, known = 0;
  };
  const Sums s = tbb::parallel_reduce(
      tbb::blocked_range<std::size_t>(0, test.size(), 4096), Sums{},
      [&](const tbb::blocked_range<std::size_t>& range, Sums acc) {
        for (std::size_t i = range.begin(); i < range.end(); ++i) {
          if (test.user[i] < f.users && test.item[i] < f.items &&
              (cold == nullptr || (!cold->has_user(test.user[i]) && !cold->has_item(test.item[i]))))
            ++acc.known;
          float r = predict_or_fallback(store, f, rs, test.user[i], test.item[i], cold);
          if (lo < hi) r = std::clamp(r, lo, hi);
          const double e = static_cast<double>(r) - test.rating[i];
          acc.squared += e * e;
          acc.absolute += std::abs(e);
          ++acc.count;
        }
        return acc;
      },
      [](Sums a, const Sums& b) {
        a.squared += b.squared;
        a.absolute += b.absolute;
        a.count += b.count;
        a.known += b.known;
        return a;
      });
  ErrorMetrics m;
  m.count = s.count;
  m.known = s.known;
  m.rmse = m.mae = std::numeric_limits<double>::quiet_NaN();
  if (s.count > 0) {
    m.rmse = std::sqrt(s.squared / static_cast<double>(s.count));
    m.mae = s.absolute / static_cast<double>(s.count);
  }
  return m;
}

}  // namespace asgd::sparse::mf
