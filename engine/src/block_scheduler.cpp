#include "asgd/engine/block_scheduler.hpp"

#include <fmt/format.h>

#include <tuple>

#include "asgd/engine/errors.hpp"

namespace asgd {

BlockScheduler::BlockScheduler(std::size_t bins, std::uint64_t seed) : bins_(bins), rng_(seed) {
  if (bins == 0 || bins > kMostBins)
    throw InputError(fmt::format("block scheduler: {} bins, expected 1 to {}", bins, kMostBins));
  rows_.fill(bins);
  cols_.fill(bins);
  rows_since_.clear(bins);
  cols_since_.clear(bins);
  next_epoch(seed);
}

void BlockScheduler::IndexSet::fill(std::size_t n) {
  list.resize(n);
  at.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) list[i] = at[i] = i;
}

void BlockScheduler::IndexSet::clear(std::size_t n) {
  list.reserve(n);  // room for all: add() never allocates
  for (const std::uint32_t i : list) at[i] = kTaken;
  list.clear();
  at.resize(n, kTaken);
}

void BlockScheduler::IndexSet::remove(std::uint32_t i) noexcept {
  const std::uint32_t last = list.back();
  list[at[i]] = last;
  at[last] = at[i];
  list.pop_back();
  at[i] = kTaken;
}

void BlockScheduler::IndexSet::add(std::uint32_t i) noexcept {
  at[i] = static_cast<std::uint32_t>(list.size());
  list.push_back(i);  // no allocation: the list has room for all
}

Block BlockScheduler::take(std::uint32_t block) {
  const std::uint32_t at = place_[block], last = untaken_.back();
  untaken_[at] = last;
  place_[last] = at;
  untaken_.pop_back();
  place_[block] = kTaken;
  const Block b{block / bins_, block % bins_};
  for (auto [set, since, i] : {std::tuple{&rows_, &rows_since_, static_cast<std::uint32_t>(b.row)},
                               std::tuple{&cols_, &cols_since_, static_cast<std::uint32_t>(b.col)}}) {
    set->remove(i);
    if (since->has(i)) since->remove(i);  // held: no candidate in it until it is put back
  }
  return b;
}

std::optional<Block> BlockScheduler::pick() {
  if (untaken_.empty()) return std::nullopt;
  // Uniform over the free untaken blocks: untaken blocks drawn at random until one is free (each accepted draw is
  // uniform over the free ones) ...
  constexpr int kDraws = 32;
  for (int d = 0; d < kDraws; ++d) {
    const std::uint32_t b = untaken_[rng_() % untaken_.size()];
    if (free(b)) return take(b);
  }
  // ... and when free ones are rare, one counted pass over the shortest of three lists that hold them all: the
  // untaken blocks (the epoch's end); the free rows x free columns (workers holding most rows: 700 workers on 943
  // bins passed over the whole grid at every pick, 48 s an epoch of 100,000 ratings); or, when a pass found none
  // since, the rows and columns put back since then x the free columns and rows (workers waiting on a grid whose
  // free rows and columns hold few untaken blocks: a put frees one row and one column, and only they can hold a
  // new candidate).
  const std::size_t fr = rows_.list.size(), fc = cols_.list.size();
  const std::size_t grid = fr * fc;
  const std::size_t since = none_known_ ? rows_since_.list.size() * fc + cols_since_.list.size() * fr : grid;
  // each(block) -> true to stop, over the untaken blocks of rows x cols (the rows in `skip` left out); true when
  // each stopped it.
  const auto cross = [&](const auto& rows, const auto& cols, const IndexSet* skip, auto& each) {
    for (const std::uint32_t r : rows) {
      if (skip != nullptr && skip->has(r)) continue;
      for (const std::uint32_t c : cols) {
        const auto b = static_cast<std::uint32_t>(r * bins_ + c);
        if (place_[b] != kTaken && each(b)) return true;
      }
    }
    return false;
  };
  const auto pass = [&](auto&& each) {
    if (since < grid && since < untaken_.size()) {
      // The rows put back since x the free columns, then the other free rows x the columns put back since.
      if (!cross(rows_since_.list, cols_.list, nullptr, each)) cross(rows_.list, cols_since_.list, &rows_since_, each);
    } else if (grid < untaken_.size()) {
      cross(rows_.list, cols_.list, nullptr, each);
    } else {
      for (const std::uint32_t b : untaken_) {
        if (free(b) && each(b)) return;
      }
    }
  };
  std::size_t candidates = 0;
  pass([&](std::uint32_t) { return ++candidates, false; });
  if (candidates == 0) {
    // None anywhere: until a put, none; after puts, only in their rows and columns.
    none_known_ = true;
    rows_since_.clear(bins_);
    cols_since_.clear(bins_);
    return std::nullopt;
  }
  std::size_t k = rng_() % candidates;
  std::uint32_t chosen = kTaken;
  pass([&](std::uint32_t b) { return k-- == 0 ? (chosen = b, true) : false; });
  return take(chosen);
}

std::optional<Block> BlockScheduler::get() {
  std::unique_lock lock(mutex_);
  bool woken = false;
  for (;;) {
    if (cancelled_) return std::nullopt;
    if (const auto b = pick()) {
      // The epoch's last block out: the waiters have nothing left to wait for. Otherwise a waiter woken by a put
      // wakes the next, as the put may have freed more than one block (put wakes one, not the crowd).
      if (untaken_.empty()) {
        freed_.notify_all();
      } else if (woken && waiting_ > 0) {
        freed_.notify_one();
      }
      return b;
    }
    if (untaken_.empty()) {
      freed_.notify_all();
      return std::nullopt;
    }
    ++waiting_;
    freed_.wait(lock);  // the one wait point: until a block is put back
    --waiting_;
    woken = true;
  }
}

void BlockScheduler::put(Block b) {
  {
    std::scoped_lock lock(mutex_);
    const auto r = static_cast<std::uint32_t>(b.row), c = static_cast<std::uint32_t>(b.col);
    rows_.add(r);
    cols_.add(c);
    if (none_known_) {  // where new candidates can be
      if (!rows_since_.has(r)) rows_since_.add(r);
      if (!cols_since_.has(c)) cols_since_.add(c);
    }
  }
  freed_.notify_one();
}

void BlockScheduler::next_epoch(std::uint64_t seed) {
  std::scoped_lock lock(mutex_);
  untaken_.resize(bins_ * bins_);
  place_.resize(bins_ * bins_);
  for (std::uint32_t b = 0; b < untaken_.size(); ++b) untaken_[b] = place_[b] = b;
  none_known_ = false;
  rng_.seed(seed);
}

void BlockScheduler::cancel() {
  {
    std::scoped_lock lock(mutex_);
    cancelled_ = true;
  }
  freed_.notify_all();
}

}  // namespace asgd
