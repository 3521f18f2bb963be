// The checks of file arguments: an output that names an input (through a link too), two outputs on stdout,
// stdin read twice, an output that cannot be written or rewritten; each error names the argument as given.
#include "asgd/engine/file_checks.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"

namespace asgd {
namespace {

using asgd::testing::message_of;

TEST(FileChecks, AnOutputNamingAnInputIsRefusedThroughALinkToo) {
  const asgd::testing::ScratchDir dir;
  const auto data = dir.file("data.txt", "1 2 3\n");
  std::filesystem::create_symlink(data, dir / "link.txt");
  EXPECT_EQ(message_of([&] { check_distinct("model", (dir / "link.txt").string(), {{"data", data.string()}}); }),
            "model: " + (dir / "link.txt").string() + " is also data's file (give each its own)");
  // Not there yet: the same canonical path.
  EXPECT_NE(message_of([&] {
              check_distinct("out", (dir / "new.txt").string(), {{"ck", (dir / "." / "new.txt").string()}});
            }).find("is also ck's file"),
            std::string::npos);
  // Relative spellings, neither there yet: "new.txt" and "./new.txt" from the folder they are in.
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  const std::string relative = message_of([] { check_distinct("out", "new.txt", {{"ck", "./new.txt"}}); });
  std::filesystem::current_path(cwd);
  EXPECT_NE(relative.find("is also ck's file"), std::string::npos) << relative;
  check_distinct("out", (dir / "other.txt").string(), {{"data", data.string()}, {"none", ""}});  // distinct: fine
  check_distinct("out", "-", {{"data", "-"}});                                                  // stdout is no file
}

TEST(FileChecks, OneOutputOnStdoutAndOneReaderOfStdin) {
  EXPECT_EQ(message_of([] { check_one_on_stdout({{"--model", "-"}, {"--csv", "/dev/stdout"}}); }),
            "--csv: stdout is --model's already (the two would run into one another)");
  check_one_on_stdout({{"--model", "-"}, {"--csv", ""}});
  EXPECT_TRUE(reads_stdin("-"));
  EXPECT_TRUE(reads_stdin("/dev/stdin"));
  EXPECT_FALSE(reads_stdin("stdin.txt"));
  EXPECT_EQ(message_of([] { check_one_stdin({{"-train", "-"}, {"-read-vocab", "/dev/stdin"}}); }),
            "-train - and -read-vocab /dev/stdin: only one of them can read standard input");
}

TEST(FileChecks, OutputsThatCannotBeWrittenOrRewritten) {
  const asgd::testing::ScratchDir dir;
  EXPECT_NE(message_of([&] { check_output("model", (dir / "no-such-dir" / "m").string()); }).find("model: "),
            std::string::npos);
  check_output("model", (dir / "m").string());
  check_output("model", "");  // none given
  EXPECT_NE(message_of([] { check_rewritten_output("checkpoint", "-"); })
                .find("checkpoint: -: rewritten during the run, so it must be a file"),
            std::string::npos);
  check_rewritten_output("checkpoint", (dir / "ck").string());
}

}  // namespace
}  // namespace asgd
