// A stop request made by Ctrl-C (SIGINT) or SIGTERM, for
// TrainerOptions::stop and BlockTrainOptions::stop: the first signal asks
// the run to stop (the workers end their step and the run returns with
// `stopped` set) and prints "asgd: SIGINT: stopping (again to kill now)"; a
// second kills at once (the default handlers are back). Process-wide: hold
// one object for the whole run. A program that stops runs its own way
// (another thread, Python's KeyboardInterrupt) sets an std::atomic<bool> of
// its own instead.
#pragma once

#include <atomic>

namespace asgd {

class StopOnSignal {
 public:
  // With install = false nothing is installed and flag() is null (a rank of
  // a multi-rank job that stopped alone would leave the others waiting).
  explicit StopOnSignal(bool install = true);
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
  ~StopOnSignal();  // the handlers that were there before, unless a signal came
  std::atomic<bool>* flag() const noexcept;
  // The signal that asked to stop: SIGINT or SIGTERM; 0 while none has.
  static int received() noexcept;

 private:
  bool installed_ = false;
};

}  // namespace asgd
