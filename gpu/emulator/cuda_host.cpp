// The part of the CUDA runtime and cuBLAS that gpu/ calls, implemented on the
// host, for the emulated backend (libasgd_gpu_emulated.so): CI has no GPU,
// and this lets the tests run gpu.cpp and network.cpp as they are, with the
// kernels' own per-element bodies, so the orchestration, the buffer sizes,
// the cuBLAS argument mapping and the ordering between streams are executed
// and checked on every run.
//
// Streams are asynchronous as on a GPU: each is a thread running its queue
// in order, and only events (cudaStreamWaitEvent) and the synchronising
// calls order work across streams, so a missing wait is a real race here
// (ThreadSanitizer reports it). Copies keep CUDA's rules for host memory:
// from pageable memory the source is taken at the call, into pageable memory
// the call returns when the copy is done, pinned memory is used when the
// stream gets there. cudaFree waits for the whole device, as it does.
//
// It is stricter than it needs to be where that finds bugs: every copy, set
// and GEMM operand must lie inside one live device allocation, copies must
// go the way their kind says, and cuBLAS arguments are validated as cuBLAS
// does (leading dimensions, sizes).
//
// Stream capture (CUDA graphs) records what is queued on the capturing
// stream instead of running it, and a graph launch queues the recording;
// arguments are bound at capture, as in a real graph. What is unsafe during
// a global-mode capture fails, at least as strictly as in CUDA, and
// invalidates every capture under way: allocation and freeing, synchronising
// with the capturing stream, an event or the device, copies from or to
// pageable memory. Events inside a capture (graph edges between streams) are
// not emulated, and gpu/ records none.
#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "emulator.hpp"

// A stream: one thread running its queue in order, on the device that was
// current when it was made.
struct CUstream_st {
  int device = 0;
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool busy = false, stop = false;
  // Between cudaStreamBeginCapture and cudaStreamEndCapture: what is queued
  // goes to `captured`; `invalidated` once an unsafe call was made.
  bool capturing = false, invalidated = false;
  std::vector<std::function<void()>> captured;
  std::size_t pushed = 0;  // operations queued or captured, ever
  std::thread thread{[this] { run(); }};

  ~CUstream_st() {
    {
      std::scoped_lock lock(m);
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }
  void run() {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;
        work = std::move(queue.front());
        queue.pop_front();
        busy = true;
      }
      work();
      {
        std::scoped_lock lock(m);
        busy = false;
      }
      cv.notify_all();
    }
  }
  void push(std::function<void()> work) {
    {
      std::scoped_lock lock(m);
      ++pushed;
      if (capturing) {
        captured.push_back(std::move(work));
        return;
      }
      queue.push_back(std::move(work));
    }
    cv.notify_all();
  }
  void synchronize() {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return queue.empty() && !busy; });
  }
};

// An event counts its records and how many of them the stream has reached;
// a wait is for the records made before it. State is shared with queued
// work so that an event may be destroyed while a stream still waits on it.
struct EventState {
  std::mutex m;
  std::condition_variable cv;
  std::uint64_t recorded = 0, reached = 0;
  void wait_for(std::uint64_t k) {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return reached >= k; });
  }
};
struct CUevent_st {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};
struct cublasContext {
  cudaStream_t stream = nullptr;
  int device = 0;  // current at cublasCreate: the handle works on it only
};
// A captured graph and its executable form: the recorded work, in order.
struct CUgraph_st {
  int device = 0;
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  int device = 0;
  std::vector<std::function<void()>> work;
};

