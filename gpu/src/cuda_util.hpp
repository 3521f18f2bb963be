// Checked CUDA and cuBLAS calls (errors carry the call, file and line) and
// RAII owners of device memory, pinned host memory, streams, events and
// cuBLAS handles. Host code only: compiled by the C++ compiler.
#pragma once

#include <cstddef>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <string>
#include <utility>

namespace asgd::gpu::detail {

[[noreturn]] void throw_cuda(cudaError_t rc, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t rc, const char* call, const char* file, int line);

#define ASGD_CUDA(call)                                                                \
  do {                                                                                 \
    const cudaError_t asgd_rc_ = (call);                                               \
    if (asgd_rc_ != cudaSuccess) ::asgd::gpu::detail::throw_cuda(asgd_rc_, #call, __FILE__, __LINE__); \
  } while (0)
#define ASGD_CUBLAS(call)                                                                \
  do {                                                                                   \
    const cublasStatus_t asgd_rc_ = (call);                                              \
    if (asgd_rc_ != CUBLAS_STATUS_SUCCESS) ::asgd::gpu::detail::throw_cublas(asgd_rc_, #call, __FILE__, __LINE__); \
  } while (0)
// After a kernel launch: launch errors (bad configuration) surface here.
#define ASGD_CUDA_LAUNCHED() ASGD_CUDA(cudaGetLastError())

// For the calls whose failure cannot be reported (destructors, clean-up on an
// error path): the error is cleared from the thread's last error too, so that
// the next ASGD_CUDA_LAUNCHED() does not blame a later kernel for it.
inline void ignore_error(cudaError_t rc) noexcept {
  if (rc != cudaSuccess) (void)cudaGetLastError();
}

// n elements of T in device memory.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { resize(n); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // Grows (contents lost) when n is larger than what is held.
  void resize(std::size_t n) {
    if (n <= n_) return;
    release();
    void* p = nullptr;
    ASGD_CUDA(cudaMalloc(&p, n * sizeof(T)));
    p_ = static_cast<T*>(p);
    n_ = n;
  }
  // All bytes 0, queued on s.
  void zero(cudaStream_t s) {
    if (n_ > 0) ASGD_CUDA(cudaMemsetAsync(p_, 0, n_ * sizeof(T), s));
  }
  T* get() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }

 private:
  void release() noexcept {
    if (p_ != nullptr) ignore_error(cudaFree(p_));
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// Page-locked host memory: copies from it run asynchronously on a stream.
template <class T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t n) : n_(n) {
    void* p = nullptr;
    ASGD_CUDA(cudaMallocHost(&p, n * sizeof(T)));
    p_ = static_cast<T*>(p);
  }
  ~PinnedBuffer() {
    if (p_ != nullptr) ignore_error(cudaFreeHost(p_));
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  T* get() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

class Stream {
 public:
  Stream() { ASGD_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s_ != nullptr) ignore_error(cudaStreamDestroy(s_));
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const noexcept { return s_; }
  void synchronize() const { ASGD_CUDA(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_ = nullptr;
};

// Without timing: only for ordering work across streams.
class Event {
 public:
  Event() { ASGD_CUDA(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming)); }
  ~Event() {
    if (e_ != nullptr) ignore_error(cudaEventDestroy(e_));
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const noexcept { return e_; }
  void record(cudaStream_t s) const { ASGD_CUDA(cudaEventRecord(e_, s)); }
  // Work queued on `s` from now on waits for this event's work.
  void wait_on(cudaStream_t s) const { ASGD_CUDA(cudaStreamWaitEvent(s, e_, 0)); }
  // Blocks the calling thread until the work before the last record is done.
  void synchronize() const { ASGD_CUDA(cudaEventSynchronize(e_)); }
  // Whether the work before the last record is done (true if never
  // recorded), without waiting.
  bool done() const {
    const cudaError_t rc = cudaEventQuery(e_);
    if (rc == cudaErrorNotReady) {
      // Not an error: kept out of the thread's last error, which the next
      // ASGD_CUDA_LAUNCHED() reads.
      if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
      return false;
    }
    ASGD_CUDA(rc);
    return true;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

class Cublas {
 public:
  explicit Cublas(cudaStream_t stream) {
    ASGD_CUBLAS(cublasCreate(&h_));
    try {
      ASGD_CUBLAS(cublasSetStream(h_, stream));
      // FP32 GEMMs stay FP32 (no TF32): the parity tests compare with the
      // CPU at 1e-4.
      ASGD_CUBLAS(cublasSetMathMode(h_, CUBLAS_DEFAULT_MATH));
    } catch (...) {
      (void)cublasDestroy(h_);  // no destructor runs for a throwing constructor
      throw;
    }
  }
  ~Cublas() {
    if (h_ != nullptr && cublasDestroy(h_) != CUBLAS_STATUS_SUCCESS) (void)cudaGetLastError();
  }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  cublasHandle_t get() const noexcept { return h_; }
  // A workspace of our own for the handle's GEMMs, so that a captured graph
  // refers to memory this object owns rather than to what cuBLAS would
  // allocate during the capture. cublasSetStream resets the workspace to
  // cuBLAS's pool: the handle's stream is set once, in the constructor,
  // before this, and never changed.
  void own_workspace(std::size_t bytes) {
    workspace_.resize(bytes);
    ASGD_CUBLAS(cublasSetWorkspace(h_, workspace_.get(), workspace_.size()));
  }

 private:
  cublasHandle_t h_ = nullptr;
  DeviceBuffer<unsigned char> workspace_;  // freed after the handle is destroyed
};

// An executable CUDA graph: the work that a function queues on one stream,
// captured once and then launched as a single unit (one launch instead of
// one per kernel). Capture records nothing that runs: buffers and scalars
// are bound at capture, so every launch repeats the same operations on the
// same memory.
class Graph {
 public:
  template <class Record>
  Graph(cudaStream_t s, Record&& record) {
    // Global mode: any call that is unsafe during a capture (cudaMalloc, a
    // synchronisation), from any thread, fails instead of being recorded.
    ASGD_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaGraph_t g = nullptr;
    try {
      record();
    } catch (...) {
      if (cudaStreamEndCapture(s, &g) == cudaSuccess && g != nullptr) ignore_error(cudaGraphDestroy(g));
      cudaGetLastError();  // the capture's error is reported by the exception
      throw;
    }
    ASGD_CUDA(cudaStreamEndCapture(s, &g));
    const cudaError_t rc = cudaGraphInstantiate(&exec_, g, 0);
    ignore_error(cudaGraphDestroy(g));
    ASGD_CUDA(rc);
    // Ready on the device now, not at the first launch (a timed step).
    if (const cudaError_t up = cudaGraphUpload(exec_, s); up != cudaSuccess) {
      ignore_error(cudaGraphExecDestroy(exec_));  // no destructor runs for a throwing constructor
      ASGD_CUDA(up);
    }
  }
  ~Graph() {
    if (exec_ != nullptr) ignore_error(cudaGraphExecDestroy(exec_));
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void launch(cudaStream_t s) const { ASGD_CUDA(cudaGraphLaunch(exec_, s)); }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace asgd::gpu::detail
