// Shared segments that trust no other user (issue 40): every attach checks
// whose the segment is and its mode, sizes are checked before the parameters
// are mapped, a segment truncated under a process ends it with a message
// naming the segment (not SIGBUS), and a stop request ends a wait for a
// creator at once, with nothing made or left behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>

#include "../common/message_of.hpp"
#include "../../engine/src/segment_format.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/training_run.hpp"

namespace asgd {
namespace {

using asgd::testing::message_of;

Layout small_layout() {
  Layout l;
  l.add("w", {10, 3}, RowPadding::cache_line);
  l.add("b", {10});
  return l;
}

// Options built field by field: GCC 12 warns falsely (maybe-uninitialized) on some designated initializers of them.
TrainingRunOptions in_segment(const std::string& name) {
  TrainingRunOptions o;
  o.shm = name;
  return o;
}

// A uid no process of the test runs as: "another user".
constexpr uid_t kOtherUid = 65534;

class SegmentSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = "asgd-safety-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ParamStore::remove_shared(name_);
  }
  void TearDown() override { ParamStore::remove_shared(name_); }

  // Runs f on the object `name_` names, opened read-write.
  template <class F>
  void with_object(F f) {
    const int fd = ::shm_open(("/" + name_).c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    f(fd);
    ::close(fd);
  }
  void set_mode(mode_t mode) {
    with_object([&](int fd) { ASSERT_EQ(::fchmod(fd, mode), 0); });
  }
  void give_to_another_user() {
    with_object([&](int fd) { ASSERT_EQ(::fchown(fd, kOtherUid, kOtherUid), 0); });
  }
  void truncate_to(off_t bytes) {
    with_object([&](int fd) { ASSERT_EQ(::ftruncate(fd, bytes), 0); });
  }
  // The messages of every way in: attaches read-write and read-only, with and without a layout, inspection, and
  // open_or_create (with and without recovery).
  std::vector<std::string> messages_of_every_attach() {
    const Layout l = small_layout();
    return {message_of([&] { ParamStore::attach_shared(name_, l); }),
            message_of([&] { ParamStore::attach_shared(name_, l, Access::read_only); }),
            message_of([&] { ParamStore::attach_shared_any(name_); }),
            message_of([&] { ParamStore::attach_shared_any(name_, Access::read_write); }),
            message_of([&] { ParamStore::inspect_shared(name_); }),
            message_of([&] { ParamStore::open_or_create_shared(name_, l); }),
            message_of([&] { ParamStore::open_or_create_shared(name_, l, {.recover_stale = true}); }),
            message_of([&] { TrainingRun run(l, in_segment(name_)); })};
  }
  std::string name_;
};

// A segment that group or other users may read or write (here the owner's own, chmod-ed) is refused on every way
// in, with its mode said and what to do; made owner-only again it attaches.
TEST_F(SegmentSafety, AGroupOrOtherPermissionBitIsRefusedOnEveryAttach) {
  { ParamStore made = ParamStore::create_shared(name_, small_layout()); }
  for (const mode_t mode : {0666, 0660, 0604, 0620, 0602}) {
    set_mode(mode);
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    for (const std::string& m : messages_of_every_attach()) {
      EXPECT_NE(m.find("shared segment '" + name_ + "'"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("mode ") + octal), std::string::npos) << m;
      EXPECT_NE(m.find("chmod 600"), std::string::npos) << m;
      EXPECT_NE(m.find("ParamStore::remove_shared(\"" + name_ + "\")"), std::string::npos) << m;
    }
  }
  EXPECT_TRUE(ParamStore::exists_shared(name_)) << "refused, not replaced";
  try {
    ParamStore::attach_shared_any(name_);
    ADD_FAILURE() << "attached";
  } catch (const UntrustedSegment& e) {
    EXPECT_EQ(e.segment, name_);
    EXPECT_EQ(e.mode, 0602u);
    EXPECT_EQ(e.owner_uid, ::geteuid());
    EXPECT_FALSE(e.foreign());
  }
  set_mode(0600);
  EXPECT_NO_THROW(ParamStore::attach_shared(name_, small_layout()));
  set_mode(0400);  // read-only for its owner: readers attach
  EXPECT_NO_THROW(ParamStore::attach_shared(name_, small_layout(), Access::read_only));
}

// Another user's segment (root plays one: chown) is refused on every way in, even owner-only, with whose it is,
// its mode and what to do; recovery does not replace it.
TEST_F(SegmentSafety, AnotherUsersSegmentIsRefusedOnEveryAttach) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a segment to another user";
  { ParamStore made = ParamStore::create_shared(name_, small_layout()); }
  give_to_another_user();
  for (const mode_t mode : {0600, 0666}) {
    set_mode(mode);
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    for (const std::string& m : messages_of_every_attach()) {
      EXPECT_NE(m.find("shared segment '" + name_ + "' belongs to user "), std::string::npos) << m;
      EXPECT_NE(m.find("uid 65534"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("mode ") + octal), std::string::npos) << m;
      EXPECT_NE(m.find("choose another name"), std::string::npos) << m;
    }
  }
  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm/" + name_).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kOtherUid) << "not replaced by recovery";
}

