#include "asgd/engine/trainer.hpp"

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/denormals.hpp"
#include "asgd/engine/options_record.hpp"
#include "asgd/engine/random.hpp"

#include <fmt/format.h>

#include <thread>

namespace asgd {

namespace detail {
std::string nonfinite_loss_message(double loss, std::uint64_t epoch, std::uint64_t example, std::size_t worker,
                                   float lr) {
  return fmt::format(
      "training diverged: loss is {} at epoch {}, example {} (worker {}, learning rate {:g}); {}", loss, epoch,
      example, worker, lr, kDivergenceAdvice);
}
}  // namespace detail

namespace {
// One spelling per file (./ck, ck and /abs/ck alike; a link as its target), for lineage comparisons.
std::filesystem::path normalized(const std::filesystem::path& path) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return ec ? path.lexically_normal() : p;
}
}  // namespace

void TrainerOptions::validate() const {
  if (workers == 0 || workers > kMaxWorkers)
    throw InputError(fmt::format("TrainerOptions::workers {}: expected 1 to {}", workers, kMaxWorkers));
  if (epochs == 0 || epochs > kMaxEpochs)
    throw InputError(fmt::format("TrainerOptions::epochs {}: expected 1 to {}", epochs, kMaxEpochs));
  if (step_examples == 0) throw InputError("TrainerOptions::step_examples 0: expected at least 1 example per step");
  if (!(progress_interval_seconds > 0))
    throw InputError(fmt::format("TrainerOptions::progress_interval_seconds {}: expected > 0", progress_interval_seconds));
  if (checkpoint_every == 0) throw InputError("TrainerOptions::checkpoint_every 0: expected at least 1 epoch");
  schedule.validate();
}

std::string TrainReport::summary() const {
  std::string s = fmt::format("{} examples in {:.3f} s ({:.4g} examples/s)", examples, seconds, examples_per_second);
  if (!epochs.empty()) s += fmt::format(", final epoch loss {:.6f}", epochs.back().loss);
  s += fmt::format(", staleness mean {:.2f} max {} (updates landed during a step), clock lead max {}", staleness.mean(),
                   staleness.max(), max_lead);
  if (stopped) s += fmt::format(" [stopped: {}]", stop_reason);
  return s;
}

void TrainReport::append(const TrainReport& later) {
  epochs.insert(epochs.end(), later.epochs.begin(), later.epochs.end());
  seconds += later.seconds;
  examples += later.examples;
  examples_per_second = seconds > 0 ? static_cast<double>(examples) / seconds : 0.0;
  staleness.merge(later.staleness);
  max_lead = std::max(max_lead, later.max_lead);
  state = later.state;
  if (later.stopped) {
    stopped = true;
    stop_reason = later.stop_reason;
  }
}

Trainer::Trainer(ParamStore& store, TrainerOptions options) : store_(store), options_(std::move(options)) {
  options_.validate();
  if (!store_.writable()) throw InputError("trainer: the parameters are attached read-only");
  if (!options_.checkpoint_path.empty()) AtomicFile::check(options_.checkpoint_path);
  state_.seed = options_.seed;
}

std::string Trainer::fmt_until_epoch(std::uint64_t until, std::uint64_t epochs) {
  return fmt::format("trainer: cannot train until epoch {} of {}", until, epochs);
}

std::string Trainer::fmt_past_epoch(std::uint64_t done, std::uint64_t until) {
  return fmt::format("trainer: {} epochs are done already, past epoch {} (a checkpoint resumed with fewer epochs "
                     "than it holds)",
                     done, until);
}

std::uint64_t Trainer::worker_seed(std::uint64_t seed, std::size_t worker, std::uint64_t epoch) noexcept {
  return FastRng::mix(seed, worker, epoch);
}

void Trainer::launch(Run& run, const std::function<void(std::size_t)>& body) {
  const std::size_t workers = options_.workers;
  std::vector<std::jthread> threads;  // joined on the way out, whatever happens
  threads.reserve(workers - 1);
  const bool flush = options_.flush_denormals;
  try {
    for (std::size_t w = 1; w < workers; ++w)
      threads.emplace_back([&body, w, flush] {
        const FlushDenormals subnormals(flush);
        body(w);
      });
  } catch (...) {
    // A thread that could not start never arrives: count it in and stop.
    run.fail(std::current_exception());
    run.started.count_down(static_cast<std::ptrdiff_t>(workers - 1 - threads.size()));
  }
  const FlushDenormals subnormals(flush);  // the caller's mode comes back when run() returns
  body(0);
}

