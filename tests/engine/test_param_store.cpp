#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../common/message_of.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/huge_pages.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/segment_removal.hpp"
#include "../../engine/src/segment_format.hpp"

using asgd::Access;
using asgd::Layout;
using asgd::ParamStore;

namespace {

Layout small_layout() {
  Layout l;
  l.add("w", {10, 3}, asgd::RowPadding::cache_line);
  l.add("b", {10});
  return l;
}

// Segment `name`'s header, mapped writable to forge it (nullptr if it cannot
// be); munmap(h, kHeaderBytes) when done.
asgd::segment::SegmentHeader* map_header(const std::string& name) {
  const int fd = ::shm_open(("/" + name).c_str(), O_RDWR, 0);
  if (fd < 0) return nullptr;
  void* mapped = ::mmap(nullptr, asgd::segment::kHeaderBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  return mapped == MAP_FAILED ? nullptr : static_cast<asgd::segment::SegmentHeader*>(mapped);
}

// Sets the modification time of shared-memory object `name` a minute back: an
// object modified in the last 2 s may be a creator's on its way, never
// abandoned.
void age(const std::string& name) {
  const int fd = ::shm_open(("/" + name).c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  const timespec times[2] = {{0, UTIME_OMIT}, {::time(nullptr) - 60, 0}};
  EXPECT_EQ(::futimens(fd, times), 0);
  ::close(fd);
}

// A unique segment name per test and process, removed at the end.
class ShmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = "asgd-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ParamStore::remove_shared(name_);
  }
  void TearDown() override { ParamStore::remove_shared(name_); }
  // Waits (up to 1 s) until the forked `child` has registered as a writer of the segment, then kills it.
  void kill_when_writing(pid_t child) {
    for (int i = 0; i < 500; ++i) {
      try {
        if (!ParamStore::inspect_shared(name_).writers.empty()) break;
      } catch (const asgd::InputError&) {  // not made yet
      }
      ::usleep(2000);
    }
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  }
  std::string name_;
};

using asgd::testing::message_of;

}  // namespace

TEST(ParamStoreHeap, IsZeroedAlignedAndWritable) {
  auto s = ParamStore::on_heap(small_layout());
  EXPECT_EQ(s.size(), small_layout().size());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.data()) % 64, 0u);
  for (std::size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s.load(i), 0.0f);
  s.store(5, 2.5f);
  EXPECT_EQ(s.snapshot()[5], 2.5f);
  EXPECT_FALSE(s.is_shared());
  EXPECT_EQ(s.snapshot("b").size(), 10u);
}

TEST_F(ShmTest, CreateAttachReadOnlyAndRemove) {
  auto owner = ParamStore::create_shared(name_, small_layout());
  owner.store(3, 1.5f);
  auto other = ParamStore::attach_shared(name_, small_layout());
  EXPECT_EQ(other.load(3), 1.5f);
  other.store(4, -2.0f);
  EXPECT_EQ(owner.load(4), -2.0f);  // one memory, two mappings
  auto reader = ParamStore::attach_shared(name_, small_layout(), Access::read_only);
  EXPECT_FALSE(reader.writable());
  EXPECT_EQ(reader.load(4), -2.0f);
  EXPECT_THROW(reader.store(0, 1.0f), asgd::RuntimeError);
  const auto info = ParamStore::inspect_shared(name_);
  EXPECT_TRUE(info.ready);
  EXPECT_EQ(info.writers.size(), 2u);  // owner and other; readers do not register
  EXPECT_FALSE(info.stale());
  EXPECT_TRUE(ParamStore::remove_shared(name_));
  EXPECT_FALSE(ParamStore::remove_shared(name_));
  EXPECT_EQ(owner.load(3), 1.5f);  // mappings outlive the name
}

