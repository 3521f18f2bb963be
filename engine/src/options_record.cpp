#include "asgd/engine/options_record.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/json_metadata.hpp"

namespace asgd {

OptionsRecord engine_options(const TrainerOptions& o) {
  const auto text = [](const auto& value) { return fmt::format("{}", value); };
  OptionsRecord r = {{"workers", text(o.workers)},
                     {"policy", std::string(to_string(o.consistency))},
                     {"tau", tau_to_string(o.tau)},
                     {"step", text(o.step_examples)},
                     {"schedule", std::string(to_string(o.schedule.kind))},
                     {"lr", text(o.schedule.lr)},
                     {"warmup", text(o.schedule.warmup)},
                     {"staleness-aware", o.schedule.staleness_aware ? "on" : "off"},
                     {"adagrad", o.schedule.adagrad ? "on" : "off"}};
  if (o.schedule.kind == ScheduleKind::linear) r["lr-floor"] = text(o.schedule.floor);
  if (o.schedule.kind == ScheduleKind::linear || o.schedule.warmup > 0) r["epochs"] = text(o.epochs);
  return r;
}

std::string options_json(const OptionsRecord& record) { return nlohmann::json(record).dump(); }

std::optional<OptionsRecord> saved_options(const std::string& metadata) {
  const auto saved = nlohmann::json::parse(metadata, nullptr, false);
  if (!saved.is_object() || !saved.contains("options") || !saved["options"].is_object()) return std::nullopt;
  OptionsRecord r;
  for (const auto& [key, value] : saved["options"].items())
    if (value.is_string()) r[key] = value.get<std::string>();
  return r;
}

std::uint64_t run_id_of(const std::string& metadata) {
  const auto options = saved_options(metadata);
  const auto run = options ? options->find("run") : OptionsRecord::const_iterator{};
  if (!options || run == options->end()) return 0;
  const std::string& text = run->second;
  std::uint64_t id = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id, 16);
  return ec == std::errc() && end == text.data() + text.size() ? id & kRunIdMask : 0;
}

int rank_files_of(const std::string& metadata, const std::string& where) {
  constexpr double kMost = 1 << 24;
  if (const auto options = saved_options(metadata); options && options->contains("ranks")) {
    const std::string& text = options->find("ranks")->second;
    int ranks = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ranks);
    if (ec == std::errc() && end == text.data() + text.size() && ranks >= 1 && ranks <= kMost) return ranks;
    throw InputError(fmt::format("{}: its metadata is malformed: options.ranks is \"{}\", not a number of ranks",
                                 where, text));
  }
  const auto j = JsonMetadata::parse(metadata, where);  // files of older linear fits kept it at the top
  if (!j || !j->has("ranks")) return 1;
  // A whole number from 1 up (1e30 was converted undefined: "an AdaGrad job of -2147483648 rank(s)").
  const double ranks = j->number("ranks");
  if (!(ranks >= 1 && ranks <= kMost) || ranks != std::floor(ranks)) j->refuse("ranks", "not a number of ranks");
  return static_cast<int>(ranks);
}

std::string with_rank_files(const std::string& metadata, int ranks) {
  auto j = nlohmann::json::parse(metadata, nullptr, false);
  if (!j.is_object()) return metadata;
  j.erase("ranks");
  if (ranks > 1) {
    if (!j.contains("options") || !j["options"].is_object()) j["options"] = nlohmann::json::object();
    j["options"]["ranks"] = std::to_string(ranks);
  } else if (j.contains("options") && j["options"].is_object()) {
    j["options"].erase("ranks");
  }
  return j.dump();
}

std::vector<OptionChange> changed_options(const OptionsRecord& before, const OptionsRecord& now) {
  std::vector<OptionChange> changes;
  for (const auto& [key, value] : now) {
    const auto was = before.find(key);
    if (was != before.end() && was->second != value) changes.push_back({key, value, was->second});
  }
  return changes;
}

ResumeChanges resume_changes(const std::optional<OptionsRecord>& before, OptionsRecord now,
                             std::string_view digest_key, std::string_view count_key) {
  ResumeChanges changes;
  if (!before) return changes;
  const auto value = [](const OptionsRecord& r, std::string_view key) -> std::optional<std::string> {
    const auto at = r.find(key);
    return at == r.end() ? std::nullopt : std::optional<std::string>(at->second);
  };
  const auto digest_before = value(*before, digest_key), digest_now = value(now, digest_key);
  changes.data_differs = digest_before && digest_now && digest_before != digest_now &&
                         value(*before, count_key) == value(now, count_key);
  if (const auto at = now.find(digest_key); at != now.end()) now.erase(at);
  changes.options = changed_options(*before, now);
  return changes;
}

}  // namespace asgd
