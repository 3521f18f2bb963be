// Device probing, the parity entry points, evaluation and bounded-delay
// training on CUDA streams.
#include "asgd/gpu/gpu.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "asgd/engine/block_trainer.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/random.hpp"
#include "backend.hpp"
#include "cuda_util.hpp"
#include "kernels.hpp"
#include "network.hpp"

// The backend's side of the API (asgd::gpu::cuda): loaded on demand from
// libasgd_gpu_cuda.so by api.cpp, which forwards asgd::gpu's functions here.
namespace asgd::gpu::cuda {

using namespace detail;

std::string unavailable();

namespace {

// The device this process uses: $ASGD_GPU_DEVICE when set; else, under
// mpirun (or srun), the rank's local rank modulo the node's devices, so that
// ranks on one node spread over its GPUs; else device 0. CUDA's current
// device belongs to each host thread: every thread that issues work calls
// use_device() first.
int chosen_device() {
  static const int device = [] {
    int count = 0;
    ASGD_CUDA(cudaGetDeviceCount(&count));
    if (const char* env = std::getenv("ASGD_GPU_DEVICE")) {
      char* end = nullptr;
      const long d = std::strtol(env, &end, 10);
      if (end == env || *end != '\0' || d < 0 || d >= count)
        throw InputError(fmt::format("ASGD_GPU_DEVICE={}: expected a device number below {}", env, count));
      return static_cast<int>(d);
    }
    for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
      if (const char* env = std::getenv(name)) return static_cast<int>(std::strtol(env, nullptr, 10) % count);
    return 0;
  }();
  return device;
}

void use_device() { ASGD_CUDA(cudaSetDevice(chosen_device())); }

void require_device() {
  const std::string why = unavailable();
  if (!why.empty()) throw RuntimeError("--device gpu: " + why);
  use_device();
}

// A Dataset on the device: images [n][D] and labels, copied once through two
// pinned staging buffers so that filling one overlaps the copy of the other.
struct DeviceData {
  DeviceBuffer<float> images;
  DeviceBuffer<std::uint8_t> labels;
  std::size_t n = 0, dim = 0;
};

DeviceData upload(const dense::Dataset& d, cudaStream_t copy) {
  DeviceData out;
  out.n = d.size();
  out.dim = d.image_size();
  const std::size_t total = out.n * out.dim;
  out.images.resize(std::max<std::size_t>(total, 1));
  out.labels.resize(std::max<std::size_t>(out.n, 1));
  constexpr std::size_t kChunk = std::size_t{1} << 20;  // floats (4 MB)
  PinnedBuffer<float> stage0(kChunk), stage1(kChunk);
  PinnedBuffer<float>* stage[2] = {&stage0, &stage1};
  Event ready[2];
  for (std::size_t first = 0, c = 0; first < total; first += kChunk, ++c) {
    const std::size_t len = std::min(kChunk, total - first), b = c % 2;
    if (c >= 2) ASGD_CUDA(cudaEventSynchronize(ready[b].get()));  // its last copy is done
    std::memcpy(stage[b]->get(), d.pixels.data() + first, len * sizeof(float));
    ASGD_CUDA(cudaMemcpyAsync(out.images.get() + first, stage[b]->get(), len * sizeof(float), cudaMemcpyHostToDevice,
                              copy));
    ready[b].record(copy);
  }
  if (out.n > 0)
    ASGD_CUDA(cudaMemcpyAsync(out.labels.get(), d.labels.data(), out.n, cudaMemcpyHostToDevice, copy));
  ASGD_CUDA(cudaStreamSynchronize(copy));
  return out;
}

// Accuracy, loss and confusion of `net` on the device, with buffers made
// once: a pass allocates nothing (a cudaMalloc would be timed with it).
class DeviceEvaluator {
 public:
  explicit DeviceEvaluator(GpuNetwork& net)
      : net_(net), k_(net.classes()), counts_(k_ * k_), loss_(1), sample_loss_(net.capacity()) {}

