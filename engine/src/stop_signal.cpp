#include "asgd/engine/stop_signal.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstddef>

namespace asgd {

namespace {
// The stop request a signal makes, and which signal: lock-free, so the handler may store them.
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free);
constexpr int kStopSignals[2] = {SIGINT, SIGTERM};
struct sigaction g_previous[2];       // SIGINT's and SIGTERM's before install
std::atomic<bool> g_installed[2] = {};  // which of them the handler took (an ignored one stays ignored)

void on_stop_signal(int sig) {
  // Async-signal-safe calls only: the defaults back for the signals we took (the next one kills), the request,
  // one write.
  const int saved_errno = errno;
  struct sigaction defaults {};
  defaults.sa_handler = SIG_DFL;
  sigemptyset(&defaults.sa_mask);
  for (std::size_t i = 0; i < 2; ++i)
    if (g_installed[i].load(std::memory_order_relaxed)) ::sigaction(kStopSignals[i], &defaults, nullptr);
  int none = 0;
  g_signal.compare_exchange_strong(none, sig, std::memory_order_relaxed);
  g_stop.store(true, std::memory_order_relaxed);
  static constexpr char kInt[] = "\nasgd: SIGINT: stopping (again to kill now)\n";
  static constexpr char kTerm[] = "\nasgd: SIGTERM: stopping (again to kill now)\n";
  const bool is_int = sig == SIGINT;
  [[maybe_unused]] const auto wrote =
      ::write(STDERR_FILENO, is_int ? kInt : kTerm, (is_int ? sizeof kInt : sizeof kTerm) - 1);
  errno = saved_errno;
}

}  // namespace

StopOnSignal::StopOnSignal(bool install) {
  if (!install) return;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (const int s : kStopSignals) ::sigaddset(&action.sa_mask, s);  // one handler at a time
  // A write to a pipe or a terminal that the signal interrupts goes on (it would fail with EINTR: a command
  // printing into `| less` when Ctrl-C came failed instead of stopping).
  action.sa_flags = SA_RESTART;
  for (std::size_t i = 0; i < 2; ++i) {
    ::sigaction(kStopSignals[i], nullptr, &g_previous[i]);
    // A signal ignored when we started stays ignored (SIGINT in a background job of a non-interactive shell).
    if (g_previous[i].sa_handler == SIG_IGN) continue;
    g_installed[i].store(true, std::memory_order_relaxed);
    ::sigaction(kStopSignals[i], &action, nullptr);
  }
  installed_ = true;
}

StopOnSignal::~StopOnSignal() {
  if (!installed_ || g_signal.load() != 0) return;  // after a signal the defaults stay: the next one kills
  for (std::size_t i = 0; i < 2; ++i) {
    if (g_installed[i].exchange(false)) ::sigaction(kStopSignals[i], &g_previous[i], nullptr);
  }
}

std::atomic<bool>* StopOnSignal::flag() const noexcept { return installed_ ? &g_stop : nullptr; }

int StopOnSignal::received() noexcept { return g_signal.load(); }

}  // namespace asgd
