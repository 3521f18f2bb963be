#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/crc.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/errors.hpp"

namespace fs = std::filesystem;
using asgd::Layout;
using asgd::ParamStore;

namespace {

Layout layout_of(std::size_t n) {
  Layout l;
  l.add("w", {n});
  return l;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("asgd-ckpt-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const asgd::InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

}  // namespace

TEST_F(CheckpointTest, RoundTripsParamsStateOptimizerAndMetadata) {
  auto s = ParamStore::on_heap(layout_of(100));
  for (std::size_t i = 0; i < s.size(); ++i) s.store(i, 0.5f * static_cast<float>(i));
  const std::vector<float> sums(s.size(), 3.0f);
  save_checkpoint(dir_ / "a.ckpt", s, {3, 300, 9}, sums, "meta=1");
  auto t = ParamStore::on_heap(layout_of(100));
  std::vector<float> back_sums;
  std::string meta;
  const auto state = load_checkpoint(dir_ / "a.ckpt", t, &back_sums, &meta);
  EXPECT_EQ(state, (asgd::TrainState{3, 300, 9}));
  EXPECT_EQ(t.snapshot(), s.snapshot());
  EXPECT_EQ(back_sums, sums);
  EXPECT_EQ(meta, "meta=1");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);  // no temp left
}

TEST_F(CheckpointTest, RefusesTornCorruptForeignAndOtherModels) {
  auto s = ParamStore::on_heap(layout_of(1000));
  s.fill(1.0f);
  save_checkpoint(dir_ / "good", s, {1, 1, 1});
  const auto bytes = fs::file_size(dir_ / "good");

  fs::copy_file(dir_ / "good", dir_ / "torn");
  fs::resize_file(dir_ / "torn", bytes - 100);
  EXPECT_NE(message_of([&] { asgd::read_checkpoint(dir_ / "torn"); }).find("truncated"), std::string::npos);

  fs::copy_file(dir_ / "good", dir_ / "flipped");
  {
    std::fstream f(dir_ / "flipped", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(bytes / 2));
    f.put('\x7f');
  }
  EXPECT_NE(message_of([&] { asgd::read_checkpoint(dir_ / "flipped"); }).find("checksum"), std::string::npos);

  std::ofstream(dir_ / "foreign") << "hello, I am a text file and not a checkpoint at all, sorry";
  EXPECT_NE(message_of([&] { asgd::read_checkpoint(dir_ / "foreign"); }).find("not an asgd checkpoint"),
            std::string::npos);
  EXPECT_NE(message_of([&] { asgd::read_checkpoint(dir_ / "missing"); }).find("cannot open"), std::string::npos);
  // A pipe says so, without waiting for a writer (before: "bad magic", as if the file were foreign).
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  EXPECT_NE(message_of([&] { asgd::read_checkpoint(dir_ / "fifo"); }).find("not a regular file"), std::string::npos);

  auto other = ParamStore::on_heap(layout_of(999));
  EXPECT_NE(message_of([&] { asgd::load_checkpoint(dir_ / "good", other); }).find("another model"),
            std::string::npos);
}

TEST_F(CheckpointTest, ThePreviousCheckpointIsKeptWhenAsked) {
  // One generation back (PATH.prev), for jobs whose processes each write a file: a job killed between their
  // writes resumes every process from the generation they share.
  auto s = ParamStore::on_heap(layout_of(10));
  const fs::path path = dir_ / "ck";
  asgd::keep_previous_checkpoint(path);  // nothing there yet: nothing kept
  EXPECT_FALSE(fs::exists(asgd::previous_checkpoint(path)));
  for (std::uint64_t epoch = 1; epoch <= 3; ++epoch) {
    s.fill(static_cast<float>(epoch));
    asgd::keep_previous_checkpoint(path);
    save_checkpoint(path, s, {epoch, epoch, 7});
  }
  EXPECT_EQ(asgd::previous_checkpoint(path), dir_ / "ck.prev");
  EXPECT_EQ(asgd::read_checkpoint(path).state.epoch, 3u);
  const auto previous = asgd::read_checkpoint(dir_ / "ck.prev");
  EXPECT_EQ(previous.state.epoch, 2u);
  EXPECT_EQ(previous.params[0], 2.0f);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);  // no temp left
  // Kept twice with no write between (the write failed): the same file, and still no temp left (a rename of one
  // link over another of the same file does nothing).
  asgd::keep_previous_checkpoint(path);
  asgd::keep_previous_checkpoint(path);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);
  EXPECT_EQ(asgd::read_checkpoint(dir_ / "ck.prev").state.epoch, 3u);
  // A checkpoint path that is a link: the link's target is kept (a link to the link would follow every write,
  // since a write replaces the target).
  fs::create_directories(dir_ / "real");
  fs::create_symlink(dir_ / "real" / "ck", dir_ / "link");
  s.fill(4.0f);
  save_checkpoint(dir_ / "link", s, {4, 4, 7});
  asgd::keep_previous_checkpoint(dir_ / "link");
  s.fill(5.0f);
  save_checkpoint(dir_ / "link", s, {5, 5, 7});
  EXPECT_EQ(asgd::read_checkpoint(dir_ / "link").state.epoch, 5u);
  EXPECT_EQ(asgd::read_checkpoint(dir_ / "link.prev").state.epoch, 4u);
}

