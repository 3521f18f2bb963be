// `asgd linear train|eval|generate`: L2-regularised linear classifiers
// (logistic regression, the squared-hinge and hinge SVMs) on libsvm files, the
// engine's convex reference problem.
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/fingerprint.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/engine/training_run.hpp"
#include "asgd/sparse/generator.hpp"
#include "asgd/sparse/libsvm.hpp"
#include "asgd/sparse/linear.hpp"
#include "asgd/sparse/linear_model_file.hpp"
#include "cli_common.hpp"
#include "distributed.hpp"

namespace asgd::cli {

namespace {

struct TrainFlags {
  EngineFlags engine;
  DistributedFlags dist;
  std::string data, test, model, checkpoint, resume, shm;
  bool shm_recover = false;
  bool reference = false;
  std::uint64_t until_epoch = 0;
  bool quiet = false;
  double l2 = 1e-4;
  std::string loss = "logistic";
  std::uint32_t features = 0;
  std::string unsorted = "sort";
};

sparse::UnsortedIds parse_unsorted(const std::string& s) {
  if (s == "sort") return sparse::UnsortedIds::sort;
  if (s == "reject") return sparse::UnsortedIds::reject;
  throw InputError(fmt::format("--unsorted '{}': expected sort or reject", s));
}

// Padded weights beyond num_features are ignored by objective/accuracy.
void print_quality(std::FILE* out, const char* what, const sparse::LinearProblem& p, std::span<const float> w) {
  fmt::print(out, "{}: {} examples, objective {:.6f}, accuracy {:.4f}\n", what, p.num_examples(), p.objective(w),
             p.accuracy(w));
}

// The run's store and resume (TrainingRun), its errors as the command says them.
TrainingRun open_run(const TrainFlags& f, Layout layout, TrainingRunOptions ro) {
  try {
    return open_training_run(std::move(layout), std::move(ro));
  } catch (const LayoutMismatch& e) {
    // Without --features each process sizes the model from its own data's largest feature id.
    if (f.features != 0) throw;
    throw LayoutMismatch(fmt::format("{}\n(without --features each process sizes the weights from the largest "
                                     "feature id in its own --data: give every process the same --features N)",
                                     e.what()));
  }
}

// Refuses a checkpoint (`saved`, read from `own`) that this run cannot continue: another kind of model, another
// width, loss or L2, AdaGrad sums of another number of ranks, another seed, or no epoch left to train.
void check_resumed(const TrainFlags& f, const CheckpointData& saved, const std::filesystem::path& own,
                   std::uint64_t features, sparse::LinearLoss loss, const TrainerOptions& options,
                   const Distributed& dist) {
  // Another kind of model (mf, w2v, cnn) said so first: its loss or layout would be refused as if a flag were
  // wrong (an mf model: "loss 'bpr': expected logistic, squared-hinge or hinge").
  const auto kind = nlohmann::json::parse(saved.metadata, nullptr, false);
  if (!kind.is_object() || (kind.value("model", "") != "logistic" && kind.value("model", "") != "linear")) {
    throw InputError(fmt::format("--resume {}: not a linear model{}", f.resume,
                                 kind.is_object() && kind.contains("model") && kind["model"].is_string()
                                     ? fmt::format(" (its kind: {})", kind["model"].get<std::string>())
                                     : std::string()));
  }
  // Without --features each run sizes the weights from its data's largest feature id.
  if (kind.contains("features") && kind["features"].is_number_unsigned() &&
      kind["features"].get<std::uint64_t>() != features) {
    throw InputError(fmt::format("--resume {}: trained with {} features, and this run has {}{}", f.resume,
                                 kind["features"].get<std::uint64_t>(), features,
                                 f.features == 0 ? fmt::format(" (from --data's largest feature id): give "
                                                               "--features {}",
                                                               kind["features"].get<std::uint64_t>())
                                                 : std::string()));
  }
  if (const auto saved_loss = sparse::linear_model_loss(saved.metadata); saved_loss != loss) {
    throw InputError(fmt::format("--resume {}: trained with --loss {}, not {}", f.resume,
                                 sparse::to_string(saved_loss), sparse::to_string(loss)));
  }
  // Another l2 is another objective: the run would go on towards another optimum.
  if (const double saved_l2 = sparse::linear_model_l2(saved.metadata).value_or(f.l2); saved_l2 != f.l2) {
    throw InputError(fmt::format("--resume {}: trained with --l2 {}, not {} (give --l2 {})", f.resume, saved_l2,
                                 f.l2, saved_l2));
  }
  // Each rank's sums fit the shard it trained: other ranks would take over sums built on other examples.
  const int wrote = [&] {
    try {
      return sparse::linear_model_ranks(saved.metadata);
    } catch (const InputError& e) {
      throw InputError(fmt::format("--resume {}: {}", own.string(), e.what()));
    }
  }();
  if (wrote != dist.size() && options.schedule.has_adagrad() && !saved.optimizer_state.empty()) {
    throw InputError(fmt::format("--resume {}: written by an AdaGrad job of {} rank(s), each with its own sums; "
                                 "resume with {} rank(s), not {}",
                                 f.resume, wrote, wrote, dist.size()));
  }
  if (f.engine.seed_given && f.engine.seed != saved.state.seed)
    throw InputError(fmt::format("--seed {}: {} was trained with seed {}, and a resumed run keeps it", f.engine.seed,
                                 f.resume, saved.state.seed));
  if (const std::uint64_t last = f.until_epoch ? f.until_epoch : options.epochs; saved.state.epoch >= last)
    throw InputError(fmt::format("--resume {}: {} epochs are done already; {} (give more)", f.resume,
                                 saved.state.epoch,
                                 f.until_epoch ? "--until-epoch is the last to train" : "--epochs is the run's total"));
}

// --data with {rank} replaced by this rank (each rank reads its own, already sharded file), after the checks that
// every rank must pass alike.
std::string rank_data_path(const TrainFlags& f, const TrainerOptions& options, Distributed& dist) {
  std::string path = f.data;
  const bool per_rank_files = path.find("{rank}") != std::string::npos;
  // Before any collective that only one of the two cases makes (the sum of the ranks' feature counts): ranks that
  // disagree here would wait for each other for ever, or meet in allreduces of different lengths.
  const std::array<std::uint64_t, 2> shape{per_rank_files ? 1u : 0u, f.features};
  dist.same_on_all_ranks(shape, "--data with or without {rank}/--features (every rank needs the same)");
  // So must --resume and AdaGrad: with both, the ranks agree on the checkpoint's generation (resume_own_checkpoint).
  const std::array<std::uint64_t, 2> resuming{f.resume.empty() ? 0u : 1u, options.schedule.has_adagrad() ? 1u : 0u};
  dist.same_on_all_ranks(resuming, "--resume (1: given)/--adagrad (1: on) (every rank needs the same)");
  if (!per_rank_files) return path;
  if (f.features == 0) throw InputError("--data with {rank}: give --features, the model width every rank shares");
  if (f.reference && dist.active())
    throw InputError("--reference: not with --data {rank} (the ranks' files together are on no one rank: no "
                     "optimum to compare with; `asgd linear eval` scores the model on any file)");
  const std::string rank = std::to_string(dist.rank());
  for (auto at = path.find("{rank}"); at != std::string::npos; at = path.find("{rank}", at + rank.size()))
    path.replace(at, 6, rank);
  return path;
}

// What a rank trains: the whole set's problem (for the report and the reference), and this rank's shard of it with
// the whole set's regulariser weights. Under mpirun each rank trains every P-th example, or its own file ({rank}):
// then `whole` is this rank's file, and the shard takes the weights from every rank's counts summed (floats:
// exact to 2^24 examples of a feature, and the weights are floats anyway). Quality is reported on `whole`.
struct TrainingData {
  // `settings`: the objective, which the ranks agree on once each has its shard, before the problems are made.
  TrainingData(const TrainFlags& f, const std::string& path, sparse::LinearLoss loss, Settings settings,
               Distributed& dist);
  TrainingData(const TrainingData&) = delete;
  TrainingData& operator=(const TrainingData&) = delete;
  const sparse::LinearProblem& problem() const { return own_shard ? *own_shard : *whole; }
  const sparse::SparseDataset& trained() const { return own_shard && shard ? *shard : data; }