void Trainer::close_epoch(Run& run, std::uint64_t epoch) {
  const std::uint64_t done = epoch + 1;
  const std::uint64_t index = epoch - run.first_epoch;
  EpochStats& stats = run.epoch_stats[index];
  stats.epoch = done;
  stats.seconds = run.elapsed();
  double loss = 0;
  std::uint64_t staleness_sum = 0, steps = 0;
  for (auto& local : run.locals) {
    auto& acc = local.epochs[index % 2];
    loss += acc.loss_sum;
    stats.examples += acc.examples;
    staleness_sum += acc.staleness_sum;
    steps += acc.steps;
    stats.max_staleness = std::max(stats.max_staleness, acc.staleness_max);
    stats.max_lead = std::max(stats.max_lead, acc.lead_max);
    acc = {};  // for epoch + 2
  }
  stats.loss = stats.examples ? loss / static_cast<double>(stats.examples) : 0.0;
  stats.mean_staleness = steps ? static_cast<double>(staleness_sum) / static_cast<double>(steps) : 0.0;
  if (!options_.checkpoint_path.empty() && (done % options_.checkpoint_every == 0 || done == options_.epochs)) {
    const TrainState at{done, state_.examples + run.examples_done.load(std::memory_order_relaxed), state_.seed};
    check_adagrad_sums();  // its own message, before save_checkpoint's "refusing to save a diverged model"
    keep_previous_of(options_.checkpoint_path);
    // With the row head, as save_checkpoint writes it (this one wrote 0, and a resume refused its own file).
    ::asgd::save_checkpoint(options_.checkpoint_path, store_, at, adagrad_sums_, options_.checkpoint_metadata,
                            optimizer_kind(), static_cast<std::uint32_t>(options_.schedule.row_head));
    lineage_ = normalized(options_.checkpoint_path);
  }
}

void Trainer::check_adagrad_sums() const {
  // A squared gradient past float's range makes a sum inf (its parameter then stops moving): the model is finite
  // but cannot be checkpointed, and the cause is the input's scale, not the rate.
  for (std::size_t i = 0; i < adagrad_sums_.size(); ++i) {
    if (!std::isfinite(adagrad_sums_[i])) {
      throw RuntimeError(fmt::format("training diverged: the AdaGrad sum of parameter {} is {} (a squared gradient "
                                     "past float's range, about 3.4e38): scale the input's values down",
                                     i, adagrad_sums_[i]));
    }
  }
}

void Trainer::keep_previous_of(const std::filesystem::path& path) const {
  if (!options_.checkpoint_keep_previous) return;
  const std::filesystem::path file = normalized(path), previous = previous_checkpoint(path);
  if (lineage_ == file) {
    keep_previous_checkpoint(path);  // this run's last generation
  } else if (lineage_ != normalized(previous)) {
    // Another run's file is at the path, and maybe its .prev: never a generation of this run, which a resume
    // could take for one. (Resumed from the .prev itself, that already holds this run's generation, and the file
    // ahead of it is the one to replace.)
    std::error_code ignored;
    std::filesystem::remove(previous, ignored);
  }
}

float Trainer::rate_now(const Run& run, double before, double total, std::uint64_t staleness) const {
  const double progress = (before + static_cast<double>(run.examples_done.load(std::memory_order_relaxed))) / total;
  return options_.schedule.rate(progress, progress * static_cast<double>(options_.epochs), staleness);
}