TEST_F(CheckpointTest, NeverSavesNonFiniteParameters) {
  auto s = ParamStore::on_heap(layout_of(10));
  s.store(3, std::nanf(""));
  EXPECT_THROW(save_checkpoint(dir_ / "x", s, {}), asgd::RuntimeError);
  EXPECT_FALSE(fs::exists(dir_ / "x"));
}

TEST_F(CheckpointTest, SigkillDuringSaveLeavesThePreviousCheckpointLoadable) {
  // 8M floats = 32 MB: each save takes long enough to be killed mid-write.
  const std::size_t n = std::size_t{8} << 20;
  const fs::path path = dir_ / "model.ckpt";
  {
    auto s = ParamStore::on_heap(layout_of(n));
    s.fill(1.0f);
    save_checkpoint(path, s, {1, 1, 1});
  }
  int killed_mid_save = 0;
  for (int round = 0; round < 4; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto s = ParamStore::on_heap(layout_of(n));
      for (std::uint64_t gen = 2;; ++gen) {
        s.fill(static_cast<float>(gen));
        save_checkpoint(path, s, {gen, gen, 1});
      }
    }
    // Wait until the child is writing a checkpoint (its temp file exists),
    // then kill it a moment later: in the middle of that save or the next.
    const std::string temp_prefix = "model.ckpt.tmp." + std::to_string(child) + ".";
    auto child_saving = [&] {
      for (const auto& e : fs::directory_iterator(dir_)) {
        if (e.path().filename().string().rfind(temp_prefix, 0) == 0) return true;
      }
      return false;
    };
    for (int i = 0; i < 20000 && !child_saving(); ++i) ::usleep(1000);
    ::usleep(static_cast<useconds_t>(2000 * round));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    ASSERT_EQ(::waitpid(child, nullptr, 0), child);
    // Was it killed in the middle of a save? Its temp file says so.
    killed_mid_save += child_saving() ? 1 : 0;
    const auto d = asgd::read_checkpoint(path);  // must not throw
    ASSERT_EQ(d.params.size(), asgd::Layout(layout_of(n)).size());
    EXPECT_EQ(d.params.front(), static_cast<float>(d.state.epoch));
    EXPECT_EQ(d.params.back(), static_cast<float>(d.state.epoch));
  }
  // A save takes most of the child's time, so nearly every kill lands in one.
  EXPECT_GE(killed_mid_save, 2);
  // The next save clears the dead children's temp files.
  auto s = ParamStore::on_heap(layout_of(16));
  save_checkpoint(dir_ / "model.ckpt", ParamStore::on_heap(layout_of(n)), {9, 9, 9});
  int left = 0;
  for (const auto& e : fs::directory_iterator(dir_)) left += e.path().filename().string().find(".tmp.") != std::string::npos;
  EXPECT_EQ(left, 0);
}

