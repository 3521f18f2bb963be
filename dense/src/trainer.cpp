#include "asgd/dense/trainer.hpp"

#include <Eigen/Core>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <exception>
#include <fmt/format.h>
#include <mutex>
#include <thread>

#include "asgd/engine/errors.hpp"

namespace asgd::dense {

void TrainOptions::validate() const {
  if (epochs == 0) throw InputError("--epochs: must be at least 1");
  if (batch == 0) throw InputError("--batch: must be at least 1");
  if (workers == 0 || workers > 256) throw InputError("--workers: must be 1..256");
  if (gemm_threads == 0 || gemm_threads > 256) throw InputError("--threads: must be a multiple of --workers");
  if (!(lr > 0) || !std::isfinite(lr)) throw InputError("--lr: must be positive");
  if (!(momentum >= 0 && momentum < 1)) throw InputError("--momentum: must be in [0, 1)");
  if (!(weight_decay >= 0) || !std::isfinite(weight_decay)) throw InputError("--weight-decay: must be >= 0");
}

EvalResult evaluate(const Network& net, const float* params, const Dataset& data, std::size_t batch,
                    std::size_t threads) {
  const std::size_t k = net.classes(), n = data.size();
  if (data.image_size() != net.input().size())
    throw InputError(fmt::format("evaluate: images of {} pixels for a network that takes {}", data.image_size(),
                                 net.input().size()));
  batch = std::max<std::size_t>(1, batch);
  threads = std::max<std::size_t>(1, std::min(threads, (n + batch - 1) / std::max<std::size_t>(1, batch)));
  const std::size_t batches = (n + batch - 1) / batch;
  std::atomic<std::size_t> next{0};
  std::vector<std::vector<std::size_t>> confusion(threads, std::vector<std::size_t>(k * k, 0));
  std::vector<double> loss(threads, 0);
  {
    std::vector<std::jthread> pool;
    for (std::size_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        // A batch is run in tiles of at most kTile images: at batch 1000 the
        // first convolution's im2col alone would be 78 MB, far out of cache.
        constexpr std::size_t kTile = 128;
        Workspace ws = net.workspace(std::min(batch, kTile));
        for (std::size_t b; (b = next.fetch_add(1)) < batches;) {
          const std::size_t end = std::min(n, (b + 1) * batch);
          for (std::size_t first = b * batch; first < end; first += kTile) {
            const std::size_t m = std::min(kTile, end - first);
            const float* logits = net.forward(params, data.pixels.data() + first * data.image_size(), m, ws);
            loss[t] += softmax_cross_entropy(logits, data.labels.data() + first, m, k, nullptr, 0.0f);
            for (std::size_t s = 0; s < m; ++s) {
              const float* z = logits + s * k;
              const std::size_t pred = static_cast<std::size_t>(std::max_element(z, z + k) - z);
              ++confusion[t][data.labels[first + s] * k + pred];
            }
          }
        }
      });
  }
  EvalResult r;
  r.confusion.assign(k * k, 0);
  std::size_t right = 0;
  for (std::size_t t = 0; t < threads; ++t) {
    for (std::size_t i = 0; i < k * k; ++i) r.confusion[i] += confusion[t][i];
    r.loss += loss[t];
  }
  for (std::size_t c = 0; c < k; ++c) right += r.confusion[c * k + c];
  r.accuracy = n ? static_cast<double>(right) / static_cast<double>(n) : 0.0;
  r.loss = n ? r.loss / static_cast<double>(n) : 0.0;
  return r;
}

namespace {

// Momentum and rate in use at a given mean staleness (see trainer.hpp).
struct Step {
  float momentum, lr;
};
Step compensated(const TrainOptions& o, double staleness) {
  if (!o.compensate || staleness <= 0) return {o.momentum, o.lr};
  const double implicit = staleness / (staleness + 1.0);
  if (implicit <= o.momentum) return {static_cast<float>(o.momentum - implicit), o.lr};
  return {0.0f, static_cast<float>(o.lr * (1.0 - implicit) / (1.0 - o.momentum))};
}

// The schedule's factor on the rate after `done` of `total` updates.
float schedule_factor(const TrainOptions& o, double done, double total) {
  if (o.schedule == TrainOptions::Schedule::constant || total <= 0) return 1.0f;
  const double t = std::min(1.0, done / total);
  return static_cast<float>(0.5 * (1.0 + std::cos(3.14159265358979323846 * t)));
}

// v = mu v + (g + wd w); w -= lr v over [first, last).
void apply(float* w, float* v, const float* g, std::size_t first, std::size_t last, Step step, float wd) {
  for (std::size_t i = first; i < last; ++i) {
    v[i] = step.momentum * v[i] + (g[i] + wd * w[i]);
    w[i] -= step.lr * v[i];
  }
}

std::uint64_t epoch_seed(std::uint64_t seed, std::size_t epoch) {
  return seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(epoch) * 0xBF58476D1CE4E5B9ULL + 1;
}

struct Worker {
  Workspace ws;
  std::vector<float> grad, view, x;
  std::vector<std::uint8_t> y;
  std::uint64_t view_version = 0;
  bool has_view = false;
  std::size_t samples = 0;  // in the current round (tau = 0)
  double loss_sum = 0;
  std::size_t batches = 0;
  double staleness_ema = 0;
  std::uint64_t updates = 0;
  std::uint64_t max_view_age = 0;
  StalenessHistogram staleness;
};

}  // namespace

