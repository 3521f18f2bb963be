#include "asgd/sparse/mf/model_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/json_metadata.hpp"
#include "asgd/engine/training_store.hpp"
#include "../text_util.hpp"

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

// The names of KEY (users or items), read from KEY_hex where put_names kept them as hex; InputError naming the file
// and the list for a name that is not hex and for one listed twice.
IdMap get_names(const JsonMetadata& j, const std::string& key) {
  std::vector<std::string> names;
  if (!j.has(key + "_hex")) {
    names = j.texts(key);
  } else {
    auto nibble = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    // Two hex digits a byte, nothing else (sscanf's %2x took "+1", " 1" and an odd last digit).
    for (const auto& h : j.texts(key + "_hex")) {
      if (h.size() % 2 != 0) j.malformed(fmt::format("bad {} ids: '{}' is not whole bytes", key, h));
      std::string name;
      for (std::size_t i = 0; i < h.size(); i += 2) {
        const int hi = nibble(h[i]), lo = nibble(h[i + 1]);
        if (hi < 0 || lo < 0) j.malformed(fmt::format("bad {} ids: '{}' is not hex", key, h));
        name += static_cast<char>(hi * 16 + lo);
      }
      names.push_back(std::move(name));
    }
  }
  try {
    return IdMap::from_names(std::move(names));
  } catch (const InputError& e) {
    j.malformed(fmt::format("{}: {}", key, e.what()));
  }
}

// A metadata number that must be finite as a float (1e300 is a double, and inf as a float).
float finite_float(const JsonMetadata& j, const char* key) {
  if (j.has(key) && !j.number_if(key)) j.malformed(fmt::format("{} is not a number", key));
  const double x = j.number(key);  // absent: said by JsonMetadata
  if (!std::isfinite(static_cast<float>(x))) j.refuse(key, "not a finite float");
  return static_cast<float>(x);
}

// Row indices, each a whole number below 2^32 (get<uint32_t> wrapped 2^32 + 1 to 1 and took 1.5 as 1).
std::vector<std::uint32_t> get_rows(const JsonMetadata& j, const char* key) {
  std::vector<std::uint32_t> rows;
  for (const double v : j.numbers(key)) {
    if (!(v >= 0 && v <= std::numeric_limits<std::uint32_t>::max()) || v != std::floor(v))
      j.malformed(fmt::format("{} holds {}, not a row number", key, v));
    rows.push_back(static_cast<std::uint32_t>(v));
  }
  return rows;
}

}  // namespace

std::string model_metadata(const Ratings& r, const ColdIds& cold, const RatingScale& rs, const MfOptions& o,
                           std::string_view loss, float positive, const OptionsRecord& options) {
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
  if (!o.biases) j["biases"] = false;  // the layout has bias rows either way
  if (!options.empty()) j["options"] = options;
  return j.dump();
}

ModelInfo read_model_info(const CheckpointData& d, const std::filesystem::path& file) {
  const std::string path = file.string();
  const auto j = JsonMetadata::parse(d.metadata, path);
  if (!j || !j->holds("model", "mf")) throw InputError(fmt::format("{}: not an asgd mf model", path));
  ModelInfo m;
  const float mean = finite_float(*j, "mean");
  m.scale = RatingScale(mean, j->has("offset") ? finite_float(*j, "offset") : mean,
                        j->has("scale") ? finite_float(*j, "scale") : 1.0f);
  if (!(m.scale.scale > 0)) j->malformed(fmt::format("scale {}, expected > 0", m.scale.scale));
  m.loss = j->text_or("loss", "squared");
  if (m.loss != "squared" && m.loss != "bpr")
    j->malformed(fmt::format("loss {}, expected squared or bpr", text::quote_token(m.loss)));
  if (j->has("positive")) m.positive = finite_float(*j, "positive");
  if (j->has("min_rating") && j->has("max_rating")) {
    m.range = {finite_float(*j, "min_rating"), finite_float(*j, "max_rating")};
    if (m.range.lo > m.range.hi)
      j->malformed(fmt::format("min_rating {} above max_rating {}", m.range.lo, m.range.hi));
  }
  m.users = get_names(*j, "users");
  m.items = get_names(*j, "items");
  for (auto [key, ids] : {std::pair{"cold_users", &m.cold.users}, std::pair{"cold_items", &m.cold.items}}) {
    if (j->has(key)) *ids = get_rows(*j, key);
    std::sort(ids->begin(), ids->end());
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

Ratings read_ratings_for(const LoadedModel& model, const std::filesystem::path& path, RatingsFormat format) {
  Ratings with_maps;
  with_maps.users = model.users;
  with_maps.items = model.items;
  return read_ratings(path, format, &with_maps);
}

}  // namespace asgd::sparse::mf
