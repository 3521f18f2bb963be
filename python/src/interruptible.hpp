// Runs a long library call (a fit) with the GIL released while Python stays responsive to Ctrl-C: CPython runs
// signal handlers only in the main thread, through PyErr_CheckSignals, so the call runs on a thread of its own
// and the calling thread checks for signals every 50 ms; a handler that raises (SIGINT: KeyboardInterrupt) sets
// the call's stop flag, and its exception is raised once the call has returned.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

namespace asgd::python {

// `work()`'s result; `stop` (read by the call) is set when a signal handler raises, and that error is raised here
// after `work` returns. Called with the GIL held. From a thread other than the main one no handler runs (as in
// Python itself), and `work` runs to its end.
template <class Work>
auto run_interruptible(std::atomic<bool>& stop, Work&& work) -> decltype(work()) {
  namespace py = pybind11;
  std::optional<decltype(work())> result;
  std::exception_ptr failure;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false, signalled = false;
  {
    py::gil_scoped_release release;
    std::thread worker([&] {
      try {
        result.emplace(work());
      } catch (...) {
        failure = std::current_exception();
      }
      const std::lock_guard lock(mutex);
      done = true;
      finished.notify_one();
    });
    std::unique_lock lock(mutex);
    while (!finished.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; })) {
      if (signalled) continue;  // stopping: wait for the step under way to end
      lock.unlock();
      {
        py::gil_scoped_acquire gil;
        // -1: a handler raised; its error stays set in this thread until raised below.
        signalled = PyErr_CheckSignals() != 0;
      }
      if (signalled) stop.store(true, std::memory_order_relaxed);
      lock.lock();
    }
    lock.unlock();
    worker.join();
  }
  if (signalled) throw py::error_already_set();
  if (failure) std::rethrow_exception(failure);
  return std::move(*result);
}

}  // namespace asgd::python