TEST_F(ShmTest, OpenOrCreateSaysWhoCreated) {
  // Of the processes that start on one name, exactly one is told it made the
  // segment (and initialises it); here threads race for it.
  std::atomic<int> created{0};
  std::vector<std::optional<ParamStore>> stores(4);
  {
    std::vector<std::jthread> racers;
    for (auto& s : stores)
      racers.emplace_back([&] {
        bool made = true;
        s.emplace(ParamStore::open_or_create_shared(name_, small_layout(), {}, &made));
        created += made ? 1 : 0;
      });
  }
  EXPECT_EQ(created.load(), 1);
  stores[0]->store(2, 7.0f);
  for (auto& s : stores) EXPECT_EQ(s->load(2), 7.0f);
  bool made = true;
  auto again = ParamStore::open_or_create_shared(name_, small_layout(), {}, &made);
  EXPECT_FALSE(made);
}

TEST_F(ShmTest, AttachWaitsUntilTheCreatorHasInitialisedIt) {
  // The creator fills its parameters before the segment is ready: a process attaching meanwhile (here a thread,
  // racing through open_or_create_shared as a second `asgd mf train --shm` would) waits and sees them all.
  std::atomic<bool> filling{false};
  std::optional<ParamStore> attached;
  bool made = true;
  std::jthread creator([&] {
    auto s = ParamStore::create_shared(name_, small_layout(), {}, [&](ParamStore& p) {
      filling = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      p.fill(2.5f);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // keep it attached while the other reads
  });
  while (!filling) std::this_thread::yield();
  EXPECT_FALSE(ParamStore::inspect_shared(name_).ready);
  attached.emplace(ParamStore::open_or_create_shared(name_, small_layout(), {}, &made,
                                                     [](ParamStore&) { FAIL() << "initialised twice"; }));
  EXPECT_FALSE(made);
  for (std::size_t i = 0; i < attached->size(); ++i) ASSERT_EQ(attached->load(i), 2.5f) << i;
}

TEST_F(ShmTest, AFailedInitialisationLeavesNoSegment) {
  const std::string message = message_of([&] {
    ParamStore::create_shared(name_, small_layout(), {}, [](ParamStore&) { throw asgd::InputError("cannot fill"); });
  });
  EXPECT_EQ(message, "cannot fill");
  EXPECT_FALSE(ParamStore::exists_shared(name_));
  bool made = false;
  auto again = ParamStore::open_or_create_shared(name_, small_layout(), {}, &made);
  EXPECT_TRUE(made);
}

TEST_F(ShmTest, AWaitIsToldAndAFailedCreatorsSegmentIsMadeAgain) {
  // The creator fills for 2.5 s and then fails (its segment goes): the waiter hears of the wait after 2 s, sees the
  // name go, and makes the segment itself.
  std::vector<std::string> notes;
  ParamStore::set_wait_notice([&](const std::string& note) { notes.push_back(note); });
  std::atomic<bool> filling{false};
  std::jthread creator([&] {
    try {
      ParamStore::create_shared(name_, small_layout(), {}, [&](ParamStore&) {
        filling = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        throw asgd::InputError("cannot fill");
      });
    } catch (const asgd::InputError&) {
    }
  });
  while (!filling) std::this_thread::yield();
  bool made = false;
  auto store = ParamStore::open_or_create_shared(name_, small_layout(), {}, &made, [](ParamStore& p) {
    p.fill(1.0f);
  });
  ParamStore::set_wait_notice({});
  EXPECT_TRUE(made);
  EXPECT_EQ(store.load(0), 1.0f);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("waiting for pid " + std::to_string(::getpid()) + " to finish initialising"),
            std::string::npos)
      << notes[0];
}

TEST_F(ShmTest, RecoveryReplacesASegmentWhoseCreatorDiedBeforeItWasReady) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ParamStore::create_shared(name_, small_layout(), {}, [](ParamStore& p) {
      p.fill(5.0f);
      ::pause();  // killed here, mid-initialisation
    });
    ::_exit(0);
  }
  kill_when_writing(child);
  EXPECT_NE(message_of([&] { ParamStore::open_or_create_shared(name_, small_layout()); }).find("AttachOptions::recover_stale"),
            std::string::npos);
  bool made = false;
  auto store = ParamStore::open_or_create_shared(name_, small_layout(), {.recover_stale = true}, &made,
                                                 [](ParamStore& p) { p.fill(2.0f); });
  EXPECT_TRUE(made);
  EXPECT_EQ(store.load(0), 2.0f);
  EXPECT_TRUE(ParamStore::inspect_shared(name_).ready);
}