void Trainer::record_step(Run& run, std::size_t w, std::uint64_t epoch, std::uint64_t examples, double loss,
                          std::uint64_t staleness, std::uint64_t lead, float lr) {
  auto& local = run.locals[w];
  auto& acc = local.epochs[(epoch - run.first_epoch) % 2];
  acc.loss_sum += loss;
  acc.examples += examples;
  acc.staleness_sum += staleness;
  acc.steps += 1;
  acc.staleness_max = std::max(acc.staleness_max, staleness);
  acc.lead_max = std::max(acc.lead_max, lead);
  local.lead_max = std::max(local.lead_max, lead);
  local.staleness.add(staleness);
  local.last_staleness = staleness;
  auto& counters = run.counters[w];
  counters.examples.fetch_add(examples, std::memory_order_relaxed);
  counters.loss_sum.store(counters.loss_sum.load(std::memory_order_relaxed) + loss, std::memory_order_relaxed);
  counters.lr.store(lr, std::memory_order_relaxed);
  run.examples_done.fetch_add(examples, std::memory_order_relaxed);
  if (options_.on_step) options_.on_step(examples);
  if (options_.on_progress) maybe_report(run, false);
}

void Trainer::epoch_finished(Run& run, std::uint64_t epoch, std::size_t w) {
  const std::uint64_t index = epoch - run.first_epoch;
  const std::uint64_t done = epoch + 1;
  const bool checkpoint_due =
      !options_.checkpoint_path.empty() && (done % options_.checkpoint_every == 0 || done == options_.epochs);
  if (checkpoint_due && options_.workers > 1) {
    // Everyone waits at the boundary: the checkpoint is a consistent snapshot. Paused in the gate meanwhile: a
    // worker still finishing its last step may be waiting there for this one's clock. Every clock counts again
    // before anyone leaves (all are parked here): resumed one by one as each woke, the first to wake ran ahead of
    // the others, whose paused clocks the gate ignores, by as many steps as they took to wake (a whole shard).
    run.gate.pause(w);
    const bool passed = run.barrier.arrive_and_wait([&] {
      run.epoch_done[index].store(options_.workers, std::memory_order_release);
      close_epoch(run, epoch);
      for (std::size_t v = 0; v < options_.workers; ++v) run.gate.resume(v);
      run.release_slot(epoch);
    });
    if (!passed) run.gate.resume(w);  // the run stopped: the completion did not run
    return;
  }
  if (run.epoch_done[index].fetch_add(1, std::memory_order_acq_rel) + 1 == options_.workers) {
    close_epoch(run, epoch);
    run.release_slot(epoch);
  }
}

void Trainer::maybe_report(Run& run, bool force) {
  const auto now_ns = static_cast<std::int64_t>(run.elapsed() * 1e9);
  if (!force && now_ns < run.next_report_ns.load(std::memory_order_relaxed)) return;
  bool expected = false;
  if (!run.reporting.compare_exchange_strong(expected, true, std::memory_order_acquire)) return;
  // Once the callback said stop, it is not asked again (workers still finishing their step call in here).
  if (run.stopped_by_callback.load(std::memory_order_relaxed)) {
    run.reporting.store(false, std::memory_order_release);
    return;
  }
  run.next_report_ns.store(now_ns + static_cast<std::int64_t>(options_.progress_interval_seconds * 1e9),
                           std::memory_order_relaxed);
  std::uint64_t examples = 0;
  double loss = 0, lr = 0;
  std::size_t stepped = 0;  // workers that have a rate to report
  for (std::size_t w = 0; w < options_.workers; ++w) {
    const auto n = run.counters[w].examples.load(std::memory_order_relaxed);
    examples += n;
    loss += run.counters[w].loss_sum.load(std::memory_order_relaxed);
    if (n > 0) {
      lr += run.counters[w].lr.load(std::memory_order_relaxed);
      ++stepped;
    }
  }
  const double total = static_cast<double>(run.examples_per_epoch) * static_cast<double>(options_.epochs);
  // This run() ends at last_epoch, which --until-epoch may put before the schedule's end.
  const double run_total =
      static_cast<double>(run.examples_per_epoch) * static_cast<double>(run.last_epoch) -
      static_cast<double>(run.examples_before);
  Progress p;
  p.examples = examples;
  p.fraction = std::min(1.0, (static_cast<double>(run.examples_before) + static_cast<double>(examples)) / total);
  p.epoch = std::min<std::uint64_t>(options_.epochs, (run.examples_before + examples) / run.examples_per_epoch);
  p.elapsed_seconds = static_cast<double>(now_ns) * 1e-9;
  p.examples_per_second = p.elapsed_seconds > 0 ? static_cast<double>(examples) / p.elapsed_seconds : 0.0;
  const std::uint64_t new_examples = examples - run.last_report_examples;
  p.loss = new_examples ? (loss - run.last_report_loss) / static_cast<double>(new_examples) : run.last_report_loss;
  p.learning_rate = stepped ? static_cast<float>(lr / static_cast<double>(stepped)) : 0.0f;
  p.last = force;
  p.eta_seconds = p.examples_per_second > 0
                      ? std::max(0.0, run_total - static_cast<double>(examples)) / p.examples_per_second
                      : 0.0;
  if (new_examples) {
    run.last_report_loss = loss;
    run.last_report_examples = examples;
  }
  bool go = true;
  try {
    go = options_.on_progress(p);
  } catch (...) {
    run.fail(std::current_exception());
  }
  if (!go) {
    run.stopped_by_callback.store(true, std::memory_order_release);
    run.halt();
  }
  run.reporting.store(false, std::memory_order_release);
}

