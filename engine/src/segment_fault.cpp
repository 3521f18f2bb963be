#include "segment_fault.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>

namespace asgd::segment {

namespace {

// One guarded mapping. The handler reads slots without a lock (lock-free atomics are async-signal-safe): a slot is
// claimed (kClaimed), filled, then published (kLive, release); released by going back to kClaimed before it is
// cleared, so the handler never matches a half-written or a freed slot.
constexpr int kFree = 0, kClaimed = 1, kLive = 2;
constexpr std::size_t kNameMax = 256;
struct Slot {
  std::atomic<int> state{kFree};
  std::atomic<std::uintptr_t> base{0};
  std::atomic<std::size_t> bytes{0};
  char name[kNameMax] = {};
};
Slot g_slots[FaultGuard::kMaxGuarded];
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<std::uintptr_t>::is_always_lock_free &&
              std::atomic<std::size_t>::is_always_lock_free);

struct sigaction g_previous;  // SIGBUS's action before ours, for faults that are not a segment's

// write(2) of a whole C string (async-signal-safe, unlike stdio).
void say(const char* text) {
  for (std::size_t left = std::strlen(text); left > 0;) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<std::size_t>(n);
  }
}

// The live slot whose mapping holds `address`, if any.
const Slot* slot_holding(std::uintptr_t address) {
  for (const Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == kLive &&
        address - s.base.load(std::memory_order_relaxed) < s.bytes.load(std::memory_order_relaxed))
      return &s;
  return nullptr;
}

// A fault the kernel raised (si_code > 0; a SIGBUS sent by kill() has no address) inside a segment: said, and the
// process ends. Anything else goes where it went before we were installed.
void on_bus_error(int sig, siginfo_t* info, void* context) {
  const Slot* s = info != nullptr && info->si_code > 0 ? slot_holding(reinterpret_cast<std::uintptr_t>(info->si_addr))
                                                       : nullptr;
  if (s != nullptr) {
    say("asgd: error: shared segment '");
    say(s->name);
    say("' was truncated while this process had it mapped (by its owner or root): the parameters past its new end "
        "are gone; ending the process (exit status 1)\n");
    ::_exit(1);
  }
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // The default: die of it. Raised now, it is delivered as the handler returns (SIGBUS is blocked until then).
  struct sigaction defaults {};
  defaults.sa_handler = SIG_DFL;
  sigemptyset(&defaults.sa_mask);
  ::sigaction(SIGBUS, &defaults, nullptr);
  ::raise(SIGBUS);
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_bus_error;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous);
  });
}

}  // namespace

FaultGuard::FaultGuard(const void* base, std::size_t bytes, const std::string& name) {
  install_once();
  for (std::size_t i = 0; i < kMaxGuarded; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) continue;
    Slot& s = g_slots[i];
    s.base.store(reinterpret_cast<std::uintptr_t>(base), std::memory_order_relaxed);
    s.bytes.store(bytes, std::memory_order_relaxed);
    const std::size_t n = std::min(name.size(), kNameMax - 1);
    std::memcpy(s.name, name.data(), n);
    s.name[n] = '\0';
    s.state.store(kLive, std::memory_order_release);
    slot_ = static_cast<int>(i);
    return;
  }
}

FaultGuard::FaultGuard(FaultGuard&& other) noexcept : slot_(std::exchange(other.slot_, -1)) {}

FaultGuard& FaultGuard::operator=(FaultGuard&& other) noexcept {
  if (this != &other) {
    release();
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

void FaultGuard::release() noexcept {
  if (slot_ < 0) return;
  Slot& s = g_slots[slot_];
  s.state.store(kClaimed, std::memory_order_release);
  s.base.store(0, std::memory_order_relaxed);
  s.bytes.store(0, std::memory_order_relaxed);
  s.state.store(kFree, std::memory_order_release);
  slot_ = -1;
}

void MappedSegment::unmap() noexcept {
  guard_.release();
  region_ = boost::interprocess::mapped_region();
}

void MappedSegment::map(const boost::interprocess::shared_memory_object& shm, boost::interprocess::mode_t mode,
                        std::size_t bytes, const std::string& name) {
  unmap();
  region_ = boost::interprocess::mapped_region(shm, mode, 0, bytes);
  guard_ = FaultGuard(region_.get_address(), region_.get_size(), name);
}

}  // namespace asgd::segment
