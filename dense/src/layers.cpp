// The dense layer set: forward and backward on a minibatch, GEMMs by Eigen
// (and a direct convolution where that wins).
#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "asgd/dense/network.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::dense {
namespace {

using MatR = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapR = Eigen::Map<MatR>;
using CMapR = Eigen::Map<const MatR>;
using Vec = Eigen::Matrix<float, Eigen::Dynamic, 1>;
using MapV = Eigen::Map<Vec>;
using CMapV = Eigen::Map<const Vec>;

// Uniform in [-bound, bound].
void fill_uniform(float* p, std::size_t n, float bound, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-bound, bound);
  for (std::size_t i = 0; i < n; ++i) p[i] = u(rng);
}

// Fan-in/fan-out initialisation: He (uniform, gain sqrt(2)) when a ReLU
// follows, Xavier/Glorot (uniform) for the output layer.
float init_bound(std::size_t fan_in, std::size_t fan_out, bool last) {
  if (last) return std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
  return std::sqrt(6.0f / static_cast<float>(fan_in));
}

// The bias gradients, summed in an order fixed by the shapes alone. Eigen's
// rowwise()/colwise() sums peel their vector loops at the operands'
// alignment, so the same gradient came out with different rounding for
// differently aligned buffers (and runs of one seed differed between
// builds, with the heap's layout).
// (The direct kernels' weight gradients sum in the target's vector lanes,
// simd::kVec, so their order is fixed per build target.)
constexpr std::size_t kLanes = 16;  // the lanes of the bias gradients' fixed-order sums

// The sum of N lanes (a power of 2), added pairwise (l + N / 2, then l + N / 4, ...).
template <std::size_t N>
float sum_lanes(float (&lane)[N]) {
  static_assert(N > 0 && (N & (N - 1)) == 0);
  for (std::size_t width = N / 2; width > 0; width /= 2)
    for (std::size_t l = 0; l < width; ++l) lane[l] += lane[l + width];
  return lane[0];
}

// out[r] = sum of row r of a rows x cols row-major a: 16 lanes over the
// columns (lane j % 16), then sum_lanes.
void row_sums(const float* a, std::size_t rows, std::size_t cols, float* out) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* row = a + r * cols;
    float lane[kLanes] = {};
    std::size_t j = 0;
    for (; j + kLanes <= cols; j += kLanes)
      for (std::size_t l = 0; l < kLanes; ++l) lane[l] += row[j + l];
    for (std::size_t l = 0; j < cols; ++j, ++l) lane[l] += row[j];
    out[r] = sum_lanes(lane);
  }
}
// out[c] = sum of column c of a rows x cols row-major a, rows in order.
void column_sums(const float* a, std::size_t rows, std::size_t cols, float* out) {
  std::fill_n(out, cols, 0.0f);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) out[c] += a[r * cols + c];
}

// The direct convolutions' common parts: the target's vectors, short-row
// copies, the geometry, the padded input, and a dispatch on kernel width.
namespace simd {

// The target's own vector width. A wider GCC vector type than the target
// has is not split into registers but expanded piecewise (through memory):
// 16-lane vectors on AVX2 made the direct kernels 3-5 times slower than
// GEMM. kRegisters: how many VecN the target holds, from which the weight
// gradients' and the channel-lane forward's accumulator blocks are sized.
#if defined(__AVX512F__)
constexpr std::size_t kVec = 16;
constexpr int kRegisters = 32;
#elif defined(__AVX__)
constexpr std::size_t kVec = 8;
constexpr int kRegisters = 16;
#elif defined(__aarch64__)
constexpr std::size_t kVec = 4;
constexpr int kRegisters = 32;
#else
constexpr std::size_t kVec = 4;
constexpr int kRegisters = 16;
#endif
typedef float VecN __attribute__((vector_size(kVec * sizeof(float))));
typedef float VecHalf __attribute__((vector_size(kVec / 2 * sizeof(float))));

// Unaligned loads and stores. Out-parameters, not return values: a 64-byte
// vector returned by value changes the ABI without AVX-512 (GCC's -Wpsabi).
inline void load(VecN& v, const float* p) { std::memcpy(&v, p, sizeof v); }
inline void store(float* p, const VecN& v) { std::memcpy(p, &v, sizeof v); }

// GCC turns a copy or zeroing loop into a call of memcpy or memset of a
// run-time length; for LeNet-5's rows of 10 to 36 floats that call costs
// more than the copy (pool2's forward took 5.2 against 3.7 us per tile).
#if defined(__GNUC__) && !defined(__clang__)
#define ASGD_NO_LIBRARY_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define ASGD_NO_LIBRARY_LOOPS
#endif

// Copies count floats of a short row in half vectors (32 bytes with
// AVX-512: whole 64-byte ones, each split across two cache lines when
// unaligned, were slower for rows of 28), the last one overlapping the one
// before.
ASGD_NO_LIBRARY_LOOPS inline void copy_row(float* __restrict dst, const float* __restrict src, std::size_t count) {
  constexpr std::size_t kHalf = kVec / 2;
  if (count < kHalf) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = src[i];
    return;
  }
  VecHalf v;
  for (std::size_t i = 0; i + kHalf < count; i += kHalf) {
    std::memcpy(&v, src + i, sizeof v);
    std::memcpy(dst + i, &v, sizeof v);
  }
  std::memcpy(&v, src + count - kHalf, sizeof v);
  std::memcpy(dst + count - kHalf, &v, sizeof v);
}

// Zeroes count floats: whole vectors, the last one overlapping.
ASGD_NO_LIBRARY_LOOPS inline void zero_row(float* dst, std::size_t count) {
  if (count < kVec) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = 0.0f;
    return;
  }
  const VecN zero{};
  for (std::size_t i = 0; i + kVec < count; i += kVec) store(dst + i, zero);
  store(dst + count - kVec, zero);
}