  dense::EvalResult operator()(const float* params, const DeviceData& data, cudaStream_t s) {
    dense::EvalResult r;
    const std::size_t k = k_, B = net_.capacity();
    ASGD_CUDA(cudaMemsetAsync(counts_.get(), 0, k * k * sizeof(unsigned), s));
    ASGD_CUDA(cudaMemsetAsync(loss_.get(), 0, sizeof(double), s));
    for (std::size_t first = 0; first < data.n; first += B) {
      const std::size_t m = std::min(B, data.n - first);
      const float* logits = net_.forward(params, data.images.get() + first * data.dim, m);
      const std::uint8_t* y = data.labels.get() + first;
      kernels::softmax_xent(logits, y, m, static_cast<int>(k), sample_loss_.get(), nullptr, 1.0f, s);
      kernels::accumulate_sum(sample_loss_.get(), m, 1.0, loss_.get(), s);
      kernels::confusion(logits, y, m, static_cast<int>(k), counts_.get(), s);
    }
    std::vector<unsigned> host(k * k);
    double loss_sum = 0;
    ASGD_CUDA(cudaMemcpyAsync(host.data(), counts_.get(), k * k * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
    ASGD_CUDA(cudaMemcpyAsync(&loss_sum, loss_.get(), sizeof(double), cudaMemcpyDeviceToHost, s));
    ASGD_CUDA(cudaStreamSynchronize(s));
    r.confusion.assign(host.begin(), host.end());
    std::size_t right = 0;
    for (std::size_t c = 0; c < k; ++c) right += host[c * k + c];
    r.accuracy = data.n ? static_cast<double>(right) / static_cast<double>(data.n) : 0.0;
    r.loss = data.n ? loss_sum / static_cast<double>(data.n) : 0.0;
    return r;
  }

 private:
  GpuNetwork& net_;
  std::size_t k_;
  DeviceBuffer<unsigned> counts_;
  DeviceBuffer<double> loss_;
  DeviceBuffer<float> sample_loss_;
};

void check_layer(const dense::Network& net, std::size_t layer) {
  if (layer >= net.specs().size())
    throw InputError(fmt::format("gpu: layer {} of a {}-layer network", layer, net.specs().size()));
}

template <class T>
void to_device(T* dst, const T* src, std::size_t n, cudaStream_t s) {
  if (n > 0) ASGD_CUDA(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyHostToDevice, s));
}
template <class T>
void to_host(T* dst, const T* src, std::size_t n, cudaStream_t s) {
  if (n > 0) ASGD_CUDA(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyDeviceToHost, s));
}

// A stream, its cuBLAS handle, a network of `capacity` samples on it and the
// parameters copied to the device: what each one-off entry point needs.
struct OneShot {
  Stream stream;
  Cublas cublas{stream.get()};
  GpuNetwork net;
  DeviceBuffer<float> params;
  OneShot(const dense::Network& n, std::size_t capacity, const float* host_params,
          GpuNetwork::Pass pass = GpuNetwork::Pass::forward_and_backward)
      : net(n, std::max<std::size_t>(capacity, 1), stream.get(), cublas.get(), pass), params(n.layout().size()) {
    to_device(params.get(), host_params, n.layout().size(), stream.get());
  }
  cudaStream_t s() const noexcept { return stream.get(); }
};

// The sizes of a layer's weight and bias tensors.
std::pair<std::size_t, std::size_t> tensor_sizes(const dense::LayerSpec& s) {
  using Kind = dense::LayerSpec::Kind;
  if (s.kind == Kind::conv2d) return {s.out.c * s.in.c * s.kernel * s.kernel, s.out.c};
  if (s.kind == Kind::linear) return {s.out.size() * s.in.size(), s.out.size()};
  return {0, 0};
}

}  // namespace

std::string unavailable() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // clear it
    return fmt::format("no usable CUDA device ({}: {})", cudaGetErrorName(rc), cudaGetErrorString(rc));
  }
  if (count == 0) return "no CUDA device on this machine";
  return {};
}

