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
  if (!why.empty()) throw RuntimeError("gpu: " + why);
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

// At tau > 0 a stream's view is copied from a snapshot of the parameters (see GpuTrainer::refresh_view).
struct Snapshot {
  DeviceBuffer<float> params;
  Event ready;                    // after the copy into params
  std::uint64_t version = 0;      // of the parameters it holds
  cudaStream_t stream = nullptr;  // where it was written
  std::vector<Worker*> readers;   // copies from it since it was written
};

// One call of train(): the parameters and momentum on the device, the data,
// W streams (workers) and the order of the updates they make.
class GpuTrainer {
 public:
  GpuTrainer(const dense::Network& net, ParamStore& params, std::vector<float>& momentum, const dense::Dataset& data,
             const dense::Dataset* test, const GpuTrainOptions& o);
  std::vector<dense::EpochReport> run(const std::function<void(const dense::EpochReport&)>& on_epoch);

 private:
  std::unique_ptr<Worker> make_worker(const dense::Network& net);
  void after_last(cudaStream_t s) {
    if (last_ != nullptr) last_->wait_on(s);
  }
  void snapshot(cudaStream_t s);
  void refresh_view(Worker& wk);
  void host_changed_parameters();
  void exchange();
  void update(Worker& wk, const kernels::GradSum& g, std::uint64_t staleness);
  std::size_t gradient(Worker& wk, std::size_t b, const float* view);
  void start_epoch(std::size_t epoch);
  bool run_rounds();   // tau 0; true when a stop request left minibatches untrained
  bool run_streams();  // tau > 0; the same
  void stream_loop(std::size_t w, BoundedDelay& gate, std::atomic<std::size_t>& next);
  // `t0`: when the epoch started (its time runs until the streams' work is done).
  dense::EpochReport finish_epoch(std::size_t epoch, std::chrono::steady_clock::time_point t0);
  void parameters_to_host();

  const GpuTrainOptions& o_;
  ParamStore& params_;
  std::vector<float>& momentum_;
  const std::size_t P_, D_, n_, W_, B_, batches_;
  const BlockTrainOptions bo_;
  Stream copy_;
  DeviceBuffer<float> d_w_, d_v_;
  DeviceData train_data_;
  std::optional<DeviceData> test_data_;
  DeviceBuffer<std::uint32_t> d_index_;
  std::vector<std::uint32_t> index_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<GpuNetwork> eval_net_;
  std::optional<DeviceEvaluator> evaluate_on_device_;
  Stream eval_stream_;
  Cublas eval_cublas_{eval_stream_.get()};
  // The order of operations on the shared parameters: every update, and
  // every change from the host, waits for the one before (an event chain),
  // so each is atomic with respect to the others.
  std::mutex chain_;
  const Event* last_ = nullptr;
  std::uint64_t version_ = 0;  // updates made (guarded by chain_)
  // At tau > 0 the views are copied from snapshots in a ring of R_ (see refresh_view). The versions not yet
  // done are at most about W x kQueueDepth: a ring of that many, and 2 more, holds a complete snapshot nearly
  // always.
  const bool views_;
  const std::size_t R_;
  std::vector<Snapshot> ring_;     // built in place: an Event does not move
  std::uint64_t first_valid_ = 0;  // older snapshots predate a change of d_w made from the host
  Event exchanged_;
};