// A convolution's sizes, and its input padded for the direct kernels:
// xp [ci][s][h + 2 pad][stride], each row zeros, then the image row at
// column pad. The row kernels' stride is row() (whole vectors of outputs
// plus k - 1), the channel-lane kernels' cols() (w + 2 pad).
struct Geometry {
  std::size_t in_c, out_c, k, pad, h, w, oh, ow;
  std::size_t K() const { return in_c * k * k; }
  std::size_t rows() const { return h + 2 * pad; }
  std::size_t cols() const { return w + 2 * pad; }
  std::size_t ow_padded() const { return (ow + kVec - 1) / kVec * kVec; }
  std::size_t row() const { return ow_padded() + k - 1; }
  std::size_t padded_input(std::size_t n, std::size_t stride) const { return in_c * n * rows() * stride; }
};

void pad_input(const float* in, float* xp, const Geometry& g, std::size_t n, std::size_t stride) {
  for (std::size_t p = 0; p < g.in_c * n; ++p) {  // p = (ci, s)
    float* dst = xp + p * g.rows() * stride;
    const float* src = in + p * g.h * g.w;
    zero_row(dst, g.pad * stride);
    for (std::size_t y = 0; y < g.h; ++y) {
      float* r = dst + (y + g.pad) * stride;
      zero_row(r, stride);
      copy_row(r + g.pad, src + y * g.w, g.w);
    }
    zero_row(dst + (g.h + g.pad) * stride, g.pad * stride);
  }
}

// f(std::integral_constant<int, k>{}) for the kernel widths the direct
// kernels are instantiated for.
constexpr std::size_t kMaxKernel = 5;
template <class F>
void with_kernel_width(std::size_t k, F&& f) {
  switch (k) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    default:  // Conv2d::path() admits no other
      throw RuntimeError(fmt::format("conv2d: no direct kernel for {}x{}", k, k));
  }
}

}  // namespace simd

// A direct convolution for layers whose im2col matrix has few rows
// (K = in_c * k * k <= direct::kMaxK, as LeNet-5's first layer: 1 x 5 x 5):
// there a GEMM spends its time packing a K x M operand it then uses in a
// K-long rank update, and the im2col copy itself costs as much. Measured
// on LeNet-5's tiles of 16 images, one core (bench/RESULTS.md): its first
// layer's forward went from 91 to 59 us and its backward from 120 to 56 us.
// Its second (K = 150, rows of 10) lost with these row vectors (forward 115
// against GEMM's 95 us) and takes by_channel below instead.
//
// Vectors of kVec floats along the output row (GCC/Clang vector types);
// the input is copied once per tile into zero-padded rows of
// kVec * ceil(OW / kVec) + k - 1 floats, so every load is in bounds.
namespace direct {

using namespace simd;
constexpr std::size_t kMaxK = 32;  // im2col rows up to which the direct path runs
static_assert(kMaxKernel * kMaxKernel <= kMaxK && (kMaxKernel + 1) * (kMaxKernel + 1) > kMaxK);

// out[c][s][oy][ox] = b[c] + sum over (ci, ky, kx) of w[c][ci][ky][kx] xp[ci][s][oy + ky][ox + kx]
// for the G output channels from c0: G vector accumulators per kVec outputs.
// A row's last vector ends at its last output (overlapping the one before,
// which it recomputes bit for bit), so every store is a whole vector; rows
// shorter than a vector are stored float by float.
template <int G>
void forward_channels(const float* xp, const float* w, const float* b, float* out, const Geometry& g,
                      std::size_t n, std::size_t c0) {
  const std::size_t K = g.K();
  for (std::size_t s = 0; s < n; ++s)
    for (std::size_t oy = 0; oy < g.oh; ++oy)
      for (std::size_t next = 0; next < g.ow; next += kVec) {
        const std::size_t x = next + kVec > g.ow && g.ow >= kVec ? g.ow - kVec : next;
        VecN acc[G];
        for (int c = 0; c < G; ++c) acc[c] = VecN{} + b[c0 + c];
        for (std::size_t ci = 0; ci < g.in_c; ++ci)
          for (std::size_t ky = 0; ky < g.k; ++ky) {
            const float* in = xp + ((ci * n + s) * g.rows() + oy + ky) * g.row() + x;
            const float* wr = w + c0 * K + (ci * g.k + ky) * g.k;
            for (std::size_t kx = 0; kx < g.k; ++kx) {
              VecN v;
              load(v, in + kx);
              for (int c = 0; c < G; ++c) acc[c] += wr[c * K + kx] * v;
            }
          }
        for (int c = 0; c < G; ++c) {
          float* o = out + (((c0 + c) * n + s) * g.oh + oy) * g.ow + x;
          if (g.ow >= kVec) {
            store(o, acc[c]);
          } else {
            float lane[kVec];
            store(lane, acc[c]);
            for (std::size_t l = 0; l < g.ow; ++l) o[l] = lane[l];
          }
        }
      }
}

// 6 output channels' accumulators per vector of outputs.
void forward(const float* xp, const float* w, const float* b, float* out, const Geometry& g, std::size_t n) {
  std::size_t c = 0;
  for (; c + 6 <= g.out_c; c += 6) forward_channels<6>(xp, w, b, out, g, n, c);
  for (; c < g.out_c; ++c) forward_channels<1>(xp, w, b, out, g, n, c);
}

// dY [c][s][oh][ow] -> dyp [c][s][oh][ow_padded()], zeros past ow (the
// row's last vector zeroed, then the row copied over it).
void pad_output_gradient(const float* dy, float* dyp, const Geometry& g, std::size_t n) {
  const std::size_t owp = g.ow_padded();
  const VecN zero{};
  for (std::size_t r = 0; r < g.out_c * n * g.oh; ++r) {
    store(dyp + (r + 1) * owp - kVec, zero);
    copy_row(dyp + r * owp, dy + r * g.ow, g.ow);
  }
}

// dw[c][ci][ky][kx] = sum over (s, oy, ox) of dY[c][s][oy][ox] xp[ci][s][oy + ky][ox + kx], for the G
// channels from c0: G x KX vector accumulators per (ci, ky), their lanes added pairwise at the end.
template <int G, int KX>
void weight_gradient_channels(const float* xp, const float* dyp, float* dw, const Geometry& g, std::size_t n,
                              std::size_t c0) {
  const std::size_t K = g.K(), owp = g.ow_padded();
  for (std::size_t ci = 0; ci < g.in_c; ++ci)
    for (std::size_t ky = 0; ky < g.k; ++ky) {
      VecN acc[G][KX] = {};
      for (std::size_t s = 0; s < n; ++s)
        for (std::size_t oy = 0; oy < g.oh; ++oy) {
          const float* in = xp + ((ci * n + s) * g.rows() + oy + ky) * g.row();
          for (std::size_t x = 0; x < owp; x += kVec) {
            VecN d[G];
            for (int c = 0; c < G; ++c) load(d[c], dyp + (((c0 + c) * n + s) * g.oh + oy) * owp + x);
            for (int kx = 0; kx < KX; ++kx) {
              VecN v;
              load(v, in + x + static_cast<std::size_t>(kx));
              for (int c = 0; c < G; ++c) acc[c][kx] += d[c] * v;
            }
          }
        }
      for (int c = 0; c < G; ++c)
        for (int kx = 0; kx < KX; ++kx) {
          float lane[kVec];
          store(lane, acc[c][kx]);
          dw[(c0 + c) * K + (ci * g.k + ky) * g.k + static_cast<std::size_t>(kx)] = sum_lanes(lane);
        }
    }
}

// About half the registers as accumulators, G = (kRegisters / 2) / k
// channels at a time (16 / k with AVX-512, where it was measured).
void weight_gradient(const float* xp, const float* dyp, float* dw, const Geometry& g, std::size_t n) {
  with_kernel_width(g.k, [&](auto width) {
    constexpr int KX = decltype(width)::value, G = std::max(1, kRegisters / 2 / KX);
    std::size_t c = 0;
    for (; c + G <= g.out_c; c += G) weight_gradient_channels<G, KX>(xp, dyp, dw, g, n, c);
    for (; c < g.out_c; ++c) weight_gradient_channels<1, KX>(xp, dyp, dw, g, n, c);
  });
}

}  // namespace direct

