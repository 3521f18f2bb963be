// A communication thread that runs a round every K local steps while the
// workers go on training: the pacing that model averaging and the parameter
// server share. Round k starts once this rank has done base + k K steps (or
// has finished); workers may run K steps past a round's start while it is in
// flight and wait there for it to end, so the round overlaps one period of
// compute and no rank gets more than about two periods ahead of its rounds.
// Without overlap, workers wait at the round's start until it ends: every
// step after round k starts from what round k brought (with one worker;
// other workers' steps in flight at the start were taken on the copy before).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace asgd::net {

class PeriodicRounds {
 public:
  // One round: `examples` trained since the previous round, `finished` when
  // this rank will take no more steps. Returns true when every rank has
  // finished (the thread then ends).
  using Round = std::function<bool(std::uint64_t examples, bool finished)>;

  PeriodicRounds();
  ~PeriodicRounds();  // ends the thread if stop() was not called
  PeriodicRounds(const PeriodicRounds&) = delete;
  PeriodicRounds& operator=(const PeriodicRounds&) = delete;

  // Starts the thread (InputError for 0 steps, more than kMostEverySteps or
  // a second start; `who` names the caller in the message).
  void start(std::uint64_t every_steps, Round round, const char* who, bool overlap = true);
  static constexpr std::uint64_t kMostEverySteps = (std::uint64_t{1} << 40) - 1;
  // A worker finished a step of `examples` examples. Cheap, any thread; it
  // blocks only when this rank is a period ahead of the round in flight
  // (without overlap: at the round's start, until it ends).
  void step_done(std::uint64_t examples) noexcept;
  // Asks for a last round with finished = true and waits for the thread;
  // rethrows an error of a round.
  void stop();
  bool running() const noexcept { return thread_.joinable(); }

 private:
  void loop(std::uint64_t base, std::uint64_t every_steps, std::uint64_t slack);
  void release_workers(std::uint64_t limit);
  void end_thread() noexcept;

  Round round_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;   // the thread: a round is due
  std::condition_variable ahead_;  // workers waiting for the round in flight
  bool finishing_ = false;         // guarded by mutex_
  // Steps done, examples trained; the step count that starts the next round,
  // and the count workers may not pass before the round in flight ends.
  std::atomic<std::uint64_t> steps_{0}, examples_{0}, trigger_, limit_;
  std::uint64_t examples_at_last_round_ = 0;
  std::exception_ptr error_;
};

}  // namespace asgd::net
