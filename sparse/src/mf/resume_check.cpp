#include "asgd/sparse/mf/resume_check.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "asgd/engine/errors.hpp"

namespace asgd::sparse::mf {

namespace {
// Keys whose values are lists of ids: said as "differ", not printed (they can hold millions of names).
bool is_id_list(const std::string& key) {
  return key == "users" || key == "items" || key == "cold_users" || key == "cold_items" || key.ends_with("_hex");
}
// Keys whose values come from the ratings trained (their mean and range), not from an option.
bool is_from_data(const std::string& key) { return key == "mean" || key == "min_rating" || key == "max_rating"; }

// The option a key stands for where its name does not say it.
std::string_view option_of(const std::string& key) {
  if (key == "offset") return " (MfOptions::center)";
  if (key == "scale") return " (MfOptions::scale_ratings)";
  if (key == "biases") return " (MfOptions::biases)";
  return "";
}

// How many ranks wrote per-rank AdaGrad sums (the record's "ranks"; empty: one file, any number may resume).
std::string ranks_of(const nlohmann::json& metadata) {
  const auto options = metadata.find("options");
  if (options == metadata.end() || !options->is_object() || !options->contains("ranks")) return "";
  return (*options)["ranks"].is_string() ? (*options)["ranks"].get<std::string>() : "";
}

// A value as the options were given: the model keeps floats (0.02f is written as 0.019999999552965164).
std::string text(const nlohmann::json& v) {
  if (v.is_null()) return "unset";
  if (v.is_number_float()) return fmt::format("{}", static_cast<float>(v.get<double>()));
  return v.is_string() ? v.get<std::string>() : v.dump();
}
}  // namespace

void check_mf_resume(const CheckpointData& saved, const std::filesystem::path& file, std::string_view metadata) {
  const std::string where = fmt::format("FitOptions::resume {}", file.string());
  nlohmann::json before = nlohmann::json::parse(saved.metadata, nullptr, false);
  if (before.is_discarded() || !before.is_object() || before.value("model", "") != "mf")
    throw InputError(fmt::format("{}: not a checkpoint of an mf model", where));
  nlohmann::json now = nlohmann::json::parse(metadata);
  const std::string ranks_before = ranks_of(before), ranks_now = ranks_of(now);
  if (ranks_before != ranks_now) {
    throw InputError(fmt::format("{}: {}; resume with as many ranks as wrote it, or start again", where,
                                 ranks_before.empty()
                                     ? std::string("its AdaGrad sums are one process's, not one file a rank")
                                     : fmt::format("its AdaGrad sums are per rank, written by {} ranks", ranks_before)));
  }
  before.erase("options");
  now.erase("options");
  // Without biases their L2 weight weighs nothing: it may differ.
  if (before.value("biases", true) == false && now.value("biases", true) == false) {
    before.erase("bias_l2");
    now.erase("bias_l2");
  }
  if (before == now) return;
  // The loss first, then the numbers, the id lists last: the first difference said is the one that explains.
  std::vector<std::string> keys{"loss"};
  for (const nlohmann::json* j : {&before, &now})
    for (const auto& [key, value] : j->items())
      if (!is_id_list(key)) keys.push_back(key);
  for (const nlohmann::json* j : {&before, &now})
    for (const auto& [key, value] : j->items())
      if (is_id_list(key)) keys.push_back(key);
  for (const std::string& key : keys) {
    const nlohmann::json was = before.value(key, nlohmann::json()), is = now.value(key, nlohmann::json());
    if (was == is) continue;
    constexpr std::string_view kOtherData =
        "another ratings file, FitOptions::test_fraction, FitOptions::split_seed, FitOptions::validation_fraction "
        "or validation set; resume on the ratings it was trained on";
    if (is_id_list(key)) throw InputError(fmt::format("{}: its {} are not this run's ({})", where, key, kOtherData));
    if (is_from_data(key)) {
      throw InputError(fmt::format("{}: it was trained on other ratings (their {} {} there, {} here: {})", where,
                                   key, text(was), text(is), kOtherData));
    }
    throw InputError(fmt::format("{}: it was trained with {} {}{}, this run has {}; resume with the model's "
                                 "options and data",
                                 where, key, text(was), option_of(key), text(is)));
  }
}

}  // namespace asgd::sparse::mf