GpuTrainer::GpuTrainer(const dense::Network& net, ParamStore& params, std::vector<float>& momentum,
                       const dense::Dataset& data, const dense::Dataset* test, const GpuTrainOptions& o)
    : o_(o),
      params_(params),
      momentum_(momentum),
      P_(net.layout().size()),
      D_(net.input().size()),
      n_(data.size()),
      W_(o.workers),
      // No minibatch holds more than the n images: a larger --batch allocates no more than they take.
      B_(std::min(o.batch, n_)),
      batches_((n_ + B_ - 1) / B_),
      bo_(o.block_options(batches_)),
      d_w_(P_),
      d_v_(P_),
      train_data_(upload(data, copy_.get())),
      d_index_(n_),
      index_(n_),
      views_(o.tau > 0),
      R_(views_ ? W_ * kQueueDepth + 2 : 0),
      ring_(R_) {
  momentum_.resize(P_, 0.0f);
  to_device(d_w_.get(), params_.data(), P_, copy_.get());
  to_device(d_v_.get(), momentum_.data(), P_, copy_.get());
  if (test != nullptr && test->size() > 0) test_data_ = upload(*test, copy_.get());
  // The parameters are on the device before any stream reads them (the graphs' warm-up steps below do).
  copy_.synchronize();
  for (std::size_t w = 0; w < W_; ++w) workers_.push_back(make_worker(net));
  if (test_data_) {
    eval_net_ = std::make_unique<GpuNetwork>(net, 1000, eval_stream_.get(), eval_cublas_.get(),
                                             GpuNetwork::Pass::forward);
    evaluate_on_device_.emplace(*eval_net_);
  }
  for (Snapshot& slot : ring_) slot.params.resize(P_);
  if (views_) snapshot(copy_.get());  // version 0: the parameters as uploaded
}

std::unique_ptr<Worker> GpuTrainer::make_worker(const dense::Network& net) {
  auto wk = std::make_unique<Worker>();
  wk->net = std::make_unique<GpuNetwork>(net, B_, wk->stream.get(), wk->cublas.get());
  wk->x.resize(B_ * D_);
  wk->y.resize(B_);
  wk->grad.resize(P_);
  wk->grad.zero(wk->stream.get());  // the layout's padding stays 0 in every update
  if (o_.tau > 0) wk->view.resize(P_);
  wk->loss.resize(1);
  wk->loss.zero(wk->stream.get());  // the graph's warm-up step adds to it before the first epoch resets it
  // A workspace of the handle's own for every stream, graphs or not, so
  // that cuBLAS chooses its GEMMs alike in both modes.
  wk->cublas.own_workspace(kCublasWorkspace);
  if (o_.cuda_graphs) {
    // The step reads the shared parameters at tau = 0 and the stream's
    // view otherwise: the pointer is bound into the graph.
    Worker& w = *wk;
    w.graph_view = o_.tau == 0 ? d_w_.get() : w.view.get();
    // One step kernel by kernel first (on zeros; it leaves nothing behind:
    // the gradient is overwritten by every step, the loss reset every
    // epoch), so that what cuBLAS and the runtime set up lazily on first
    // use is not met inside the capture, where allocating fails.
    w.x.zero(w.stream.get());
    w.y.zero(w.stream.get());
    w.queue_step(d_w_.get(), B_);
    w.stream.synchronize();
    w.step.emplace(w.stream.get(), [&] { w.queue_step(w.graph_view, B_); });
  }
  return wk;
}

// Under chain_, or while no worker thread runs: d_w as it is after the work queued on s so far becomes the
// snapshot of version_. A slot is written again only after the copies that read it (their view_done).
void GpuTrainer::snapshot(cudaStream_t s) {
  Snapshot& slot = ring_[version_ % R_];
  for (Worker* reader : slot.readers) reader->view_done.wait_on(s);
  slot.readers.clear();
  ASGD_CUDA(cudaMemcpyAsync(slot.params.get(), d_w_.get(), P_ * sizeof(float), cudaMemcpyDeviceToDevice, s));
  slot.ready.record(s);
  slot.version = version_;
  slot.stream = s;
}

