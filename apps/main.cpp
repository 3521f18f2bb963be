// The `asgd` command: one binary, one subcommand per app.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "asgd/config.hpp"
#include "asgd/engine/param_store.hpp"
#include "cli_common.hpp"

int main(int argc, char** argv) {
  CLI::App app{"asgd " ASGD_VERSION_STRING ": lock-free asynchronous SGD (Hogwild!, bounded delay)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", ASGD_VERSION_STRING);
  int exit_code = 0;
  asgd::cli::add_demo_command(app, exit_code);
  asgd::cli::add_linear_commands(app, exit_code);
  asgd::cli::add_w2v_command(app, exit_code);
  asgd::cli::add_w2v_eval_command(app, exit_code);
  asgd::cli::add_mf_commands(app, exit_code);
  asgd::cli::add_cnn_commands(app, exit_code);
  asgd::cli::add_bench_commands(app, exit_code);
  asgd::cli::add_shm_commands(app, exit_code);
  asgd::cli::refuse_negative_unsigned(app);
  asgd::ParamStore::set_wait_notice([](const std::string& note) { std::fprintf(stderr, "asgd: %s\n", note.c_str()); });
  // LIBMF spells its L2 flag with one dash and several letters (-l2 0.05),
  // which CLI11 would read as -l with the value 2: spell it --l2 for mf.
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() > 1 && args[1] == "mf") {
    for (auto& a : args) {
      if (a == "-l2") a = "--l2";
    }
  }
  std::vector<char*> arg_ptrs;
  for (auto& a : args) arg_ptrs.push_back(a.data());
  try {
    app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "asgd: error: %s\n", e.what());
    std::fprintf(stderr, "Run with --help for usage.\n");
    return asgd::cli::kExitInput;
  }
  // What a command printed to stdout (vectors, metrics, a model) must have been written: a full disk or a closed
  // descriptor is a failure (exit 1), not a success with the output lost.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "asgd: error: writing standard output: %s\n", std::strerror(errno));
    asgd::cli::die_of_stop_signal();
    return exit_code != 0 ? exit_code : asgd::cli::kExitRuntime;
  }
  asgd::cli::die_of_stop_signal();  // a command stopped by Ctrl-C or SIGTERM ends as killed by it
  return exit_code;
}