TEST_F(ShmTest, CreatedOwnerOnlyEvenWithAPermissiveUmask) {
  const mode_t old = ::umask(0);
  auto s = ParamStore::create_shared(name_, small_layout());
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm/" + name_).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(ShmTest, ClearErrorsForMissingForeignAndOtherLayout) {
  EXPECT_NE(message_of([&] { ParamStore::attach_shared(name_, small_layout()); }).find("no shared segment"),
            std::string::npos);
  auto s = ParamStore::create_shared(name_, small_layout());
  Layout other;
  other.add("w", {11, 3});
  const auto msg = message_of([&] { ParamStore::attach_shared(name_, other); });
  EXPECT_NE(msg.find("another layout"), std::string::npos) << msg;
  EXPECT_NE(msg.find("w [10 x 3]"), std::string::npos) << msg;
  EXPECT_NE(message_of([&] { ParamStore::create_shared(name_, small_layout()); }).find("already exists"),
            std::string::npos);
  EXPECT_THROW(ParamStore::create_shared("bad/name", small_layout()), asgd::InputError);
  for (const char* dots : {".", ".."}) {
    EXPECT_NE(message_of([&] { ParamStore::create_shared(dots, small_layout()); }).find("not a name"),
              std::string::npos);
    EXPECT_NE(message_of([&] { ParamStore::inspect_shared(dots); }).find("not a name"), std::string::npos);
  }
}

// Writers of one segment train one objective: a writer with other settings is refused before it registers (no
// trace left in the segment), with both settings named; readers, and a side without settings, compare nothing.
// Recovery and open_or_create keep the settings in the segment they make.
TEST_F(ShmTest, AWriterWithOtherSettingsIsRefused) {
  const asgd::CreateOptions logistic{false, "--loss logistic --l2 0.0001"};
  auto s = ParamStore::create_shared(name_, small_layout(), logistic);
  EXPECT_EQ(ParamStore::inspect_shared(name_).settings, logistic.settings);
  const auto msg = message_of([&] {
    ParamStore::attach_shared(name_, small_layout(), Access::read_write, {false, "--loss hinge --l2 0.0001"});
  });
  EXPECT_NE(msg.find("is trained with --loss logistic --l2 0.0001; this process would train it with --loss hinge "
                     "--l2 0.0001"),
            std::string::npos)
      << msg;
  EXPECT_EQ(ParamStore::inspect_shared(name_).writers.size(), 1u) << "the refused writer did not register";
  EXPECT_NO_THROW(ParamStore::attach_shared(name_, small_layout(), Access::read_write, {false, logistic.settings}));
  EXPECT_NO_THROW(ParamStore::attach_shared(name_, small_layout(), Access::read_write, {}));
  EXPECT_NO_THROW(ParamStore::attach_shared(name_, small_layout(), Access::read_only, {false, "--loss hinge"}));
  bool created = true;
  const auto msg2 = message_of([&] {
    ParamStore::open_or_create_shared(name_, small_layout(), {false, "--loss hinge --l2 0.0001"}, &created);
  });
  EXPECT_NE(msg2.find("must train one objective"), std::string::npos) << msg2;
  s = ParamStore::on_heap(small_layout());
  ParamStore::remove_shared(name_);
  auto made = ParamStore::open_or_create_shared(name_, small_layout(), {false, "--loss hinge"}, &created);
  EXPECT_TRUE(created);
  EXPECT_EQ(ParamStore::inspect_shared(name_).settings, "--loss hinge");
  // Settings that do not fit beside the layout in the header are refused at creation.
  ParamStore::remove_shared(name_);
  const auto msg3 = message_of(
      [&] { ParamStore::create_shared(name_, small_layout(), {false, std::string(20000, 'x')}); });
  EXPECT_NE(msg3.find("settings too long"), std::string::npos) << msg3;
}