// Under chain_: brings wk's view within the delay rule, from a snapshot. A copy from d_w would have to wait for
// the newest update queued, and so for the gradient before it on another stream: the streams' gradients would
// run one after another. A refresh takes the newest snapshot that the delay rule allows and that costs no wait:
// complete already, or taken on the worker's own stream (behind its own update, which its next gradient follows
// anyway; so one stream always sees its last update). Only when there is none does it wait (for the oldest
// allowed).
void GpuTrainer::refresh_view(Worker& wk) {
  if (wk.has_view && o_.tau != kUnbounded && version_ - wk.view_version <= o_.tau) return;  // young enough
  // The versions allowed, all still in the ring: [lo, version_].
  std::uint64_t lo = std::max(first_valid_, version_ + 1 >= R_ ? version_ + 1 - R_ : 0);
  if (o_.tau != kUnbounded && version_ > o_.tau) lo = std::max(lo, version_ - o_.tau);
  std::optional<std::uint64_t> newest_free;
  for (std::uint64_t v = version_ + 1; v-- > lo;) {
    const Snapshot& slot = ring_[v % R_];
    if (slot.version != v) throw std::logic_error("gpu: a snapshot missing from the ring");
    if (slot.stream == wk.stream.get() || slot.ready.done()) {
      newest_free = v;
      break;
    }
  }
  // Any age is allowed at tau = inf: a view is replaced only by a newer one, never waited for.
  if (o_.tau == kUnbounded && wk.has_view && (!newest_free || *newest_free <= wk.view_version)) return;
  const std::uint64_t v = newest_free.value_or(lo);
  Snapshot& slot = ring_[v % R_];
  slot.ready.wait_on(wk.stream.get());
  ASGD_CUDA(cudaMemcpyAsync(wk.view.get(), slot.params.get(), P_ * sizeof(float), cudaMemcpyDeviceToDevice,
                            wk.stream.get()));
  wk.view_done.record(wk.stream.get());
  if (std::find(slot.readers.begin(), slot.readers.end(), &wk) == slot.readers.end()) slot.readers.push_back(&wk);
  wk.view_version = v;
  wk.has_view = true;
}

// After the host changed d_w (on the copy stream): views and snapshots of earlier parameters are not used again.
void GpuTrainer::host_changed_parameters() {
  for (auto& wk : workers_) wk->has_view = false;
  if (!views_) return;
  snapshot(copy_.get());
  first_valid_ = version_;
}

// bo_.after_updates (under mpirun: the ranks average their models) runs on the host copy of the parameters:
// after the last update, the parameters go to the host, and every later update or view copy waits for their
// return; views taken before are refreshed before their next gradient, as on the CPU. The momentum stays on the
// device. Under chain_ (or on the one host thread at tau = 0).
void GpuTrainer::exchange() {
  after_last(copy_.get());
  to_host(params_.data(), d_w_.get(), P_, copy_.get());
  copy_.synchronize();
  bo_.after_updates();
  to_device(d_w_.get(), params_.data(), P_, copy_.get());
  host_changed_parameters();
  exchanged_.record(copy_.get());
  last_ = &exchanged_;
}

// Under chain_.
void GpuTrainer::update(Worker& wk, const kernels::GradSum& g, std::uint64_t staleness) {
  const BlockStep current = block_step(bo_, wk.estimate.add(staleness), bo_.first_update + version_);
  after_last(wk.stream.get());
  kernels::sgd_momentum(d_w_.get(), d_v_.get(), g, P_, current.lr, current.momentum, o_.weight_decay,
                        wk.stream.get());
  ++version_;
  if (views_) snapshot(wk.stream.get());
  wk.update_done.record(wk.stream.get());
  last_ = &wk.update_done;
  if (bo_.update_hook_due(bo_.first_update + version_)) exchange();
}

// Queues minibatch b's gradient on wk's stream, from `view`; returns its images.
std::size_t GpuTrainer::gradient(Worker& wk, std::size_t b, const float* view) {
  const std::size_t first = b * B_, m = std::min(B_, n_ - first);
  kernels::gather(train_data_.images.get(), train_data_.labels.get(), d_index_.get(), first, m, D_, wk.x.get(),
                  wk.y.get(), wk.stream.get());
  if (wk.step && m == B_) {
    if (view != wk.graph_view) throw std::logic_error("gpu: a step graph launched on another view");
    wk.step->launch(wk.stream.get());
    ++wk.graph_steps;
  } else {
    wk.queue_step(view, m);
  }
  ++wk.batches;
  return m;
}

