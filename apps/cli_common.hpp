// What every `asgd` subcommand shares: the engine's flags (workers, policy,
// tau, schedule), the terminal-aware progress line, and error-to-exit-code mapping.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <fmt/format.h>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "asgd/dense/mnist.hpp"
#include "asgd/sparse/generator.hpp"
#include "asgd/sparse/libsvm.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/file_checks.hpp"
#include "asgd/engine/options_record.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/stop_signal.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/engine/training_run.hpp"

namespace asgd::cli {

// Exit codes: 0 ok, 1 runtime failure, 2 bad input (flags, files).
inline constexpr int kExitRuntime = 1;
inline constexpr int kExitInput = 2;

// Engine flags as typed on the command line, validated by to_trainer_options.
struct EngineFlags {
  std::size_t workers = 2;
  std::uint64_t epochs = 10;
  std::uint64_t seed = 1;
  bool seed_given = false;  // --seed on the command line (a resume keeps the checkpoint's)
  std::string policy = "racy";
  std::string tau = "inf";
  std::size_t step_examples = 256;
  std::string schedule = "linear";
  float lr = 0.1f;
  float lr_floor = 1e-4f;
  float warmup = 0.0f;
  bool staleness_aware = false;
  bool adagrad = false;
  // How the command spells these flags, for its error messages (mf: -s, -t, -r, --lr-schedule).
  struct Names {
    const char* workers = "--workers";
    const char* epochs = "--epochs";
    const char* lr = "--lr";
    const char* schedule = "--schedule";
  } names;
};

// parse()'s value; its InputError says which flag was wrong ("--tau: ...").
template <class Parse>
auto parse_flag(std::string_view name, Parse&& parse) {
  try {
    return parse();
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", name, e.what()));
  }
}

// CLI11 reads "-1" into an unsigned option as 2^64 - 1: every unsigned
// option of `app` and its subcommands refuses a value with a minus sign.
void refuse_negative_unsigned(CLI::App& app);

void add_engine_flags(CLI::App& app, EngineFlags& flags);
// Throws InputError naming the flag that is wrong.
TrainerOptions to_trainer_options(const EngineFlags& flags);

// A value as text, as fmt prints it (for option records and settings).
template <class T>
std::string as_text(const T& value) {
  return fmt::format("{}", value);
}

// "1 worker", "2 workers": a count and its noun (plural with an s).
inline std::string counted(std::uint64_t n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

// A resumed run continues the saved one (the same rates, steps and updates) only with the same options: a warning
// on stderr for every change (resume_changes, dense::resume_changes, w2v::changed_settings) to the run the
// checkpoint `path` holds. A key is printed as DASHES key unless `bare` names it (a count or a name that no flag
// sets).
void warn_option_changes(std::string_view command, const std::string& path, std::span<const OptionChange> changes,
                         std::initializer_list<std::string_view> bare = {}, std::string_view dashes = "--");
// "the WHAT differ from those of the run PATH continues (same number)", as a warning.
void warn_data_differs(std::string_view command, const std::string& path, std::string_view what);

// Ctrl-C (SIGINT) or SIGTERM while a command trains (StopOnSignal,
// engine/stop_signal.hpp). The first asks the run to stop: the workers end
// their step, the command writes nothing more (the last checkpoint stays
// what a resume starts from), detaches a shared segment as a finished run
// does (not stale: the next trainer needs no --shm-recover), says where
// the run stopped, and returns interrupted_exit_code(); main() then dies
// of the same signal, so a shell or a script sees an interrupted command.
// A signal after training (while the command evaluates or writes) lets that
// work finish and the process then dies of it all the same. Under mpirun
// with several ranks nothing is installed: a rank that stopped alone would
// leave the others waiting in a collective, so there the signal ends the job.
// This function: 128 + the signal, what a command returns after a stop by
// signal (the shell's own code for a command killed by it).
int interrupted_exit_code() noexcept;
// Called by main() last: when a signal asked to stop, dies of it (default
// disposition); otherwise returns.
void die_of_stop_signal();
// Where an interrupted run stopped, for print_interrupted.
struct Interrupted {
  std::string_view command = {};       // "linear train"
  std::uint64_t epochs_at_start = 0;   // done before this run (a resume's)
  std::uint64_t epochs_done = 0;       // done now, those before a resume too
  std::uint64_t epochs = 0;            // the run's total
  std::string checkpoint = {};         // written after every epoch (empty: none)
  std::string resumed_from = {};       // the checkpoint this run resumed (empty: none)
  std::string_view dashes = {};        // spell the checkpoint and resume flags: "--", "-" (w2v); empty: none
  std::string shm = {};                // the shared segment trained (empty: the heap)
};
// "asgd COMMAND: interrupted (SIGINT) in epoch E of N: nothing more written;
// ..." on stderr: what a shared segment keeps, and which checkpoint a
// resume goes on from (this run's, when it finished an epoch; else the one
// it resumed).
void print_interrupted(const Interrupted& run);
// The same for a Trainer's run: the epochs at its start and done now come from the report.
void print_interrupted(Interrupted run, const TrainReport& report);

// A time for a progress line's ETA: "42s", "12m05s", "3.2h".
std::string human_duration(double seconds);

// A progress callback: a live line on a terminal (stderr), nothing in a pipe.
ProgressCallback progress_printer(std::string label, bool quiet);
// True when stderr is a terminal.
bool stderr_is_terminal();

// MNIST's folder for `--data DIR|builtin` (dense::mnist_dir, the built-in digits looked for in ./build/data and
// the source tree's).
std::filesystem::path resolve_mnist_dir(const std::string& data);

// The generated problem's sizes (linear generate, demo, bench staleness), refused with the flags' names before
// anything is printed or made (generate_sparse's own errors name its fields).
void check_generator_flags(const sparse::GeneratorOptions& gen);

// A reader of segment `name` (attached read-only) is told on stderr when a process that trained into it died
// without detaching: what it serves is what that process had written, perhaps mid-epoch (`asgd shm info` says as
// much; a writer would have to pass --shm-recover).
void warn_if_writers_died(const std::string& name);
// Where a command prints its report (what it read, did and reached):
// stdout, unless one of `outputs` (its data files; "" for none) is written
// there too, as `--model -` is: then stderr, so the data stays whole. A
// stdout that is /dev/null keeps the report.
std::FILE* report_stream(std::initializer_list<std::string_view> outputs);

// A library error's text as the command line says it: the library names its
// calls and options (ParamStore::remove_shared("NAME"),
// AttachOptions::recover_stale, BlockTrainOptions::lr), the CLI the commands
// and flags that do the same (asgd shm remove NAME, --shm-recover, --lr).
// `names` adds a command's own: (library option, flag) pairs, such as
// {"FitOptions::test_fraction", "--test-fraction"}; an option is replaced
// where it is whole (not followed by a letter, digit or _).
using OptionNames = std::span<const std::pair<std::string_view, std::string_view>>;
std::string cli_message(std::string message, OptionNames names = {});

// Runs `body`, mapping asgd errors to "asgd: error: ..." (cli_message with `names`) and exit codes.
int run_guarded(const std::function<int()>& body, OptionNames names = {});

// Subcommand registration (each in its own file). A subcommand's callback
// stores its exit code in `exit_code`.
void add_linear_commands(CLI::App& app, int& exit_code);
void add_bench_commands(CLI::App& app, int& exit_code);
void add_shm_commands(CLI::App& app, int& exit_code);
void add_demo_command(CLI::App& app, int& exit_code);
void add_w2v_command(CLI::App& app, int& exit_code);
void add_mf_commands(CLI::App& app, int& exit_code);
void add_w2v_eval_command(CLI::App& app, int& exit_code);
void add_cnn_commands(CLI::App& app, int& exit_code);

}  // namespace asgd::cli
