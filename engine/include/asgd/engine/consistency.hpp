// The one write primitive for shared parameters, and its three policies.
//
// Contract (read before touching shared floats):
//  * Every read or write of a parameter that another worker may touch goes
//    through `load_param` / a policy's `add`, which use std::atomic_ref<float>
//    with memory_order_relaxed. Races are therefore a decision, not undefined
//    behaviour, and ThreadSanitizer sees them as atomic. The one exception is
//    whole-row traffic through the rows:: kernels (the reads of load, dot and
//    axpy, for every policy; the writes of Racy::add_scaled,
//    Racy::bilinear_step and Locked::add_scaled, the last under its stripe
//    locks, which readers do not take): vectorised, with the per-float
//    guarantee and the TSan fallback written in row_ops.hpp.
//  * Racy (Hogwild!): relaxed load + relaxed store. Two workers adding to the
//    same float at once may lose one of the updates. That is intended: on
//    sparse problems collisions are rare and the loss is bounded (Niu et al.
//    2011). Results are reproducible only with one worker.
//  * Atomic: relaxed compare-and-swap add; no update is ever lost, order is
//    still nondeterministic with more than one worker.
//  * Locked: striped mutexes keyed by cache line; the lock-based baseline
//    Hogwild! is measured against. Readers do not lock.
//  * No policy orders parameter writes with anything else; a worker that needs
//    to publish "I am done" uses the engine's clocks, which synchronise.
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>

#include "asgd/engine/row_ops.hpp"

namespace asgd {

enum class Consistency { racy, atomic, locked };

// "racy" | "hogwild", "atomic", "locked"; throws InputError naming the choices.
Consistency parse_consistency(std::string_view name);
std::string_view to_string(Consistency c) noexcept;

// A relaxed atomic read of a shared parameter (the only way to read one).
inline float load_param(const float& x) noexcept {
  // atomic_ref<const float> is not in C++20; the load never writes.
  return std::atomic_ref<float>(const_cast<float&>(x)).load(std::memory_order_relaxed);
}

// A relaxed atomic write of a shared parameter (initialisation, assignment).
inline void store_param(float& x, float value) noexcept {
  std::atomic_ref<float>(x).store(value, std::memory_order_relaxed);
}

inline constexpr std::size_t kCacheLine = 64;
inline constexpr std::size_t kFloatsPerLine = kCacheLine / sizeof(float);

// Hogwild!: lost updates allowed.
struct Racy {
  static constexpr Consistency kind = Consistency::racy;
  void add(float& x, float delta) const noexcept {
    std::atomic_ref<float> ref(x);
    ref.store(ref.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }
  // x[k] += scale * d[k] for k < n, vectorised (see row_ops.hpp for why a
  // SIMD store keeps the Racy contract).
  void add_scaled(float* x, const float* d, float scale, std::size_t n) const noexcept {
    rows::add_scaled(x, d, scale, n);
  }
  // Both rows' bilinear step in one vectorised pass (rows::bilinear_step).
  // A policy that has this lets UpdateSink skip its copy-and-add fallback.
  void bilinear_step(float* a, float* b, std::size_t n, float sa, float da, float sb, float db) const noexcept {
    rows::bilinear_step(a, b, n, sa, da, sb, db);
  }
};

// Compare-and-swap add: no lost update.
struct Atomic {
  static constexpr Consistency kind = Consistency::atomic;
  void add(float& x, float delta) const noexcept {
    std::atomic_ref<float>(x).fetch_add(delta, std::memory_order_relaxed);
  }
  void add_scaled(float* x, const float* d, float scale, std::size_t n) const noexcept {
    for (std::size_t k = 0; k < n; ++k) add(x[k], scale * d[k]);
  }
};

// Striped mutexes keyed by the cache line of the address.
class Locked {
 public:
  static constexpr Consistency kind = Consistency::locked;
  explicit Locked(std::size_t stripes = 4096);

  void add(float& x, float delta) const noexcept {
    std::scoped_lock lock(stripe_for(&x));
    Racy{}.add(x, delta);
  }
  // Takes each cache line's lock once.
  void add_scaled(float* x, const float* d, float scale, std::size_t n) const noexcept {
    std::size_t k = 0;
    while (k < n) {
      const auto addr = reinterpret_cast<std::uintptr_t>(x + k);
      // Floats left in this cache line: 1..16 for a float-aligned address.
      const std::size_t in_line = (kCacheLine - addr % kCacheLine) / sizeof(float);
      const std::size_t end = std::min(n, k + in_line);
      std::scoped_lock lock(stripe_for(x + k));
      rows::add_scaled(x + k, d + k, scale, end - k);  // writers of this line hold the lock
      k = end;
    }
  }
  std::size_t stripes() const noexcept { return count_; }

 private:
  struct alignas(kCacheLine) Stripe {
    std::mutex mutex;
  };
  std::mutex& stripe_for(const float* p) const noexcept {
    const auto line = reinterpret_cast<std::uintptr_t>(p) / kCacheLine;
    return stripes_[line % count_].mutex;
  }
  std::size_t count_;
  std::unique_ptr<Stripe[]> stripes_;
};

template <class P>
concept ConsistencyPolicy = requires(const P& p, float& x, float* xs, const float* ds) {
  { P::kind } -> std::convertible_to<Consistency>;
  p.add(x, 1.0f);
  p.add_scaled(xs, ds, 1.0f, std::size_t{1});
};

}  // namespace asgd