TEST_F(CheckpointTest, CheckingAnOutputPathWritesNothingAndRefusesWhatCannotBeWritten) {
  // A file that exists keeps its bytes, and nothing is left beside it.
  const fs::path kept = dir_ / "model.ckpt";
  std::ofstream(kept) << "old";
  asgd::AtomicFile::check(kept);
  asgd::AtomicFile::check(dir_ / "new.ckpt");
  EXPECT_FALSE(fs::exists(dir_ / "new.ckpt"));
  std::ifstream in(kept);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
  // What the real write would refuse, refused now.
  EXPECT_NE(message_of([&] { asgd::AtomicFile::check(dir_ / "no-such-folder" / "m"); }).find("cannot write here"),
            std::string::npos);
  EXPECT_NE(message_of([&] { asgd::AtomicFile::check(dir_); }).find("is a directory"), std::string::npos);
  // A pipe is not opened (its reader would see the end of its input): this
  // returns at once although nobody reads the FIFO.
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  asgd::AtomicFile::check(fifo);
  asgd::AtomicFile::check("-");
  asgd::AtomicFile::check("/dev/stdout");
  // A descriptor is checked as the write would use it: open, and for writing.
  const int reading = ::open(kept.c_str(), O_RDONLY);
  ASSERT_GE(reading, 0);
  const std::string name = "/dev/fd/" + std::to_string(reading);
  EXPECT_NE(message_of([&] { asgd::AtomicFile::check(name); }).find("reading only"), std::string::npos);
  ::close(reading);
  EXPECT_NE(message_of([&] { asgd::AtomicFile::check(name); }).find("cannot write"), std::string::npos);
  // A loop of links, refused before anything is written.
  fs::create_symlink(dir_ / "loop2", dir_ / "loop1");
  fs::create_symlink(dir_ / "loop1", dir_ / "loop2");
  EXPECT_NE(message_of([&] { asgd::AtomicFile::check(dir_ / "loop1"); }).find("too many levels of symbolic links"),
            std::string::npos);
}

TEST_F(CheckpointTest, WritesToKnowsEveryNameOfAnOpenFile) {
  const fs::path file = dir_ / "out.txt", other = dir_ / "other.txt";
  std::ofstream(file) << "HEADER\n";
  std::ofstream(other) << "x";
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  const std::string by_fd = "/dev/fd/" + std::to_string(fd);
  fs::create_symlink(file, dir_ / "link");
  fs::create_symlink(by_fd, dir_ / "link-to-fd");
  EXPECT_TRUE(asgd::AtomicFile::writes_to(file, fd));
  EXPECT_TRUE(asgd::AtomicFile::writes_to(by_fd, fd));
  EXPECT_TRUE(asgd::AtomicFile::writes_to(dir_ / "link", fd));
  EXPECT_TRUE(asgd::AtomicFile::writes_to(dir_ / "link-to-fd", fd));
  EXPECT_FALSE(asgd::AtomicFile::writes_to(other, fd));
  EXPECT_FALSE(asgd::AtomicFile::writes_to(dir_ / "missing", fd));
  EXPECT_FALSE(asgd::AtomicFile::writes_to(file, 1000));  // not an open descriptor
  // A link to a descriptor's name writes through the descriptor, as the name does: appended to what the
  // descriptor has open, not a new file renamed over it; the link stays.
  asgd::AtomicFile out(dir_ / "link-to-fd");
  out.write("body\n");
  out.commit();
  ::close(fd);
  std::ifstream in(file);
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "HEADER\nbody\n");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link-to-fd"));
}