  sparse::SparseDataset data;
  std::optional<sparse::SparseDataset> shard;
  std::optional<sparse::LinearProblem> whole;  // after the ranks agreed: under mpirun an empty set is too few to share
  std::optional<sparse::LinearProblem> own_shard;
  std::uint64_t all_examples = 0;
};

sparse::SparseDataset read_data(const TrainFlags& f, const std::string& path) {
  sparse::SparseDataset data = sparse::read_libsvm(path, parse_unsorted(f.unsorted));
  if (f.features > 0) {
    // Processes training shards of one model need one layout: fix its width.
    if (data.num_features > f.features) {
      throw InputError(fmt::format("{}: feature id {} is beyond --features {}", path, data.num_features - 1,
                                   f.features));
    }
    data.num_features = f.features;
  }
  return data;
}

TrainingData::TrainingData(const TrainFlags& f, const std::string& path, sparse::LinearLoss loss, Settings settings,
                           Distributed& dist)
    : data(read_data(f, path)), all_examples(data.rows()) {
  const bool per_rank_files = path != f.data;
  if (dist.active() && !per_rank_files) shard = sparse::select_rows(data, dist.shard(data.rows(), "examples"));
  dist.same_settings(settings);
  whole.emplace(data, f.l2, loss);
  if (shard) own_shard.emplace(*shard, *whole);
  if (!per_rank_files || !dist.active()) return;
  auto counts = sparse::LinearProblem::count_features(data);
  std::vector<float> sums(counts.per_feature.begin(), counts.per_feature.end());
  sums.push_back(static_cast<float>(counts.examples));
  dist.sum_of_ranks(sums);
  constexpr float kMaxCount = 4294967040.0f;  // the largest float below 2^32
  for (std::size_t u = 0; u < counts.per_feature.size(); ++u)
    counts.per_feature[u] = static_cast<std::uint32_t>(std::min(sums[u], kMaxCount));
  counts.examples = static_cast<std::uint64_t>(sums.back());
  own_shard.emplace(data, f.l2, loss, counts);
  all_examples = counts.examples;
}

// The checkpoint this rank resumes (with AdaGrad under mpirun every rank has its own, and the ranks agree on its
// generation), read before this run's checkpoints' metadata is made, which keeps the run's id.
std::optional<Distributed::Resumed> read_resumed(const TrainFlags& f, const TrainerOptions& options,
                                                 Distributed& dist) {
  if (f.resume.empty()) return std::nullopt;
  const std::filesystem::path own = dist.own_checkpoint(f.resume, options);
  if (own != f.resume && !std::filesystem::exists(own)) {
    throw InputError(fmt::format("--resume: {} is missing (under mpirun an AdaGrad run checkpoints each rank's sums, "
                                 "rank r's beside the file given; resume with as many ranks as wrote them)",
                                 own.string()));
  }
  return dist.resume_own_checkpoint(f.resume, options);
}

// After training: the objective and accuracy on the training set, the gap to L-BFGS's optimum (--reference) and
// the test set's figures.
void report_quality(std::FILE* out, const TrainFlags& f, const sparse::LinearProblem& whole,
                    std::optional<sparse::SparseDataset>& test, std::span<const float> w, sparse::LinearLoss loss) {
  print_quality(out, "train", whole, w);
  if (f.reference) {
    const auto opt = sparse::solve_lbfgs(whole);
    const double ours = whole.objective(w);
    fmt::print(out, "reference (L-BFGS, {} iterations, |grad| {:.1e}): ", opt.iterations, opt.gradient_norm);
    if (opt.objective > 1e-6) {
      fmt::print(out, "objective {:.6f}; ours is {:.2e} relative above\n", opt.objective,
                 (ours - opt.objective) / opt.objective);
    } else {  // a gap relative to (nearly) zero says nothing
      fmt::print(out, "objective {:.2e}; ours is {:.2e} above (absolute: the optimum is too near 0 for a relative "
                 "gap{})\n",
                 opt.objective, ours - opt.objective,
                 f.l2 == 0 && loss == sparse::LinearLoss::logistic
                     ? "; logistic with --l2 0 on data that a hyperplane separates has no finite optimum"
                     : "");
    }
  }
  if (test) {
    // narrow_to_weights first (it narrows the data to the model's features): the problem is built on what it leaves.
    const std::vector<float> scored = sparse::narrow_to_weights(*test, {w.begin(), w.end()});
    print_quality(out, "test", sparse::LinearProblem(*test, f.l2, loss), scored);
  }
}

// The run's options: the store (heap or --shm), the checkpoint resumed, the stop request and progress.
TrainingRunOptions run_options(const TrainFlags& f, Settings settings, std::optional<Distributed::Resumed> resumed,
                               std::atomic<bool>* stop) {
  TrainingRunOptions ro;  // field by field: GCC 12 warns falsely on a designated initializer here
  ro.shm = f.shm;
  // The objective, which every process training the segment must share too (the rates and step rules may differ).
  ro.attach = {.recover_stale = f.shm_recover, .settings = settings_text(settings)};
  ro.checkpoint = f.checkpoint;
  if (resumed) {
    ro.resume = resumed->file;
    ro.resumed = std::move(resumed->data);
  }
  ro.stop = stop;
  ro.on_progress = progress_printer("linear", f.quiet);
  return ro;
}

int train(const TrainFlags& f, Distributed& dist) {
  check_one_stdin({{"--data", f.data}, {"--test", f.test}});
  // The report goes to stderr when the model goes to stdout (--model -).
  std::FILE* const out = report_stream({f.model});
  TrainerOptions options = to_trainer_options(f.engine);
  if (dist.active() && !f.shm.empty()) throw InputError("--shm: not with mpirun (each rank keeps its model)");
  if (dist.root()) {
    check_output("--model", f.model);
    check_rewritten_output("--checkpoint", f.checkpoint);
    check_distinct("--model", f.model, {{"--data", f.data}, {"--test", f.test}});
    check_distinct("--checkpoint", f.checkpoint, {{"--data", f.data}, {"--test", f.test}});
  }
  const std::string path = rank_data_path(f, options, dist);
  // The flags that need no data, before the file is read (a 1 GB file was read, 5.5 s, before "--l2 -1" was said).
  const sparse::LinearLoss loss = parse_flag("--loss", [&] { return sparse::parse_linear_loss(f.loss); });
  if (!(f.l2 >= 0) || !std::isfinite(f.l2)) throw InputError(fmt::format("--l2 {}: expected finite and >= 0", f.l2));
  // One objective for the models the ranks average.
  const std::pair<std::string_view, std::string> settings[] = {{"--loss", std::string(sparse::to_string(loss))},
                                                                {"--l2", as_text(f.l2)}};
  const TrainingData d(f, path, loss, settings, dist);
  const sparse::LinearProblem& problem = d.problem();
  // Before training, what solve_lbfgs would refuse after it.
  if (f.reference && !problem.smooth())
    throw InputError(fmt::format("--reference: not with --loss {} (not smooth: L-BFGS has no optimum to give; "
                                 "squared-hinge has)",
                                 f.loss));
  // Read before training, so that a bad --test file fails now rather than after the run.
  std::optional<sparse::SparseDataset> test;
  if (!f.test.empty() && dist.root()) test = sparse::read_libsvm(f.test, parse_unsorted(f.unsorted));
  std::optional<Distributed::Resumed> resumed = read_resumed(f, options, dist);
  if (f.until_epoch > options.epochs) {
    throw InputError(fmt::format("--until-epoch {}: past --epochs {}", f.until_epoch, options.epochs));
  }
  if (f.until_epoch != 0 && f.checkpoint.empty() && f.model.empty())
    throw InputError("--until-epoch: give --checkpoint FILE to resume from (or --model), or the run is lost");

  // From before the segment is opened: a signal while it is created or attached stops the run at its first step,
  // which detaches as a finished run does (a kill then left a segment stale, for --shm-recover).
  const StopOnSignal on_signal(!dist.active());
  TrainingRun run = open_run(f, problem.layout(), run_options(f, settings, std::move(resumed), on_signal.flag()));
  // The run's id: the settings every rank trains with and the seed (a resume keeps the checkpoint's).
  run.set_record(asgd::engine_options(options), options.seed,
                 fmt::format("{} {} {}", sparse::to_string(loss), as_text(f.l2), problem.num_features()));
  // What this rank trains on, counted (a resume on other data is warned about, as cnn and w2v warn).
  run.add_to_record("examples", as_text(problem.num_examples()));
  run.add_to_record("nonzeros", as_text(d.trained().nnz()));
  run.add_to_record("data", fmt::format("{:016x}", d.trained().checksum()));
  options.checkpoint_metadata = sparse::linear_model_metadata(
      f.l2, problem.num_features(), loss, options.schedule.has_adagrad() && dist.active() ? dist.size() : 0,
      run.record());
  if (!f.shm.empty() && !f.quiet) {
    fmt::print(out, "{} shared segment '{}'{}\n", run.created() ? "created" : "attached to", f.shm,
               run.created() ? "" : " (training continues from the parameters in it)");
  }
  run.configure(options);
  dist.prepare(options);
  ParamStore& store = run.store();
  Trainer trainer(store, options);
  if (run.resumed()) {
    check_resumed(f, *run.resumed(), run.options().resume, problem.num_features(), loss, options, dist);
    // Loaded first: a step rule it refuses (AdaGrad on or off) is an error, not a warning followed by one.
    const nlohmann::json before = saved_options(run.resumed()->metadata);
    run.load_resumed(trainer);
    if (dist.root()) {
      nlohmann::json now = nlohmann::json(run.record());
      warn_data_changed("linear train", f.resume, before, now, "data", "examples", "training examples");
      now.erase("run");  // a digest of the settings: those that differ are said one by one
      warn_options_changed("linear train", f.resume, before, now, {"examples", "nonzeros"});
      fmt::print(out, "resumed from {} at epoch {}\n", f.resume, trainer.state().epoch);
    }
  }
  if (dist.active())
    fmt::print(out, "mpi: {}; rank 0 trains {} of {} examples\n", dist.describe(), problem.num_examples(),
               d.all_examples);
  dist.start(trainer, store);
  run.started();  // from here on the segment holds training: kept whatever happens next
  const TrainReport report = run_averaged(dist, trainer, problem, f.until_epoch ? f.until_epoch : options.epochs);
  if (report.stopped) {
    print_interrupted({.command = "linear train",
                       .epochs = options.epochs,
                       .checkpoint = f.checkpoint,
                       .resumed_from = f.resume,
                       .dashes = "--",
                       .shm = f.shm},
                      report);
    return interrupted_exit_code();
  }
  for (const auto& e : report.epochs) {
    if (!f.quiet) {
      fmt::print(out, "epoch {:3}: mean loss {:.6f}  {:.2f} s  staleness mean {:.2f} max {}  lead max {}\n", e.epoch,
                 e.loss, e.seconds, e.mean_staleness, e.max_staleness, e.max_lead);
    }
  }
  fmt::print(out, "trained: {} ({}, {}, tau {}, {})\n", report.summary(), counted(options.workers, "worker"),
             to_string(options.consistency), tau_to_string(options.tau), options.schedule.describe());
  if (dist.active()) {
    fmt::print(out, "mpi: {}\n", dist.traffic());
    if (!dist.root()) return 0;  // every rank holds the same model; rank 0 reports and writes it
  }
  // On the heap nobody else writes the parameters: they are evaluated in place (a copy is as large as the model,
  // 8 GiB for ids near 2^31). In a shared segment other processes may go on training: a snapshot, so that every
  // figure below is of the same weights.
  std::vector<float> copy;
  std::span<const float> w(std::as_const(store).data(), store.size());
  if (store.is_shared()) w = copy = store.snapshot();
  report_quality(out, f, *d.whole, test, w, loss);
  if (!f.model.empty()) {
    // Rank 0 alone writes the model, with its own AdaGrad sums and no rank files: it records no ranks, so one
    // process may resume it (checkpoints of an AdaGrad job record theirs).
    save_checkpoint(f.model, store, trainer.state(), trainer.adagrad_sums(),
                    sparse::linear_model_metadata(f.l2, problem.num_features(), loss, 0, run.record()),
                    trainer.optimizer_kind());
    fmt::print(out, "model written to {}\n", f.model);
  }
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
  sparse::SparseDataset data = sparse::read_libsvm(f.data, parse_unsorted(f.unsorted));
  std::vector<float> w;
  std::optional<double> l2;
  if (f.l2_given) l2 = f.l2;  // checked by LinearProblem, as train's
  sparse::LinearLoss loss = sparse::LinearLoss::logistic;
  if (!f.loss.empty()) loss = parse_flag("--loss", [&] { return sparse::parse_linear_loss(f.loss); });
  if (!f.model.empty()) {
    sparse::LinearModelFile model = sparse::read_linear_model(f.model);
    w = std::move(model.weights);
    if (!l2) l2 = model.l2().value_or(1e-4);
    if (f.loss.empty()) loss = model.loss();
  } else {
    const ParamStore store = ParamStore::attach_shared_any(f.shm, Access::read_only);
    warn_if_writers_died(f.shm);
    refuse_diverged_segment(f.shm, store);
    if (!store.layout().contains("weights")) throw InputError(fmt::format("segment {}: not a linear model", f.shm));
    w = store.snapshot("weights");
    // The segment keeps the objective its trainers share (linear train's settings_text).
    const std::string kept = ParamStore::inspect_shared(f.shm).settings;
    if (const auto kept_loss = setting_of(kept, "--loss"); kept_loss && f.loss.empty())
      loss = parse_flag("the segment's --loss", [&] { return sparse::parse_linear_loss(*kept_loss); });
    if (const auto kept_l2 = setting_of(kept, "--l2"); kept_l2 && !l2) {
      try {
        l2 = std::stod(*kept_l2);
      } catch (const std::exception&) {
        throw InputError(fmt::format("segment {}: its --l2 '{}' is not a number", f.shm, *kept_l2));
      }
    }
    if (!l2) {
      l2 = 1e-4;  // a segment made by another program: parameters only
      fmt::print("(segment: objective with --l2 {}, the training default; pass --l2 if it trained with another)\n",
                 *l2);
    }
  }
  w = sparse::narrow_to_weights(data, std::move(w));
  const sparse::LinearProblem problem(data, *l2, loss);
  print_quality(stdout, "eval", problem, w);
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
  auto options = f.gen;
  options.examples += f.test_examples;
  const auto g = sparse::generate_sparse(options);
  const std::size_t n = f.gen.examples;
  const std::uint32_t first_id = f.one_based ? 1 : 0;
  sparse::write_libsvm(f.out, sparse::slice_rows(g.data, 0, n), first_id);
  fmt::print(out, "wrote {} examples, {} features, {} non-zeros each to {}\n", n, options.features,
             options.nnz_per_example, f.out);
  if (f.test_examples > 0) {
    sparse::write_libsvm(f.test_out, sparse::slice_rows(g.data, n, n + f.test_examples), first_id);
    fmt::print(out, "wrote {} test examples to {}\n", f.test_examples, f.test_out);
  }
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
  train_cmd->add_option("--data", tf->data,
                        "Training file (libsvm: label id:value ..., gzipped or not); under mpirun, {rank} in the name "
                        "gives each rank its own file")
      ->required();
  train_cmd->add_option("--test", tf->test, "Test file to report accuracy on");
  train_cmd->add_option("--l2", tf->l2, "L2 regularisation strength")->capture_default_str();
  train_cmd->add_option("--loss", tf->loss,
                        "logistic (regression), squared-hinge (L2-loss SVM) or hinge (L1-loss SVM, subgradient); "
                        "--lr is 0.1 for the hinges unless given")
      ->capture_default_str();
  train_cmd->add_option("--features", tf->features,
                        "Model width (default: largest feature id + 1); give it when processes train shards");
  train_cmd->add_option("--model", tf->model, "Write the trained model here");
  train_cmd->add_option("--checkpoint", tf->checkpoint, "Checkpoint here after every epoch");
  train_cmd->add_option("--resume", tf->resume, "Start from this checkpoint (parameters, epoch, seeds)");
  train_cmd->add_option("--until-epoch", tf->until_epoch,
                        "Stop after this epoch of --epochs (the schedule still spans --epochs); resume later");
  train_cmd->add_option("--shm", tf->shm, "Train in shared segment NAME (created, or attached if it exists)");
  train_cmd->add_flag("--shm-recover", tf->shm_recover, "Take over a segment whose writer was killed");
  train_cmd->add_flag("--reference", tf->reference, "Also solve with L-BFGS and print the gap to the optimum");
  train_cmd->add_option("--unsorted", tf->unsorted, "Unsorted feature ids in a line: sort or reject")
      ->capture_default_str();
  train_cmd->add_flag("--quiet,-q", tf->quiet, "No progress or per-epoch lines");
  add_engine_flags(*train_cmd, tf->engine);
  add_distributed_flags(*train_cmd, tf->dist);
  train_cmd->callback([tf, train_cmd, &exit_code] {
    // The hinges' gradients grow with the violation (the squared one's curvature is 8x the logistic's): without
    // --lr they start at 0.1, where SGD is stable on the reference data (bench/RESULTS.md).
    if (train_cmd->count("--lr") == 0 && tf->loss != "logistic") tf->engine.lr = 0.1f;
    exit_code = run_guarded([&] { return run_distributed(tf->dist, [&](Distributed& d) { return train(*tf, d); }); });
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