void GpuTrainer::start_epoch(std::size_t epoch) {
  const std::vector<std::size_t> order = dense::shuffled_indices(n_, dense::epoch_seed(o_.seed, epoch));
  for (std::size_t i = 0; i < n_; ++i) index_[i] = static_cast<std::uint32_t>(order[i]);
  to_device(d_index_.get(), index_.data(), n_, copy_.get());
  copy_.synchronize();
  for (auto& wk : workers_) {
    ASGD_CUDA(cudaMemsetAsync(wk->loss.get(), 0, sizeof(double), wk->stream.get()));
    wk->batches = 0;
    wk->graph_steps = 0;
    wk->staleness_sum = 0;
    wk->max_staleness = wk->max_view_age = 0;
  }
}

// Synchronous rounds, driven from this thread: the W streams compute on the same parameters, then one update
// on stream 0 uses the sample-weighted mean of their gradients.
bool GpuTrainer::run_rounds() {
  Worker& lead = *workers_[0];
  for (std::size_t round = 0; round * W_ < batches_; ++round) {
    // At most kQueueDepth rounds queued ahead of the device.
    if (round >= kQueueDepth) lead.step_done[round % kQueueDepth].synchronize();
    if (o_.stop_requested()) return true;
    kernels::GradSum g{};
    std::size_t total = 0, sizes[kernels::kMaxGrads] = {};
    for (std::size_t w = 0; w < W_ && round * W_ + w < batches_; ++w) {
      Worker& wk = *workers_[w];
      after_last(wk.stream.get());
      sizes[w] = gradient(wk, round * W_ + w, d_w_.get());
      wk.grad_done.record(wk.stream.get());
      total += sizes[w];
      g.grads[g.count++] = wk.grad.get();
    }
    for (int w = 0; w < g.count; ++w) {
      g.weights[w] = static_cast<float>(sizes[w]) / static_cast<float>(total);
      if (w > 0) workers_[static_cast<std::size_t>(w)]->grad_done.wait_on(lead.stream.get());
    }
    update(lead, g, 0);
    lead.step_done[round % kQueueDepth].record(lead.stream.get());
  }
  return false;
}