// A direct convolution with the output channels as the vector lanes, for
// layers with K > direct::kMaxK and a multiple of 16 output channels (as
// LeNet-5's second layer: 6 -> 16 channels, 5 x 5, rows of 10 outputs, too
// short for the row vectors above). Forward and weight gradient broadcast
// one input float against kVec channels' weights or output gradients; the
// input gradient takes the tile's images as its lanes instead, so no tap is
// spent on padding (and no lane, when the tile is a multiple of kVec). On
// LeNet-5's tiles of 16 images, one core (bench/RESULTS.md): forward 84 ->
// 41 us, backward 157 -> 108 us against im2col + GEMM; the forward and the
// weight gradient run near the two 16-lane FMAs per cycle the core can issue.
namespace by_channel {

using namespace simd;
constexpr std::size_t kChannels = 16;  // the path takes a multiple of 16 output channels (whatever kVec)
static_assert(kChannels % kVec == 0);
// Only where it was measured to win: with AVX2 (8 lanes, FMAs without a
// broadcast operand) LeNet-5's second layer took 93-112 us forward and
// 181-213 us backward this way, against im2col + GEMM's 93-98 and 145-148.
constexpr bool kPays = kVec >= 16;
constexpr int kMaxPixels = kRegisters >= 32 ? 12 : 10;  // forward: output pixels per block
constexpr int kMaxGroup = 6;                            // input gradient: input channels per block

// wt[cg][t][c] = w[kVec cg + c][t] for the taps t = (ci, ky, kx): each
// tap's weights of kVec output channels as one vector.
void transpose_weights(const float* w, float* wt, const Geometry& g) {
  const std::size_t K = g.K();
  for (std::size_t cg = 0; cg < g.out_c / kVec; ++cg)
    for (std::size_t t = 0; t < K; ++t)
      for (std::size_t c = 0; c < kVec; ++c) wt[(cg * K + t) * kVec + c] = w[(cg * kVec + c) * K + t];
}

// Outputs (cg, s, oy, ox0 .. ox0 + P): P accumulators of kVec channels,
// transposed on the way out.
template <int P>
void forward_pixels(const float* xp, const float* wt, const float* b, float* out, const Geometry& g, std::size_t n,
                    std::size_t cg, std::size_t s, std::size_t oy, std::size_t ox0) {
  const std::size_t K = g.K(), cols = g.cols();
  VecN bias;
  load(bias, b + cg * kVec);
  VecN acc[P];
  for (int p = 0; p < P; ++p) acc[p] = bias;
  for (std::size_t ci = 0; ci < g.in_c; ++ci)
    for (std::size_t ky = 0; ky < g.k; ++ky) {
      const float* in = xp + ((ci * n + s) * g.rows() + oy + ky) * cols + ox0;
      const float* wr = wt + (cg * K + (ci * g.k + ky) * g.k) * kVec;
      for (std::size_t kx = 0; kx < g.k; ++kx) {
        VecN wv;
        load(wv, wr + kx * kVec);
        for (int p = 0; p < P; ++p) acc[p] += wv * in[static_cast<std::size_t>(p) + kx];
      }
    }
  float lane[P][kVec];
  std::memcpy(lane, acc, sizeof lane);
  for (std::size_t c = 0; c < kVec; ++c) {
    float* o = out + (((cg * kVec + c) * n + s) * g.oh + oy) * g.ow + ox0;
    for (int p = 0; p < P; ++p) o[p] = lane[p][c];
  }
}

void forward(const float* xp, const float* wt, const float* b, float* out, const Geometry& g, std::size_t n) {
  static constexpr auto pixels = []<std::size_t... P>(std::index_sequence<P...>) {
    return std::array{&forward_pixels<static_cast<int>(P) + 1>...};
  }(std::make_index_sequence<kMaxPixels>{});
  // Rows in blocks as equal as can be (10 -> 10; 28 -> 10 + 9 + 9), not 12 + 12 + 4.
  const std::size_t blocks = (g.ow + kMaxPixels - 1) / kMaxPixels, base = g.ow / blocks, longer = g.ow % blocks;
  for (std::size_t cg = 0; cg < g.out_c / kVec; ++cg)
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t oy = 0; oy < g.oh; ++oy)
        for (std::size_t i = 0, ox = 0; i < blocks; ++i) {
          const std::size_t P = base + (i < longer ? 1 : 0);
          pixels[P - 1](xp, wt, b, out, g, n, cg, s, oy, ox);
          ox += P;
        }
}

