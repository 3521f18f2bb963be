// Subnormal floats flushed to zero in the workers' arithmetic.
//
// L2 shrinking and decaying rates drive many parameters and their updates
// towards zero, and on x86 an operation with a subnormal operand or result
// can take a hundred cycles or more. Flushing them (x86 MXCSR FTZ and DAZ,
// AArch64 FPCR FZ) changes only values below FLT_MIN, about 1.2e-38, which
// no SGD step can tell from zero. Measured on this project's AMD EPYC (bench/
// RESULTS.md, "Subnormals"): mf with a strong L2 (1M ratings, k 32, -l2 0.3,
// 260 epochs, one thread) 4.41 s of SGD before, 4.11 s flushed; with
// subnormal factors from the start, 0.27 s against 0.16 s. Intel cores are
// said to pay more for subnormals (not measured here).
//
// The mode is per thread: the trainers set it in each worker for the run
// and restore it after (TrainerOptions::flush_denormals,
// BlockTrainOptions::flush_denormals), so what runs on a worker meanwhile
// runs flushed too: the problem's gradients, and the callbacks and
// checkpoint writes a worker makes (on_progress, on_step, after_updates).
// TBB tasks a worker starts run in its mode; threads a library starts on
// its own (OpenMP's, for Eigen's parallel GEMMs) keep theirs.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

namespace asgd {

class FlushDenormals {
 public:
  explicit FlushDenormals(bool on = true) noexcept : on_(on) {
    if (!on_) return;
#if defined(__x86_64__) || defined(_M_X64)
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | kFtz | kDaz);
#elif defined(__aarch64__)
    std::uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    saved_ = fpcr;
    fpcr |= kFz;
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
#endif
  }
  // Restores the two modes only: the exception flags raised meanwhile (overflow, invalid) stay raised.
  ~FlushDenormals() {
    if (!on_) return;
#if defined(__x86_64__) || defined(_M_X64)
    _mm_setcsr((_mm_getcsr() & ~(kFtz | kDaz)) | (static_cast<unsigned>(saved_) & (kFtz | kDaz)));
#elif defined(__aarch64__)
    std::uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    fpcr = (fpcr & ~kFz) | (saved_ & kFz);
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
#endif
  }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

  // Whether this thread flushes subnormals now (false where the mode is not known: other targets).
  static bool active() noexcept {
#if defined(__x86_64__) || defined(_M_X64)
    return (_mm_getcsr() & (kFtz | kDaz)) == (kFtz | kDaz);
#elif defined(__aarch64__)
    std::uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    return (fpcr & kFz) != 0;
#else
    return false;
#endif
  }

 private:
  static constexpr unsigned kFtz = 0x8000;  // MXCSR bit 15: results below FLT_MIN become 0
  static constexpr unsigned kDaz = 0x0040;  // MXCSR bit 6: subnormal operands read as 0
  static constexpr std::uint64_t kFz = std::uint64_t{1} << 24;  // FPCR.FZ
  bool on_;
  std::uint64_t saved_ = 0;
};

}  // namespace asgd
