// The JSON object that a model file's or checkpoint's metadata holds, read
// key by key: a key that is missing or holds a value of the wrong kind is an
// InputError naming the file and the key in plain words ("checkpoint ck.bin:
// its metadata has no 'window'"), never the JSON library's exception text.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace asgd {

class JsonMetadata {
 public:
  // None when `text` is no JSON object: a file of another kind or format, which the caller names as such.
  // `where` begins every message ("checkpoint ck.bin", or a path).
  static std::optional<JsonMetadata> parse(std::string_view text, std::string where);
  ~JsonMetadata();
  JsonMetadata(JsonMetadata&&) noexcept;
  JsonMetadata& operator=(JsonMetadata&&) noexcept;

  const std::string& where() const noexcept { return where_; }
  bool has(std::string_view key) const;
  // Whether `key` holds the string `value` (false when absent or of another kind): a file's kind ("model").
  bool holds(std::string_view key, std::string_view value) const;
  // The string, or number, `key` holds; none when it is absent or of another kind.
  std::optional<std::string> text_if(std::string_view key) const;
  std::optional<double> number_if(std::string_view key) const;

  // The value of `key`, of the kind named; InputError when it is absent or of another kind.
  bool flag(std::string_view key) const;
  double number(std::string_view key) const;
  std::uint64_t whole(std::string_view key) const;  // an integer >= 0 as written (4.5 and -1 are refused)
  std::string text(std::string_view key) const;
  std::vector<std::string> texts(std::string_view key) const;     // a list of strings
  std::vector<std::uint64_t> wholes(std::string_view key) const;  // a list of whole numbers
  std::vector<double> numbers(std::string_view key) const;        // a list of numbers
  // The same, `fallback` when `key` is absent (what older files lack); still InputError for another kind.
  bool flag_or(std::string_view key, bool fallback) const;
  double number_or(std::string_view key, double fallback) const;
  std::uint64_t whole_or(std::string_view key, std::uint64_t fallback) const;
  std::string text_or(std::string_view key, std::string fallback) const;

  // The value of `key` as JSON text, cut to a length a message can show.
  std::string shown(std::string_view key) const;
  // InputError "WHERE: its metadata is malformed: KEY is VALUE, WHY" (why: "expected > 0", "not a finite float").
  [[noreturn]] void refuse(std::string_view key, std::string_view why) const;
  // InputError "WHERE: its metadata is malformed: WHAT", for what no single key says (two keys that disagree).
  [[noreturn]] void malformed(std::string_view what) const;

 private:
  struct Json;
  JsonMetadata(std::unique_ptr<Json> json, std::string where);

  std::unique_ptr<Json> json_;
  std::string where_;
};

}  // namespace asgd