// dyt[cg][(s, oy, ox)][c] = dY[kVec cg + c][s][oy][ox].
void transpose_output_gradient(const float* dy, float* dyt, const Geometry& g, std::size_t n) {
  const std::size_t M = n * g.oh * g.ow;
  for (std::size_t cg = 0; cg < g.out_c / kVec; ++cg)
    for (std::size_t c = 0; c < kVec; ++c) {
      const float* src = dy + (cg * kVec + c) * M;
      float* dst = dyt + cg * M * kVec + c;
      for (std::size_t i = 0; i < M; ++i) dst[i * kVec] = src[i];
    }
}

// dw[kVec cg + c][ci][ky][kx] for ky = ky0 .. ky0 + KY: sum over (s, oy, ox)
// of dyt[cg][(s, oy, ox)][c] * xp[ci][s][oy + ky][ox + kx], KY x KX
// accumulators per image, added into `total` after each (so that no float
// sums more than one image's oh * ow products: with one sum over a tile of
// 256 images the error reached 3e-4, twice GEMM's).
// Not inlined: inlined into its caller's loops (GCC 12) it spilled, and the
// layer's backward took 131 us instead of 108.
template <int KX, int KY>
__attribute__((noinline)) void weight_gradient_rows(const float* xp, const float* dyt, float* dw, const Geometry& g,
                                                    std::size_t n, std::size_t cg, std::size_t ci, std::size_t ky0) {
  const std::size_t K = g.K(), cols = g.cols(), M = n * g.oh * g.ow;
  float total[KY][KX][kVec] = {};
  for (std::size_t s = 0; s < n; ++s) {
    VecN acc[KY][KX] = {};
    for (std::size_t oy = 0; oy < g.oh; ++oy) {
      const float* in = xp + ((ci * n + s) * g.rows() + oy + ky0) * cols;
      const float* d0 = dyt + (cg * M + (s * g.oh + oy) * g.ow) * kVec;
      for (std::size_t ox = 0; ox < g.ow; ++ox) {
        VecN d;
        load(d, d0 + ox * kVec);
        for (int ky = 0; ky < KY; ++ky)
          for (int kx = 0; kx < KX; ++kx)
            acc[ky][kx] += d * in[static_cast<std::size_t>(ky) * cols + ox + static_cast<std::size_t>(kx)];
      }
    }
    for (int ky = 0; ky < KY; ++ky)
      for (int kx = 0; kx < KX; ++kx) {
        VecN t;
        load(t, total[ky][kx]);
        store(total[ky][kx], t + acc[ky][kx]);
      }
  }
  for (int ky = 0; ky < KY; ++ky)
    for (int kx = 0; kx < KX; ++kx) {
      const std::size_t t = (ci * g.k + ky0 + static_cast<std::size_t>(ky)) * g.k + static_cast<std::size_t>(kx);
      for (std::size_t c = 0; c < kVec; ++c) dw[(cg * kVec + c) * K + t] = total[ky][kx][c];
    }
}

// Kernel rows in blocks of KY (all k with AVX-512: k x k <= 25
// accumulators), the remainder one row at a time.
void weight_gradient(const float* xp, const float* dyt, float* dw, const Geometry& g, std::size_t n) {
  with_kernel_width(g.k, [&](auto width) {
    constexpr int KX = decltype(width)::value, KY = std::max(1, std::min(KX, (kRegisters - 4) / KX));
    for (std::size_t cg = 0; cg < g.out_c / kVec; ++cg)
      for (std::size_t ci = 0; ci < g.in_c; ++ci) {
        std::size_t ky = 0;
        for (; ky + KY <= g.k; ky += KY) weight_gradient_rows<KX, KY>(xp, dyt, dw, g, n, cg, ci, ky);
        for (; ky < g.k; ++ky) weight_gradient_rows<KX, 1>(xp, dyt, dw, g, n, cg, ci, ky);
      }
  });
}

// The input gradient of images s0 .. s0 + m (m <= kVec), one image per lane:
// dyi[c][oy][ox][l] = dY[c][s0 + l][oy][ox] (zeros for l >= m); then
// dxi[ci][y][x][l] = sum over (c, ky, kx) of w[c][ci][ky][kx] dyi[c][y + pad - ky][x + pad - kx][l],
// over the taps whose output is inside the image only; then back to din.
void spread_output_gradient(const float* dy, float* dyi, const Geometry& g, std::size_t n, std::size_t s0,
                            std::size_t m) {
  const std::size_t P = g.oh * g.ow;
  // Lanes past m are never read back, but zeros keep stale denormals out of
  // the FMAs; with m = kVec every lane is written below.
  if (m < kVec) std::fill_n(dyi, g.out_c * P * kVec, 0.0f);
  for (std::size_t c = 0; c < g.out_c; ++c)
    for (std::size_t l = 0; l < m; ++l) {
      const float* src = dy + (c * n + s0 + l) * P;
      float* dst = dyi + c * P * kVec + l;
      for (std::size_t p = 0; p < P; ++p) dst[p * kVec] = src[p];
    }
}

template <int G>
void input_gradient_channels(const float* w, const float* dyi, float* dxi, const Geometry& g, std::size_t ci0) {
  const std::size_t K = g.K(), kk = g.k * g.k, P = g.oh * g.ow;
  for (std::size_t y = 0; y < g.h; ++y) {
    // Padded row y + pad meets output rows y + pad - ky in [0, oh).
    const std::size_t iy = y + g.pad;
    const std::size_t ky0 = iy >= g.oh ? iy - g.oh + 1 : 0, ky1 = std::min(g.k - 1, iy);
    for (std::size_t x = 0; x < g.w; ++x) {
      const std::size_t ix = x + g.pad;
      const std::size_t kx0 = ix >= g.ow ? ix - g.ow + 1 : 0, kx1 = std::min(g.k - 1, ix);
      VecN acc[G] = {};
      for (std::size_t ky = ky0; ky <= ky1; ++ky)
        for (std::size_t kx = kx0; kx <= kx1; ++kx) {
          const float* d0 = dyi + ((iy - ky) * g.ow + ix - kx) * kVec;
          const float* w0 = w + (ci0 * g.k + ky) * g.k + kx;
          for (std::size_t c = 0; c < g.out_c; ++c) {
            VecN d;
            load(d, d0 + c * P * kVec);
            for (int j = 0; j < G; ++j) acc[j] += w0[c * K + static_cast<std::size_t>(j) * kk] * d;
          }
        }
      for (int j = 0; j < G; ++j) store(dxi + (((ci0 + static_cast<std::size_t>(j)) * g.h + y) * g.w + x) * kVec, acc[j]);
    }
  }
}