std::vector<EpochReport> train(const Network& net, ParamStore& params, std::vector<float>& momentum_buffer,
                               const Dataset& data, const Dataset* test, const TrainOptions& o,
                               const std::function<void(const EpochReport&)>& on_epoch) {
  o.validate();
  const std::size_t P = net.layout().size(), D = net.input().size(), n = data.size();
  if (params.size() != P || params.layout() != net.layout())
    throw InputError("train: the parameter store does not have the network's layout");
  if (data.image_size() != D)
    throw InputError(fmt::format("train: images of {} pixels for a network that takes {}", data.image_size(), D));
  if (n == 0) throw InputError("train: no training images");
  momentum_buffer.resize(P, 0.0f);
  // By default workers are the parallelism and each runs single-threaded
  // GEMMs (measured faster at LeNet-5's sizes: RESULTS.md).
  Eigen::setNbThreads(static_cast<int>(o.gemm_threads));

  float* w = params.data();
  float* v = momentum_buffer.data();
  const auto blocks = net.blocks();
  const std::size_t W = o.workers, B = o.batch;
  const bool sync = o.tau == 0, live = o.tau == kUnbounded;
  std::vector<Worker> workers(W);
  for (auto& wk : workers) {
    wk.ws = net.workspace(B);
    wk.grad.assign(P, 0.0f);
    wk.x.resize(B * D);
    wk.y.resize(B);
    if (!sync && !live) wk.view.assign(P, 0.0f);
  }
  std::vector<std::mutex> block_locks(blocks.size());
  const std::size_t batches = (n + B - 1) / B;
  const std::uint64_t per_epoch = sync ? (batches + W - 1) / W : batches;
  // Updates made so far (resumed runs count the earlier epochs): the
  // staleness clock and the schedule's position.
  std::atomic<std::uint64_t> version{o.first_epoch * per_epoch};
  const double total_updates =
      static_cast<double>(o.total_epochs ? o.total_epochs : o.first_epoch + o.epochs) * static_cast<double>(per_epoch);
  std::vector<EpochReport> reports;

  for (std::size_t e = 0; e < o.epochs; ++e) {
    const std::size_t epoch = o.first_epoch + e;
    const std::vector<std::size_t> order = shuffled_indices(n, epoch_seed(o.seed, epoch));
    for (auto& wk : workers) {
      wk.loss_sum = 0;
      wk.batches = 0;
      wk.staleness = StalenessHistogram{};
      wk.max_view_age = 0;
    }
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto fail = [&](std::exception_ptr p) {
      std::lock_guard lock(error_mutex);
      if (!error) error = p;
      failed.store(true);
    };
    // Gathers batch b into wk.x / wk.y; returns its size.
    auto gather = [&](Worker& wk, std::size_t b) {
      const std::size_t first = b * B, m = std::min(B, n - first);
      for (std::size_t s = 0; s < m; ++s) {
        const std::size_t idx = order[first + s];
        std::copy_n(data.pixels.data() + idx * D, D, wk.x.data() + s * D);
        wk.y[s] = data.labels[idx];
      }
      return m;
    };
    auto compute = [&](Worker& wk, const float* view, std::size_t m) {
      const double loss = net.loss_and_gradient(view, wk.x.data(), wk.y.data(), m, wk.grad.data(), wk.ws);
      if (!std::isfinite(loss))
        throw RuntimeError(fmt::format("training diverged: minibatch loss {} in epoch {} (lower --lr)", loss,
                                       epoch + 1));
      wk.loss_sum += loss;
      ++wk.batches;
    };

    const auto start = std::chrono::steady_clock::now();
    if (sync) {
      // Rounds: worker i takes batch r * W + i, so the result does not depend
      // on timing. The barrier's completion step (one thread, all others
      // waiting) makes the single update from the weighted mean gradient.
      const std::size_t rounds = (batches + W - 1) / W;
      auto update = [&]() noexcept {
        if (failed.load()) return;
        std::size_t total = 0;
        for (const auto& wk : workers) total += wk.samples;
        if (total == 0) return;
        float* g = workers[0].grad.data();
        const float s0 = static_cast<float>(workers[0].samples) / static_cast<float>(total);
        for (std::size_t i = 0; i < P; ++i) g[i] *= s0;
        for (std::size_t k = 1; k < W; ++k) {
          if (workers[k].samples == 0) continue;
          const float sk = static_cast<float>(workers[k].samples) / static_cast<float>(total);
          const float* gk = workers[k].grad.data();
          for (std::size_t i = 0; i < P; ++i) g[i] += sk * gk[i];
        }
        const double done = static_cast<double>(version.load(std::memory_order_relaxed));
        apply(w, v, g, 0, P, {o.momentum, o.lr * schedule_factor(o, done, total_updates)}, o.weight_decay);
        version.fetch_add(1, std::memory_order_relaxed);
      };
      std::barrier round_end(static_cast<std::ptrdiff_t>(W), update);
      std::vector<std::jthread> pool;
      for (std::size_t i = 0; i < W; ++i)
        pool.emplace_back([&, i] {
          Worker& wk = workers[i];
          for (std::size_t r = 0; r < rounds; ++r) {
            wk.samples = 0;
            const std::size_t b = r * W + i;
            if (b < batches && !failed.load()) {
              try {
                const std::size_t m = gather(wk, b);
                compute(wk, w, m);
                wk.samples = m;
                wk.staleness.add(0);
              } catch (...) {
                fail(std::current_exception());
                wk.samples = 0;
              }
            }
            round_end.arrive_and_wait();
          }
        });
    } else {
      BoundedDelay gate(W, o.tau);
      std::atomic<std::size_t> next{0};
      std::vector<std::jthread> pool;
      for (std::size_t i = 0; i < W; ++i)
        pool.emplace_back([&, i] {
          Worker& wk = workers[i];
          try {
            while (!failed.load()) {
              if (!gate.enter(i)) break;
              const std::size_t b = next.fetch_add(1);
              if (b >= batches) break;
              const std::size_t m = gather(wk, b);
              const float* view = w;
              std::uint64_t seen = version.load(std::memory_order_acquire);
              if (!live) {
                // Refresh the view only when it is more than tau updates old.
                if (!wk.has_view || seen - wk.view_version > o.tau) {
                  std::copy_n(w, P, wk.view.data());
                  wk.view_version = seen;
                  wk.has_view = true;
                }
                view = wk.view.data();
                wk.max_view_age = std::max(wk.max_view_age, seen - wk.view_version);
                seen = wk.view_version;
              }
              compute(wk, view, m);
              const std::uint64_t now = version.load(std::memory_order_acquire);
              const std::uint64_t stale = now - seen;
              wk.staleness.add(stale);
              // A running mean for the first 100 updates, then an average over
              // about the last 100: compensation must act from the first
              // stale update (a lagging estimate lets momentum 0.9 at
              // staleness 8 diverge in the first steps).
              const double alpha = std::max(1.0 / static_cast<double>(++wk.updates), 0.01);
              wk.staleness_ema += alpha * (static_cast<double>(stale) - wk.staleness_ema);
              Step step = compensated(o, wk.staleness_ema);
              step.lr *= schedule_factor(o, static_cast<double>(now), total_updates);
              for (std::size_t k = 0; k < blocks.size(); ++k) {
                std::lock_guard lock(block_locks[k]);
                apply(w, v, wk.grad.data(), blocks[k].offset, blocks[k].offset + blocks[k].size, step,
                      o.weight_decay);
              }
              version.fetch_add(1, std::memory_order_acq_rel);
              gate.finish_step(i);
            }
          } catch (...) {
            fail(std::current_exception());
            gate.cancel();
          }
          gate.retire(i);
        });
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (error) std::rethrow_exception(error);

    EpochReport r;
    r.epoch = epoch + 1;
    r.seconds = seconds;
    r.images_per_second = static_cast<double>(n) / std::max(seconds, 1e-9);
    double loss = 0;
    std::size_t count = 0;
    StalenessHistogram all;
    double ema = 0;
    for (const auto& wk : workers) {
      loss += wk.loss_sum;
      count += wk.batches;
      all.merge(wk.staleness);
      r.max_view_age = std::max(r.max_view_age, wk.max_view_age);
      ema += wk.staleness_ema / static_cast<double>(W);
    }
    r.train_loss = count ? loss / static_cast<double>(count) : 0.0;
    r.mean_staleness = all.mean();
    r.max_staleness = all.max();
    Step step = sync ? Step{o.momentum, o.lr} : compensated(o, ema);
    step.lr *= schedule_factor(o, static_cast<double>(version.load()), total_updates);
    r.momentum = step.momentum;
    r.lr = step.lr;
    if (test != nullptr && test->size() > 0) r.test_accuracy = evaluate(net, w, *test, 1000, W).accuracy;
    reports.push_back(r);
    if (on_epoch) on_epoch(r);
  }
  return reports;
}

}  // namespace asgd::dense