std::string describe_device() {
  require_device();
  int device = 0;
  ASGD_CUDA(cudaGetDevice(&device));
  cudaDeviceProp p{};
  ASGD_CUDA(cudaGetDeviceProperties(&p, device));
  if (p.major == 0) {  // the emulated backend: no compute capability or memory size, but which device
    int count = 0;
    ASGD_CUDA(cudaGetDeviceCount(&count));
    return fmt::format("{}, device {} of {}", p.name, device, count);
  }
  return fmt::format("{}, sm_{}{}, {:.1f} GiB", p.name, p.major, p.minor,
                     static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
}

void layer_forward(const dense::Network& net, std::size_t layer, const float* params, const float* in, float* out,
                   std::size_t n) {
  require_device();
  check_layer(net, layer);
  const auto spec = net.specs()[layer];
  OneShot g(net, n, params, GpuNetwork::Pass::forward);
  DeviceBuffer<float> d_in(n * spec.in.size() + 1), d_out(n * spec.out.size() + 1);
  to_device(d_in.get(), in, n * spec.in.size(), g.s());
  // No samples: nothing to compute (cuBLAS refuses a GEMM with a leading dimension of 0).
  if (n > 0) g.net.layer_forward(layer, g.params.get(), d_in.get(), d_out.get(), n);
  to_host(out, d_out.get(), n * spec.out.size(), g.s());
  g.stream.synchronize();
}

void layer_backward(const dense::Network& net, std::size_t layer, const float* params, const float* in,
                    const float* dout, float* din, float* grad, std::size_t n) {
  require_device();
  check_layer(net, layer);
  const auto spec = net.specs()[layer];
  OneShot g(net, n, params);
  DeviceBuffer<float> d_grad(net.layout().size()), d_in(n * spec.in.size() + 1), d_out(n * spec.out.size() + 1),
      d_dout(n * spec.out.size() + 1), d_din(n * spec.in.size() + 1);
  d_grad.zero(g.s());
  to_device(d_in.get(), in, n * spec.in.size(), g.s());
  to_device(d_dout.get(), dout, n * spec.out.size(), g.s());
  if (n > 0) {  // else the gradient of no samples: the zeros above
    g.net.layer_forward(layer, g.params.get(), d_in.get(), d_out.get(), n);  // the scratch backward needs
    g.net.layer_backward(layer, g.params.get(), d_in.get(), d_out.get(), d_dout.get(), din ? d_din.get() : nullptr,
                         d_grad.get(), n);
  }
  if (din != nullptr) to_host(din, d_din.get(), n * spec.in.size(), g.s());
  const auto [wsize, bsize] = tensor_sizes(spec);
  if (grad != nullptr && wsize > 0) {
    to_host(grad + spec.weight, d_grad.get() + spec.weight, wsize, g.s());
    to_host(grad + spec.bias, d_grad.get() + spec.bias, bsize, g.s());
  }
  g.stream.synchronize();
}

double loss_and_gradient(const dense::Network& net, const float* params, const float* x, const std::uint8_t* labels,
                         std::size_t n, float* grad) {
  require_device();
  if (n == 0) throw InputError("gpu: loss of no samples");
  dense::check_labels({labels, n}, net.classes(), "gpu loss");
  const std::size_t P = net.layout().size(), D = net.input().size();
  OneShot g(net, n, params);
  DeviceBuffer<float> d_grad(P), d_x(n * D);
  DeviceBuffer<std::uint8_t> d_y(n);
  DeviceBuffer<double> d_loss(1);
  d_grad.zero(g.s());  // the layout's padding: the backward pass writes only the tensors
  to_device(d_x.get(), x, n * D, g.s());
  to_device(d_y.get(), labels, n, g.s());
  ASGD_CUDA(cudaMemsetAsync(d_loss.get(), 0, sizeof(double), g.s()));
  g.net.loss_and_gradient(g.params.get(), d_x.get(), d_y.get(), n, d_grad.get());
  kernels::accumulate_sum(g.net.sample_losses(), n, 1.0 / static_cast<double>(n), d_loss.get(), g.s());
  double loss = 0;
  to_host(grad, d_grad.get(), P, g.s());
  to_host(&loss, d_loss.get(), 1, g.s());
  g.stream.synchronize();
  return loss;
}

dense::EvalResult evaluate(const dense::Network& net, const float* params, const dense::Dataset& data,
                           std::size_t batch, std::span<double> seconds) {
  require_device();
  dense::check_images(net, data, "evaluate");
  OneShot g(net, std::min(batch, std::max<std::size_t>(data.size(), 1)), params, GpuNetwork::Pass::forward);
  const DeviceData d = upload(data, g.s());
  DeviceEvaluator evaluate_on_device(g.net);
  if (seconds.empty()) return evaluate_on_device(g.params.get(), d, g.s());
  g.stream.synchronize();  // the upload done: each pass is timed alone
  dense::EvalResult r;
  for (double& s : seconds) {
    const auto start = std::chrono::steady_clock::now();
    r = evaluate_on_device(g.params.get(), d, g.s());  // ends with its result on the host
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return r;
}

double sgemm_gflops(std::size_t n, std::size_t repeats) {
  require_device();
  if (n == 0 || repeats == 0) throw InputError("sgemm_gflops: n and repeats must be positive");
  Stream stream;
  const Cublas cublas(stream.get());
  const std::size_t nn = n * n;
  DeviceBuffer<float> a(nn), b(nn), c(nn);
  {  // random operands (zeros can let the GPU clock higher than real data does)
    std::vector<float> host(nn);
    FastRng rng(1);
    for (float& v : host) v = rng.uniform() - 0.5f;
    to_device(a.get(), host.data(), nn, stream.get());
    to_device(b.get(), host.data(), nn, stream.get());
  }
  const int N = static_cast<int>(n);
  const float one = 1.0f, zero = 0.0f;
  stream.synchronize();
  return dense::gemm_gflops(n, repeats, [&] {  // the warm-up also lets cuBLAS pick its kernel
    ASGD_CUBLAS(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, a.get(), N, b.get(), N, &zero,
                            c.get(), N));
    stream.synchronize();
  });
}

namespace {

// How many of its steps a stream may have queued and not done (at tau 0:
// how many rounds): one running and one waiting, so that the device never
// idles for the host. Else the host would queue every step of an epoch at
// once: a stop request would wait for the whole epoch, and at tau > 0 the
// version count the host keeps would run ahead of the device's, so the
// views' ages would count steps queued, not steps done.
constexpr std::size_t kQueueDepth = 2;

// One stream's state: its network buffers, minibatch, gradient and view.
struct Worker {
  Stream stream;
  Cublas cublas{stream.get()};
  std::unique_ptr<GpuNetwork> net;
  DeviceBuffer<float> x, grad, view;
  DeviceBuffer<std::uint8_t> y;
  DeviceBuffer<double> loss;  // sum of this epoch's minibatch mean losses
  Event grad_done, update_done, view_done;  // view_done: after the last copy into `view`
  std::array<Event, kQueueDepth> step_done;  // step (at tau 0: round) k's end in step_done[k % kQueueDepth]
  std::uint64_t view_version = 0;
  bool has_view = false;
  std::size_t batches = 0;
  double staleness_sum = 0;
  std::uint64_t max_staleness = 0, max_view_age = 0;
  StalenessEstimate estimate;  // what compensation reads, as BlockTrainer's worker keeps it
  // With cuda_graphs: the full-batch step on `graph_view`, captured once
  // (declared last: destroyed before the buffers it refers to).
  std::optional<Graph> step;
  const float* graph_view = nullptr;
  std::size_t graph_steps = 0;  // this epoch's

  // What one minibatch step queues on the stream, for the minibatch of m
  // samples in x and y: the loss and gradient on `params` into grad, and
  // the batch's mean loss added to `loss`.
  void queue_step(const float* params, std::size_t m) {
    net->loss_and_gradient(params, x.get(), y.get(), m, grad.get());
    kernels::accumulate_sum(net->sample_losses(), m, 1.0 / static_cast<double>(m), loss.get(), stream.get());
  }
};

// cuBLAS's recommended workspace on Hopper; ample for LeNet's GEMMs.
constexpr std::size_t kCublasWorkspace = std::size_t{32} << 20;

}  // namespace

std::vector<dense::EpochReport> train(const dense::Network& net, ParamStore& params,
                                      std::vector<float>& momentum_buffer, const dense::Dataset& data,
                                      const dense::Dataset* test, const GpuTrainOptions& o,
                                      const std::function<void(const dense::EpochReport&)>& on_epoch) {
  require_device();
  o.validate();
  const std::size_t P = net.layout().size(), D = net.input().size(), n = data.size();
  if (params.size() != P) throw InputError("train: the parameter store does not have the network's layout");
  dense::check_images(net, data, "train");
  if (test != nullptr) dense::check_images(net, *test, "train (test set)");
  if (n == 0) throw InputError("train: no training images");
  // No minibatch holds more than the n images: a larger --batch allocates no more than they take.
  const std::size_t W = o.workers, B = std::min(o.batch, n), batches = (n + B - 1) / B;
  static_assert(kMaxSynchronousStreams == static_cast<std::size_t>(kernels::kMaxGrads));
  check_streams(W, o.tau);
  momentum_buffer.resize(P, 0.0f);

  const BlockTrainOptions bo = o.block_options(batches);

  Stream copy;
  DeviceBuffer<float> d_w(P), d_v(P);
  to_device(d_w.get(), params.data(), P, copy.get());
  to_device(d_v.get(), momentum_buffer.data(), P, copy.get());
  const DeviceData train_data = upload(data, copy.get());
  std::optional<DeviceData> test_data;
  if (test != nullptr && test->size() > 0) test_data = upload(*test, copy.get());
  DeviceBuffer<std::uint32_t> d_index(n);
  std::vector<std::uint32_t> index(n);

  std::vector<std::unique_ptr<Worker>> workers;
  for (std::size_t w = 0; w < W; ++w) {
    auto wk = std::make_unique<Worker>();
    wk->net = std::make_unique<GpuNetwork>(net, B, wk->stream.get(), wk->cublas.get());
    wk->x.resize(B * D);
    wk->y.resize(B);
    wk->grad.resize(P);
    wk->grad.zero(wk->stream.get());  // the layout's padding stays 0 in every update
    if (o.tau > 0) wk->view.resize(P);
    wk->loss.resize(1);
    wk->loss.zero(wk->stream.get());  // the graph's warm-up step adds to it before the first epoch resets it
    // A workspace of the handle's own for every stream, graphs or not, so
    // that cuBLAS chooses its GEMMs alike in both modes.
    wk->cublas.own_workspace(kCublasWorkspace);
    if (o.cuda_graphs) {
      // The step reads the shared parameters at tau = 0 and the stream's
      // view otherwise: the pointer is bound into the graph.
      Worker& w = *wk;
      w.graph_view = o.tau == 0 ? d_w.get() : w.view.get();
      // One step kernel by kernel first (on zeros; it leaves nothing behind:
      // the gradient is overwritten by every step, the loss reset every
      // epoch), so that what cuBLAS and the runtime set up lazily on first
      // use is not met inside the capture, where allocating fails.
      w.x.zero(w.stream.get());
      w.y.zero(w.stream.get());
      w.queue_step(d_w.get(), B);
      w.stream.synchronize();
      w.step.emplace(w.stream.get(), [&] { w.queue_step(w.graph_view, B); });
    }
    workers.push_back(std::move(wk));
  }
  std::unique_ptr<GpuNetwork> eval_net;
  std::optional<DeviceEvaluator> evaluate_on_device;
  Stream eval_stream;
  Cublas eval_cublas(eval_stream.get());
  if (test_data) {
    eval_net = std::make_unique<GpuNetwork>(net, 1000, eval_stream.get(), eval_cublas.get(), GpuNetwork::Pass::forward);
    evaluate_on_device.emplace(*eval_net);
  }

  // The order of operations on the shared parameters: every update, and
  // every change from the host, waits for the one before (an event chain),
  // so each is atomic with respect to the others.
  std::mutex chain;
  const Event* last = nullptr;
  std::uint64_t version = 0;  // updates made (guarded by chain)
  auto after_last = [&](cudaStream_t s) {
    if (last != nullptr) last->wait_on(s);
  };
  // At tau > 0 the views are copied from snapshots, not from d_w: after
  // every update the chain copies the parameters into slot version % R of a
  // ring. A copy from d_w would have to wait for the newest update queued,
  // and so for the gradient before it on another stream: the streams'
  // gradients would run one after another. A refresh takes the newest
  // snapshot that the delay rule allows and that costs no wait: complete
  // already, or taken on the worker's own stream (behind its own update,
  // which its next gradient follows anyway; so one stream always sees its
  // last update). Only when there is none does it wait (for the oldest
  // allowed). A slot is written again only after the copies that read it
  // (their view_done).
  const bool views = o.tau > 0;
  // The versions not yet done are at most about W x kQueueDepth: a ring of
  // that many, and 2 more, holds a complete snapshot nearly always.
  const std::size_t R = views ? W * kQueueDepth + 2 : 0;
  struct Snapshot {
    DeviceBuffer<float> params;
    Event ready;                   // after the copy into params
    std::uint64_t version = 0;     // of the parameters it holds
    cudaStream_t stream = nullptr;  // where it was written
    std::vector<Worker*> readers;  // copies from it since it was written
  };
  std::vector<Snapshot> ring(R);  // built in place: an Event does not move
  for (Snapshot& slot : ring) slot.params.resize(P);
  std::uint64_t first_valid = 0;  // older snapshots predate a change of d_w made from the host
  // Under `chain`, or while no worker thread runs: d_w as it is after the
  // work queued on s so far becomes the snapshot of `version`.
  auto snapshot = [&](cudaStream_t s) {
    Snapshot& slot = ring[version % R];
    for (Worker* reader : slot.readers) reader->view_done.wait_on(s);
    slot.readers.clear();
    ASGD_CUDA(cudaMemcpyAsync(slot.params.get(), d_w.get(), P * sizeof(float), cudaMemcpyDeviceToDevice, s));
    slot.ready.record(s);
    slot.version = version;
    slot.stream = s;
  };
  // Under `chain`: brings wk's view within the delay rule, from a snapshot.
  auto refresh_view = [&](Worker& wk) {
    if (wk.has_view && o.tau != kUnbounded && version - wk.view_version <= o.tau) return;  // young enough
    // The versions allowed, all still in the ring: [lo, version].
    std::uint64_t lo = std::max(first_valid, version + 1 >= R ? version + 1 - R : 0);
    if (o.tau != kUnbounded && version > o.tau) lo = std::max(lo, version - o.tau);
    std::optional<std::uint64_t> newest_free;
    for (std::uint64_t v = version + 1; v-- > lo;) {
      const Snapshot& slot = ring[v % R];
      if (slot.version != v) throw std::logic_error("gpu: a snapshot missing from the ring");
      if (slot.stream == wk.stream.get() || slot.ready.done()) {
        newest_free = v;
        break;
      }
    }
    // Any age is allowed at tau = inf: a view is replaced only by a newer one, never waited for.
    if (o.tau == kUnbounded && wk.has_view && (!newest_free || *newest_free <= wk.view_version)) return;
    const std::uint64_t v = newest_free.value_or(lo);
    Snapshot& slot = ring[v % R];
    slot.ready.wait_on(wk.stream.get());
    ASGD_CUDA(cudaMemcpyAsync(wk.view.get(), slot.params.get(), P * sizeof(float), cudaMemcpyDeviceToDevice,
                              wk.stream.get()));
    wk.view_done.record(wk.stream.get());
    if (std::find(slot.readers.begin(), slot.readers.end(), &wk) == slot.readers.end()) slot.readers.push_back(&wk);
    wk.view_version = v;
    wk.has_view = true;
  };
  // After the host changed d_w (on the copy stream): views and snapshots of
  // earlier parameters are not used again.
  auto host_changed_parameters = [&] {
    for (auto& wk : workers) wk->has_view = false;
    if (!views) return;
    snapshot(copy.get());
    first_valid = version;
  };
  if (views) snapshot(copy.get());  // version 0: the parameters as uploaded
  // bo.after_updates (under mpirun: the ranks average their models) runs on
  // the host copy of the parameters: after the last update, the parameters
  // go to the host, and every later update or view copy waits for their
  // return; views taken before are refreshed before their next gradient, as
  // on the CPU. The momentum stays on the device.
  Event exchanged;
  auto exchange = [&] {
    // Under `chain` (or on the one host thread at tau = 0).
    after_last(copy.get());
    to_host(params.data(), d_w.get(), P, copy.get());
    copy.synchronize();
    bo.after_updates();
    to_device(d_w.get(), params.data(), P, copy.get());
    host_changed_parameters();
    exchanged.record(copy.get());
    last = &exchanged;
  };
  auto update = [&](Worker& wk, const kernels::GradSum& g, std::uint64_t staleness) {
    // Under `chain`.
    const BlockStep current = block_step(bo, wk.estimate.add(staleness), bo.first_update + version);
    after_last(wk.stream.get());
    kernels::sgd_momentum(d_w.get(), d_v.get(), g, P, current.lr, current.momentum, o.weight_decay,
                          wk.stream.get());
    ++version;
    if (views) snapshot(wk.stream.get());
    wk.update_done.record(wk.stream.get());
    last = &wk.update_done;
    if (bo.update_hook_due(bo.first_update + version)) exchange();
  };

  std::vector<dense::EpochReport> reports;
  for (std::size_t e = 0; e < o.epochs; ++e) {
    const std::size_t epoch = o.first_epoch + e;
    const std::vector<std::size_t> order = dense::shuffled_indices(n, dense::epoch_seed(o.seed, epoch));
    for (std::size_t i = 0; i < n; ++i) index[i] = static_cast<std::uint32_t>(order[i]);
    to_device(d_index.get(), index.data(), n, copy.get());
    copy.synchronize();
    for (auto& wk : workers) {
      ASGD_CUDA(cudaMemsetAsync(wk->loss.get(), 0, sizeof(double), wk->stream.get()));
      wk->batches = 0;
      wk->graph_steps = 0;
      wk->staleness_sum = 0;
      wk->max_staleness = wk->max_view_age = 0;
    }
    const auto t0 = std::chrono::steady_clock::now();
    bool stopped = false;  // by o.stop, minibatches left untrained
    auto gradient = [&](Worker& wk, std::size_t b, const float* view) {
      const std::size_t first = b * B, m = std::min(B, n - first);
      kernels::gather(train_data.images.get(), train_data.labels.get(), d_index.get(), first, m, D, wk.x.get(),
                      wk.y.get(), wk.stream.get());
      if (wk.step && m == B) {
        if (view != wk.graph_view) throw std::logic_error("gpu: a step graph launched on another view");
        wk.step->launch(wk.stream.get());
        ++wk.graph_steps;
      } else {
        wk.queue_step(view, m);
      }
      ++wk.batches;
      return m;
    };

    if (o.tau == 0) {
      // Synchronous rounds, driven from this thread: the W streams compute
      // on the same parameters, then one update on stream 0 uses the
      // sample-weighted mean of their gradients.
      Worker& lead = *workers[0];
      for (std::size_t round = 0; round * W < batches; ++round) {
        // At most kQueueDepth rounds queued ahead of the device.
        if (round >= kQueueDepth) lead.step_done[round % kQueueDepth].synchronize();
        if (o.stop_requested()) {
          stopped = true;
          break;
        }
        kernels::GradSum g{};
        std::size_t total = 0, sizes[kernels::kMaxGrads] = {};
        for (std::size_t w = 0; w < W && round * W + w < batches; ++w) {
          Worker& wk = *workers[w];
          after_last(wk.stream.get());
          sizes[w] = gradient(wk, round * W + w, d_w.get());
          wk.grad_done.record(wk.stream.get());
          total += sizes[w];
          g.grads[g.count++] = wk.grad.get();
        }
        for (int w = 0; w < g.count; ++w) {
          g.weights[w] = static_cast<float>(sizes[w]) / static_cast<float>(total);
          if (w > 0) workers[static_cast<std::size_t>(w)]->grad_done.wait_on(lead.stream.get());
        }
        update(lead, g, 0);
        lead.step_done[round % kQueueDepth].record(lead.stream.get());
      }
    } else {
      // Bounded delay: stream w computes on a view at most tau updates old
      // (refreshed every step at tau = inf); BoundedDelay keeps each host
      // thread at most tau steps ahead of the slowest.
      BoundedDelay gate(W, o.tau);
      std::atomic<std::size_t> next{0};
      std::vector<std::exception_ptr> errors(W);
      std::vector<std::thread> threads;
      for (std::size_t w = 0; w < W; ++w)
        threads.emplace_back([&, w] {
          Worker& wk = *workers[w];
          try {
            use_device();
            for (std::size_t step = 0;; ++step) {
              if (o.stop_requested()) break;
              const std::size_t b = next.fetch_add(1);
              if (b >= batches) break;
              // At most kQueueDepth steps of this stream queued ahead of the device (see kQueueDepth). Not under
              // `chain`: the work waited for is queued already and needs nothing more from the host.
              if (step >= kQueueDepth) wk.step_done[step % kQueueDepth].synchronize();
              if (!gate.enter(w)) break;
              {
                std::scoped_lock lock(chain);
                refresh_view(wk);
                wk.max_view_age = std::max(wk.max_view_age, version - wk.view_version);
              }
              gradient(wk, b, wk.view.get());
              {
                std::scoped_lock lock(chain);
                const std::uint64_t staleness = version - wk.view_version;
                wk.staleness_sum += static_cast<double>(staleness);
                wk.max_staleness = std::max(wk.max_staleness, staleness);
                kernels::GradSum g{};
                g.grads[0] = wk.grad.get();
                g.weights[0] = 1.0f;
                g.count = 1;
                update(wk, g, staleness);
              }
              wk.step_done[step % kQueueDepth].record(wk.stream.get());
              gate.finish_step(w);
            }
          } catch (...) {
            errors[w] = std::current_exception();
            gate.cancel();
          }
          gate.retire(w);
        });
      for (auto& t : threads) t.join();
      for (auto& err : errors)
        if (err) std::rethrow_exception(err);
      stopped = next.load() < batches;  // only a stop request leaves minibatches untaken
    }
    if (stopped) {
      // An unfinished epoch, as on the CPU: not reported; the host copy holds the updates made.
      ASGD_CUDA(cudaDeviceSynchronize());
      to_host(params.data(), d_w.get(), P, copy.get());
      to_host(momentum_buffer.data(), d_v.get(), P, copy.get());
      copy.synchronize();
      break;
    }

    double loss_sum = 0, staleness_estimate = 0;
    std::size_t batches_done = 0;
    dense::EpochReport r;
    for (auto& wk : workers) {
      staleness_estimate += wk->estimate.value() / static_cast<double>(W);
      double l = 0;
      to_host(&l, wk->loss.get(), 1, wk->stream.get());
      wk->stream.synchronize();
      loss_sum += l;
      batches_done += wk->batches;
      r.graph_steps += wk->graph_steps;
      r.mean_staleness += wk->staleness_sum;
      r.max_staleness = std::max(r.max_staleness, wk->max_staleness);
      r.max_view_age = std::max(r.max_view_age, wk->max_view_age);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.epoch = epoch + 1;
    r.seconds = seconds;
    r.images_per_second = static_cast<double>(n) / std::max(seconds, 1e-9);
    r.mean_loss = batches_done ? loss_sum / static_cast<double>(batches_done) : 0.0;
    if (!std::isfinite(r.mean_loss))
      throw RuntimeError(fmt::format("gpu: the training loss became {} in epoch {} (lower --lr?)", r.mean_loss,
                                     epoch + 1));
    r.mean_staleness = o.tau == 0 ? 0.0 : r.mean_staleness / static_cast<double>(std::max<std::size_t>(batches_done, 1));
    // What the next update would take, as BlockTrainer reports it (the CSV's columns mean the same on both
    // devices; a cosine schedule ends at 0).
    const BlockStep next = block_step(bo, o.tau == 0 ? 0.0 : staleness_estimate, bo.first_update + version);
    r.momentum = next.momentum;
    r.lr = next.lr;
    to_host(params.data(), d_w.get(), P, copy.get());
    to_host(momentum_buffer.data(), d_v.get(), P, copy.get());
    copy.synchronize();
    if (o.after_epoch) {  // it may change the parameters and the momentum, as on the CPU
      o.after_epoch();
      to_device(d_w.get(), params.data(), P, copy.get());
      to_device(d_v.get(), momentum_buffer.data(), P, copy.get());
      host_changed_parameters();
      copy.synchronize();
    }
    std::optional<dense::EvalResult> scored;
    if (test_data) {
      ASGD_CUDA(cudaDeviceSynchronize());
      scored = (*evaluate_on_device)(d_w.get(), *test_data, eval_stream.get());
      r.test_accuracy = scored->accuracy;
    }
    dense::check_not_diverged({params.data(), params.size()}, scored ? &*scored : nullptr, r.epoch);
    reports.push_back(r);
    if (on_epoch) on_epoch(r);
  }
  return reports;
}

}  // namespace asgd::gpu::cuda

// The one symbol the module exports.
extern "C" ASGD_GPU_BACKEND_EXPORT const asgd::gpu::detail::Backend* asgd_gpu_cuda_backend() {
  namespace c = asgd::gpu::cuda;
  static const asgd::gpu::detail::Backend table{
      asgd::gpu::detail::kBackendAbi, &c::unavailable,   &c::describe_device,   &c::train,
      &c::evaluate,                   &c::sgemm_gflops,  &c::layer_forward,     &c::layer_backward,
      &c::loss_and_gradient};
  return &table;
}
