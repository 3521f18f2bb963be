// The part of the CUDA runtime and cuBLAS that gpu/ calls, implemented on the
// host, for the emulated backend (libasgd_gpu_emulated.so): CI has no GPU,
// and this lets the tests run gpu.cpp and network.cpp as they are, with the
// kernels' own per-element bodies, so the orchestration, the buffer sizes
// and the cuBLAS argument mapping are executed and checked on every run.
//
// It is stricter than it needs to be where that finds bugs: every copy, set
// and GEMM operand must lie inside one live device allocation, copies must
// go the way their kind says, and cuBLAS arguments are validated as cuBLAS
// does (leading dimensions, sizes). Streams run synchronously, so it cannot
// find missing synchronisation; compute-sanitizer on a GPU does that.
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <iterator>
#include <map>
#include <mutex>
#include <new>

struct CUstream_st {};
struct CUevent_st {
  bool recorded = false;
};
struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace {

// Live device allocations: first byte -> size.
std::mutex registry_mutex;
std::map<std::uintptr_t, std::size_t>& registry() {
  static std::map<std::uintptr_t, std::size_t> r;
  return r;
}

// Whether [p, p + bytes) lies inside one live device allocation.
bool on_device(const void* p, std::size_t bytes) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::scoped_lock lock(registry_mutex);
  auto& r = registry();
  auto it = r.upper_bound(a);
  if (it == r.begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second;
}

// Any byte of [p, p + bytes) inside a device allocation (a host pointer
// must have none).
bool touches_device(const void* p, std::size_t bytes) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::scoped_lock lock(registry_mutex);
  auto& r = registry();
  auto it = r.upper_bound(a + (bytes ? bytes - 1 : 0));
  if (it == r.begin()) return false;
  --it;
  return it->first + it->second > a;
}

thread_local cudaError_t last_error = cudaSuccess;
cudaError_t fail(cudaError_t e) { return last_error = e; }

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (p == nullptr || device != 0) return fail(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::strncpy(p->name, "asgd host emulation (no GPU)", sizeof p->name - 1);
  p->totalGlobalMem = std::size_t{1} << 30;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    default: return "cudaError (emulated)";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (emulator: a pointer or size outside its allocation, or a "
                                       "copy whose kind does not match its pointers)";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    default: return "emulated CUDA error";
  }
}

cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  if (p == nullptr) return fail(cudaErrorInvalidValue);
  // 256-byte aligned, as cudaMalloc's are.
  void* q = ::operator new(std::max<std::size_t>(bytes, 1), std::align_val_t{256}, std::nothrow);
  if (q == nullptr) return fail(cudaErrorMemoryAllocation);
  std::scoped_lock lock(registry_mutex);
  registry()[reinterpret_cast<std::uintptr_t>(q)] = bytes;
  *p = q;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  {
    std::scoped_lock lock(registry_mutex);
    if (registry().erase(reinterpret_cast<std::uintptr_t>(p)) == 0) return fail(cudaErrorInvalidValue);
  }
  ::operator delete(p, std::align_val_t{256});
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, std::size_t bytes) {
  if (p == nullptr) return fail(cudaErrorInvalidValue);
  *p = std::malloc(std::max<std::size_t>(bytes, 1));
  return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  if (bytes == 0) return cudaSuccess;
  bool ok = false;
  switch (kind) {
    case cudaMemcpyHostToDevice: ok = on_device(dst, bytes) && !touches_device(src, bytes); break;
    case cudaMemcpyDeviceToHost: ok = on_device(src, bytes) && !touches_device(dst, bytes); break;
    case cudaMemcpyDeviceToDevice: ok = on_device(src, bytes) && on_device(dst, bytes); break;
    default: ok = false;  // gpu/ always names the direction
  }
  if (!ok) return fail(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t) {
  if (bytes == 0) return cudaSuccess;
  if (!on_device(p, bytes)) return fail(cudaErrorInvalidValue);
  std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  if (s == nullptr) return fail(cudaErrorInvalidValue);
  *s = new CUstream_st;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  *e = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  e->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  return e == nullptr ? fail(cudaErrorInvalidResourceHandle) : cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t e, unsigned) {
  return e == nullptr ? fail(cudaErrorInvalidResourceHandle) : cudaSuccess;
}

cublasStatus_t cublasCreate_v2(cublasHandle_t* h) {
  if (h == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *h = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t) {
  return h == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE (emulator: a size, a leading dimension or "
                                             "an operand outside its device allocation)";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS (emulated)";
  }
}

}  // extern "C"

namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using ConstView = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
using View = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;

// A rows x cols column-major operand with leading dimension ld: valid as
// cuBLAS requires, and inside one device allocation.
bool operand_ok(const float* p, int rows, int cols, int ld) {
  if (ld < std::max(1, rows)) return false;
  if (rows == 0 || cols == 0) return true;
  const std::size_t span = (static_cast<std::size_t>(cols) - 1) * ld + rows;
  return on_device(p, span * sizeof(float));
}

}  // namespace

extern "C" {

// C (m x n) = alpha op(A) op(B) + beta C, column-major, as cuBLAS; with beta
// = 0, C is not read.
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float* alpha, const float* a, int lda, const float* b, int ldb, const float* beta,
                              float* c, int ldc) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool na = ta == CUBLAS_OP_N, nb = tb == CUBLAS_OP_N;
  const int ar = na ? m : k, ac = na ? k : m, br = nb ? k : n, bc = nb ? n : k;
  if (!operand_ok(a, ar, ac, lda) || !operand_ok(b, br, bc, ldb) || !operand_ok(c, m, n, ldc))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const ConstView A(a, ar, ac, Eigen::OuterStride<>(lda)), B(b, br, bc, Eigen::OuterStride<>(ldb));
  View C(c, m, n, Eigen::OuterStride<>(ldc));
  Mat product;
  if (na && nb)
    product = A * B;
  else if (na)
    product = A * B.transpose();
  else if (nb)
    product = A.transpose() * B;
  else
    product = A.transpose() * B.transpose();
  if (*beta == 0.0f)
    C = *alpha * product;
  else
    C = *beta * C + *alpha * product;
  return CUBLAS_STATUS_SUCCESS;
}

// y = alpha op(A) x + beta y, A m x n column-major, as cuBLAS (unit strides only).
cublasStatus_t cublasSgemv_v2(cublasHandle_t h, cublasOperation_t t, int m, int n, const float* alpha, const float* a,
                              int lda, const float* x, int incx, const float* beta, float* y, int incy) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || alpha == nullptr || beta == nullptr || incx == 0 || incy == 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (incx != 1 || incy != 1 || (t != CUBLAS_OP_N && t != CUBLAS_OP_T)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool nt = t == CUBLAS_OP_N;
  const int xl = nt ? n : m, yl = nt ? m : n;
  if (!operand_ok(a, m, n, lda) || !operand_ok(x, xl, 1, std::max(1, xl)) || !operand_ok(y, yl, 1, std::max(1, yl)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const ConstView A(a, m, n, Eigen::OuterStride<>(lda));
  const Eigen::Map<const Eigen::VectorXf> X(x, xl);
  Eigen::Map<Eigen::VectorXf> Y(y, yl);
  Eigen::VectorXf product = nt ? Eigen::VectorXf(A * X) : Eigen::VectorXf(A.transpose() * X);
  if (*beta == 0.0f)
    Y = *alpha * product;
  else
    Y = *beta * Y + *alpha * product;
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