TEST_F(ShmTest, NotAnAsgdSegment) {
  {
    // Someone else's segment under the name: refuse, never crash.
    auto fd = ::shm_open(("/" + name_).c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 20000), 0);
    ::close(fd);
  }
  const auto msg = message_of([&] { ParamStore::attach_shared_any(name_); });
  EXPECT_NE(msg.find("not an asgd"), std::string::npos) << msg;
  EXPECT_THROW(ParamStore::create_shared(name_, small_layout()), asgd::InputError);
}

TEST_F(ShmTest, AKilledWriterIsDetectedAndRecoverable) {
  { auto creator = ParamStore::create_shared(name_, small_layout()); }  // detaches cleanly
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto w = ParamStore::attach_shared(name_, small_layout());
    w.store(0, 42.0f);
    ::pause();  // killed here, still attached
    ::_exit(0);
  }
  kill_when_writing(child);

  const auto info = ParamStore::inspect_shared(name_);
  ASSERT_EQ(info.dead_writers.size(), 1u);
  EXPECT_EQ(info.dead_writers[0], child);
  EXPECT_TRUE(info.stale());
  const auto msg = message_of([&] { ParamStore::attach_shared(name_, small_layout()); });
  EXPECT_NE(msg.find("pid " + std::to_string(child) + " died"), std::string::npos) << msg;
  // Reading is still allowed; taking over needs recovery.
  EXPECT_EQ(ParamStore::attach_shared(name_, small_layout(), Access::read_only).load(0), 42.0f);
  // A recovery refused for its layout leaves the mark: the next plain attach still hears of the dead writer.
  Layout other;
  other.add("v", {3});
  EXPECT_THROW(ParamStore::attach_shared(name_, other, Access::read_write, {.recover_stale = true}), asgd::InputError);
  EXPECT_EQ(ParamStore::inspect_shared(name_).dead_writers.size(), 1u);
  auto recovered = ParamStore::attach_shared(name_, small_layout(), Access::read_write, {.recover_stale = true});
  EXPECT_EQ(recovered.load(0), 42.0f);
  EXPECT_TRUE(ParamStore::inspect_shared(name_).dead_writers.empty());
}

// A writer is the process that registered, not its pid: a dead writer whose
// pid another process has since taken (forged here with a live pid and
// another start time) is dead, and the creator likewise.
TEST_F(ShmTest, AReusedPidIsNotTheWriter) {
  auto owner = ParamStore::create_shared(name_, small_layout());
  auto* h = map_header(name_);
  ASSERT_NE(h, nullptr);
  ASSERT_EQ(h->format_version, asgd::segment::kFormatVersion);
  ASSERT_EQ(h->writers[0], ::getpid());
  const std::uint64_t started = h->writer_starts[0];
  ASSERT_NE(started, 0u);  // /proc is there
  EXPECT_EQ(h->creator_start, started);
  EXPECT_TRUE(ParamStore::inspect_shared(name_).creator_alive);

  h->writers[1] = ::getpid();  // this process's pid...
  h->writer_starts[1] = started + 1;  // ...but another process's start: the writer died, its pid was reused
  auto info = ParamStore::inspect_shared(name_);
  EXPECT_EQ(info.writers, std::vector<int>{::getpid()});
  EXPECT_EQ(info.dead_writers, std::vector<int>{::getpid()});
  const auto msg = message_of([&] { ParamStore::attach_shared(name_, small_layout()); });
  EXPECT_NE(msg.find("died without detaching"), std::string::npos) << msg;
  h->writer_starts[1] = 0;  // a start time not (yet) written: the pid alone decides
  EXPECT_EQ(ParamStore::inspect_shared(name_).writers.size(), 2u);
  h->writer_starts[1] = started + 1;
  {
    auto recovered = ParamStore::attach_shared(name_, small_layout(), Access::read_write, {.recover_stale = true});
    EXPECT_EQ(h->writers[1], ::getpid());  // the dead slot cleared, then taken by this attach
    EXPECT_EQ(h->writer_starts[1], started);
    EXPECT_TRUE(ParamStore::inspect_shared(name_).dead_writers.empty());
  }
  EXPECT_EQ(h->writers[1], 0);  // detached
  EXPECT_EQ(h->writer_starts[1], 0u);

  h->creator_start = started + 1;
  EXPECT_FALSE(ParamStore::inspect_shared(name_).creator_alive);
  ::munmap(h, asgd::segment::kHeaderBytes);
}

