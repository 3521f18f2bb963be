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
#include <utility>

namespace asgd::python {

namespace detail {

// work()'s outcome on its own thread: its result or its exception, and whether a signal handler raised meanwhile
// (that error then stays set in this thread, for the caller to fetch).
template <class Result>
struct Outcome {
  std::optional<Result> result;
  std::exception_ptr failure;
  bool signalled = false;
};

// Runs `work` on a thread of its own with the GIL released, checking for signals every 50 ms meanwhile; a
// handler that raises sets `stop`. Called with the GIL held.
template <class Work>
auto run_checking_signals(std::atomic<bool>& stop, Work&& work) -> Outcome<decltype(work())> {
  namespace py = pybind11;
  Outcome<decltype(work())> out;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  py::gil_scoped_release release;
  std::thread worker([&] {
    try {
      out.result.emplace(work());
    } catch (...) {
      out.failure = std::current_exception();
    }
    const std::lock_guard lock(mutex);
    done = true;
    finished.notify_one();
  });
  std::unique_lock lock(mutex);
  while (!finished.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; })) {
    if (out.signalled) continue;  // stopping: wait for the step under way to end
    lock.unlock();
    {
      py::gil_scoped_acquire gil;
      // -1: a handler raised; its error stays set in this thread until fetched by the caller.
      out.signalled = PyErr_CheckSignals() != 0;
    }
    if (out.signalled) stop.store(true, std::memory_order_relaxed);
    lock.lock();
  }
  lock.unlock();
  worker.join();
  return out;
}

}  // namespace detail

// `work()`'s result; `stop` (read by the call) is set when a signal handler raises, and that error is raised here
// after `work` returns. Called with the GIL held. From a thread other than the main one no handler runs (as in
// Python itself), and `work` runs to its end.
template <class Work>
auto run_interruptible(std::atomic<bool>& stop, Work&& work) -> decltype(work()) {
  auto out = detail::run_checking_signals(stop, std::forward<Work>(work));
  if (out.signalled) throw pybind11::error_already_set();
  if (out.failure) std::rethrow_exception(out.failure);
  return std::move(*out.result);
}

// What run_interruptible_keeping returns: work()'s result and, when a signal handler raised while it ran (and so
// stopped it), that error, for the caller to raise once it has kept what the stopped call returned.
template <class Result>
struct Interruptible {
  Result result;
  std::optional<pybind11::error_already_set> interrupt;
};

// As run_interruptible, but a signal's error is handed back beside the result instead of raised (an exception
// from `work` is still raised, the signal's first).
template <class Work>
auto run_interruptible_keeping(std::atomic<bool>& stop, Work&& work) -> Interruptible<decltype(work())> {
  auto out = detail::run_checking_signals(stop, std::forward<Work>(work));
  if (out.signalled && out.failure) throw pybind11::error_already_set();
  if (out.failure) std::rethrow_exception(out.failure);
  Interruptible<decltype(work())> kept{std::move(*out.result), std::nullopt};
  if (out.signalled) kept.interrupt.emplace();
  return kept;
}

}  // namespace asgd::python
