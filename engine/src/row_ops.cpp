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

// A float of a row that another thread may be writing.
inline float read_shared(const float* x) noexcept {
#ifdef ASGD_ROWS_TSAN
  return std::atomic_ref<float>(const_cast<float&>(*x)).load(std::memory_order_relaxed);
#else
  return *x;
#endif
}

inline void write_shared(float* x, float v) noexcept {
#ifdef ASGD_ROWS_TSAN
  std::atomic_ref<float>(*x).store(v, std::memory_order_relaxed);
#else
  *x = v;
#endif
}

float dot_generic(const float* a, const float* b, std::size_t n) noexcept {
  // Four partial sums: breaks the add dependency chain without -ffast-math.
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += read_shared(a + k) * read_shared(b + k);
    s1 += read_shared(a + k + 1) * read_shared(b + k + 1);
    s2 += read_shared(a + k + 2) * read_shared(b + k + 2);
    s3 += read_shared(a + k + 3) * read_shared(b + k + 3);
  }
  for (; k < n; ++k) s0 += read_shared(a + k) * read_shared(b + k);
  return (s0 + s1) + (s2 + s3);
}

void bilinear_step_generic(float* a, float* b, std::size_t n, float sa, float da, float sb, float db) noexcept {
  for (std::size_t k = 0; k < n; ++k) {
    const float x = read_shared(a + k), y = read_shared(b + k);
    write_shared(a + k, da * x - sa * y);
    write_shared(b + k, db * y - sb * x);
  }
}

void gram_generic(const float* a, const float* b, std::size_t n, float out[3]) noexcept {
  float aa = 0, bb = 0, ab = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const float x = read_shared(a + k), y = read_shared(b + k);
    aa += x * x;
    bb += y * y;
    ab += x * y;
  }
  out[0] = aa;
  out[1] = bb;
  out[2] = ab;
}

void axpy_generic(float s, const float* x, float* y, std::size_t n) noexcept {
  for (std::size_t k = 0; k < n; ++k) y[k] += s * read_shared(x + k);
}

void axpy_then_add_scaled_generic(float s, float* x, float* y, const float* d, float scale, std::size_t n) noexcept {
  for (std::size_t k = 0; k < n; ++k) {
    const float v = read_shared(x + k);
    y[k] += s * v;
    write_shared(x + k, v + scale * d[k]);
  }
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

__attribute__((target("avx2,fma"))) void bilinear_step_avx2(float* a, float* b, std::size_t n, float sa, float da,
                                                           float sb, float db) noexcept {
  const __m256 minus_sa = _mm256_set1_ps(-sa), dav = _mm256_set1_ps(da);
  const __m256 minus_sb = _mm256_set1_ps(-sb), dbv = _mm256_set1_ps(db);
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 x = _mm256_loadu_ps(a + k), y = _mm256_loadu_ps(b + k);
    _mm256_storeu_ps(a + k, _mm256_fmadd_ps(minus_sa, y, _mm256_mul_ps(dav, x)));
    _mm256_storeu_ps(b + k, _mm256_fmadd_ps(minus_sb, x, _mm256_mul_ps(dbv, y)));
  }
  for (; k < n; ++k) {
    const float x = a[k], y = b[k];
    a[k] = da * x - sa * y;
    b[k] = db * y - sb * x;
  }
}

__attribute__((target("avx2,fma"))) inline float sum8(__m256 v) noexcept {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  return _mm_cvtss_f32(lo);
}

__attribute__((target("avx2,fma"))) void gram_avx2(const float* a, const float* b, std::size_t n,
                                                  float out[3]) noexcept {
  __m256 aa = _mm256_setzero_ps(), bb = _mm256_setzero_ps(), ab = _mm256_setzero_ps();
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 x = _mm256_loadu_ps(a + k), y = _mm256_loadu_ps(b + k);
    aa = _mm256_fmadd_ps(x, x, aa);
    bb = _mm256_fmadd_ps(y, y, bb);
    ab = _mm256_fmadd_ps(x, y, ab);
  }
  float saa = sum8(aa), sbb = sum8(bb), sab = sum8(ab);
  for (; k < n; ++k) {
    saa += a[k] * a[k];
    sbb += b[k] * b[k];
    sab += a[k] * b[k];
  }
  out[0] = saa;
  out[1] = sbb;
  out[2] = sab;
}

__attribute__((target("avx2,fma"))) void axpy_avx2(float s, const float* x, float* y, std::size_t n) noexcept {
  const __m256 sv = _mm256_set1_ps(s);
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    _mm256_storeu_ps(y + k, _mm256_fmadd_ps(sv, _mm256_loadu_ps(x + k), _mm256_loadu_ps(y + k)));
  }
  for (; k < n; ++k) y[k] += s * x[k];
}

__attribute__((target("avx2,fma"))) void axpy_then_add_scaled_avx2(float s, float* x, float* y, const float* d,
                                                                  float scale, std::size_t n) noexcept {
  const __m256 sv = _mm256_set1_ps(s), scalev = _mm256_set1_ps(scale);
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 v = _mm256_loadu_ps(x + k);
    _mm256_storeu_ps(y + k, _mm256_fmadd_ps(sv, v, _mm256_loadu_ps(y + k)));
    _mm256_storeu_ps(x + k, _mm256_fmadd_ps(scalev, _mm256_loadu_ps(d + k), v));
  }
  for (; k < n; ++k) {
    const float v = x[k];
    y[k] += s * v;
    x[k] = v + scale * d[k];
  }
}
#endif

