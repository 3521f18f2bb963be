#include "asgd/engine/json_metadata.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "asgd/engine/errors.hpp"

namespace asgd {

struct JsonMetadata::Json {
  nlohmann::json object;
};

namespace {

constexpr std::size_t kShownChars = 40;

// A value as a message shows it: JSON text, non-ASCII escaped (no raw bytes reach a terminal), cut when long.
std::string shown_value(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  if (text.size() > kShownChars) text = text.substr(0, kShownChars) + "...";
  return text;
}

}  // namespace

JsonMetadata::JsonMetadata(std::unique_ptr<Json> json, std::string where)
    : json_(std::move(json)), where_(std::move(where)) {}
JsonMetadata::~JsonMetadata() = default;
JsonMetadata::JsonMetadata(JsonMetadata&&) noexcept = default;
JsonMetadata& JsonMetadata::operator=(JsonMetadata&&) noexcept = default;

std::optional<JsonMetadata> JsonMetadata::parse(std::string_view text, std::string where) {
  auto object = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (object.is_discarded() || !object.is_object()) return std::nullopt;
  return JsonMetadata(std::make_unique<Json>(Json{std::move(object)}), std::move(where));
}

bool JsonMetadata::has(std::string_view key) const { return json_->object.contains(key); }

std::optional<std::string> JsonMetadata::text_if(std::string_view key) const {
  const auto it = json_->object.find(key);
  if (it == json_->object.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::optional<double> JsonMetadata::number_if(std::string_view key) const {
  const auto it = json_->object.find(key);
  if (it == json_->object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

bool JsonMetadata::holds(std::string_view key, std::string_view value) const { return text_if(key) == value; }

std::string JsonMetadata::shown(std::string_view key) const {
  const auto it = json_->object.find(key);
  return it == json_->object.end() ? std::string("absent") : shown_value(*it);
}

void JsonMetadata::refuse(std::string_view key, std::string_view why) const {
  malformed(fmt::format("{} is {}, {}", key, shown(key), why));
}

void JsonMetadata::malformed(std::string_view what) const {
  throw InputError(fmt::format("{}: its metadata is malformed: {}", where_, what));
}

namespace {

// The value of `key`, which `is_kind` must accept; InputError naming the key and the kind (`expected`) otherwise.
template <class IsKind>
const nlohmann::json& value_of(const JsonMetadata& m, const nlohmann::json& object, std::string_view key,
                               IsKind is_kind, std::string_view expected) {
  const auto it = object.find(key);
  if (it == object.end()) throw InputError(fmt::format("{}: its metadata has no '{}'", m.where(), key));
  if (!is_kind(*it)) m.refuse(key, fmt::format("not {}", expected));
  return *it;
}

bool is_whole(const nlohmann::json& v) { return v.is_number_unsigned(); }

// Every element of a list checked alike: the first of another kind is named with its position.
template <class T, class IsKind>
std::vector<T> list_of(const JsonMetadata& m, const nlohmann::json& object, std::string_view key, IsKind is_kind,
                       std::string_view expected) {
  const auto& list = value_of(m, object, key, [](const nlohmann::json& v) { return v.is_array(); }, "a list");
  std::vector<T> out;
  out.reserve(list.size());
  for (const auto& v : list) {
    if (!is_kind(v)) {
      m.malformed(fmt::format("{} holds {} at position {}, not {}", key, shown_value(v), out.size() + 1, expected));
    }
    out.push_back(v.template get<T>());
  }
  return out;
}

}  // namespace

bool JsonMetadata::flag(std::string_view key) const {
  return value_of(*this, json_->object, key, [](const nlohmann::json& v) { return v.is_boolean(); },
                  "true or false")
      .get<bool>();
}

double JsonMetadata::number(std::string_view key) const {
  return value_of(*this, json_->object, key, [](const nlohmann::json& v) { return v.is_number(); }, "a number")
      .get<double>();
}

std::uint64_t JsonMetadata::whole(std::string_view key) const {
  return value_of(*this, json_->object, key, is_whole, "a whole number").get<std::uint64_t>();
}

std::string JsonMetadata::text(std::string_view key) const {
  return value_of(*this, json_->object, key, [](const nlohmann::json& v) { return v.is_string(); }, "a string")
      .get<std::string>();
}

std::vector<std::string> JsonMetadata::texts(std::string_view key) const {
  return list_of<std::string>(*this, json_->object, key, [](const nlohmann::json& v) { return v.is_string(); },
                              "a string");
}

std::vector<std::uint64_t> JsonMetadata::wholes(std::string_view key) const {
  return list_of<std::uint64_t>(*this, json_->object, key, is_whole, "a whole number");
}

std::vector<double> JsonMetadata::numbers(std::string_view key) const {
  return list_of<double>(*this, json_->object, key, [](const nlohmann::json& v) { return v.is_number(); },
                         "a number");
}

bool JsonMetadata::flag_or(std::string_view key, bool fallback) const { return has(key) ? flag(key) : fallback; }
double JsonMetadata::number_or(std::string_view key, double fallback) const {
  return has(key) ? number(key) : fallback;
}
std::uint64_t JsonMetadata::whole_or(std::string_view key, std::uint64_t fallback) const {
  return has(key) ? whole(key) : fallback;
}
std::string JsonMetadata::text_or(std::string_view key, std::string fallback) const {
  return has(key) ? text(key) : std::move(fallback);
}

}  // namespace asgd