// Another user's object without a header (what a killed creator leaves, forged) is not "abandoned": recovery
// does not remove it and make its own there.
TEST_F(SegmentSafety, AnotherUsersHeaderlessObjectIsNotRecovered) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a segment to another user";
  const int fd = ::shm_open(("/" + name_).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fchown(fd, kOtherUid, kOtherUid), 0);
  const timespec times[2] = {{0, UTIME_OMIT}, {::time(nullptr) - 60, 0}};
  ASSERT_EQ(::futimens(fd, times), 0);
  ::close(fd);
  EXPECT_FALSE(ParamStore::abandoned_shared(name_).has_value());
  const std::string m =
      message_of([&] { ParamStore::open_or_create_shared(name_, small_layout(), {.recover_stale = true}); });
  EXPECT_NE(m.find("belongs to user "), std::string::npos) << m;
  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm/" + name_).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kOtherUid);
}

// A segment shorter than its header says is refused (not mapped and read past its end).
TEST_F(SegmentSafety, ASegmentShorterThanItsHeaderSaysIsRefused) {
  { ParamStore made = ParamStore::create_shared(name_, small_layout()); }
  truncate_to(static_cast<off_t>(segment::kHeaderBytes + 8));
  for (const std::string& m : {message_of([&] { ParamStore::attach_shared(name_, small_layout()); }),
                               message_of([&] { ParamStore::attach_shared_any(name_); }),
                               message_of([&] { ParamStore::inspect_shared(name_); })})
    EXPECT_NE(m.find("shared segment '" + name_ + "' is truncated or corrupt"), std::string::npos) << m;
}

// A header whose layout text does not parse (forged, or written over) is refused naming the segment: the layout's
// own message alone says nothing of where it was read.
TEST_F(SegmentSafety, ALayoutTextThatDoesNotParseIsRefusedNamingTheSegment) {
  { ParamStore made = ParamStore::create_shared(name_, small_layout()); }
  with_object([](int fd) {
    ASSERT_EQ(::pwrite(fd, "[", 1, offsetof(segment::SegmentHeader, layout_text)), 1);  // a name of "[" is refused
  });
  for (const std::string& m : {message_of([&] { ParamStore::attach_shared(name_, small_layout()); }),
                               message_of([&] { ParamStore::attach_shared_any(name_); })}) {
    EXPECT_NE(m.find("shared segment '" + name_ + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("tensor name '['"), std::string::npos) << m;
  }
}

// How a forked child ended: its exit status (or 128 + the signal that killed it) and what it wrote on stderr.
struct Ended {
  int status = -1;
  std::string stderr_text;
};
template <class F>
Ended in_child(F body) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    body();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  Ended e;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) e.stderr_text.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  e.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return e;
}

Layout big_layout() {
  Layout l;
  l.add("w", {1 << 20});
  return l;
}

// A segment truncated under a writer (by its owner, or root: nobody else may now) ends the process with a message
// naming the segment, exit status 1, when the process touches the part that is gone (before: SIGBUS, 135).
TEST_F(SegmentSafety, ASegmentTruncatedUnderAWriterEndsItWithAMessage) {
  const Ended e = in_child([&] {
    ParamStore store = ParamStore::create_shared(name_, big_layout());
    truncate_to(static_cast<off_t>(segment::kHeaderBytes));
    store.store(store.size() - 1, 1.0f);
  });
  EXPECT_EQ(e.status, 1) << e.stderr_text;
  EXPECT_NE(e.stderr_text.find("shared segment '" + name_ + "'"), std::string::npos) << e.stderr_text;
  EXPECT_NE(e.stderr_text.find("truncated"), std::string::npos) << e.stderr_text;
}

// The same for a reader, and for a segment truncated to nothing (its header gone too).
TEST_F(SegmentSafety, ASegmentTruncatedUnderAReaderEndsItWithAMessage) {
  { ParamStore made = ParamStore::create_shared(name_, big_layout()); }
  for (const off_t left : {off_t{0}, static_cast<off_t>(segment::kHeaderBytes + 4096)}) {
    const Ended e = in_child([&] {
      const ParamStore store = ParamStore::attach_shared_any(name_);
      truncate_to(left);
      float sum = 0;
      for (std::size_t i = 0; i < store.size(); i += 1024) sum += store.load(i);
      std::printf("%g\n", sum);
    });
    EXPECT_EQ(e.status, 1) << e.stderr_text;
    EXPECT_NE(e.stderr_text.find("shared segment '" + name_ + "'"), std::string::npos) << e.stderr_text;
    ParamStore::remove_shared(name_);
    ParamStore made = ParamStore::create_shared(name_, big_layout());
  }
}