void gather_input_gradient(const float* dxi, float* din, const Geometry& g, std::size_t n, std::size_t s0,
                           std::size_t m) {
  const std::size_t P = g.h * g.w;
  for (std::size_t ci = 0; ci < g.in_c; ++ci)
    for (std::size_t l = 0; l < m; ++l) {
      const float* src = dxi + ci * P * kVec + l;
      float* dst = din + (ci * n + s0 + l) * P;
      for (std::size_t p = 0; p < P; ++p) dst[p] = src[p * kVec];
    }
}

// dyi and dxi: out_c * oh * ow * kVec and in_c * h * w * kVec floats.
void input_gradient(const float* w, const float* dy, float* din, float* dyi, float* dxi, const Geometry& g,
                    std::size_t n) {
  static constexpr auto channels = []<std::size_t... G>(std::index_sequence<G...>) {
    return std::array{&input_gradient_channels<static_cast<int>(G) + 1>...};
  }(std::make_index_sequence<kMaxGroup>{});
  for (std::size_t s0 = 0; s0 < n; s0 += kVec) {
    const std::size_t m = std::min(kVec, n - s0);
    spread_output_gradient(dy, dyi, g, n, s0, m);
    for (std::size_t ci = 0; ci < g.in_c; ci += kMaxGroup)
      channels[std::min<std::size_t>(kMaxGroup, g.in_c - ci) - 1](w, dyi, dxi, g, ci);
    gather_input_gradient(dxi, din, g, n, s0, m);
  }
}

}  // namespace by_channel

class Conv2d final : public Layer {
 public:
  Conv2d(std::size_t in_c, std::size_t out_c, std::size_t k, std::size_t pad)
      : in_c_(in_c), out_c_(out_c), k_(k), pad_(pad) {
    if (in_c == 0 || out_c == 0 || k == 0) throw InputError("conv2d: channels and kernel must be positive");
  }
  std::string describe() const override {
    static constexpr const char* kPathNames[] = {"direct, rows", "direct, channels", "im2col + GEMM"};
    return describe_as(kPathNames[static_cast<int>(path())]);
  }
  std::string describe_on_gpu() const override { return describe_as("im2col + SGEMM"); }
  Shape output(Shape in) const override {
    if (in.c != in_c_) throw InputError(fmt::format("conv2d: expected {} input channels, got {}", in_c_, in.c));
    if (in.h + 2 * pad_ < k_ || in.w + 2 * pad_ < k_)
      throw InputError(fmt::format("conv2d: input {}x{} smaller than the {}x{} kernel", in.h, in.w, k_, k_));
    return {out_c_, in.h + 2 * pad_ - k_ + 1, in.w + 2 * pad_ - k_ + 1};
  }
  void declare(Layout& layout, const std::string& prefix, Shape in) override {
    in_ = in;
    out_ = output(in);
    layout.add(prefix + ".weight", {out_c_, in_c_ * k_ * k_});
    layout.add(prefix + ".bias", {out_c_});
    w_ = layout[prefix + ".weight"].offset;
    b_ = layout[prefix + ".bias"].offset;
  }
  bool has_params() const noexcept override { return true; }
  LayerSpec spec() const override {
    return {LayerSpec::Kind::conv2d, in_, out_, k_, pad_, w_, b_};
  }
  Takes takes() const noexcept override { return Takes::spatial; }
  void initialize(float* params, std::mt19937_64& rng, bool last) const override {
    const std::size_t kk = in_c_ * k_ * k_;
    fill_uniform(params + w_, out_c_ * kk, init_bound(kk, out_c_ * k_ * k_, last), rng);
    std::fill_n(params + b_, out_c_, 0.0f);
  }

  void forward(const float* params, const float* in, float* out, std::size_t n, Scratch& s) const override {
    const std::size_t K = in_c_ * k_ * k_, M = n * out_.h * out_.w;
    switch (path()) {
      case Path::rows: {
        const simd::Geometry g = geometry();
        float* xp = s.get(s.a, g.padded_input(n, g.row()));  // kept for backward
        simd::pad_input(in, xp, g, n, g.row());
        direct::forward(xp, params + w_, params + b_, out, g, n);
        return;
      }
      case Path::channels: {
        const simd::Geometry g = geometry();
        const float* xp = in;
        if (pad_ > 0) {  // kept for backward
          float* padded = s.get(s.a, g.padded_input(n, g.cols()));
          simd::pad_input(in, padded, g, n, g.cols());
          xp = padded;
        }
        float* wt = s.get(s.b, out_c_ * K);
        by_channel::transpose_weights(params + w_, wt, g);
        by_channel::forward(xp, wt, params + b_, out, g, n);
        return;
      }
      case Path::gemm:
        break;
    }
    float* col = s.get(s.a, K * M);
    im2col(in, col, n);
    CMapR W(params + w_, static_cast<Eigen::Index>(out_c_), static_cast<Eigen::Index>(K));
    CMapV b(params + b_, static_cast<Eigen::Index>(out_c_));
    MapR Y(out, static_cast<Eigen::Index>(out_c_), static_cast<Eigen::Index>(M));
    Y.noalias() = W * CMapR(col, static_cast<Eigen::Index>(K), static_cast<Eigen::Index>(M));
    Y.colwise() += b;
  }

