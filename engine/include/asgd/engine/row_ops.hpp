// Whole-row operations on shared parameters, vectorised: the Racy policy's
// fast path for models whose updates are dense rows (word2vec, MF).
//
// Contract. These read and write shared floats with SIMD loads and stores,
// not through std::atomic_ref, because atomic_ref<float> cannot be
// vectorised. On the targets asgd supports (x86-64, AArch64) a vector access
// to 4-byte-aligned floats never tears an individual float: each float is
// read or written whole, which is exactly the Racy contract (a concurrent
// add may be lost; no value is ever half-written). The C++ memory model
// still calls this a data race, so
//  * the functions live in their own translation unit (the optimiser cannot
//    reason across the call about the shared memory), and
//  * ThreadSanitizer builds use per-element relaxed atomic_ref instead, so
//    TSan checks the same algorithm with the same ordering.
// Rows are plain float arrays of any length and alignment.
//
// The kernel for this machine is chosen once, when the library is loaded
// (an ELF ifunc where the toolchain has them), so a call costs what a call
// into a shared library costs: hot loops make a few of them per example.
#pragma once

#include <cstddef>

namespace asgd::rows {

// out[k] = shared[k]
void load(const float* shared, float* out, std::size_t n) noexcept;
// shared[k] += scale * d[k]  (Racy: a concurrent add may be lost)
void add_scaled(float* shared, const float* d, float scale, std::size_t n) noexcept;

// The step of a bilinear term on two shared rows, from their values before
// the step: a[k] = da * a[k] - sa * b[k] and b[k] = db * b[k] - sb * a[k].
// With s = lr * g (g the loss's derivative at a . b) and d = 1 - lr * l2
// this is one SGD step on L(a . b) + l2/2 (|a|^2 + |b|^2) (each row may
// have its own lr): MF's update in one pass, with no copies of either row.
// a and b must not overlap.
void bilinear_step(float* a, float* b, std::size_t n, float sa, float da, float sb, float db) noexcept;

// sum_k a[k] * b[k]; either row may be shared (each float read whole), and
// y[k] += s * x[k] into a local row y (x may be shared, read as dot reads).
float dot(const float* a, const float* b, std::size_t n) noexcept;
void axpy(float s, const float* x, float* y, std::size_t n) noexcept;
// axpy(s, shared, y, n), then add_scaled(shared, d, scale, n), in one pass over
// the shared row (y gets its values before the step): word2vec's output-row
// update. y and d must not overlap the shared row.
void axpy_then_add_scaled(float s, float* shared, float* y, const float* d, float scale, std::size_t n) noexcept;
// out = {a . a, b . b, a . b} in one pass (rows as dot reads them): the
// squared norms of both rows' bilinear gradients (per-row AdaGrad).
void gram(const float* a, const float* b, std::size_t n, float out[3]) noexcept;

// "avx2+fma" or "generic": what this machine runs.
const char* simd_level() noexcept;

}  // namespace asgd::rows