// The sanitizer in, if any: AddressSanitizer and ThreadSanitizer install SIGBUS handlers of their own, which
// report ("AddressSanitizer: BUS", "ThreadSanitizer: BUS") and exit with their own status.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::string_view kSanitizer = "AddressSanitizer";
#elif defined(__SANITIZE_THREAD__)
constexpr std::string_view kSanitizer = "ThreadSanitizer";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr std::string_view kSanitizer = "AddressSanitizer";
#elif __has_feature(thread_sanitizer)
constexpr std::string_view kSanitizer = "ThreadSanitizer";
#else
constexpr std::string_view kSanitizer = "";
#endif
#else
constexpr std::string_view kSanitizer = "";
#endif

// A bus error elsewhere (a file of the process's own, truncated under its mapping) still goes where it went: to the
// handler that was there before (AddressSanitizer's), or the default, which kills the process. The handler only
// speaks for segments.
TEST_F(SegmentSafety, ABusErrorOutsideASegmentStillKills) {
  const Ended e = in_child([&] {
    ParamStore store = ParamStore::create_shared(name_, small_layout());
    const std::string other = "/" + name_ + "-other";
    const int fd = ::shm_open(other.c_str(), O_CREAT | O_RDWR, 0600);
    ::shm_unlink(other.c_str());
    if (fd < 0 || ::ftruncate(fd, 8192) != 0) ::_exit(3);
    auto* p = static_cast<volatile char*>(::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    if (p == MAP_FAILED || ::ftruncate(fd, 0) != 0) ::_exit(3);
    p[4096] = 1;
  });
  if (!kSanitizer.empty()) {
    EXPECT_NE(e.stderr_text.find(std::string(kSanitizer) + ": BUS"), std::string::npos) << e.stderr_text;
    EXPECT_NE(e.status, 0) << e.stderr_text;
  } else {
    EXPECT_EQ(e.status, 128 + SIGBUS) << e.stderr_text;
  }
  EXPECT_EQ(e.stderr_text.find("shared segment"), std::string::npos) << e.stderr_text;
}

// A run that waits for another process to finish making its segment stops within a second of a stop request
// (Ctrl-C, SIGTERM) and makes nothing: here the creator fails after 3 s and removes its segment, after which the
// waiter would have made one of its own and left it (before: it waited the 3 s, then did).
TEST_F(SegmentSafety, AStopRequestEndsTheWaitForACreator) {
  std::atomic<bool> filling{false};
  std::jthread creator([&] {
    try {
      ParamStore::create_shared(name_, small_layout(), {}, [&](ParamStore&) {
        filling = true;
        std::this_thread::sleep_for(std::chrono::seconds(3));
        throw InputError("cannot fill");
      });
    } catch (const InputError&) {
    }
  });
  while (!filling) std::this_thread::yield();
  std::atomic<bool> stop{false};
  std::jthread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  TrainingRunOptions o = in_segment(name_);
  o.stop = &stop;
  const auto start = std::chrono::steady_clock::now();
  const std::string m = message_of([&] { TrainingRun run(small_layout(), o); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.3) << m;
  EXPECT_NE(m.find("shared segment '" + name_ + "'"), std::string::npos) << m;
  EXPECT_NE(m.find("stop"), std::string::npos) << m;
  creator.join();
  EXPECT_FALSE(ParamStore::exists_shared(name_)) << "the stopped run made a segment";
}

// The same through AttachOptions::stop: a stop request already made ends the wait at its first step
// (StopRequested), and open_or_create_shared then makes nothing, also where there is nothing to wait for.
TEST_F(SegmentSafety, AnAttachWithAStopRequestMakesNothingAndWaitsForNothing) {
  std::atomic<bool> stop{true};
  AttachOptions stopped;
  stopped.stop = &stop;
  EXPECT_THROW(ParamStore::open_or_create_shared(name_, small_layout(), stopped), StopRequested);
  EXPECT_FALSE(ParamStore::exists_shared(name_));
  std::atomic<bool> filling{false}, done{false};
  std::jthread creator([&] {
    ParamStore made = ParamStore::create_shared(name_, small_layout(), {}, [&](ParamStore&) {
      filling = true;
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  });
  while (!filling) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  try {
    ParamStore::attach_shared(name_, small_layout(), Access::read_only, stopped);
    ADD_FAILURE() << "attached";
  } catch (const StopRequested& e) {
    EXPECT_NE(std::string(e.what()).find("is still being initialised by pid " + std::to_string(::getpid()) +
                                         ": stopped waiting for it"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5);
  done = true;
}

}  // namespace
}  // namespace asgd