  void backward(const float* params, const float* in, const float*, const float* dout, float* din, float* grad,
                std::size_t n, Scratch& s) const override {
    const std::size_t K = in_c_ * k_ * k_, M = n * out_.h * out_.w;
    CMapR dY(dout, static_cast<Eigen::Index>(out_c_), static_cast<Eigen::Index>(M));
    const Path which = path();
    if (which == Path::channels) {
      const simd::Geometry g = geometry();
      const std::size_t dyt_size = out_c_ * M, dyi_size = out_c_ * out_.h * out_.w * simd::kVec;
      float* dyt = s.get(s.b, dyt_size + dyi_size + in_c_ * in_.h * in_.w * simd::kVec);
      by_channel::transpose_output_gradient(dout, dyt, g, n);
      const float* xp = pad_ > 0 ? s.a.data() : in;  // s.a: forward's padded input
      by_channel::weight_gradient(xp, dyt, grad + w_, g, n);
      row_sums(dout, out_c_, M, grad + b_);
      float* dyi = dyt + dyt_size;
      if (din != nullptr) by_channel::input_gradient(params + w_, dout, din, dyi, dyi + dyi_size, g, n);
      return;
    }
    if (which == Path::rows) {
      const simd::Geometry g = geometry();
      float* dyp = s.get(s.b, out_c_ * n * out_.h * g.ow_padded());
      direct::pad_output_gradient(dout, dyp, g, n);
      direct::weight_gradient(s.a.data(), dyp, grad + w_, g, n);  // s.a: the padded input of forward
    } else {
      const float* col = s.a.data();  // im2col(in) from the forward pass
      CMapR C(col, static_cast<Eigen::Index>(K), static_cast<Eigen::Index>(M));
      MapR dW(grad + w_, static_cast<Eigen::Index>(out_c_), static_cast<Eigen::Index>(K));
      dW.noalias() = dY * C.transpose();
    }
    row_sums(dout, out_c_, M, grad + b_);
    if (din == nullptr) return;
    float* dcol = s.get(s.b, K * M);
    CMapR W(params + w_, static_cast<Eigen::Index>(out_c_), static_cast<Eigen::Index>(K));
    MapR dC(dcol, static_cast<Eigen::Index>(K), static_cast<Eigen::Index>(M));
    dC.noalias() = W.transpose() * dY;
    col2im(dcol, din, n);
  }

 private:
  std::string describe_as(const char* kernel) const {
    return fmt::format("conv {}->{} {}x{} pad {} ({})", in_c_, out_c_, k_, k_, pad_, kernel);
  }
  // col[(ci, ky, kx)][(s, oy, ox)] = in[ci][s][oy + ky - pad][ox + kx - pad] (0 outside).
  void im2col(const float* in, float* col, std::size_t n) const {
    const std::size_t H = in_.h, Wd = in_.w, OH = out_.h, OW = out_.w;
    const std::ptrdiff_t pad = static_cast<std::ptrdiff_t>(pad_);
    for (std::size_t ci = 0; ci < in_c_; ++ci)
      for (std::size_t ky = 0; ky < k_; ++ky)
        for (std::size_t kx = 0; kx < k_; ++kx) {
          float* row = col + ((ci * k_ + ky) * k_ + kx) * n * OH * OW;
          // ox range whose source column is inside the image.
          const std::ptrdiff_t dx = static_cast<std::ptrdiff_t>(kx) - pad;
          const std::size_t x0 = static_cast<std::size_t>(std::max<std::ptrdiff_t>(0, -dx));
          const std::size_t x1 = static_cast<std::size_t>(
              std::clamp<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(Wd) - dx, 0, static_cast<std::ptrdiff_t>(OW)));
          for (std::size_t s = 0; s < n; ++s) {
            const float* plane = in + (ci * n + s) * H * Wd;
            for (std::size_t oy = 0; oy < OH; ++oy, row += OW) {
              const std::ptrdiff_t iy = static_cast<std::ptrdiff_t>(oy + ky) - pad;
              if (iy < 0 || iy >= static_cast<std::ptrdiff_t>(H) || x0 >= x1) {
                std::fill_n(row, OW, 0.0f);
                continue;
              }
              std::fill(row, row + x0, 0.0f);
              std::memcpy(row + x0, plane + static_cast<std::size_t>(iy) * Wd + (x0 + dx), (x1 - x0) * sizeof(float));
              std::fill(row + x1, row + OW, 0.0f);
            }
          }
        }
  }
  // The adjoint of im2col: din[ci][s][iy][ix] = sum of the col entries it fed.
  void col2im(const float* col, float* din, std::size_t n) const {
    const std::size_t H = in_.h, Wd = in_.w, OH = out_.h, OW = out_.w;
    const std::ptrdiff_t pad = static_cast<std::ptrdiff_t>(pad_);
    std::fill_n(din, in_c_ * n * H * Wd, 0.0f);
    for (std::size_t ci = 0; ci < in_c_; ++ci)
      for (std::size_t ky = 0; ky < k_; ++ky)
        for (std::size_t kx = 0; kx < k_; ++kx) {
          const float* row = col + ((ci * k_ + ky) * k_ + kx) * n * OH * OW;
          const std::ptrdiff_t dx = static_cast<std::ptrdiff_t>(kx) - pad;
          const std::size_t x0 = static_cast<std::size_t>(std::max<std::ptrdiff_t>(0, -dx));
          const std::size_t x1 = static_cast<std::size_t>(
              std::clamp<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(Wd) - dx, 0, static_cast<std::ptrdiff_t>(OW)));
          for (std::size_t s = 0; s < n; ++s) {
            float* plane = din + (ci * n + s) * H * Wd;
            for (std::size_t oy = 0; oy < OH; ++oy, row += OW) {
              const std::ptrdiff_t iy = static_cast<std::ptrdiff_t>(oy + ky) - pad;
              if (iy < 0 || iy >= static_cast<std::ptrdiff_t>(H)) continue;
              float* dst = plane + static_cast<std::size_t>(iy) * Wd;
              for (std::size_t ox = x0; ox < x1; ++ox) dst[ox + dx] += row[ox];
            }
          }
        }
  }

  // Which kernels run: direct with rows as vectors (K <= 32), direct with
  // output channels as vectors (a multiple of 16 of them, on targets where
  // that pays), or im2col + GEMM.
  enum class Path { rows, channels, gemm };
  Path path() const noexcept {
    if (k_ > simd::kMaxKernel) return Path::gemm;
    if (in_c_ * k_ * k_ <= direct::kMaxK) return Path::rows;
    return by_channel::kPays && out_c_ % by_channel::kChannels == 0 ? Path::channels : Path::gemm;
  }
  simd::Geometry geometry() const noexcept { return {in_c_, out_c_, k_, pad_, in_.h, in_.w, out_.h, out_.w}; }

  std::size_t in_c_, out_c_, k_, pad_;
  Shape out_{};
  std::size_t w_ = 0, b_ = 0;
};

