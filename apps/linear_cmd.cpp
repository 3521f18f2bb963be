// `asgd linear train|eval|generate`: L2-regularised linear classifiers
// (logistic regression, the squared-hinge and hinge SVMs) on libsvm files, the
// engine's convex reference problem.
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/stop_signal.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/engine/training_run.hpp"
#include "asgd/sparse/generator.hpp"
#include "asgd/sparse/libsvm.hpp"
#include "asgd/sparse/linear_fit.hpp"
#include "asgd/sparse/linear_quality.hpp"
#include "asgd/sparse/linear_segment.hpp"
#include "cli_common.hpp"
#include "distributed.hpp"

namespace asgd::cli {

namespace {

struct TrainFlags {
  EngineFlags engine;
  DistributedFlags dist;
  sparse::LinearFitOptions fit;  // the flags that are its options as they are
  std::string model, checkpoint, resume, shm;
  bool quiet = false;
  std::string loss = "logistic";
  std::string unsorted = "sort";
};

// The library's option names in errors, as the command spells them.
constexpr std::pair<std::string_view, std::string_view> kNames[] = {
    {"LinearFitOptions::data", "--data"},        {"LinearFitOptions::test", "--test"},
    {"LinearFitOptions::features", "--features"}, {"LinearFitOptions::l2", "--l2"},
    {"LinearFitOptions::loss", "--loss"},        {"LinearFitOptions::reference", "--reference"},
    {"LinearFitOptions::until_epoch", "--until-epoch"}, {"LinearFitOptions::model", "--model"},
    {"TrainingRunOptions::resume", "--resume"},  {"TrainingRunOptions::checkpoint", "--checkpoint"},
    {"TrainerOptions::epochs", "--epochs"},      {"TrainerOptions::seed", "--seed"},
    {"Schedule::adagrad", "--adagrad"}};

void print_quality(std::FILE* out, const char* what, const sparse::LinearQuality& q) {
  fmt::print(out, "{}: {} examples, objective {:.6f}, accuracy {:.4f}\n", what, q.examples, q.objective, q.accuracy);
}

// The flags as the library's options.
sparse::LinearFitOptions fit_options(const TrainFlags& f, TrainerOptions trainer) {
  sparse::LinearFitOptions o = f.fit;
  o.loss = parse_flag("--loss", [&] { return sparse::parse_linear_loss(f.loss); });
  o.unsorted = parse_flag("--unsorted", [&] { return sparse::parse_unsorted_ids(f.unsorted); });
  o.seed_given = f.engine.seed_given;
  o.model = f.model;
  o.trainer = std::move(trainer);
  o.run.shm = f.shm;
  o.run.checkpoint = f.checkpoint;
  o.run.resume = f.resume;
  o.run.on_progress = progress_printer("linear", f.quiet);
  return o;
}

void print_reference(std::FILE* out, const TrainFlags& f, const sparse::ReferenceGap& gap) {
  fmt::print(out, "reference (L-BFGS, {} iterations, |grad| {:.1e}): ", gap.iterations, gap.gradient_norm);
  if (gap.optimum > 1e-6) {
    fmt::print(out, "objective {:.6f}; ours is {:.2e} relative above\n", gap.optimum,
               (gap.ours - gap.optimum) / gap.optimum);
  } else {  // a gap relative to (nearly) zero says nothing
    fmt::print(out, "objective {:.2e}; ours is {:.2e} above (absolute: the optimum is too near 0 for a relative "
               "gap{})\n",
               gap.optimum, gap.ours - gap.optimum,
               f.fit.l2 == 0 && f.loss == "logistic"
                   ? "; logistic with --l2 0 on data that a hyperplane separates has no finite optimum"
                   : "");
  }
}

// After training: the epochs, the run and the ranks' traffic (every rank), then rank 0's figures.
void report_results(sparse::LinearFitEvents& events, const TrainFlags& f, const TrainerOptions& options,
                    std::FILE* out, Distributed& dist) {
  events.trained = [&f, &options, out, &dist](const TrainReport& report) {
    for (const auto& e : report.epochs) {
      if (f.quiet) break;
      fmt::print(out, "epoch {:3}: mean loss {:.6f}  {:.2f} s  staleness mean {:.2f} max {}  lead max {}\n", e.epoch,
                 e.loss, e.seconds, e.mean_staleness, e.max_staleness, e.max_lead);
    }
    fmt::print(out, "trained: {} ({}, {}, tau {}, {})\n", report.summary(), counted(options.workers, "worker"),
               to_string(options.consistency), tau_to_string(options.tau), options.schedule.describe());
    if (dist.active()) fmt::print(out, "mpi: {}\n", dist.traffic());
  };
  events.scored = [&f, out](const sparse::LinearFitReport& report) {
    print_quality(out, "train", *report.train);
    if (report.reference) print_reference(out, f, *report.reference);
    if (report.test) print_quality(out, "test", *report.test);
  };
}

// What is said as the fit goes: the segment, the resume (its changes warned about), the ranks, the results.
sparse::LinearFitEvents fit_events(const TrainFlags& f, const TrainerOptions& options, std::FILE* out,
                                   Distributed& dist, std::optional<StopOnSignal>& on_signal) {
  sparse::LinearFitEvents events;
  // From before the segment is opened: a signal while it is created or attached stops the run at its first step.
  events.stop_from_here = [&dist, &on_signal] { return on_signal.emplace(!dist.active()).flag(); };
  events.opened = [&f, out](const TrainingRun& run) {
    if (f.shm.empty() || f.quiet) return;
    fmt::print(out, "{} shared segment '{}'{}\n", run.created() ? "created" : "attached to", f.shm,
               run.created() ? "" : " (training continues from the parameters in it)");
  };
  events.ready = [&f, out, &dist](const sparse::LinearFitReady& r) {
    if (r.resumed && dist.root()) {
      if (r.changes.data_differs) warn_data_differs("linear train", f.resume, "training examples");
      warn_option_changes("linear train", f.resume, r.changes.options, {"examples", "nonzeros"});
      fmt::print(out, "resumed from {} at epoch {}\n", f.resume, r.epoch);
    }
    if (dist.active())
      fmt::print(out, "mpi: {}; rank 0 trains {} of {} examples\n", dist.describe(), r.examples, r.all_examples);
  };
  report_results(events, f, options, out, dist);
  return events;
}

int train(const TrainFlags& f, Distributed& dist) {
  // The report goes to stderr when the model goes to stdout (--model -).
  std::FILE* const out = report_stream({f.model});
  const TrainerOptions options = to_trainer_options(f.engine);
  if (dist.active() && !f.shm.empty()) throw InputError("--shm: not with mpirun (each rank keeps its model)");
  std::optional<StopOnSignal> on_signal;
  const sparse::LinearFitReport report =
      sparse::fit_linear(fit_options(f, options), dist, fit_events(f, options, out, dist, on_signal));
  if (report.training.stopped) {
    print_interrupted({.command = "linear train",
                       .epochs = options.epochs,
                       .checkpoint = f.checkpoint,
                       .resumed_from = f.resume,
                       .dashes = "--",
                       .shm = f.shm},
                      report.training);
    return interrupted_exit_code();
  }
  if (report.model_written) fmt::print(out, "model written to {}\n", f.model);
  if (!f.shm.empty()) fmt::print(out, "parameters stay in shared segment '{}' (asgd shm remove {})\n", f.shm, f.shm);
  return 0;
}

struct EvalFlags {
  std::string data, model, shm, loss;  // loss: empty, the model's (logistic for a segment)
  double l2 = 0;
  bool l2_given = false;  // else the model's (the training default for a segment)
  std::string unsorted = "sort";
};

int eval(const EvalFlags& f) {
  if (f.model.empty() == f.shm.empty()) throw InputError("eval: give exactly one of --model FILE or --shm NAME");
  sparse::LinearEvalOptions o;  // field by field: GCC 12 warns falsely on a designated initializer here
  o.data = f.data;
  o.unsorted = parse_flag("--unsorted", [&] { return sparse::parse_unsorted_ids(f.unsorted); });
  if (f.l2_given) o.l2 = f.l2;  // checked by LinearProblem, as train's
  if (!f.loss.empty()) o.loss = parse_flag("--loss", [&] { return sparse::parse_linear_loss(f.loss); });
  if (!f.model.empty()) {
    print_quality(stdout, "eval", sparse::evaluate_linear_model(f.model, o));
    return 0;
  }
  const sparse::LinearSegmentEval e = sparse::evaluate_linear_segment(f.shm, o);
  warn_if_writers_died(f.shm);
  if (e.l2_assumed)
    fmt::print("(segment: objective with --l2 {}, the training default; pass --l2 if it trained with another)\n", e.l2);
  print_quality(stdout, "eval", e.quality);
  return 0;
}

struct GenerateFlags {
  sparse::GeneratorOptions gen;
  std::size_t test_examples = 0;
  std::string out, test_out;
  bool one_based = false;
};

int generate(const GenerateFlags& f) {
  std::FILE* const out = report_stream({f.out, f.test_out});
  if (f.test_examples > 0 && f.test_out.empty()) throw InputError("--test-examples needs --test-out FILE");
  if (f.test_examples == 0 && !f.test_out.empty()) throw InputError("--test-out needs --test-examples N (N > 0)");
  check_generator_flags(f.gen);
  check_output("--out", f.out);
  check_output("--test-out", f.test_out);
  check_distinct("--test-out", f.test_out, {{"--out", f.out}});
  check_one_on_stdout({{"--out", f.out}, {"--test-out", f.test_out}});
  sparse::write_generated(f.gen, f.out, f.test_examples, f.test_out, f.one_based ? 1 : 0);
  fmt::print(out, "wrote {} examples, {} features, {} non-zeros each to {}\n", f.gen.examples, f.gen.features,
             f.gen.nnz_per_example, f.out);
  if (f.test_examples > 0) fmt::print(out, "wrote {} test examples to {}\n", f.test_examples, f.test_out);
  return 0;
}

}  // namespace

void add_linear_commands(CLI::App& app, int& exit_code) {
  auto* linear = app.add_subcommand("linear", "Logistic regression or a linear SVM on libsvm files (the engine's "
                                               "reference problem)");
  linear->require_subcommand(1);

  auto tf = std::make_shared<TrainFlags>();
  tf->engine.lr = 0.5f;
  auto* train_cmd = linear->add_subcommand("train", "Train a model");
  train_cmd->add_option("--data", tf->fit.data,
                        "Training file (libsvm: label id:value ..., gzipped or not); under mpirun, {rank} in the name "
                        "gives each rank its own file")
      ->required();
  train_cmd->add_option("--test", tf->fit.test, "Test file to report accuracy on");
  train_cmd->add_option("--l2", tf->fit.l2, "L2 regularisation strength")->capture_default_str();
  train_cmd->add_option("--loss", tf->loss,
                        "logistic (regression), squared-hinge (L2-loss SVM) or hinge (L1-loss SVM, subgradient); "
                        "--lr is 0.1 for the hinges unless given")
      ->capture_default_str();
  train_cmd->add_option("--features", tf->fit.features,
                        "Model width (default: largest feature id + 1); give it when processes train shards");
  train_cmd->add_option("--model", tf->model, "Write the trained model here");
  train_cmd->add_option("--checkpoint", tf->checkpoint, "Checkpoint here after every epoch");
  train_cmd->add_option("--resume", tf->resume, "Start from this checkpoint (parameters, epoch, seeds)");
  train_cmd->add_option("--until-epoch", tf->fit.until_epoch,
                        "Stop after this epoch of --epochs (the schedule still spans --epochs); resume later");
  train_cmd->add_option("--shm", tf->shm, "Train in shared segment NAME (created, or attached if it exists)");
  train_cmd->add_flag("--shm-recover", tf->fit.run.attach.recover_stale, "Take over a segment whose writer was killed");
  train_cmd->add_flag("--reference", tf->fit.reference, "Also solve with L-BFGS and print the gap to the optimum");
  train_cmd->add_option("--unsorted", tf->unsorted, "Unsorted feature ids in a line: sort or reject")
      ->capture_default_str();
  train_cmd->add_flag("--quiet,-q", tf->quiet, "No progress or per-epoch lines");
  add_engine_flags(*train_cmd, tf->engine);
  add_distributed_flags(*train_cmd, tf->dist);
  tf->dist.names = kNames;
  train_cmd->callback([tf, train_cmd, &exit_code] {
    // The hinges' gradients grow with the violation (the squared one's curvature is 8x the logistic's): without
    // --lr they start at 0.1, where SGD is stable on the reference data (bench/RESULTS.md).
    if (train_cmd->count("--lr") == 0 && tf->loss != "logistic") tf->engine.lr = 0.1f;
    exit_code =
        run_guarded([&] { return run_distributed(tf->dist, [&](Distributed& d) { return train(*tf, d); }); }, kNames);
  });

  auto ef = std::make_shared<EvalFlags>();
  auto* eval_cmd = linear->add_subcommand("eval", "Evaluate a model file or a live shared segment");
  eval_cmd->add_option("--data", ef->data, "libsvm file")->required();
  eval_cmd->add_option("--model", ef->model, "Model file from train --model");
  eval_cmd->add_option("--shm", ef->shm, "Shared segment to read (attached read-only)");
  eval_cmd->add_option("--l2", ef->l2, "L2 strength for the objective (default: the model's)")
      ->each([ef](const std::string&) { ef->l2_given = true; });
  eval_cmd->add_option("--loss", ef->loss, "Loss for the objective (default: the model's or the segment's)");
  eval_cmd->add_option("--unsorted", ef->unsorted, "Unsorted feature ids: sort or reject")->capture_default_str();
  eval_cmd->callback([ef, &exit_code] { exit_code = run_guarded([&] { return eval(*ef); }); });

  auto gf = std::make_shared<GenerateFlags>();
  auto* gen_cmd = linear->add_subcommand("generate", "Write a sparse set with a planted logistic model");
  gen_cmd->add_option("--out", gf->out, "Training file to write")->required();
  gen_cmd->add_option("--examples", gf->gen.examples, "Training examples")->capture_default_str();
  gen_cmd->add_option("--features", gf->gen.features, "Features")->capture_default_str();
  gen_cmd->add_option("--nnz", gf->gen.nnz_per_example, "Non-zeros per example")->capture_default_str();
  gen_cmd->add_option("--noise", gf->gen.label_noise, "Probability of flipping a label")->capture_default_str();
  gen_cmd->add_option("--seed", gf->gen.seed, "Seed")->capture_default_str();
  gen_cmd->add_option("--test-examples", gf->test_examples, "Also write this many test examples")
      ->capture_default_str();
  gen_cmd->add_option("--test-out", gf->test_out, "Test file to write");
  gen_cmd->add_flag("--one-based", gf->one_based,
                    "Feature ids from 1, as LIBSVM and LIBLINEAR need (default: from 0, which asgd reads; a model "
                    "trained on one-based ids is one weight wider)");
  gen_cmd->callback([gf, &exit_code] { exit_code = run_guarded([&] { return generate(*gf); }); });
}

}  // namespace asgd::cli
