// CheckpointLock: one run writes a checkpoint path at a time. A second
// process is refused while the first holds the lock, told the holder's pid;
// the lock goes with its holder, kill -9 included, and survives the renames
// that replace the checkpoint.
#include "asgd/engine/checkpoint_lock.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd {
namespace {

namespace fs = std::filesystem;
using asgd::testing::message_of;
using asgd::testing::ScratchDir;

// A process that takes the lock of `checkpoint` and holds it until killed.
class Holder {
 public:
  explicit Holder(const fs::path& checkpoint) {
    int ready[2];
    if (::pipe(ready) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      char ok = 'n';
      try {
        const CheckpointLock lock(checkpoint);
        ok = lock.held() ? 'y' : 'n';
        (void)!::write(ready[1], &ok, 1);
        for (;;) ::pause();
      } catch (...) {
      }
      (void)!::write(ready[1], &ok, 1);
      ::_exit(1);
    }
    ::close(ready[1]);
    char ok = 'n';
    held_ = ::read(ready[0], &ok, 1) == 1 && ok == 'y';
    ::close(ready[0]);
  }
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;
  ~Holder() { kill(); }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }
  bool held() const { return held_; }

 private:
  pid_t pid_ = -1;
  bool held_ = false;
};

void write_checkpoint(const fs::path& path) {
  Layout layout;
  layout.add("w", {4});
  auto store = ParamStore::on_heap(layout);
  save_checkpoint(path, store, {1, 4, 7});
}

TEST(CheckpointLock, ASecondProcessIsRefusedWithTheHoldersPidUntilTheHolderIsKilled) {
  const ScratchDir dir;
  const fs::path ck = dir / "ck.bin";
  Holder first(ck);
  ASSERT_TRUE(first.held());
  const std::string message = message_of([&] { CheckpointLock second(ck); });
  EXPECT_EQ(message, "checkpoint " + ck.string() + ": another run is writing it (pid " + std::to_string(first.pid()) +
                         "); wait for it to end, or give another checkpoint path (its lock: " + ck.string() +
                         ".lock)");
  EXPECT_THROW(CheckpointLock{ck}, InputError);
  // kill -9: no chance to let go or to remove the lock file; the kernel releases the lock all the same.
  first.kill();
  EXPECT_TRUE(fs::exists(dir / "ck.bin.lock"));
  const CheckpointLock after(ck);
  EXPECT_TRUE(after.held());
  // The file names the new holder, not the killed one.
  const std::string again = message_of([&] { CheckpointLock third(ck); });
  EXPECT_NE(again.find("(pid " + std::to_string(::getpid()) + ", this process)"), std::string::npos) << again;
}

TEST(CheckpointLock, ALockInThisProcessKeepsOutAnotherAndLetsGoWithItsObject) {
  const ScratchDir dir;
  const fs::path ck = dir / "ck.bin";
  {
    CheckpointLock first(ck);
    ASSERT_TRUE(first.held());
    EXPECT_THROW(CheckpointLock{ck}, InputError);
    CheckpointLock moved = std::move(first);
    EXPECT_TRUE(moved.held());
    EXPECT_FALSE(first.held());  // NOLINT(bugprone-use-after-move): moved from, it holds nothing
    EXPECT_THROW(CheckpointLock{ck}, InputError);
  }
  EXPECT_TRUE(dir.entries().empty()) << "the lock file is removed by its holder";
  const CheckpointLock next(ck);
  EXPECT_TRUE(next.held());
  // Another path is another lock.
  const CheckpointLock other(dir / "other.bin");
  EXPECT_TRUE(other.held());
}

TEST(CheckpointLock, HeldWhileTheCheckpointIsReplacedAndThroughALink) {
  const ScratchDir dir;
  const fs::path ck = dir / "ck.bin";
  Holder first(ck);
  ASSERT_TRUE(first.held());
  // The holder's saves rename a new file over the checkpoint: the lock is not on it, so it holds on.
  write_checkpoint(ck);
  write_checkpoint(ck);
  EXPECT_THROW(CheckpointLock{ck}, InputError);
  // A link to the checkpoint writes its target: the same lock.
  fs::create_symlink(ck, dir / "link.bin");
  EXPECT_EQ(CheckpointLock::file_for(dir / "link.bin"), dir / "ck.bin.lock");
  EXPECT_THROW(CheckpointLock{dir / "link.bin"}, InputError);
  // A relative path names the same file.
  const fs::path here = fs::current_path();
  fs::current_path(dir.path());
  const std::string relative = message_of([] { CheckpointLock second("ck.bin"); });
  fs::current_path(here);
  EXPECT_NE(relative.find("checkpoint ck.bin: another run is writing it"), std::string::npos) << relative;
}

TEST(CheckpointLock, WhatIsNotReplacedHoldsNothingAndAnUnwritableFolderIsSaid) {
  EXPECT_FALSE(CheckpointLock("/dev/null").held());
  EXPECT_FALSE(CheckpointLock("-").held());
  EXPECT_FALSE(CheckpointLock().held());
  const ScratchDir dir;
  const std::string message = message_of([&] { CheckpointLock lock(dir / "missing" / "ck.bin"); });
  EXPECT_NE(message.find((dir / "missing" / "ck.bin").string()), std::string::npos) << message;
  // A lock file name that is a link (planted) is not followed.
  fs::create_symlink(dir / "elsewhere", dir / "planted.bin.lock");
  EXPECT_THROW(CheckpointLock{dir / "planted.bin"}, InputError);
  EXPECT_FALSE(fs::exists(dir / "elsewhere"));
  // A name too long for the suffix gets a short lock name in the same folder.
  const fs::path long_name = dir / std::string(250, 'c');
  EXPECT_EQ(CheckpointLock::file_for(long_name).parent_path(), dir.path());
  EXPECT_LT(CheckpointLock::file_for(long_name).filename().string().size(), 40u);
  EXPECT_TRUE(CheckpointLock(long_name).held());
}

}  // namespace
}  // namespace asgd