TEST_F(CheckpointTest, ALinkToADescriptorsNameIsThatDescriptorWhateverItHasOpen) {
  // A socket, as stdout may be: not a file or a FIFO, yet written through the descriptor.
  int ends[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, ends), 0);
  fs::create_symlink("/dev/fd/" + std::to_string(ends[0]), dir_ / "to-socket");
  // Relative, with ".." up to the root: the same name.
  std::string up;
  for (const auto& part : dir_.relative_path()) up += part.empty() ? "" : "../";
  fs::create_symlink(up + "dev/fd/" + std::to_string(ends[0]), dir_ / "relative");
  for (const char* name : {"to-socket", "relative"}) {
    EXPECT_TRUE(asgd::AtomicFile::writes_to(dir_ / name, ends[0])) << name;
    EXPECT_FALSE(asgd::AtomicFile::replaces(dir_ / name)) << name;
    asgd::AtomicFile out(dir_ / name);
    out.write(name);
    out.commit();
    char got[16] = {};
    ASSERT_EQ(::read(ends[1], got, sizeof got), static_cast<ssize_t>(std::strlen(name)));
    EXPECT_STREQ(got, name);
  }
  ::close(ends[0]);
  ::close(ends[1]);
  // A link to a descriptor open for reading only is refused as its name is, before anything is written.
  const fs::path kept = dir_ / "kept";
  std::ofstream(kept) << "old";
  const int reading = ::open(kept.c_str(), O_RDONLY);
  ASSERT_GE(reading, 0);
  fs::create_symlink("/dev/fd/" + std::to_string(reading), dir_ / "to-reading");
  EXPECT_NE(message_of([&] { asgd::AtomicFile::check(dir_ / "to-reading"); }).find("reading only"),
            std::string::npos);
  ::close(reading);
  // "-" is stdout as the name given only: ./- is a file of that name.
  EXPECT_FALSE(asgd::AtomicFile::writes_to("./-", STDOUT_FILENO));
  EXPECT_TRUE(asgd::AtomicFile::replaces("./-"));
  EXPECT_FALSE(asgd::AtomicFile::replaces("-"));
  EXPECT_FALSE(asgd::AtomicFile::replaces("/dev/null"));
  EXPECT_TRUE(asgd::AtomicFile::replaces(kept));
  EXPECT_TRUE(asgd::AtomicFile::replaces(dir_ / "new"));
}

// A file written with a valid checksum but holding NaN (made by some other program) is refused on loading, as
// saving refuses it.
TEST_F(CheckpointTest, LoadingRefusesNonFiniteValuesEvenUnderAValidChecksum) {
  const fs::path path = dir_ / "forged.ckpt";
  auto s = ParamStore::on_heap(layout_of(8));
  s.fill(1.0f);
  save_checkpoint(path, s, {1, 1, 1});
  // The end of the file: params (no optimizer state), CRC-32 of everything before it, "ASGDEND!".
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::size_t crc_at = bytes.size() - 12, n = asgd::Layout(layout_of(8)).size();
  const float nan = std::nanf("");
  std::memcpy(bytes.data() + crc_at - 4 * n, &nan, 4);
  boost::crc_32_type crc;
  crc.process_bytes(bytes.data(), crc_at);
  const std::uint32_t sum = crc.checksum();
  std::memcpy(bytes.data() + crc_at, &sum, 4);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  const auto msg = message_of([&] { (void)asgd::read_checkpoint(path); });
  EXPECT_NE(msg.find("parameter 0 is nan"), std::string::npos) << msg;
}

// A layout text that does not parse (under a valid checksum: a file some other program made) is refused naming the
// file, as every other fault of a checkpoint is: the layout's own message alone says no file.
TEST_F(CheckpointTest, ALayoutThatDoesNotParseIsRefusedNamingTheFile) {
  const fs::path path = dir_ / "bad-layout.ckpt";
  auto s = ParamStore::on_heap(layout_of(8));
  save_checkpoint(path, s, {1, 1, 1});
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  // The layout text starts right after the 80-byte header: "w dense 8\n"; a name of "[" does not parse.
  ASSERT_EQ(bytes.substr(80, 2), "w ");
  bytes[80] = '[';
  const std::size_t crc_at = bytes.size() - 12;
  boost::crc_32_type crc;
  crc.process_bytes(bytes.data(), crc_at);
  const std::uint32_t sum = crc.checksum();
  std::memcpy(bytes.data() + crc_at, &sum, 4);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  const auto msg = message_of([&] { (void)asgd::read_checkpoint(path); });
  EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor name '['"), std::string::npos) << msg;
}