class MaxPool2 final : public Layer {
 public:
  std::string describe() const override { return "max-pool 2x2"; }
  LayerSpec spec() const override { return {LayerSpec::Kind::max_pool2, in_, output(in_)}; }
  Takes takes() const noexcept override { return Takes::spatial; }
  Shape output(Shape in) const override {
    if (in.h % 2 != 0 || in.w % 2 != 0)
      throw InputError(fmt::format("max-pool 2x2: input {}x{} is not even", in.h, in.w));
    return {in.c, in.h / 2, in.w / 2};
  }
  void declare(Layout&, const std::string&, Shape in) override { in_ = in; }
  // Remembers which of the four inputs won (0..3: top-left, top-right,
  // bottom-left, bottom-right; the first on ties) for backward.
  void forward(const float*, const float* in, float* out, std::size_t n, Scratch& s) const override {
    const std::size_t rows = in_.c * n * (in_.h / 2), W = in_.w, m = rows * (W / 2);
    if (s.choice.size() < m) s.choice.resize(m);
    // The tops and the bottoms of all windows, each as one array.
    float* tops = s.get(s.a, 2 * rows * W);
    float* bottoms = tops + rows * W;
    split_rows(in, tops, bottoms, rows, W);
    pool(tops, bottoms, out, s.choice.data(), m);
  }
  void backward(const float*, const float*, const float*, const float* dout, float* din, float*, std::size_t n,
                Scratch& s) const override {
    if (din == nullptr) return;
    const std::size_t rows = in_.c * n * (in_.h / 2), W = in_.w;
    float* tops = s.get(s.a, 2 * rows * W);
    float* bottoms = tops + rows * W;
    unpool(dout, s.choice.data(), tops, bottoms, rows * (W / 2));
    join_rows(tops, bottoms, din, rows, W);
  }

 private:
  // Output row r (of all planes: a [C][n][H][W] activation's planes are
  // contiguous) pools input rows 2r and 2r + 1, and its rows are only 14 or
  // 5 wide in LeNet-5: too short for vectors, and the scalar remainder
  // branches on the data (mispredicted about half the time; this layer was
  // 20 % of a training epoch). So the rows are first copied apart, the
  // windows' top rows into one array and their bottom rows into another,
  // after which window i is tops[2i, 2i + 1] over bottoms[2i, 2i + 1] and a
  // single flat loop over all windows vectorizes (7 to 19 times faster).
  static void split_rows(const float* in, float* tops, float* bottoms, std::size_t rows, std::size_t W) {
    for (std::size_t r = 0; r < rows; ++r) {
      simd::copy_row(tops + r * W, in + 2 * r * W, W);
      simd::copy_row(bottoms + r * W, in + (2 * r + 1) * W, W);
    }
  }
  static void join_rows(const float* tops, const float* bottoms, float* din, std::size_t rows, std::size_t W) {
    for (std::size_t r = 0; r < rows; ++r) {
      simd::copy_row(din + 2 * r * W, tops + r * W, W);
      simd::copy_row(din + (2 * r + 1) * W, bottoms + r * W, W);
    }
  }
  static void pool(const float* __restrict tops, const float* __restrict bottoms, float* __restrict out,
                   std::uint8_t* __restrict choice, std::size_t m) {
    // The first maximum wins a tie; a NaN anywhere in the window wins (as PyTorch's max-pool): a NaN activation
    // reaches the loss, which stops the run, instead of vanishing unless it was a window's first value.
    for (std::size_t i = 0; i < m; ++i) {
      const float a = tops[2 * i], b = tops[2 * i + 1], c = bottoms[2 * i], d = bottoms[2 * i + 1];
      const bool right_top = b > a || b != b, right_bottom = d > c || d != d;
      const float top = right_top ? b : a, bottom = right_bottom ? d : c;
      const bool lower = bottom > top || bottom != bottom;
      out[i] = lower ? bottom : top;
      choice[i] = lower ? (right_bottom ? 3 : 2) : (right_top ? 1 : 0);
    }
  }
  static void unpool(const float* __restrict dout, const std::uint8_t* __restrict choice, float* __restrict tops,
                     float* __restrict bottoms, std::size_t m) {
    for (std::size_t i = 0; i < m; ++i) {
      const float g = dout[i];
      const std::uint8_t c = choice[i];
      tops[2 * i] = c == 0 ? g : 0.0f;
      tops[2 * i + 1] = c == 1 ? g : 0.0f;
      bottoms[2 * i] = c == 2 ? g : 0.0f;
      bottoms[2 * i + 1] = c == 3 ? g : 0.0f;
    }
  }
};

class Relu final : public Layer {
 public:
  std::string describe() const override { return "relu"; }
  LayerSpec spec() const override { return {LayerSpec::Kind::relu, in_, in_}; }
  Shape output(Shape in) const override { return in; }
  void declare(Layout&, const std::string&, Shape in) override { in_ = in; }
  void forward(const float*, const float* in, float* out, std::size_t n, Scratch&) const override {
    const std::size_t m = n * in_.size();
    for (std::size_t i = 0; i < m; ++i) out[i] = std::max(in[i], 0.0f);
  }
  void backward(const float*, const float*, const float* out, const float* dout, float* din, float*, std::size_t n,
                Scratch&) const override {
    if (din == nullptr) return;
    const std::size_t m = n * in_.size();
    // Not below or at 0 (a NaN too, as PyTorch's threshold_backward): the gradient passes.
    for (std::size_t i = 0; i < m; ++i) din[i] = out[i] <= 0.0f ? 0.0f : dout[i];
  }
};