bool Trainer::stop_requested(Run& run) const noexcept {
  if (options_.stop == nullptr || !options_.stop->load(std::memory_order_relaxed)) return false;
  run.stopped_on_request.store(true, std::memory_order_relaxed);
  run.halt();
  return true;
}

TrainReport Trainer::finish(Run& run) {
  if (run.error) std::rethrow_exception(run.error);
  TrainReport report;
  report.seconds = run.elapsed();
  report.examples = run.examples_done.load();
  report.examples_per_second = report.seconds > 0 ? static_cast<double>(report.examples) / report.seconds : 0.0;
  std::uint64_t completed = 0;
  while (completed < run.last_epoch - run.first_epoch && run.epoch_done[completed].load() == options_.workers) {
    report.epochs.push_back(run.epoch_stats[completed]);
    ++completed;
  }
  for (std::size_t w = 0; w < options_.workers; ++w) last_staleness_[w] = run.locals[w].last_staleness;
  for (const auto& local : run.locals) {
    report.staleness.merge(local.staleness);
    report.max_lead = std::max(report.max_lead, local.lead_max);
  }
  // The closing progress event, while state_ still holds the start of the run. What the callback throws there
  // is rethrown like any other failure of the run (maybe_report hands it to run.fail()).
  // Only a stop asked for before it counts: false from the closing event leaves a finished run finished.
  const bool stopped = run.stopped_by_callback.load();
  if (options_.on_progress && !stopped) {
    maybe_report(run, true);
    if (run.error) std::rethrow_exception(run.error);
  }
  state_.epoch = run.first_epoch + completed;
  state_.examples += report.examples;
  report.state = state_;
  if (stopped) {
    report.stopped = true;
    report.stop_reason = "stopped by the progress callback";
  } else if (run.stopped_on_request.load()) {
    report.stopped = true;
    report.stop_reason = "stop requested";
  }
  if (const auto i = store_.first_non_finite()) {
    throw RuntimeError(fmt::format("training diverged: parameter {} is {} after the run; {}", *i, store_.load(*i),
                                   detail::kDivergenceAdvice));
  }
  check_adagrad_sums();
  return report;
}

void Trainer::save_checkpoint(const std::filesystem::path& path) const {
  write_file(path, 1.0f, options_.checkpoint_metadata, true);
}

namespace {
// The ranks whose files a checkpoint's metadata says hold the sums, and the metadata without that count (the
// same text where there is none). One parse: a model's metadata may hold its id maps.
std::pair<int, std::string> job_metadata(const std::string& metadata, const std::string& where) {
  const int ranks = rank_files_of(metadata, where);
  return {ranks, ranks > 1 ? with_rank_files(metadata, 1) : metadata};
}
}  // namespace

void Trainer::save_model(const std::filesystem::path& path) const {
  const auto [ranks, metadata] = job_metadata(options_.checkpoint_metadata, path.string());
  write_file(path, static_cast<float>(ranks), metadata, false);
}

std::string Trainer::model_metadata() const {
  return job_metadata(options_.checkpoint_metadata, "TrainerOptions::checkpoint_metadata").second;
}

