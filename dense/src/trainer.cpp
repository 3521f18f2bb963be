#include "asgd/dense/trainer.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <thread>
#include <utility>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/trainer.hpp"

namespace asgd::dense {

void TrainOptions::validate() const {
  if (epochs == 0 || epochs > kMaxEpochs)
    throw InputError(fmt::format("TrainOptions::epochs {}: expected 1 to {}", epochs, kMaxEpochs));
  if (batch == 0) throw InputError("TrainOptions::batch: must be at least 1");
  if (gemm_threads == 0 || gemm_threads > 256)
    throw InputError(fmt::format("TrainOptions::gemm_threads {}: expected 1 to 256", gemm_threads));
  BlockTrainOptions::validate();
}

BlockTrainOptions TrainOptions::block_options(std::size_t batches) const {
  BlockTrainOptions bo = *this;
  const std::uint64_t per_epoch = BlockTrainer::updates_per_epoch(batches, bo);
  bo.first_update = first_epoch * per_epoch;
  bo.total_updates =
      static_cast<double>(total_epochs ? total_epochs : first_epoch + epochs) * static_cast<double>(per_epoch);
  return bo;
}

void check_images(const Network& net, const Dataset& data, std::string_view what) {
  const Shape in = net.input();
  // One channel: the images' own rows and columns, not only their number of pixels (14x56 is no 28x28).
  const bool fits = in.c == 1 ? data.rows == in.h && data.cols == in.w : data.image_size() == in.size();
  if (!fits)
    throw InputError(fmt::format("{}: images of {}x{} ({} pixels) for a network that takes {}x{}x{}", what,
                                 data.rows, data.cols, data.image_size(), in.c, in.h, in.w));
  check_labels(data.labels, net.classes(), what);
}

EvalResult evaluate(const Network& net, const float* params, const Dataset& data, std::size_t batch,
                    std::size_t threads) {
  const std::size_t k = net.classes(), n = data.size();
  check_images(net, data, "evaluate");
  batch = std::clamp<std::size_t>(batch, 1, std::max<std::size_t>(n, 1));  // (n + batch - 1) cannot wrap
  const std::size_t batches = (n + batch - 1) / batch;
  threads = std::max<std::size_t>(1, std::min(threads, batches));
  // The evaluation threads are the parallelism: GEMMs on one thread each
  // (Eigen's OpenMP threads on top oversubscribe the cores: 6x slower).
  const int gemm_threads = Eigen::nbThreads();
  Eigen::setNbThreads(1);
  std::atomic<std::size_t> next{0};
  std::vector<std::vector<std::size_t>> confusion(threads, std::vector<std::size_t>(k * k, 0));
  std::vector<double> loss(threads, 0);
  {
    std::vector<std::jthread> pool;
    for (std::size_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        // A batch is run in tiles of at most Network::kTile images (cache).
        Workspace ws = net.workspace(std::min(batch, Network::kTile));
        for (std::size_t b; (b = next.fetch_add(1)) < batches;) {
          const std::size_t end = std::min(n, (b + 1) * batch);
          for (std::size_t first = b * batch; first < end; first += Network::kTile) {
            const std::size_t m = std::min(Network::kTile, end - first);
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
  Eigen::setNbThreads(gemm_threads);
  EvalResult r;
  r.confusion.assign(k * k, 0);
  std::size_t right = 0;
  for (std::size_t t = 0; t < threads; ++t) {
    for (std::size_t i = 0; i < k * k; ++i) r.confusion[i] += confusion[t][i];
    r.loss += loss[t];
  }
  for (std::size_t c = 0; c < k; ++c) right += r.confusion[c * k + c];
  r.threads = threads;
  r.accuracy = n ? static_cast<double>(right) / static_cast<double>(n) : 0.0;
  r.loss = n ? r.loss / static_cast<double>(n) : 0.0;
  return r;
}

std::uint64_t epoch_seed(std::uint64_t seed, std::size_t epoch) noexcept {
  return seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(epoch) * 0xBF58476D1CE4E5B9ULL + 1;
}

std::vector<EpochReport> train(const Network& net, ParamStore& params, std::vector<float>& momentum_buffer,
                               const Dataset& data, const Dataset* test, const TrainOptions& o,
                               const std::function<void(const EpochReport&)>& on_epoch) {
  o.validate();
  const std::size_t P = net.layout().size(), D = net.input().size(), n = data.size();
  if (params.size() != P || params.layout() != net.layout())
    throw InputError("train: the parameter store does not have the network's layout");
  check_images(net, data, "train");
  if (test != nullptr) check_images(net, *test, "train (test set)");
  if (n == 0) throw InputError("train: no training images");
  momentum_buffer.resize(P, 0.0f);
  // By default workers are the parallelism and each runs single-threaded
  // GEMMs (measured faster at LeNet-5's sizes: RESULTS.md).
  Eigen::setNbThreads(static_cast<int>(o.gemm_threads));

  // No minibatch holds more than the n images: a larger --batch allocates no more than they take.
  const std::size_t W = o.workers, B = std::min(o.batch, n), batches = (n + B - 1) / B;
  const BlockTrainOptions bo = o.block_options(batches);
  std::vector<BlockTrainer::Block> blocks;
  for (const auto& b : net.blocks()) blocks.push_back({b.offset, b.size});
  BlockTrainer trainer(params, momentum_buffer, std::move(blocks), bo);

  // Per worker: the network's buffers and the gathered minibatch.
  struct Batch {
    Workspace ws;
    std::vector<float> x;
    std::vector<std::uint8_t> y;
  };
  std::vector<Batch> scratch(W);
  for (auto& s : scratch) {
    s.ws = net.workspace(std::min(B, Network::kTile));  // larger batches run in tiles
    s.x.resize(B * D);
    s.y.resize(B);
  }
  std::vector<EpochReport> reports;
  for (std::size_t e = 0; e < o.epochs; ++e) {
    const std::size_t epoch = o.first_epoch + e;
    const std::vector<std::size_t> order = shuffled_indices(n, epoch_seed(o.seed, epoch));
    const BlockEpochStats st = trainer.run_epoch(
        batches, [&](std::size_t w, std::size_t b, const float* view, float* grad) -> BlockTrainer::Minibatch {
          Batch& s = scratch[w];
          const std::size_t first = b * B, m = std::min(B, n - first);
          for (std::size_t k = 0; k < m; ++k) {
            const std::size_t idx = order[first + k];
            std::copy_n(data.pixels.data() + idx * D, D, s.x.data() + k * D);
            s.y[k] = data.labels[idx];
          }
          return {net.loss_and_gradient(view, s.x.data(), s.y.data(), m, grad, s.ws), m};
        });
    if (st.stopped) break;  // an unfinished epoch: not reported, evaluated or handed to after_epoch
    EpochReport r;
    static_cast<BlockEpochStats&>(r) = st;
    r.epoch = epoch + 1;
    r.images_per_second = static_cast<double>(n) / std::max(st.seconds, 1e-9);
    if (o.after_epoch) {
      o.after_epoch();
      trainer.refresh_views();
    }
    std::optional<EvalResult> scored;
    if (test != nullptr && test->size() > 0) {
      scored = evaluate(net, params.data(), *test, 1000, W);
      r.test_accuracy = scored->accuracy;
    }
    check_not_diverged({params.data(), params.size()}, scored ? &*scored : nullptr, r.epoch);
    reports.push_back(r);
    if (on_epoch) on_epoch(r);
  }
  return reports;
}

void TimedEvalOptions::validate() const {
  for (const auto& [option, value] : {std::pair{"TimedEvalOptions::batch", batch},
                                      std::pair{"TimedEvalOptions::threads", threads},
                                      std::pair{"TimedEvalOptions::repeats", repeats}})
    if (value == 0) throw InputError(fmt::format("{} 0: expected at least 1", option));
}

TimedEval evaluate_timed(const Network& net, const float* params, const Dataset& data,
                         const TimedEvalOptions& options) {
  options.validate();
  TimedEval t;
  t.seconds.resize(options.repeats);
  for (double& s : t.seconds) {
    const auto start = std::chrono::steady_clock::now();
    t.result = evaluate(net, params, data, options.batch, options.threads);
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return t;
}

double TimedEval::images_per_second(std::size_t images) const {
  std::vector<double> rates;
  for (const double s : seconds) rates.push_back(static_cast<double>(images) / std::max(s, 1e-9));
  std::sort(rates.begin(), rates.end());
  return rates.empty() ? 0.0 : rates[rates.size() / 2];
}

}  // namespace asgd::dense
