#include "asgd/engine/row_ops.hpp"

#include <atomic>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define ASGD_ROWS_X86 1
#endif

#if defined(__SANITIZE_THREAD__)
#define ASGD_ROWS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ASGD_ROWS_TSAN 1
#endif
#endif

namespace asgd::rows {
namespace {

// Portable versions (any ISA; the compiler vectorises load/add_scaled/axpy
// at its baseline, e.g. SSE2). Under TSan, shared accesses are atomic_ref.
void load_generic(const float* shared, float* out, std::size_t n) noexcept {
#ifdef ASGD_ROWS_TSAN
  for (std::size_t k = 0; k < n; ++k) {
    out[k] = std::atomic_ref<float>(const_cast<float&>(shared[k])).load(std::memory_order_relaxed);
  }
#else
  for (std::size_t k = 0; k < n; ++k) out[k] = shared[k];
#endif
}

void add_scaled_generic(float* shared, const float* d, float scale, std::size_t n) noexcept {
#ifdef ASGD_ROWS_TSAN
  for (std::size_t k = 0; k < n; ++k) {
    std::atomic_ref<float> ref(shared[k]);
    ref.store(ref.load(std::memory_order_relaxed) + scale * d[k], std::memory_order_relaxed);
  }
#else
  for (std::size_t k = 0; k < n; ++k) shared[k] += scale * d[k];
#endif
}

float dot_generic(const float* a, const float* b, std::size_t n) noexcept {
  // Four partial sums: breaks the add dependency chain without -ffast-math.
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += a[k] * b[k];
    s1 += a[k + 1] * b[k + 1];
    s2 += a[k + 2] * b[k + 2];
    s3 += a[k + 3] * b[k + 3];
  }
  for (; k < n; ++k) s0 += a[k] * b[k];
  return (s0 + s1) + (s2 + s3);
}

void axpy_generic(float s, const float* x, float* y, std::size_t n) noexcept {
  for (std::size_t k = 0; k < n; ++k) y[k] += s * x[k];
}

#if defined(ASGD_ROWS_X86) && !defined(ASGD_ROWS_TSAN)
__attribute__((target("avx2,fma"))) void load_avx2(const float* shared, float* out, std::size_t n) noexcept {
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8) _mm256_storeu_ps(out + k, _mm256_loadu_ps(shared + k));
  for (; k < n; ++k) out[k] = shared[k];
}

__attribute__((target("avx2,fma"))) void add_scaled_avx2(float* shared, const float* d, float scale,
                                                        std::size_t n) noexcept {
  const __m256 s = _mm256_set1_ps(scale);
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    _mm256_storeu_ps(shared + k, _mm256_fmadd_ps(s, _mm256_loadu_ps(d + k), _mm256_loadu_ps(shared + k)));
  }
  for (; k < n; ++k) shared[k] += scale * d[k];
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, std::size_t n) noexcept {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  std::size_t k = 0;
  for (; k + 16 <= n; k += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), acc1);
  }
  for (; k + 8 <= n; k += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc0);
  __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  float s = _mm_cvtss_f32(lo);
  for (; k < n; ++k) s += a[k] * b[k];
  return s;
}

__attribute__((target("avx2,fma"))) void axpy_avx2(float s, const float* x, float* y, std::size_t n) noexcept {
  const __m256 sv = _mm256_set1_ps(s);
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    _mm256_storeu_ps(y + k, _mm256_fmadd_ps(sv, _mm256_loadu_ps(x + k), _mm256_loadu_ps(y + k)));
  }
  for (; k < n; ++k) y[k] += s * x[k];
}
#endif

struct Kernels {
  void (*load)(const float*, float*, std::size_t) noexcept;
  void (*add_scaled)(float*, const float*, float, std::size_t) noexcept;
  float (*dot)(const float*, const float*, std::size_t) noexcept;
  void (*axpy)(float, const float*, float*, std::size_t) noexcept;
  const char* name;
};

Kernels pick() noexcept {
#if defined(ASGD_ROWS_X86) && !defined(ASGD_ROWS_TSAN)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return {load_avx2, add_scaled_avx2, dot_avx2, axpy_avx2, "avx2+fma"};
  }
#endif
  return {load_generic, add_scaled_generic, dot_generic, axpy_generic, "generic"};
}

// Chosen on first use (a function-local static: safe from other static
// initialisers).
const Kernels& kernels() noexcept {
  static const Kernels k = pick();
  return k;
}

}  // namespace

void load(const float* shared, float* out, std::size_t n) noexcept { kernels().load(shared, out, n); }
void add_scaled(float* shared, const float* d, float scale, std::size_t n) noexcept {
  kernels().add_scaled(shared, d, scale, n);
}
float dot(const float* a, const float* b, std::size_t n) noexcept { return kernels().dot(a, b, n); }
void axpy(float s, const float* x, float* y, std::size_t n) noexcept { kernels().axpy(s, x, y, n); }
const char* simd_level() noexcept { return kernels().name; }

}  // namespace asgd::rows