// A removal by id removes the segment that was made, not one made again
// under its name since.
TEST_F(ShmTest, RemovalByIdSparesASegmentMadeAgain) {
  EXPECT_EQ(ParamStore::on_heap(small_layout()).segment_id(), asgd::SegmentId{});
  auto first = ParamStore::create_shared(name_, small_layout());
  const asgd::SegmentId id = first.segment_id();
  EXPECT_NE(id, asgd::SegmentId{});
  ASSERT_TRUE(ParamStore::remove_shared(name_));
  auto second = ParamStore::create_shared(name_, small_layout());
  second.store(0, 5.0f);
  EXPECT_NE(second.segment_id(), id);
  // What inspect_shared judged is named by its id (a stale segment is replaced through it).
  EXPECT_EQ(ParamStore::inspect_shared(name_).id, second.segment_id());
  EXPECT_FALSE(ParamStore::remove_shared(name_, id));
  EXPECT_EQ(ParamStore::attach_shared(name_, small_layout(), Access::read_only).load(0), 5.0f);
  EXPECT_TRUE(ParamStore::remove_shared(name_, second.segment_id()));
  EXPECT_FALSE(ParamStore::exists_shared(name_));
  EXPECT_FALSE(ParamStore::remove_shared(name_, second.segment_id()));  // nothing there
}

TEST_F(ShmTest, ReplaceStaleMakesAFreshSegment) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto w = ParamStore::create_shared(name_, small_layout());
    w.store(0, 7.0f);
    ::pause();
    ::_exit(0);
  }
  kill_when_writing(child);
  EXPECT_NE(message_of([&] { ParamStore::create_shared(name_, small_layout()); }).find("stale"), std::string::npos);
  auto fresh = ParamStore::create_shared(name_, small_layout(), {.replace_stale = true});
  EXPECT_EQ(fresh.load(0), 0.0f);
}

TEST_F(ShmTest, NamesStartingWithADashAreRefused) {
  // `asgd shm remove -x` would take the name for an option.
  const auto msg = message_of([&] { ParamStore::create_shared("-x", small_layout()); });
  EXPECT_NE(msg.find("may not start with '-'"), std::string::npos) << msg;
  EXPECT_THROW(ParamStore::inspect_shared("-" + name_), asgd::InputError);
  EXPECT_NO_THROW(ParamStore::exists_shared("x-"));
}

// A killed process its parent has not reaped yet (a zombie) is dead: kill(pid, 0) still finds it.
TEST_F(ShmTest, AZombieCreatorAndWriterAreDead) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Registered as a writer, then gone without detaching, before the segment was ready.
    ParamStore::create_shared(name_, small_layout(), {}, [](ParamStore&) { ::_exit(0); });
    ::_exit(1);
  }
  auto state_of = [](pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    const auto close = line.rfind(')');
    return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
  };
  for (int i = 0; i < 2000 && state_of(child) != 'Z'; ++i) ::usleep(1000);
  if (state_of(child) != 'Z') {
    ::waitpid(child, nullptr, 0);
    GTEST_SKIP() << "no /proc/PID/stat";
  }
  const auto info = ParamStore::inspect_shared(name_);
  bool made = false;
  if (!info.creator_alive) {  // else recovery would wait for it to finish (10 min)
    auto store = ParamStore::open_or_create_shared(name_, small_layout(), {.recover_stale = true}, &made);
  }
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(info.creator_alive);
  EXPECT_TRUE(info.writers.empty());
  EXPECT_EQ(info.dead_writers, std::vector<int>{child});
  EXPECT_TRUE(made);
}

