// The Problem concept: the only thing the engine knows of a model.
//
// A Problem has a number of examples and, for example i, writes its gradient
// into an update sink and returns the example's loss:
//
//   struct MyProblem {
//     std::size_t num_examples() const;
//     template <class Sink> double gradient(std::size_t i, Sink& sink);
//     // optional: reorder a worker's examples for a new epoch
//     void shuffle(std::span<std::uint64_t> order, std::mt19937_64& rng);
//     // optional: the parameters it reads and writes; Trainer::run then
//     // refuses a ParamStore of another layout (InputError), since nothing
//     // checks the offsets gradient() uses against the store's size
//     Layout layout() const;
//   };
//
// `gradient` is called concurrently from several workers: it must only read
// parameters through sink.read and write through sink.add_gradient, and keep
// any scratch per call (or per thread). It starts no threads and takes no locks.
// Random numbers it needs come from a generator seeded with (sink.seed(),
// sink.epoch(), i), which keeps a one-worker run reproducible.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <utility>

namespace asgd {

// The sink interface a Problem may rely on; gradient() must accept any type
// with these members (write it as a template over the sink). The concept
// below calls gradient() with this type: one with a deduced return type is
// instantiated with it, so it may use only these members. Offsets are
// std::size_t: a literal 0 as a dot()'s first argument is ambiguous (a null
// `local` row too).
struct SinkArchetype {
  float read(std::size_t i) const noexcept;
  void read(std::size_t offset, float* out, std::size_t n) const noexcept;
  void add_gradient(std::size_t i, float g) noexcept;
  void add_gradient(std::size_t offset, const float* g, std::size_t n, float scale = 1.0f) noexcept;
  // Rows read in place (UpdateSink says how): a . b of two shared rows, of a
  // local row and a shared one, and out += s * a shared row.
  float dot(std::size_t a, std::size_t b, std::size_t n) const noexcept;
  float dot(const float* local, std::size_t offset, std::size_t n) const noexcept;
  void add_row_to(float s, std::size_t offset, float* out, std::size_t n) const noexcept;
  // add_row_to, then add_gradient(offset, g, n, scale) on the same row.
  void add_row_to_then_gradient(float s, std::size_t offset, float* out, const float* g, std::size_t n,
                                float scale) noexcept;
  // The gradient of L(a . b) + l2/2 (|a|^2 + |b|^2) on two rows, g = L'(a . b).
  void add_bilinear_gradient(std::size_t a, std::size_t b, std::size_t n, float g, float l2) noexcept;
  float learning_rate() const noexcept;
  std::size_t size() const noexcept;
  void prefetch(std::size_t offset, std::size_t n = 1) const noexcept;
  std::uint64_t seed() const noexcept;
  std::uint64_t epoch() const noexcept;
};

template <class P>
concept Problem = requires(P& p, const P& cp, std::size_t i, SinkArchetype& sink) {
  { cp.num_examples() } -> std::convertible_to<std::size_t>;
  { p.gradient(i, sink) } -> std::convertible_to<double>;
};

// A problem whose examples are grouped into a bins x bins grid of blocks
// (e.g. ratings by user group x item group) such that examples of blocks in
// different rows and columns touch disjoint parameters; block (r, c) holds
// the examples [first, last) of block_range(r, c). TrainerOptions::blocks
// then trains it with the BlockScheduler instead of shards.
template <class P>
concept BlockedProblem = Problem<P> && requires(const P& p, std::size_t r, std::size_t c) {
  { p.bins() } -> std::convertible_to<std::size_t>;
  { p.block_range(r, c) } -> std::convertible_to<std::pair<std::uint64_t, std::uint64_t>>;
};

template <class P>
concept ShufflingProblem =
    Problem<P> && requires(P& p, std::span<std::uint64_t> order, std::mt19937_64& rng) {
      p.shuffle(order, rng);
    };

}  // namespace asgd