namespace {

// What an emulated device says it has (cudaGetDeviceProperties), and the most one cudaMalloc gets.
constexpr std::size_t kDeviceMemory = std::size_t{16} << 30;

// Live streams, for cudaDeviceSynchronize, cudaFree and the null stream.
std::mutex streams_mutex;
std::set<cudaStream_t>& streams() {
  static std::set<cudaStream_t> s;
  return s;
}

// Streams capturing now. A global-mode capture makes unsafe calls from any
// thread fail (and ends the capture's validity), as CUDA does.
std::atomic<int> captures{0};

bool is_capturing(cudaStream_t s) {
  if (s == nullptr) return false;
  std::scoped_lock lock(s->m);
  return s->capturing;
}

// True (and every capture invalidated) when a capture is under way: the
// caller then fails with cudaErrorStreamCaptureUnsupported.
bool unsafe_during_capture() {
  if (captures.load() == 0) return false;
  std::scoped_lock lock(streams_mutex);
  for (cudaStream_t s : streams()) {
    std::scoped_lock slock(s->m);
    if (s->capturing) s->invalidated = true;
  }
  return true;
}

void invalidate_capture(cudaStream_t s) {
  std::scoped_lock lock(s->m);
  s->invalidated = true;
}

void synchronize_device() {
  std::vector<cudaStream_t> all;
  {
    std::scoped_lock lock(streams_mutex);
    all.assign(streams().begin(), streams().end());
  }
  for (cudaStream_t s : all) s->synchronize();
}

// A set of live allocations (first byte -> size), safe to use from any thread.
class Allocations {
 public:
  void add(const void* p, std::size_t bytes) {
    std::scoped_lock lock(m_);
    map_[key(p)] = bytes;
  }
  bool remove(const void* p) {
    std::scoped_lock lock(m_);
    return map_.erase(key(p)) > 0;
  }
  // Whether [p, p + bytes) lies inside one of them.
  bool contains(const void* p, std::size_t bytes) const {
    std::scoped_lock lock(m_);
    const auto it = last_at_or_before(key(p));
    return it != map_.end() && key(p) + bytes <= it->first + it->second;
  }
  // Whether any byte of [p, p + bytes) lies inside one of them.
  bool touches(const void* p, std::size_t bytes) const {
    std::scoped_lock lock(m_);
    const auto it = last_at_or_before(key(p) + (bytes ? bytes - 1 : 0));
    return it != map_.end() && it->first + it->second > key(p);
  }

