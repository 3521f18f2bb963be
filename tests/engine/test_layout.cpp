#include <gtest/gtest.h>

#include <chrono>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/layout.hpp"

using asgd::Layout;
using asgd::RowPadding;

TEST(Layout, TensorsStartOnCacheLinesAndPaddedRowsFillWholeLines) {
  Layout l;
  l.add("a", {3});
  l.add("b", {5, 3}, RowPadding::cache_line);
  l.add("c", {2, 2, 5});
  EXPECT_EQ(l["a"].offset, 0u);
  EXPECT_EQ(l["a"].rows, 1u);
  EXPECT_EQ(l["a"].cols, 3u);
  EXPECT_EQ(l["b"].offset, 16u);
  EXPECT_EQ(l["b"].row_stride, 16u);
  EXPECT_EQ(l["b"].at(2, 1), 16u + 2 * 16 + 1);
  EXPECT_EQ(l["c"].offset, 16u + 5 * 16);
  EXPECT_EQ(l["c"].rows, 2u);
  EXPECT_EQ(l["c"].cols, 10u);
  EXPECT_EQ(l.size() % 16, 0u);
  EXPECT_EQ(l.size(), 16u + 80 + 32);
}

TEST(Layout, HashDependsOnNamesShapesAndPadding) {
  Layout a, b, c, d;
  a.add("w", {4, 8});
  b.add("w", {4, 8});
  c.add("w", {8, 4});
  d.add("w", {4, 8}, RowPadding::cache_line);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_NE(a.hash(), d.hash());
  Layout e;
  e.add("v", {4, 8});
  EXPECT_NE(a.hash(), e.hash());
  // Pinned: the hash is part of the segment and checkpoint formats, so it
  // must not change between builds, compilers or machines.
  EXPECT_EQ(a.hash(), 0xac1d52eb98a038f0ULL);
}

TEST(Layout, SerializeRoundTrips) {
  Layout l;
  l.add("embeddings", {100, 7}, RowPadding::cache_line);
  l.add("bias", {100});
  const Layout back = Layout::parse(l.serialize());
  EXPECT_EQ(back.hash(), l.hash());
  EXPECT_EQ(back.size(), l.size());
  EXPECT_EQ(back["embeddings"].row_stride, 16u);
  // A name the text form could not give back is refused when added (before: \f and \v were taken, and the
  // checkpoint written with them could not be read).
  for (const char* name : {"a\fb", "a\vb", "a b", "a\x01b", "a[0]"}) EXPECT_THROW(Layout().add(name, {2}), asgd::InputError);
}

// A tag says what the rows stand for: another tag is another layout (a shared segment or model file of one is
// refused for the other), it round-trips through the text form, and an untagged layout hashes as before tags.
TEST(Layout, ATagIsPartOfTheHashAndTheText) {
  Layout a, b;
  a.add("w", {4, 8});
  b.add("w", {4, 8});
  b.set_tag("ids 0123456789abcdef");
  EXPECT_NE(a.hash(), b.hash());
  EXPECT_EQ(a.hash(), 0xac1d52eb98a038f0ULL);
  Layout c = b;
  c.set_tag("ids fedcba9876543210");
  EXPECT_NE(b.hash(), c.hash());
  const Layout back = Layout::parse(b.serialize());
  EXPECT_EQ(back.tag(), "ids 0123456789abcdef");
  EXPECT_EQ(back.hash(), b.hash());
  EXPECT_EQ(Layout::parse(a.serialize()).tag(), "");
  EXPECT_NE(b.describe().find("tag: ids 0123456789abcdef"), std::string::npos) << b.describe();
  EXPECT_THROW(c.set_tag("two\nlines"), asgd::InputError);
  EXPECT_THROW(Layout().add("#tag", {3}), asgd::InputError);  // would read back as a tag
}

TEST(Layout, RejectsBadTensors) {
  Layout l;
  l.add("w", {3});
  EXPECT_THROW(l.add("w", {3}), asgd::InputError);
  EXPECT_THROW(l.add("", {3}), asgd::InputError);
  EXPECT_THROW(l.add("x y", {3}), asgd::InputError);
  EXPECT_THROW(l.add("z", {0}), asgd::InputError);
  EXPECT_THROW(l.add("z", {}), asgd::InputError);
  try {
    (void)l["nope"];
    FAIL();
  } catch (const asgd::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("have: w"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Layout::parse("w sideways 3\n"), asgd::InputError);
  EXPECT_THROW(Layout::parse("w dense 3x\n"), asgd::InputError);
  // Counts a forged file may hold: too large, never a wrap to zero (that divided by zero: SIGFPE).
  for (const char* text : {"w padded 18446744073709551615\n", "w dense 18446744073709551615\n",
                           "w padded 18446744073709551615x2\n", "w padded 2x18446744073709551615\n"}) {
    EXPECT_THROW(Layout::parse(text), asgd::InputError) << text;
  }
}

// Names are looked up in constant time: a layout of many tensors parses in linear time (a forged checkpoint of
// 100,000 tensors took 18 s to parse and refuse, quadratically).
TEST(Layout, ManyTensorsParseInLinearTime) {
  asgd::Layout many;
  for (int i = 0; i < 200000; ++i) many.add("t" + std::to_string(i), {1});
  const auto start = std::chrono::steady_clock::now();
  const asgd::Layout back = asgd::Layout::parse(many.serialize());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20.0);
  EXPECT_EQ(back.hash(), many.hash());
  EXPECT_TRUE(back.contains("t199999"));
  EXPECT_EQ(back["t123456"].offset, many["t123456"].offset);
  EXPECT_THROW(many.add("t5", {1}), asgd::InputError);
}