// AdaGrad's sums are sums of squares: a negative one (a forged file) is refused when read, not found later as a
// NaN step and "training diverged".
TEST_F(CheckpointTest, LoadingRefusesANegativeAdagradSum) {
  const fs::path path = dir_ / "negative.ckpt";
  auto s = ParamStore::on_heap(layout_of(8));
  const std::size_t n = s.size();
  std::vector<float> sums(n, 1.0f);
  sums[3] = -1.0f;
  save_checkpoint(path, s, {1, 1, 1}, sums, "", asgd::OptimizerKind::adagrad);
  auto msg = message_of([&] { (void)asgd::read_checkpoint(path); });
  EXPECT_NE(msg.find("AdaGrad sum 3 is -1"), std::string::npos) << msg;
  save_checkpoint(path, s, {1, 1, 1}, sums, "", asgd::OptimizerKind::unrecorded);  // another optimizer's state
  EXPECT_NO_THROW((void)asgd::read_checkpoint(path));
}

// The optimizer word keeps the kind in its low byte and a row head above it: a head is read back with per-row
// sums only, and one that does not fit (or goes with another kind) is refused when written.
TEST_F(CheckpointTest, ARowHeadTravelsWithPerRowSums) {
  const fs::path path = dir_ / "head.ckpt";
  auto s = ParamStore::on_heap(layout_of(8));
  const std::vector<float> sums(s.size(), 1.0f);
  save_checkpoint(path, s, {1, 1, 1}, sums, "", asgd::OptimizerKind::row_adagrad, 8);
  auto d = asgd::read_checkpoint(path);
  EXPECT_EQ(d.optimizer_kind, asgd::OptimizerKind::row_adagrad);
  EXPECT_EQ(d.row_head, 8u);
  save_checkpoint(path, s, {1, 1, 1}, sums, "", asgd::OptimizerKind::row_adagrad, asgd::kMaxRowHead - 1);
  EXPECT_EQ(asgd::read_checkpoint(path).row_head, asgd::kMaxRowHead - 1);
  save_checkpoint(path, s, {1, 1, 1}, sums, "", asgd::OptimizerKind::row_adagrad);
  EXPECT_EQ(asgd::read_checkpoint(path).row_head, 0u);
  for (const auto& bad : {std::pair{asgd::OptimizerKind::row_adagrad, std::uint32_t{1} << 24},
                          std::pair{asgd::OptimizerKind::adagrad, std::uint32_t{8}}}) {
    const auto msg = message_of([&] { save_checkpoint(path, s, {1, 1, 1}, sums, "", bad.first, bad.second); });
    EXPECT_NE(msg.find("a row head"), std::string::npos) << msg;
  }
  EXPECT_EQ(asgd::read_checkpoint(path).row_head, 0u);  // the refused writes left the file as it was
}

// Replacing a file: a private one stays private; names that only look like our temp files are the user's and
// stay; a name near the file system's limit still gets written (its temp name is short).
TEST_F(CheckpointTest, ReplacingAFileKeepsItsModeAndNeighbours) {
  const fs::path model = dir_ / "model";
  std::ofstream(model) << "old";
  ASSERT_EQ(::chmod(model.c_str(), 0600), 0);
  const fs::path notes = dir_ / "model.tmp.2024-notes", odd = dir_ / "model.tmp.999999999.x";
  std::ofstream(notes) << "mine";
  std::ofstream(odd) << "mine too";
  auto s = ParamStore::on_heap(layout_of(4));
  save_checkpoint(model, s, {1, 1, 1});
  struct stat st {};
  ASSERT_EQ(::stat(model.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(fs::exists(notes));
  EXPECT_TRUE(fs::exists(odd));
  const fs::path long_name = dir_ / std::string(250, 'm');
  save_checkpoint(long_name, s, {2, 2, 2});
  EXPECT_EQ(asgd::read_checkpoint(long_name).state.epoch, 2u);
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".asgd-long-name"), std::string::npos) << "left behind";
  }
}