void Trainer::write_file(const std::filesystem::path& path, float sums_scale, const std::string& metadata,
                         bool generation) const {
  // Before the first run() the sums are all zero: written as such, so that an AdaGrad run can load the file.
  std::vector<float> copy;
  std::span<const float> sums = adagrad_sums_;
  if (options_.schedule.has_adagrad() && (sums.size() != store_.size() || sums_scale != 1.0f)) {
    copy.assign(store_.size(), 0.0f);
    if (sums.size() == store_.size())
      for (std::size_t i = 0; i < copy.size(); ++i) copy[i] = sums[i] * sums_scale;
    sums = copy;
  }
  if (generation) keep_previous_of(path);
  ::asgd::save_checkpoint(path, store_, state_, sums, metadata, optimizer_kind(),
                          static_cast<std::uint32_t>(options_.schedule.row_head));  // 0 without row AdaGrad
  if (generation) lineage_ = normalized(path);
}

OptimizerKind Trainer::optimizer_kind() const noexcept {
  return options_.schedule.adagrad       ? OptimizerKind::adagrad
         : options_.schedule.row_adagrad ? OptimizerKind::row_adagrad
                                         : OptimizerKind::unrecorded;
}

void Trainer::load_checkpoint(const std::filesystem::path& path) { load_checkpoint(read_checkpoint(path), path); }

void Trainer::load_checkpoint(CheckpointData data, const std::filesystem::path& path) {
  // Both checks before anything is loaded: a refused resume leaves the parameters (a shared segment others may
  // be training) as they were.
  // (Another model altogether is load_checkpoint's error, said first.)
  const std::vector<float>& sums = data.optimizer_state;
  const bool same_model = data.layout.hash() == store_.layout().hash();
  if (same_model && !sums.empty() && sums.size() != store_.size()) {
    throw InputError(fmt::format("checkpoint {}: optimizer state has {} values for {} parameters", path.string(),
                                 sums.size(), store_.size()));
  }
  // A resume continues the checkpointed run's step rule: sums dropped, or started from zero mid-run, would give
  // another run than the uninterrupted one without a word.
  if (same_model && sums.empty() == options_.schedule.has_adagrad()) {
    throw InputError(fmt::format("checkpoint {} {}; resume with the step rule it was trained with", path.string(),
                                 sums.empty() ? "holds no AdaGrad sums and this run uses AdaGrad"
                                              : "holds AdaGrad sums and this run does not use AdaGrad"));
  }
  // Per-row sums are not per-parameter sums (files from before the kind was recorded say neither).
  if (same_model && !sums.empty() && data.optimizer_kind != OptimizerKind::unrecorded &&
      data.optimizer_kind != optimizer_kind()) {
    const auto name = [](OptimizerKind k) { return k == OptimizerKind::row_adagrad ? "per-row" : "per-parameter"; };
    throw InputError(fmt::format("checkpoint {} holds {} AdaGrad sums and this run uses {} AdaGrad; resume with the "
                                 "step rule it was trained with",
                                 path.string(), name(data.optimizer_kind), name(optimizer_kind())));
  }
  // So are sums split into a row's head and tail (Schedule::row_head) when the head differs.
  if (same_model && !sums.empty() && data.optimizer_kind == OptimizerKind::row_adagrad &&
      data.row_head != options_.schedule.row_head) {
    const auto what = [](std::size_t head) {
      return head > 0 ? fmt::format("a row head of {}", head) : std::string("one sum per row");
    };
    // A file from before heads were recorded says 0 whatever its head was (no asgd command resumes one with one).
    throw InputError(fmt::format("checkpoint {} holds per-row AdaGrad sums with {}{} and this run uses {}; resume "
                                 "with the step rule it was trained with",
                                 path.string(), what(data.row_head),
                                 data.row_head == 0 ? " (or is from before asgd recorded row heads)" : "",
                                 what(options_.schedule.row_head)));
  }
  std::vector<float> loaded;
  state_ = ::asgd::load_checkpoint(std::move(data), path, store_, &loaded);
  adagrad_sums_ = std::move(loaded);
  lineage_ = normalized(path);
}

}  // namespace asgd