bool has_avx2_fma() noexcept {
#if defined(ASGD_ROWS_X86) && !defined(ASGD_ROWS_TSAN)
  __builtin_cpu_init();  // may run before constructors (an ifunc resolver)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

}  // namespace

#if defined(ASGD_ROWS_X86) && !defined(ASGD_ROWS_TSAN)
#define ASGD_ROWS_PICK(fn) (has_avx2_fma() ? fn##_avx2 : fn##_generic)
#else
#define ASGD_ROWS_PICK(fn) fn##_generic
#endif

const char* simd_level() noexcept { return has_avx2_fma() ? "avx2+fma" : "generic"; }

// Each entry point is bound to one kernel: by the dynamic loader (ifunc) on
// ELF x86-64, else through a pointer chosen on first use. Not under
// AddressSanitizer: the loader runs the resolvers before the sanitizer has
// set up its shadow memory, and their instrumented code then faults.
#if defined(__SANITIZE_ADDRESS__)
#define ASGD_ROWS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASGD_ROWS_ASAN 1
#endif
#endif
#if defined(ASGD_ROWS_X86) && !defined(ASGD_ROWS_TSAN) && !defined(ASGD_ROWS_ASAN) && defined(__ELF__) && \
    defined(__GNUC__)
extern "C" {
// Resolvers: unmangled names for the ifunc attributes. Hidden, not static: clang mangles a static function's
// name even in extern "C", and the attribute then names nothing.
#define ASGD_ROWS_RESOLVER __attribute__((visibility("hidden")))
ASGD_ROWS_RESOLVER decltype(&load_generic) asgd_rows_pick_load() { return ASGD_ROWS_PICK(load); }
ASGD_ROWS_RESOLVER decltype(&add_scaled_generic) asgd_rows_pick_add_scaled() { return ASGD_ROWS_PICK(add_scaled); }
ASGD_ROWS_RESOLVER decltype(&bilinear_step_generic) asgd_rows_pick_bilinear_step() {
  return ASGD_ROWS_PICK(bilinear_step);
}
ASGD_ROWS_RESOLVER decltype(&dot_generic) asgd_rows_pick_dot() { return ASGD_ROWS_PICK(dot); }
ASGD_ROWS_RESOLVER decltype(&axpy_generic) asgd_rows_pick_axpy() { return ASGD_ROWS_PICK(axpy); }
ASGD_ROWS_RESOLVER decltype(&gram_generic) asgd_rows_pick_gram() { return ASGD_ROWS_PICK(gram); }
ASGD_ROWS_RESOLVER decltype(&axpy_then_add_scaled_generic) asgd_rows_pick_axpy_then_add_scaled() {
  return ASGD_ROWS_PICK(axpy_then_add_scaled);
}
}

void load(const float*, float*, std::size_t) noexcept __attribute__((ifunc("asgd_rows_pick_load")));
void add_scaled(float*, const float*, float, std::size_t) noexcept __attribute__((ifunc("asgd_rows_pick_add_scaled")));
void bilinear_step(float*, float*, std::size_t, float, float, float, float) noexcept
    __attribute__((ifunc("asgd_rows_pick_bilinear_step")));
float dot(const float*, const float*, std::size_t) noexcept __attribute__((ifunc("asgd_rows_pick_dot")));
void axpy(float, const float*, float*, std::size_t) noexcept __attribute__((ifunc("asgd_rows_pick_axpy")));
void gram(const float*, const float*, std::size_t, float*) noexcept __attribute__((ifunc("asgd_rows_pick_gram")));
void axpy_then_add_scaled(float, float*, float*, const float*, float, std::size_t) noexcept
    __attribute__((ifunc("asgd_rows_pick_axpy_then_add_scaled")));
#else

void load(const float* shared, float* out, std::size_t n) noexcept {
  static const auto fn = ASGD_ROWS_PICK(load);
  fn(shared, out, n);
}
void add_scaled(float* shared, const float* d, float scale, std::size_t n) noexcept {
  static const auto fn = ASGD_ROWS_PICK(add_scaled);
  fn(shared, d, scale, n);
}
void bilinear_step(float* a, float* b, std::size_t n, float sa, float da, float sb, float db) noexcept {
  static const auto fn = ASGD_ROWS_PICK(bilinear_step);
  fn(a, b, n, sa, da, sb, db);
}
float dot(const float* a, const float* b, std::size_t n) noexcept {
  static const auto fn = ASGD_ROWS_PICK(dot);
  return fn(a, b, n);
}
void axpy(float s, const float* x, float* y, std::size_t n) noexcept {
  static const auto fn = ASGD_ROWS_PICK(axpy);
  fn(s, x, y, n);
}
void gram(const float* a, const float* b, std::size_t n, float out[3]) noexcept {
  static const auto fn = ASGD_ROWS_PICK(gram);
  fn(a, b, n, out);
}
void axpy_then_add_scaled(float s, float* x, float* y, const float* d, float scale, std::size_t n) noexcept {
  static const auto fn = ASGD_ROWS_PICK(axpy_then_add_scaled);
  fn(s, x, y, d, scale, n);
}
#endif

}  // namespace asgd::rows
