// Running the `asgd` binary from tests: a child process with its output
// captured, and a fixture with a scratch folder per test.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "asgd/engine/checkpoint.hpp"

namespace asgd::testing {

namespace fs = std::filesystem;

struct Result {
  int status = -1;
  std::string output;  // stdout and stderr together
};

// A child process running `asgd ARGS...`, output to a file.
class Child {
 public:
  // stdin comes from `input` (default /dev/null: a test never waits on a terminal); stdout goes to `out` when
  // given, else with stderr to `log`.
  Child(const std::vector<std::string>& args, const fs::path& log, const fs::path& input = "/dev/null",
        const fs::path& out = {})
      : log_(log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      // As a shell starts a job in the foreground: Ctrl-C and SIGTERM at their defaults, whatever this test
      // inherited (a CI run in the background of a non-interactive shell ignores SIGINT, and asgd leaves an
      // ignored signal ignored).
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      const int in = ::open(input.c_str(), O_RDONLY);
      ::dup2(in, 0);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(out.empty() ? fd : ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
      ::dup2(fd, 2);
      std::vector<char*> argv;
      std::string bin = ASGD_BINARY;
      argv.push_back(bin.data());
      std::vector<std::string> copy = args;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0 && !waited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Result wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    waited_ = true;
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), ss.str()};
  }
  void kill_now(int sig = SIGKILL) { ::kill(pid_, sig); }
  pid_t pid() const { return pid_; }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  bool waited_ = false;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("asgd-cli-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Result run(const std::vector<std::string>& args, const fs::path& input = "/dev/null") {
    Child c(args, dir_ / ("log" + std::to_string(runs_++)), input);
    return c.wait();
  }
  // `args` with stdout to file `out` in the test's directory; the result's output is stderr alone.
  Result run_to(const std::string& out, const std::vector<std::string>& args) {
    Child c(args, dir_ / ("log" + std::to_string(runs_++)), "/dev/null", dir_ / out);
    return c.wait();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Starts `args`, which write a checkpoint to file `checkpoint` after every
  // epoch, and sends it `sig` (SIGKILL; SIGINT as Ctrl-C) a few milliseconds
  // after that file first appears: in the middle of some later epoch or
  // save, before the run ends if it has epochs enough. Returns the epoch the
  // checkpoint then holds; `result`, when given, gets how the child ended.
  std::uint64_t killed_after_first_checkpoint(const std::vector<std::string>& args, const std::string& checkpoint,
                                              int sig = SIGKILL, Result* result = nullptr) {
    Child victim(args, dir_ / ("victim" + std::to_string(runs_++)));
    for (int i = 0; i < 5000 && !fs::exists(path(checkpoint)); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + ::getpid() % 20));
    victim.kill_now(sig);
    const Result r = victim.wait();
    if (result) *result = r;
    return asgd::read_checkpoint(path(checkpoint)).state.epoch;
  }
  // `args(extra)` is a training command line plus `extra`: killed (`sig`)
  // after its first checkpoint and resumed from it, it must give the
  // uninterrupted run's parameters. Stopped by SIGINT (Ctrl-C) it must also
  // die of it, say so, and write no model; a run that finished first (a
  // busy machine) exits 0.
  void expect_killed_and_resumed_is_whole(
      const std::function<std::vector<std::string>(std::vector<std::string>)>& args, int sig = SIGKILL) {
    Result victim;
    const auto killed_at =
        killed_after_first_checkpoint(args({"--checkpoint", path("ck"), "--model", path("victim-model")}), "ck",
                                      sig, &victim);
    ASSERT_GE(killed_at, 1u);
    if (sig == SIGINT && victim.status != 0) {
      EXPECT_EQ(victim.status, 128 + SIGINT) << victim.output;
      EXPECT_NE(victim.output.find("interrupted (SIGINT)"), std::string::npos) << victim.output;
      EXPECT_NE(victim.output.find("--resume " + path("ck") + " goes on from the end of epoch"), std::string::npos)
          << victim.output;
      EXPECT_FALSE(fs::exists(path("victim-model"))) << "an interrupted run writes no model";
    }
    auto r = run(args({"--resume", path("ck"), "--model", path("resumed")}));
    // Killed after its last epoch (a busy machine): a resume has nothing to train and is refused; the last
    // checkpoint is then the model.
    const bool finished = r.status == 2 && r.output.find("epochs are done already") != std::string::npos;
    if (!finished) {
      ASSERT_EQ(r.status, 0) << r.output;
    }
    r = run(args({"--model", path("whole")}));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(asgd::read_checkpoint(path(finished ? "ck" : "resumed")).params,
              asgd::read_checkpoint(path("whole")).params)
        << "killed after epoch " << killed_at;
  }
  // Two trainers on one checkpoint: `first` (a long run that writes checkpoint file `checkpoint`) runs; once its
  // first checkpoint is written, `second` (a short run on the same path) is refused at its start (exit 2), told
  // the path and the first's pid, and leaves the checkpoint as it was; once the first is killed with SIGKILL (no
  // chance to clean up), `second` runs (exit 0).
  void expect_second_writer_refused(const std::vector<std::string>& first, const std::vector<std::string>& second,
                                    const std::string& checkpoint) {
    Child running(first, dir_ / ("first" + std::to_string(runs_++)));
    for (int i = 0; i < 20000 && !fs::exists(path(checkpoint)); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(fs::exists(path(checkpoint))) << "the first run wrote no checkpoint";
    ASSERT_EQ(::waitpid(running.pid(), nullptr, WNOHANG), 0) << "the first run ended too soon";
    Result r = run(second);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("checkpoint " + path(checkpoint) + ": another run is writing it (pid " +
                            std::to_string(running.pid()) + ")"),
              std::string::npos)
        << r.output;
    running.kill_now(SIGKILL);
    running.wait();
    r = run(second);
    EXPECT_EQ(r.status, 0) << r.output;
  }
  // The bytes of file `name` in the test's directory ("" when there is none).
  std::string slurp(const std::string& name) const {
    std::ifstream in(path(name), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  fs::path dir_;
  int runs_ = 0;
};

inline double number_after(const std::string& text, const std::string& key) {
  const auto at = text.rfind(key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size()));
}


}  // namespace asgd::testing
