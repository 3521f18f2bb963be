#include "asgd/sparse/mf/model_file.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/training_store.hpp"

namespace asgd::sparse::mf {
namespace {

// Ids are any bytes, JSON strings UTF-8: a list holding a name that is not
// UTF-8 is kept as hex, under KEY_hex, and read back byte for byte.
void put_names(nlohmann::json& j, const std::string& key, const std::vector<std::string>& names) {
  try {
    (void)nlohmann::json(names).dump();  // throws on a name that is not UTF-8
    j[key] = names;
    return;
  } catch (const nlohmann::json::type_error&) {
  }
  std::vector<std::string> hex;
  hex.reserve(names.size());
  for (const auto& name : names) {
    std::string h;
    for (const unsigned char c : name) h += fmt::format("{:02x}", c);
    hex.push_back(std::move(h));
  }
  j[key + "_hex"] = std::move(hex);
}

std::vector<std::string> get_names(const nlohmann::json& j, const std::string& key, const std::string& path) {
  if (!j.contains(key + "_hex")) return j.at(key).get<std::vector<std::string>>();
  std::vector<std::string> names;
  auto nibble = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  // Two hex digits a byte, nothing else (sscanf's %2x took "+1", " 1" and an odd last digit).
  for (const auto& h : j.at(key + "_hex").get<std::vector<std::string>>()) {
    if (h.size() % 2 != 0) throw InputError(fmt::format("{}: bad {} ids: '{}' is not whole bytes", path, key, h));
    std::string name;
    for (std::size_t i = 0; i < h.size(); i += 2) {
      const int hi = nibble(h[i]), lo = nibble(h[i + 1]);
      if (hi < 0 || lo < 0) throw InputError(fmt::format("{}: bad {} ids: '{}' is not hex", path, key, h));
      name += static_cast<char>(hi * 16 + lo);
    }
    names.push_back(std::move(name));
  }
  return names;
}

// A metadata number that must be finite (nlohmann converts 1e300 to a float inf without a word).
float finite_float(const nlohmann::json& j, const char* key, const std::string& path) {
  const auto& v = j.at(key);
  if (!v.is_number()) throw InputError(fmt::format("{}: bad mf model metadata: {} is not a number", path, key));
  const auto x = v.get<double>();
  if (!std::isfinite(static_cast<float>(x))) {
    throw InputError(fmt::format("{}: bad mf model metadata: {} is {}, not a finite float", path, key, x));
  }
  return static_cast<float>(x);
}

// Row indices, each a non-negative integer (get<uint32_t> wrapped 2^32 + 1 to 1 and took 1.5 as 1).
std::vector<std::uint32_t> get_rows(const nlohmann::json& j, const char* key, const std::string& path) {
  std::vector<std::uint32_t> rows;
  // A list: a range-for over a number or an object walks it as one element (1 read as [1]).
  if (!j.at(key).is_array()) {
    throw InputError(fmt::format("{}: bad mf model metadata: {} is {}, not a list", path, key, j.at(key).dump()));
  }
  for (const auto& v : j.at(key)) {
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() > std::numeric_limits<std::uint32_t>::max()) {
      throw InputError(fmt::format("{}: bad mf model metadata: {} holds {}, not a row number", path, key, v.dump()));
    }
    rows.push_back(v.get<std::uint32_t>());
  }
  return rows;
}

}  // namespace

std::string model_metadata(const Ratings& r, const ColdIds& cold, const RatingScale& rs, const MfOptions& o,
                           std::string_view loss, float positive) {
  const RatingRange range = RatingRange::of(r);
  nlohmann::json j{{"model", "mf"},   {"loss", std::string(loss)}, {"mean", rs.mean},
                   {"factors", o.factors}, {"l2", o.l2}, {"bias_l2", o.bias_l2}};
  if (loss == "squared") {
    j["min_rating"] = range.lo;
    j["max_rating"] = range.hi;
    // A prediction is offset + scale * (biases + p . q); files without them are centred on the mean.
    j["offset"] = rs.offset;
    j["scale"] = rs.scale;
  } else {
    j["positive"] = positive;
  }
  put_names(j, "users", r.users.names());
  put_names(j, "items", r.items.names());
  // Ids with no training rating (first seen in a validation or test file): zero rows, never recommended.
  if (!cold.users.empty()) j["cold_users"] = cold.users;
  if (!cold.items.empty()) j["cold_items"] = cold.items;
  return j.dump();
}