// Stream w's host thread at tau > 0: computes on a view at most tau updates old (refreshed every step at tau =
// inf); the gate keeps it at most tau steps ahead of the slowest.
void GpuTrainer::stream_loop(std::size_t w, BoundedDelay& gate, std::atomic<std::size_t>& next) {
  Worker& wk = *workers_[w];
  use_device();
  for (std::size_t step = 0;; ++step) {
    if (o_.stop_requested()) break;
    const std::size_t b = next.fetch_add(1);
    if (b >= batches_) break;
    // At most kQueueDepth steps of this stream queued ahead of the device (see kQueueDepth). Not under
    // chain_: the work waited for is queued already and needs nothing more from the host.
    if (step >= kQueueDepth) wk.step_done[step % kQueueDepth].synchronize();
    if (!gate.enter(w)) break;
    {
      std::scoped_lock lock(chain_);
      refresh_view(wk);
      wk.max_view_age = std::max(wk.max_view_age, version_ - wk.view_version);
    }
    gradient(wk, b, wk.view.get());
    {
      std::scoped_lock lock(chain_);
      const std::uint64_t staleness = version_ - wk.view_version;
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
}

bool GpuTrainer::run_streams() {
  BoundedDelay gate(W_, o_.tau);
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> errors(W_);
  std::vector<std::thread> threads;
  for (std::size_t w = 0; w < W_; ++w)
    threads.emplace_back([&, w] {
      try {
        stream_loop(w, gate, next);
      } catch (...) {
        errors[w] = std::current_exception();
        gate.cancel();
      }
      gate.retire(w);
    });
  for (auto& t : threads) t.join();
  for (auto& err : errors)
    if (err) std::rethrow_exception(err);
  return next.load() < batches_;  // only a stop request leaves minibatches untaken
}

void GpuTrainer::parameters_to_host() {
  to_host(params_.data(), d_w_.get(), P_, copy_.get());
  to_host(momentum_.data(), d_v_.get(), P_, copy_.get());
  copy_.synchronize();
}

// The epoch's report from the streams' sums; the parameters and momentum back on the host (after_epoch may change
// them, as on the CPU), and the test accuracy.
dense::EpochReport GpuTrainer::finish_epoch(std::size_t epoch, std::chrono::steady_clock::time_point t0) {
  double loss_sum = 0, staleness_estimate = 0;
  std::size_t batches_done = 0;
  dense::EpochReport r;
  for (auto& wk : workers_) {
    staleness_estimate += wk->estimate.value() / static_cast<double>(W_);
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
  r.images_per_second = static_cast<double>(n_) / std::max(seconds, 1e-9);
  r.mean_loss = batches_done ? loss_sum / static_cast<double>(batches_done) : 0.0;
  if (!std::isfinite(r.mean_loss))
    throw RuntimeError(fmt::format("gpu: the training loss became {} in epoch {} (lower TrainOptions::lr?)", r.mean_loss,
                                   epoch + 1));
  r.mean_staleness =
      o_.tau == 0 ? 0.0 : r.mean_staleness / static_cast<double>(std::max<std::size_t>(batches_done, 1));
  // What the next update would take, as BlockTrainer reports it (the CSV's columns mean the same on both
  // devices; a cosine schedule ends at 0).
  const BlockStep next = block_step(bo_, o_.tau == 0 ? 0.0 : staleness_estimate, bo_.first_update + version_);
  r.momentum = next.momentum;
  r.lr = next.lr;
  parameters_to_host();
  if (o_.after_epoch) {
    o_.after_epoch();
    to_device(d_w_.get(), params_.data(), P_, copy_.get());
    to_device(d_v_.get(), momentum_.data(), P_, copy_.get());
    host_changed_parameters();
    copy_.synchronize();
  }
  std::optional<dense::EvalResult> scored;
  if (test_data_) {
    ASGD_CUDA(cudaDeviceSynchronize());
    scored = (*evaluate_on_device_)(d_w_.get(), *test_data_, eval_stream_.get());
    r.test_accuracy = scored->accuracy;
  }
  dense::check_not_diverged({params_.data(), params_.size()}, scored ? &*scored : nullptr, r.epoch);
  return r;
}

std::vector<dense::EpochReport> GpuTrainer::run(const std::function<void(const dense::EpochReport&)>& on_epoch) {
  std::vector<dense::EpochReport> reports;
  for (std::size_t e = 0; e < o_.epochs; ++e) {
    const std::size_t epoch = o_.first_epoch + e;
    start_epoch(epoch);
    const auto t0 = std::chrono::steady_clock::now();
    if (o_.tau == 0 ? run_rounds() : run_streams()) {
      // An unfinished epoch, as on the CPU: not reported; the host copy holds the updates made.
      ASGD_CUDA(cudaDeviceSynchronize());
      parameters_to_host();
      break;
    }
    reports.push_back(finish_epoch(epoch, t0));
    if (on_epoch) on_epoch(reports.back());
  }
  return reports;
}

}  // namespace

std::vector<dense::EpochReport> train(const dense::Network& net, ParamStore& params,
                                      std::vector<float>& momentum_buffer, const dense::Dataset& data,
                                      const dense::Dataset* test, const GpuTrainOptions& o,
                                      const std::function<void(const dense::EpochReport&)>& on_epoch) {
  require_device();
  o.validate();
  if (params.size() != net.layout().size())
    throw InputError("train: the parameter store does not have the network's layout");
  dense::check_images(net, data, "train");
  if (test != nullptr) dense::check_images(net, *test, "train (test set)");
  if (data.size() == 0) throw InputError("train: no training images");
  static_assert(kMaxSynchronousStreams == static_cast<std::size_t>(kernels::kMaxGrads));
  check_streams(o.workers, o.tau);
  GpuTrainer trainer(net, params, momentum_buffer, data, test, o);
  return trainer.run(on_epoch);
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