 private:
  using Map = std::map<std::uintptr_t, std::size_t>;
  static std::uintptr_t key(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
  Map::const_iterator last_at_or_before(std::uintptr_t a) const {
    auto it = map_.upper_bound(a);
    return it == map_.begin() ? map_.end() : std::prev(it);
  }
  mutable std::mutex m_;
  Map map_;
};

Allocations device;  // cudaMalloc
Allocations pinned;  // cudaMallocHost

bool on_device(const void* p, std::size_t bytes) { return device.contains(p, bytes); }
bool touches_device(const void* p, std::size_t bytes) { return device.touches(p, bytes); }
bool is_pinned(const void* p, std::size_t bytes) { return pinned.contains(p, bytes); }

thread_local cudaError_t last_error = cudaSuccess;
cudaError_t fail(cudaError_t e) { return last_error = e; }

// A handle's destroy call: `if_null` for a null handle, as CUDA answers.
template <class Handle>
cudaError_t destroy(Handle h, cudaError_t if_null) {
  if (h == nullptr) return fail(if_null);
  delete h;
  return cudaSuccess;
}

// Devices: $ASGD_EMULATED_GPUS of them (1 to 16; default 1), so that the
// choice of a device per rank and per thread can be tested. The current
// device belongs to each host thread, as in CUDA; work sent to a stream or
// cuBLAS handle of another device is refused (see launch_on).
int device_count() {
  static const int count = [] {
    const char* env = std::getenv("ASGD_EMULATED_GPUS");
    const int n = env ? std::atoi(env) : 1;
    return std::clamp(n, 1, 16);
  }();
  return count;
}
thread_local int current_device = 0;

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = device_count();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (p == nullptr || device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::strncpy(p->name, "asgd host emulation (no GPU)", sizeof p->name - 1);
  p->totalGlobalMem = kDeviceMemory;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorNotReady: return "cudaErrorNotReady";
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
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorIllegalState: return "the stream is not capturing (or already is)";
    default: return "emulated CUDA error";
  }
}

cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  if (p == nullptr) return fail(cudaErrorInvalidValue);
  if (unsafe_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  // More than the device has fails, as on a GPU (and before the host is asked: a sanitizer's allocator aborts on
  // an absurd size instead of failing).
  if (bytes > kDeviceMemory) return fail(cudaErrorMemoryAllocation);
  // 256-byte aligned, as cudaMalloc's are.
  void* q = ::operator new(std::max<std::size_t>(bytes, 1), std::align_val_t{256}, std::nothrow);
  if (q == nullptr) return fail(cudaErrorMemoryAllocation);
  // Stricter than a GPU, whose fresh memory holds whatever it held: 0xFF bytes (a NaN in every float), so that a
  // kernel reading what nothing wrote makes NaNs, where zeroed pages would pass unnoticed.
  std::memset(q, 0xFF, bytes);
  device.add(q, bytes);
  *p = q;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  if (unsafe_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  synchronize_device();  // as cudaFree does
  if (!device.remove(p)) return fail(cudaErrorInvalidValue);
  ::operator delete(p, std::align_val_t{256});
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, std::size_t bytes) {
  if (p == nullptr) return fail(cudaErrorInvalidValue);
  if (unsafe_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  *p = std::malloc(std::max<std::size_t>(bytes, 1));
  if (*p == nullptr) return fail(cudaErrorMemoryAllocation);
  pinned.add(*p, bytes);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* p) {
  if (p == nullptr) return cudaSuccess;
  if (unsafe_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  synchronize_device();
  if (!pinned.remove(p)) return fail(cudaErrorInvalidValue);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
  if (bytes == 0) return cudaSuccess;
  bool ok = false;
  switch (kind) {
    case cudaMemcpyHostToDevice: ok = on_device(dst, bytes) && !touches_device(src, bytes); break;
    case cudaMemcpyDeviceToHost: ok = on_device(src, bytes) && !touches_device(dst, bytes); break;
    case cudaMemcpyDeviceToDevice: ok = on_device(src, bytes) && on_device(dst, bytes); break;
    default: ok = false;  // gpu/ always names the direction
  }
  if (!ok) return fail(cudaErrorInvalidValue);
  if (is_capturing(s) && ((kind == cudaMemcpyHostToDevice && !is_pinned(src, bytes)) ||
                          (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, bytes)))) {
    invalidate_capture(s);  // a copy with pageable memory synchronises
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  if (kind == cudaMemcpyHostToDevice && !is_pinned(src, bytes)) {
    // From pageable memory: the source is taken now.
    auto copy = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                             static_cast<const unsigned char*>(src) + bytes);
    asgd::gpu::emulator::enqueue(s, [dst, copy] { std::memcpy(dst, copy->data(), copy->size()); });
    return cudaSuccess;
  }
  asgd::gpu::emulator::enqueue(s, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  // Into pageable memory: returns when the copy is done.
  if (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, bytes)) s->synchronize();
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t s) {
  if (bytes == 0) return cudaSuccess;
  if (!on_device(p, bytes)) return fail(cudaErrorInvalidValue);
  asgd::gpu::emulator::enqueue(s, [p, value, bytes] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  if (s == nullptr) return fail(cudaErrorInvalidValue);
  *s = new CUstream_st;
  (*s)->device = current_device;
  std::scoped_lock lock(streams_mutex);
  streams().insert(*s);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  {
    std::scoped_lock lock(streams_mutex);
    if (streams().erase(s) == 0) return fail(cudaErrorInvalidResourceHandle);
  }
  s->synchronize();  // its queued work still runs, as on a GPU
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (s == nullptr ? unsafe_during_capture() : is_capturing(s)) {
    if (s != nullptr) invalidate_capture(s);
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  if (s == nullptr)
    synchronize_device();
  else
    s->synchronize();
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (unsafe_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  synchronize_device();
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  if (s == nullptr) return fail(cudaErrorStreamCaptureUnsupported);  // not the legacy stream
  if (mode != cudaStreamCaptureModeGlobal) return fail(cudaErrorInvalidValue);  // the one gpu/ uses
  {
    std::scoped_lock lock(s->m);
    if (s->capturing) return fail(cudaErrorIllegalState);
    s->capturing = true;
    s->invalidated = false;
    s->captured.clear();
  }
  ++captures;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  if (s == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  std::vector<std::function<void()>> work;
  bool invalidated = false;
  {
    std::scoped_lock lock(s->m);
    if (!s->capturing) return fail(cudaErrorIllegalState);
    s->capturing = false;
    invalidated = s->invalidated;
    work.swap(s->captured);
  }
  --captures;
  *graph = nullptr;
  if (invalidated) return fail(cudaErrorStreamCaptureInvalidated);
  *graph = new CUgraph_st{s->device, std::move(work)};
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (exec == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->device, graph->work};
  return cudaSuccess;
}

// Nothing to upload: the recording is launched as it is.
cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t s) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  if (is_capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) { return destroy(graph, cudaErrorInvalidValue); }

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) { return destroy(exec, cudaErrorInvalidValue); }

// The recorded work, queued on s in its captured order (each piece a copy:
// a graph can be launched again while an earlier launch still runs).
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  if (is_capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);  // no nested graphs in gpu/
  for (const auto& work : exec->work) asgd::gpu::emulator::launch(s, work);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  *e = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) { return destroy(e, cudaErrorInvalidResourceHandle); }

// A wait or query refers to the last record made before it, as in CUDA
// (`reached` keeps the latest record done): an event recorded on several
// streams (the snapshot slots in gpu.cpp) is recorded in an order the event
// chain already imposes on those streams.
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (is_capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);  // not emulated (see the top)
  if (s == nullptr) throw std::logic_error("emulator: an event recorded on the legacy null stream");
  auto st = e->state;
  std::uint64_t k = 0;
  {
    std::scoped_lock lock(st->m);
    k = ++st->recorded;
  }
  asgd::gpu::emulator::enqueue(s, [st, k] {
    {
      std::scoped_lock lock(st->m);
      st->reached = std::max(st->reached, k);
    }
    st->cv.notify_all();
  });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (unsafe_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  std::uint64_t k = 0;
  {
    std::scoped_lock lock(e->state->m);
    k = e->state->recorded;
  }
  e->state->wait_for(k);
  return cudaSuccess;
}

// cudaErrorNotReady until the stream reaches the event's last record. It is
// left as the thread's last error too (fail()), the stricter reading of
// CUDA's rules: a caller must not let it reach a later launch check.
cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (unsafe_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  std::scoped_lock lock(e->state->m);
  return e->state->reached >= e->state->recorded ? cudaSuccess : fail(cudaErrorNotReady);
}

// Work queued on s after this waits for the event's last record before it.
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (is_capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);  // not emulated (see the top)
  auto st = e->state;
  std::uint64_t k = 0;
  {
    std::scoped_lock lock(st->m);
    k = st->recorded;
  }
  if (k > 0) asgd::gpu::emulator::enqueue(s, [st, k] { st->wait_for(k); });
  return cudaSuccess;
}

cublasStatus_t cublasCreate_v2(cublasHandle_t* h) {
  if (h == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *h = new cublasContext;
  (*h)->device = current_device;
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

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void* workspace, std::size_t bytes) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0 && !on_device(workspace, bytes)) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;  // the emulated GEMMs need none
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
  const float al = *alpha, be = *beta;  // host scalars are read at the call
  if (h->device != current_device) return CUBLAS_STATUS_EXECUTION_FAILED;  // another thread's device
  asgd::gpu::emulator::enqueue(h->stream, [=] {
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
    if (be == 0.0f)
      C = al * product;
    else
      C = be * C + al * product;
  });
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
  const float al = *alpha, be = *beta;
  if (h->device != current_device) return CUBLAS_STATUS_EXECUTION_FAILED;  // another thread's device
  asgd::gpu::emulator::enqueue(h->stream, [=] {
    const ConstView A(a, m, n, Eigen::OuterStride<>(lda));
    const Eigen::Map<const Eigen::VectorXf> X(x, xl);
    Eigen::Map<Eigen::VectorXf> Y(y, yl);
    const Eigen::VectorXf product = nt ? Eigen::VectorXf(A * X) : Eigen::VectorXf(A.transpose() * X);
    if (be == 0.0f)
      Y = al * product;
    else
      Y = be * Y + al * product;
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"

namespace asgd::gpu::emulator {

void launch(cudaStream_t s, std::function<void()> work) {
  const int stream_device = s == nullptr ? current_device : s->device;
  if (stream_device != current_device) {
    // CUDA refuses a launch into another device's stream; a thread that did
    // not select the process's device (cudaSetDevice) would do this.
    throw std::logic_error("emulator: a kernel launched on a stream of device " + std::to_string(stream_device) +
                           " while this thread's current device is " + std::to_string(current_device));
  }
  enqueue(s, std::move(work));
}

void require_operand(const void* p, std::size_t bytes, const char* what) {
  if (bytes > 0 && !on_device(p, bytes)) {
    throw std::logic_error(std::string("emulator: kernel operand ") + what + " (" + std::to_string(bytes) +
                           " bytes) is not inside one device allocation");
  }
}

std::size_t operations(cudaStream_t s) {
  std::scoped_lock lock(s->m);
  return s->pushed;
}

void enqueue(cudaStream_t s, std::function<void()> work) {
  if (s == nullptr) {
    // The legacy null stream would be a device-wide barrier here, but gpu/'s
    // streams are non-blocking, and on a GPU they do not wait for it (nor it
    // for them): work ordered here would race there. gpu/ queues nothing on it.
    throw std::logic_error("emulator: work queued on the legacy null stream (gpu/ orders work on its own streams)");
  }
  s->push(std::move(work));
}

}  // namespace asgd::gpu::emulator