ModelInfo read_model_info(const CheckpointData& d, const std::filesystem::path& file) {
  const std::string path = file.string();
  const auto j = nlohmann::json::parse(d.metadata, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("model", "") != "mf") {
    throw InputError(fmt::format("{}: not an asgd mf model", path));
  }
  ModelInfo m;
  try {
    const float mean = finite_float(j, "mean", path);
    m.scale = RatingScale(mean, j.contains("offset") ? finite_float(j, "offset", path) : mean,
                          j.contains("scale") ? finite_float(j, "scale", path) : 1.0f);
    if (!(m.scale.scale > 0)) {
      throw InputError(fmt::format("{}: bad mf model metadata: scale {}, expected > 0", path, m.scale.scale));
    }
    m.loss = j.value("loss", "squared");
    if (m.loss != "squared" && m.loss != "bpr") {
      throw InputError(fmt::format("{}: bad mf model metadata: loss '{}', expected squared or bpr", path, m.loss));
    }
    if (j.contains("positive")) m.positive = finite_float(j, "positive", path);
    if (j.contains("min_rating") && j.contains("max_rating")) {
      m.range = {finite_float(j, "min_rating", path), finite_float(j, "max_rating", path)};
      if (m.range.lo > m.range.hi) {
        throw InputError(fmt::format("{}: bad mf model metadata: min_rating {} above max_rating {}", path,
                                     m.range.lo, m.range.hi));
      }
    }
    m.users = IdMap::from_names(get_names(j, "users", path));
    m.items = IdMap::from_names(get_names(j, "items", path));
    for (auto [key, ids] : {std::pair{"cold_users", &m.cold.users}, std::pair{"cold_items", &m.cold.items}}) {
      if (j.contains(key)) *ids = get_rows(j, key, path);
      std::sort(ids->begin(), ids->end());
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: bad mf model metadata: {}", path, e.what()));
  }
  // The ids index the factor rows: a file whose parts disagree (forged, or from another build) is refused before
  // anything is read through them.
  const FactorLayout f = [&] {
    try {
      return FactorLayout::of(d.layout);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", path, e.what()));
    }
  }();
  if (m.users.size() != f.users || m.items.size() != f.items) {
    throw InputError(fmt::format("{}: {} user and {} item ids for {} x {} factor rows", path, m.users.size(),
                                 m.items.size(), f.users, f.items));
  }
  if ((!m.cold.users.empty() && m.cold.users.back() >= f.users) ||
      (!m.cold.items.empty() && m.cold.items.back() >= f.items)) {
    throw InputError(fmt::format("{}: a cold id past the model's users or items", path));
  }
  // The names themselves, where the layout's tag holds them: an edited list would give each row another id.
  if (!has_model_ids(d.layout, m.users, m.items)) {
    throw InputError(fmt::format("{}: its ids are not the ones its factors were trained with", path));
  }
  return m;
}

LoadedModel load_model(const std::filesystem::path& path, const std::string& shm) {
  const CheckpointData d = read_checkpoint(path);
  LoadedModel m;
  static_cast<ModelInfo&>(m) = read_model_info(d, path);
  m.epochs = d.state.epoch;
  if (!shm.empty()) {
    m.store.emplace(ParamStore::attach_shared(shm, d.layout, Access::read_only));
    refuse_diverged(*m.store, shm);
  } else {
    m.store.emplace(ParamStore::on_heap(d.layout));
    m.store->assign(d.params);
  }
  return m;
}

}  // namespace asgd::sparse::mf