// A creator writes the header (its pid in it) before it sizes the segment: one killed while sizing (here by
// SIGXFSZ, as under `ulimit -f`) leaves a segment that names it, which recovery replaces (before: an object of 0
// bytes, or of full size without a header, that recovery refused).
TEST_F(ShmTest, ACreatorKilledWhileSizingLeavesASegmentThatNamesIt) {
  Layout big;
  big.add("w", {100000});
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const rlimit no_core{0, 0}, small{64 * 1024, RLIM_INFINITY};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::setrlimit(RLIMIT_FSIZE, &small);
    ParamStore::create_shared(name_, big);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) << status;
  const auto info = ParamStore::inspect_shared(name_);
  EXPECT_FALSE(info.ready);
  EXPECT_EQ(info.creator_pid, child);
  EXPECT_FALSE(info.creator_alive);
  EXPECT_TRUE(info.stale());
  const auto msg = message_of([&] { ParamStore::open_or_create_shared(name_, big); });
  EXPECT_NE(msg.find("died before it was ready"), std::string::npos) << msg;
  bool made = false;
  auto store = ParamStore::open_or_create_shared(name_, big, {.recover_stale = true}, &made);
  EXPECT_TRUE(made);
  EXPECT_EQ(store.size(), big.size());
}

// An attacher copes with a segment whose header is written but which its creator is still sizing: it waits and
// maps it at its final size.
TEST_F(ShmTest, AnAttacherWaitsWhileTheCreatorSizesTheSegment) {
  const std::string real = name_ + "-real";
  ParamStore::remove_shared(real);
  std::vector<char> header(asgd::segment::kHeaderBytes);
  {
    auto made = ParamStore::create_shared(real, small_layout());
    const int fd = ::shm_open(("/" + real).c_str(), O_RDONLY, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pread(fd, header.data(), header.size(), 0), static_cast<ssize_t>(header.size()));
    ::close(fd);
  }
  ParamStore::remove_shared(real);
  auto* h = reinterpret_cast<asgd::segment::SegmentHeader*>(header.data());
  h->state = asgd::segment::kStateInitialising;
  for (auto& w : h->writers) w = 0;
  const int fd = ::shm_open(("/" + name_).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, header.data(), header.size(), 0), static_cast<ssize_t>(header.size()));
  std::optional<ParamStore> attached;
  std::jthread attacher([&] { attached.emplace(ParamStore::attach_shared(name_, small_layout())); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::size_t bytes = asgd::segment::kHeaderBytes + small_layout().size() * sizeof(float);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
  const std::uint32_t ready = asgd::segment::kStateReady;
  ASSERT_EQ(::pwrite(fd, &ready, sizeof ready, offsetof(asgd::segment::SegmentHeader, state)),
            static_cast<ssize_t>(sizeof ready));
  ::close(fd);
  attacher.join();
  ASSERT_TRUE(attached.has_value());
  EXPECT_EQ(attached->size(), small_layout().size());
  attached->store(attached->size() - 1, 3.0f);
  EXPECT_EQ(attached->load(attached->size() - 1), 3.0f);
}

// What a creator killed before writing its header leaves (0 bytes, or a header's size of zeros), unchanged for
// 2 s, that no process holds is abandoned: recovery replaces it. One that a process holds (a creator about to
// write it), one just made or truncated, or one of another size is not.
// remove_segment checks before it removes: a live writer, another program's shared memory are kept unless
// forced; what a killed creator left is removed as such; a name with nothing under it is said to be missing.
TEST_F(ShmTest, RemoveSegmentKeepsWhatIsInUseOrNotOursUnlessForced) {
  using asgd::remove_segment;
  using asgd::SegmentRemoved;
  EXPECT_EQ(message_of([&] { remove_segment(name_); }), "no shared segment '" + name_ + "'");
  {
    auto writer = ParamStore::create_shared(name_, small_layout());
    const auto refused = message_of([&] { remove_segment(name_); });
    EXPECT_NE(refused.find("has 1 live writer(s) (pid " + std::to_string(::getpid()) + ")"), std::string::npos)
        << refused;
    EXPECT_NE(refused.find("Stop them, or pass RemoveSegmentOptions::force"), std::string::npos) << refused;
    EXPECT_TRUE(ParamStore::exists_shared(name_));
    EXPECT_EQ(remove_segment(name_, {.force = true}), SegmentRemoved::segment);
    EXPECT_FALSE(ParamStore::exists_shared(name_));
  }
  { auto finished = ParamStore::create_shared(name_, small_layout()); }  // detached: no writer left
  EXPECT_EQ(remove_segment(name_), SegmentRemoved::segment);
  const int fd = ::shm_open(("/" + name_).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 20000), 0);
  ::close(fd);
  const auto foreign = message_of([&] { remove_segment(name_); });
  EXPECT_NE(foreign.find("not an asgd"), std::string::npos) << foreign;
  EXPECT_NE(foreign.find("; not removed (pass RemoveSegmentOptions::force to remove it anyway)"), std::string::npos)
      << foreign;
  EXPECT_EQ(remove_segment(name_, {.force = true}), SegmentRemoved::segment);
  if (!std::filesystem::exists("/proc/self/fd")) GTEST_SKIP() << "no /proc";
  const int headerless = ::shm_open(("/" + name_).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(headerless, 0);
  ::close(headerless);
  age(name_);
  EXPECT_EQ(remove_segment(name_), SegmentRemoved::abandoned);
  EXPECT_FALSE(ParamStore::exists_shared(name_));
}

TEST_F(ShmTest, AHeaderlessObjectNobodyHasOpenIsAbandoned) {
  const int fd = ::shm_open(("/" + name_).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  if (!std::filesystem::exists("/proc/self/fd")) GTEST_SKIP() << "no /proc";
  EXPECT_FALSE(ParamStore::abandoned_shared(name_).has_value());  // we have it open
  ASSERT_EQ(::ftruncate(fd, 20000), 0);
  ::close(fd);
  EXPECT_FALSE(ParamStore::abandoned_shared(name_).has_value());  // not what a creator leaves
  {
    const int again = ::shm_open(("/" + name_).c_str(), O_RDWR, 0);
    ASSERT_EQ(::ftruncate(again, 0), 0);
    ASSERT_EQ(::ftruncate(again, asgd::segment::kHeaderBytes), 0);
    ::close(again);
  }
  // Just truncated: a creator may be about to write its header, even if /proc does not show it.
  EXPECT_FALSE(ParamStore::abandoned_shared(name_).has_value());
  age(name_);
  ASSERT_TRUE(ParamStore::abandoned_shared(name_).has_value());
  {
    // Held by a mapping alone (another program's way: map, then close the descriptor): not abandoned (before:
    // only descriptors were looked for, and `shm remove` removed it).
    const int again = ::shm_open(("/" + name_).c_str(), O_RDWR, 0);
    void* mapped = ::mmap(nullptr, asgd::segment::kHeaderBytes, PROT_READ, MAP_SHARED, again, 0);
    ::close(again);
    ASSERT_NE(mapped, MAP_FAILED);
    EXPECT_FALSE(ParamStore::abandoned_shared(name_).has_value());
    ::munmap(mapped, asgd::segment::kHeaderBytes);
  }
  ASSERT_TRUE(ParamStore::abandoned_shared(name_).has_value());
  auto msg = message_of([&] { ParamStore::attach_shared(name_, small_layout()); });  // after 2 s
  EXPECT_NE(msg.find("has no header: its creator died before writing it; remove it (ParamStore::remove_shared(\"" +
                     name_),
            std::string::npos)
      << msg;
  msg = message_of([&] { ParamStore::create_shared(name_, small_layout()); });
  EXPECT_NE(msg.find("its creator died before writing its header"), std::string::npos) << msg;
  bool made = false;
  {
    auto store = ParamStore::open_or_create_shared(name_, small_layout(), {.recover_stale = true}, &made);
    EXPECT_TRUE(made);
    EXPECT_TRUE(ParamStore::inspect_shared(name_).ready);
  }
  ASSERT_TRUE(ParamStore::remove_shared(name_));
  const int empty = ::shm_open(("/" + name_).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);  // killed at its truncate
  ASSERT_GE(empty, 0);
  ::close(empty);
  age(name_);
  EXPECT_TRUE(ParamStore::abandoned_shared(name_).has_value());
  auto store = ParamStore::create_shared(name_, small_layout(), {.replace_stale = true});
  EXPECT_TRUE(ParamStore::inspect_shared(name_).ready);
}

// Processes recovering one segment whose creator died before it was ready, at once: one makes it again, the
// others attach to that (before: some failed, as the name they saw stale had been made again).
TEST_F(ShmTest, RacingRecoveriesAllSucceed) {
  for (int round = 0; round < 5; ++round) {
    {
      auto s = ParamStore::create_shared(name_, small_layout());
    }  // detached: no writer left
    {
      // Forged: never ready, and its creator another process (its start time not ours), so dead.
      auto* h = map_header(name_);
      ASSERT_NE(h, nullptr);
      h->state = asgd::segment::kStateInitialising;
      h->creator_start += 1;
      ::munmap(h, asgd::segment::kHeaderBytes);
    }
    ASSERT_FALSE(ParamStore::inspect_shared(name_).creator_alive);
    std::atomic<int> created{0}, waiting{0};
    std::vector<std::string> failures;
    std::mutex failures_mutex;
    std::vector<std::optional<ParamStore>> stores(4);
    {
      std::vector<std::jthread> racers;
      for (auto& s : stores)
        racers.emplace_back([&] {
          ++waiting;
          while (waiting < static_cast<int>(stores.size())) std::this_thread::yield();
          try {
            bool made = false;
            s.emplace(ParamStore::open_or_create_shared(name_, small_layout(), {.recover_stale = true}, &made,
                                                        [](ParamStore& p) { p.fill(2.0f); }));
            created += made ? 1 : 0;
          } catch (const std::exception& e) {
            std::scoped_lock lock(failures_mutex);
            failures.push_back(e.what());
          }
        });
    }
    ASSERT_TRUE(failures.empty()) << "round " << round << ": " << failures[0];
    EXPECT_EQ(created.load(), 1);
    for (auto& s : stores) EXPECT_EQ(s->load(0), 2.0f);
    stores.clear();
    ASSERT_TRUE(ParamStore::remove_shared(name_));
  }
}

// A store of 2 MiB and more starts on a huge page; every store starts zeroed, the large one too (its memory
// advised onto huge pages before the zeroing).
TEST(ParamStore, ALargeHeapStoreStartsOnAHugePageAndZeroed) {
  Layout l;
  l.add("w", {3u << 20});  // 12 MiB of floats
  auto s = ParamStore::on_heap(l);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.data()) % (std::uintptr_t{2} << 20), 0u);
  for (std::size_t i = 0; i < s.size(); i += 4093) ASSERT_EQ(s.load(i), 0.0f) << i;
  EXPECT_EQ(s.load(s.size() - 1), 0.0f);
}

// The advice takes any range (nothing for one without a whole huge page), and the large-array allocator's
// vectors hold what is written to them, whatever their size.
TEST(HugePages, AnyRangeIsTakenAndLargeArraysHoldTheirValues) {
  asgd::advise_huge_pages(nullptr, 0);
  asgd::advise_huge_pages(nullptr, std::size_t{8} << 20);
  char small[100];
  asgd::advise_huge_pages(small + 1, sizeof small - 1);
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3} << 20}) {
    std::vector<std::uint32_t, asgd::LargeArrayAllocator<std::uint32_t>> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint32_t>(i * 7);
    v.push_back(5);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i * 7) << n;
    EXPECT_EQ(v.back(), 5u);
  }
}