class Flatten final : public Layer {
 public:
  std::string describe() const override { return "flatten"; }
  LayerSpec spec() const override { return {LayerSpec::Kind::flatten, in_, output(in_)}; }
  Takes takes() const noexcept override { return Takes::spatial; }
  bool makes_flat(bool) const noexcept override { return true; }
  Shape output(Shape in) const override { return {in.size(), 1, 1}; }
  void declare(Layout&, const std::string&, Shape in) override { in_ = in; }
  void forward(const float*, const float* in, float* out, std::size_t n, Scratch&) const override {
    const std::size_t hw = in_.h * in_.w, f = in_.size();
    for (std::size_t c = 0; c < in_.c; ++c)
      for (std::size_t s = 0; s < n; ++s) std::memcpy(out + s * f + c * hw, in + (c * n + s) * hw, hw * sizeof(float));
  }
  void backward(const float*, const float*, const float*, const float* dout, float* din, float*, std::size_t n,
                Scratch&) const override {
    if (din == nullptr) return;
    const std::size_t hw = in_.h * in_.w, f = in_.size();
    for (std::size_t c = 0; c < in_.c; ++c)
      for (std::size_t s = 0; s < n; ++s) std::memcpy(din + (c * n + s) * hw, dout + s * f + c * hw, hw * sizeof(float));
  }
};

class Linear final : public Layer {
 public:
  Linear(std::size_t in, std::size_t out) : in_f_(in), out_f_(out) {
    if (in == 0 || out == 0) throw InputError("linear: sizes must be positive");
  }
  std::string describe() const override { return fmt::format("linear {}->{}", in_f_, out_f_); }
  LayerSpec spec() const override {
    return {LayerSpec::Kind::linear, in_, {out_f_, 1, 1}, 0, 0, w_, b_};
  }
  Takes takes() const noexcept override { return Takes::flat; }
  Shape output(Shape in) const override {
    if (in.size() != in_f_ || in.h != 1 || in.w != 1)
      throw InputError(fmt::format("linear: expected {} features (flatten first), got {}x{}x{}", in_f_, in.c, in.h,
                                   in.w));
    return {out_f_, 1, 1};
  }
  void declare(Layout& layout, const std::string& prefix, Shape in) override {
    in_ = in;
    (void)output(in);
    layout.add(prefix + ".weight", {out_f_, in_f_});
    layout.add(prefix + ".bias", {out_f_});
    w_ = layout[prefix + ".weight"].offset;
    b_ = layout[prefix + ".bias"].offset;
  }
  bool has_params() const noexcept override { return true; }
  void initialize(float* params, std::mt19937_64& rng, bool last) const override {
    fill_uniform(params + w_, out_f_ * in_f_, init_bound(in_f_, out_f_, last), rng);
    std::fill_n(params + b_, out_f_, 0.0f);
  }
  void forward(const float* params, const float* in, float* out, std::size_t n, Scratch&) const override {
    CMapR X(in, static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(in_f_));
    CMapR W(params + w_, static_cast<Eigen::Index>(out_f_), static_cast<Eigen::Index>(in_f_));
    MapR Y(out, static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(out_f_));
    Y.noalias() = X * W.transpose();
    Y.rowwise() += CMapV(params + b_, static_cast<Eigen::Index>(out_f_)).transpose();
  }
  void backward(const float* params, const float* in, const float*, const float* dout, float* din, float* grad,
                std::size_t n, Scratch&) const override {
    CMapR X(in, static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(in_f_));
    CMapR dY(dout, static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(out_f_));
    MapR dW(grad + w_, static_cast<Eigen::Index>(out_f_), static_cast<Eigen::Index>(in_f_));
    dW.noalias() = dY.transpose() * X;
    column_sums(dout, n, out_f_, grad + b_);
    if (din == nullptr) return;
    CMapR W(params + w_, static_cast<Eigen::Index>(out_f_), static_cast<Eigen::Index>(in_f_));
    MapR dX(din, static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(in_f_));
    dX.noalias() = dY * W;
  }

 private:
  std::size_t in_f_, out_f_;
  std::size_t w_ = 0, b_ = 0;
};

}  // namespace

std::unique_ptr<Layer> conv2d(std::size_t in_channels, std::size_t out_channels, std::size_t kernel,
                              std::size_t pad) {
  return std::make_unique<Conv2d>(in_channels, out_channels, kernel, pad);
}
std::size_t conv2d_vector_lanes() noexcept { return simd::kVec; }
std::unique_ptr<Layer> max_pool2() { return std::make_unique<MaxPool2>(); }
std::unique_ptr<Layer> relu() { return std::make_unique<Relu>(); }
std::unique_ptr<Layer> flatten() { return std::make_unique<Flatten>(); }
std::unique_ptr<Layer> linear(std::size_t in, std::size_t out) { return std::make_unique<Linear>(in, out); }

double softmax_cross_entropy(const float* logits, const std::uint8_t* labels, std::size_t n, std::size_t k,
                             float* dlogits, float scale) {
  check_labels({labels, n}, k, "softmax cross-entropy");
  double total = 0;
  for (std::size_t s = 0; s < n; ++s) {
    const float* z = logits + s * k;
    const float m = *std::max_element(z, z + k);
    double sum = 0;
    for (std::size_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(z[j] - m));
    const double log_sum = std::log(sum) + m;
    total += log_sum - z[labels[s]];
    if (dlogits != nullptr) {
      float* d = dlogits + s * k;
      for (std::size_t j = 0; j < k; ++j)
        d[j] = static_cast<float>(std::exp(static_cast<double>(z[j]) - log_sum)) * scale;
      d[labels[s]] -= scale;
    }
  }
  return total;
}

double sgemm_gflops(std::size_t n, std::size_t repeats, std::size_t threads) {
  if (n == 0 || repeats == 0) throw InputError("sgemm_gflops: n and repeats must be positive");
  const auto N = static_cast<Eigen::Index>(n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  MatR a(N, N), b(N, N), c(N, N);
  for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = u(rng), b.data()[i] = u(rng);
  const int before = Eigen::nbThreads();
  Eigen::setNbThreads(static_cast<int>(std::max<std::size_t>(1, threads)));
  const double gflops = gemm_gflops(n, repeats, [&] { c.noalias() = a * b; });
  Eigen::setNbThreads(before);
  return gflops;
}

double gemm_gflops(std::size_t n, std::size_t repeats, const std::function<void()>& gemm) {
  if (n == 0 || repeats == 0) throw InputError("gemm_gflops: n and repeats must be positive");
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  std::vector<double> rates;
  for (std::size_t r = 0; r <= repeats; ++r) {  // run 0 warms caches, threads and clocks
    const auto t0 = std::chrono::steady_clock::now();
    gemm();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) rates.push_back(flops / std::max(s, 1e-12) / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace asgd::dense
