// JsonMetadata: a file's JSON metadata read key by key; a missing key or one
// of the wrong kind is an InputError that names the file and the key in
// plain words, never the JSON library's exception text.
#include "asgd/engine/json_metadata.hpp"

#include <gtest/gtest.h>

#include <string>

#include "../common/message_of.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd {
namespace {

using asgd::testing::message_of;

const char* const kText = R"({"model": "word2vec", "dim": 8, "cbow": true, "sample": 0.001, "words": ["a", "b"],
                              "rows": [0, 2], "minus": -1, "half": 4.5, "name": "caf\u00e9 \u0001",
                              "long": "0123456789012345678901234567890123456789012345"})";

TEST(JsonMetadata, ReadsEachKindAndFallsBackOnlyWhenAKeyIsAbsent) {
  const auto m = JsonMetadata::parse(kText, "checkpoint ck.bin");
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->holds("model", "word2vec"));
  EXPECT_FALSE(m->holds("model", "mf"));
  EXPECT_FALSE(m->holds("dim", "8"));  // a number is no string
  EXPECT_FALSE(m->holds("absent", ""));
  EXPECT_EQ(m->whole("dim"), 8u);
  EXPECT_TRUE(m->flag("cbow"));
  EXPECT_DOUBLE_EQ(m->number("sample"), 0.001);
  EXPECT_DOUBLE_EQ(m->number("dim"), 8.0);  // an integer is a number
  EXPECT_EQ(m->texts("words"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m->wholes("rows"), (std::vector<std::uint64_t>{0, 2}));
  EXPECT_EQ(m->numbers("rows"), (std::vector<double>{0, 2}));
  EXPECT_EQ(m->text_if("model"), "word2vec");
  EXPECT_FALSE(m->text_if("dim").has_value());
  EXPECT_EQ(m->number_if("half"), 4.5);
  EXPECT_FALSE(m->number_if("model").has_value());
  EXPECT_FALSE(m->number_if("absent").has_value());
  EXPECT_EQ(m->text_or("absent", "squared"), "squared");
  EXPECT_EQ(m->whole_or("absent", 7), 7u);
  EXPECT_FALSE(m->flag_or("absent", false));
  EXPECT_DOUBLE_EQ(m->number_or("absent", 0.5), 0.5);
  // A fallback is for an absent key: one of another kind is still refused.
  EXPECT_EQ(message_of([&] { (void)m->text_or("dim", "x"); }),
            "checkpoint ck.bin: its metadata is malformed: dim is 8, not a string");
}

TEST(JsonMetadata, AMissingKeyOrAValueOfAnotherKindNamesTheFileAndTheKey) {
  const auto m = JsonMetadata::parse(kText, "checkpoint ck.bin");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(message_of([&] { (void)m->whole("window"); }), "checkpoint ck.bin: its metadata has no 'window'");
  EXPECT_EQ(message_of([&] { (void)m->whole("minus"); }),
            "checkpoint ck.bin: its metadata is malformed: minus is -1, not a whole number");
  EXPECT_EQ(message_of([&] { (void)m->whole("half"); }),
            "checkpoint ck.bin: its metadata is malformed: half is 4.5, not a whole number");
  EXPECT_EQ(message_of([&] { (void)m->flag("dim"); }),
            "checkpoint ck.bin: its metadata is malformed: dim is 8, not true or false");
  EXPECT_EQ(message_of([&] { (void)m->number("model"); }),
            "checkpoint ck.bin: its metadata is malformed: model is \"word2vec\", not a number");
  EXPECT_EQ(message_of([&] { (void)m->texts("dim"); }),
            "checkpoint ck.bin: its metadata is malformed: dim is 8, not a list");
  EXPECT_EQ(message_of([&] { (void)m->texts("rows"); }),
            "checkpoint ck.bin: its metadata is malformed: rows holds 0 at position 1, not a string");
  EXPECT_EQ(message_of([&] { (void)m->wholes("words"); }),
            "checkpoint ck.bin: its metadata is malformed: words holds \"a\" at position 1, not a whole number");
  // Control and non-ASCII characters escaped, long values cut.
  EXPECT_EQ(message_of([&] { (void)m->whole("name"); }),
            "checkpoint ck.bin: its metadata is malformed: name is \"caf\\u00e9 \\u0001\", not a whole number");
  EXPECT_EQ(m->shown("long"), "\"012345678901234567890123456789012345678...");
  EXPECT_EQ(message_of([&] { m->refuse("dim", "expected > 8"); }),
            "checkpoint ck.bin: its metadata is malformed: dim is 8, expected > 8");
  EXPECT_THROW(m->malformed("two keys disagree"), InputError);
  // Never the JSON library's words.
  for (const char* key : {"window", "minus", "model", "words"}) {
    const std::string message = message_of([&] { (void)m->wholes(key); });
    EXPECT_EQ(message.find("json"), std::string::npos) << message;
  }
}

TEST(JsonMetadata, TextThatIsNoJsonObjectIsNoMetadata) {
  for (const char* text : {"", "lenet5", "{\"model\": ", "[1, 2]", "5", "\"text\"", "{\"a\": \"\xff\"}"})
    EXPECT_FALSE(JsonMetadata::parse(text, "f").has_value()) << text;
  EXPECT_TRUE(JsonMetadata::parse("{}", "f").has_value());
}

}  // namespace
}  // namespace asgd
