#include "asgd/sparse/mf/ratings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/fingerprint.hpp"
#include "asgd/engine/huge_pages.hpp"
#include "asgd/engine/random.hpp"
#include "../input.hpp"
#include "../text_util.hpp"

namespace asgd::sparse::mf {

bool IdMap::small_number(std::string_view name, std::uint64_t& value) noexcept {
  if (name.empty() || name.size() > 8 || (name[0] == '0' && name.size() > 1)) return false;
  value = 0;
  for (const char c : name) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return value < kMaxNumber;
}

IdMap::Key IdMap::key_of(std::string_view name) noexcept {
  Key k;
  k.hash = std::hash<std::string_view>{}(name);
  k.head = 0;
  std::memcpy(&k.head, name.data(), std::min<std::size_t>(name.size(), 8));
  const auto length = static_cast<std::uint32_t>(std::min<std::size_t>(name.size(), 255));
  k.tag = (static_cast<std::uint32_t>(k.hash >> 32) & 0xffffff00u) | length;
  return k;
}

std::size_t IdMap::probe(std::string_view name, const Key& key) const noexcept {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = key.hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id == kAbsent) return i;
    if (s.tag == key.tag && s.head == key.head && (name.size() <= 8 || names_[s.id] == name)) return i;
  }
}

void IdMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(std::max<std::size_t>(64, 2 * old.size()), Slot{});
  for (const Slot& s : old) {
    if (s.id != kAbsent) slots_[probe(names_[s.id], key_of(names_[s.id]))] = s;
  }
}

std::uint32_t IdMap::intern(std::string_view name) {
  std::uint64_t number = 0;
  Key key{};
  const bool numeric = small_number(name, number);
  std::size_t slot = 0;
  if (numeric) {
    if (number < by_number_.size() && by_number_[number] != kAbsent) return by_number_[number];
  } else {
    if (2 * (hashed_ + 1) > slots_.size()) grow();
    key = key_of(name);
    slot = probe(name, key);
    if (slots_[slot].id != kAbsent) return slots_[slot].id;
  }
  // Ids are 32 bits, kAbsent not one of them (read by code, not run: 2^32 - 1 names is over 100 GB).
  if (names_.size() >= kAbsent) throw InputError(fmt::format("more than {} distinct ids", kAbsent - 1));
  const auto id = static_cast<std::uint32_t>(names_.size());
  names_.emplace_back(name);
  if (numeric) {
    if (number >= by_number_.size()) {
      by_number_.resize(std::min<std::uint64_t>(kMaxNumber, std::max<std::uint64_t>(number + 1, 2 * by_number_.size())),
                        kAbsent);
    }
    by_number_[number] = id;
  } else {
    slots_[slot] = {key.head, key.tag, id};
    ++hashed_;
  }
  return id;
}

std::optional<std::uint32_t> IdMap::find(std::string_view name) const noexcept {
  if (std::uint64_t number; small_number(name, number)) {
    if (number < by_number_.size() && by_number_[number] != kAbsent) return by_number_[number];
    return std::nullopt;
  }
  if (slots_.empty()) return std::nullopt;
  const Slot& s = slots_[probe(name, key_of(name))];
  if (s.id == kAbsent) return std::nullopt;
  return s.id;
}

namespace {
constexpr std::string_view kIdMapsTag = "user and item ids ";
}  // namespace

std::string id_maps_tag(const IdMap& users, const IdMap& items, std::size_t first_users, std::size_t first_items) {
  std::uint64_t h = kFnv1aStart;  // each map's size, then each name's length and bytes, users then items
  for (const auto& [map, count] : {std::pair{&users, first_users}, std::pair{&items, first_items}}) {
    const std::size_t n = std::min(count, map->size());
    h = fnv1a_u64(h, n);
    for (std::size_t id = 0; id < n; ++id) h = fnv1a_field(h, map->names()[id]);
  }
  return fmt::format("{}{:016x} (numbered in the order the ratings file gives them)", kIdMapsTag, h);
}

bool is_id_maps_tag(std::string_view tag) noexcept { return tag.starts_with(kIdMapsTag); }

std::string Ratings::id_maps_tag() const { return mf::id_maps_tag(users, items); }

void Ratings::add(std::string_view user_name, std::string_view item_name, float value) {
  if (!std::isfinite(value)) {
    throw InputError(fmt::format("ratings: the rating of '{}' by '{}' is {}: expected a finite number", item_name,
                                 user_name, value));
  }
  if (has_timestamps()) throw InputError("ratings: add() gives no timestamp, and these ratings have them");
  user.push_back(users.intern(user_name));
  item.push_back(items.intern(item_name));
  rating.push_back(value);
}

void Ratings::check(std::string_view what) const {
  const std::size_t n = rating.size();
  if (user.size() != n || item.size() != n || (has_timestamps() && timestamp.size() != n)) {
    throw InputError(fmt::format("{}: {} ratings with {} user ids, {} item ids and {} timestamps: expected one "
                                 "each (or no timestamps)",
                                 what, n, user.size(), item.size(), timestamp.size()));
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (user[i] >= users.size() || item[i] >= items.size()) {
      throw InputError(fmt::format("{}: rating {} has user id {} and item id {}, with {} users and {} items in its "
                                   "id maps: ids come from the maps (Ratings::add, IdMap::intern or a reader)",
                                   what, i, user[i], item[i], users.size(), items.size()));
    }
    if (!std::isfinite(rating[i])) throw InputError(fmt::format("{}: rating {} is {}", what, i, rating[i]));
  }
}

Ratings remap_ids(const Ratings& ratings, const Ratings& id_maps_from) {
  ratings.check("remap ids");
  Ratings out;
  out.users = id_maps_from.users;
  out.items = id_maps_from.items;
  // Each id once, not each rating: a set has far fewer ids than ratings.
  std::vector<std::uint32_t> user_of(ratings.users.size()), item_of(ratings.items.size());
  for (std::uint32_t u = 0; u < user_of.size(); ++u) user_of[u] = out.users.intern(ratings.users.name(u));
  for (std::uint32_t i = 0; i < item_of.size(); ++i) item_of[i] = out.items.intern(ratings.items.name(i));
  out.user.reserve(ratings.size());
  out.item.reserve(ratings.size());
  for (std::size_t r = 0; r < ratings.size(); ++r) {
    out.user.push_back(user_of[ratings.user[r]]);
    out.item.push_back(item_of[ratings.item[r]]);
  }
  out.rating = ratings.rating;
  out.timestamp = ratings.timestamp;
  return out;
}

IdMap IdMap::from_names(std::vector<std::string> names) {
  IdMap m;
  for (auto& n : names) {
    // Escaped: a saved name may hold any bytes. The caller says which file and list.
    if (const auto first = m.find(n))
      throw InputError(fmt::format("{} is listed twice (as ids {} and {})", text::quote_token(n), *first, m.size()));
    m.intern(n);
  }
  return m;
}

double Ratings::mean() const noexcept {
  if (rating.empty()) return 0.0;
  double s = 0;
  for (float r : rating) s += r;
  return s / static_cast<double>(rating.size());
}

double Ratings::deviation() const noexcept {
  if (rating.empty()) return 0.0;
  const double m = mean();
  double s = 0;
  for (float r : rating) s += (r - m) * (r - m);
  return std::sqrt(s / static_cast<double>(rating.size()));
}

Ratings Ratings::subset(std::span<const std::size_t> rows) const {
  Ratings out;
  out.users = users;
  out.items = items;
  out.user.reserve(rows.size());
  out.item.reserve(rows.size());
  out.rating.reserve(rows.size());
  for (auto r : rows) {
    out.user.push_back(user[r]);
    out.item.push_back(item[r]);
    out.rating.push_back(rating[r]);
    if (has_timestamps()) out.timestamp.push_back(timestamp[r]);
  }
  return out;
}

RatingsFormat parse_ratings_format(std::string_view name) {
  if (name == "detect" || name == "auto") return RatingsFormat::detect;
  if (name == "udata" || name == "u.data") return RatingsFormat::udata;
  if (name == "dat" || name == "ratings.dat") return RatingsFormat::dat;
  if (name == "csv" || name == "ratings.csv") return RatingsFormat::csv;
  if (name == "libmf") return RatingsFormat::libmf;
  throw InputError(fmt::format("format '{}': expected detect, udata, dat, csv or libmf", name));
}

std::string_view to_string(RatingsFormat f) noexcept {
  switch (f) {
    case RatingsFormat::detect: return "detect";
    case RatingsFormat::udata: return "udata";
    case RatingsFormat::dat: return "dat";
    case RatingsFormat::csv: return "csv";
    case RatingsFormat::libmf: return "libmf";
  }
  return "?";
}

namespace {


// Splits `line` into at most 5 fields; returns how many there were.
std::size_t split_fields(std::string_view line, RatingsFormat f, std::string_view* out) {
  std::size_t n = 0;
  auto push = [&](std::string_view v) {
    if (n < 5) out[n] = v;
    ++n;
  };
  if (f == RatingsFormat::libmf) {
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i == line.size()) break;
      const std::size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
      push(line.substr(start, i - start));
    }
    return n;
  }
  const std::string_view sep = f == RatingsFormat::dat ? "::" : f == RatingsFormat::csv ? "," : "\t";
  // Blanks around a field are not part of it: "u1, i2, 4" names the ids "u1" and "i2", as "u1,i2,4" does.
  auto trimmed = [](std::string_view v) {
    const auto b = v.find_first_not_of(" \t");
    if (b == std::string_view::npos) return std::string_view();
    return v.substr(b, v.find_last_not_of(" \t") - b + 1);
  };
  std::size_t start = 0;
  for (;;) {
    const auto at = line.find(sep, start);
    if (at == std::string_view::npos) {
      push(trimmed(line.substr(start)));
      return n;
    }
    push(trimmed(line.substr(start, at - start)));
    start = at + sep.size();
  }
}

// NA, N/A, null, none (any case): how data files mark a missing value (NaN is a number to text::is_any_number).
bool is_missing_mark(std::string_view field) {
  std::string lower(field);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "na" || lower == "n/a" || lower == "null" || lower == "none";
}

// Room for `n` more values in `v`, on huge pages where the kernel allows.
template <class Vector>
void reserve_more(Vector& v, std::size_t n) {
  v.reserve(v.size() + n);
  advise_huge_pages(v.data(), v.capacity() * sizeof(v[0]));
}

RatingsFormat detect(std::string_view first_line) {
  // (A header's separator decides too: "userId\tmovieId\t..." is tab-separated.)
  if (first_line.find(',') != std::string_view::npos) return RatingsFormat::csv;
  if (first_line.find("::") != std::string_view::npos) return RatingsFormat::dat;
  if (first_line.find('\t') != std::string_view::npos) return RatingsFormat::udata;
  return RatingsFormat::libmf;
}

}  // namespace

Ratings parse_ratings(std::string_view text, std::string_view source, RatingsFormat format,
                      const Ratings* id_maps_from) {
  Ratings r;
  if (id_maps_from) {
    r.users = id_maps_from->users;
    r.items = id_maps_from->items;
  }
  std::size_t line_no = 0, pos = 0;
  if (text.starts_with(text::kUtf8Bom)) pos = text::kUtf8Bom.size();
  // Room for a rating a line, before any is read: grown by doubling, the arrays were copied and faulted in
  // again and again (reading 9M ratings spent 0.27 s in those copies).
  const auto lines = static_cast<std::size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(pos), text.end(),
                                                         '\n')) + 1;
  reserve_more(r.user, lines);
  reserve_more(r.item, lines);
  reserve_more(r.rating, lines);
  bool first = true;
  // Whether lines carry a timestamp: LIBMF text never; the others as their first data line does (all lines
  // alike; a header's names do not decide it).
  bool with_time = false, time_decided = false;
  std::string_view fields[5];
  while (pos < text.size()) {
    const auto eol = text.find('\n', pos);
    std::string_view line = text.substr(pos, (eol == std::string_view::npos ? text.size() : eol) - pos);
    pos = eol == std::string_view::npos ? text.size() : eol + 1;
    ++line_no;
    if (line.size() > kMaxRatingsLineBytes) [[unlikely]] {
      io::refuse_long_line(source, line_no, static_cast<std::uint64_t>(line.data() - text.data()), line,
                           kMaxRatingsLineBytes, "a ratings file");
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (first) {
      first = false;
      if (format == RatingsFormat::detect) format = detect(line);
      const std::size_t n = split_fields(line, format, fields);
      // A CSV or TSV header (userId,movieId,rating,timestamp or any names): no field a number, the rating's a
      // word. A data line with a bad rating (1,10,NA,100 or 1,10,,100, or alice,matrix,NA with names for ids)
      // is still an error, not a header: a missing-value mark is no column name.
      if ((format == RatingsFormat::csv || format == RatingsFormat::udata) && (n == 3 || n == 4)) {
        bool any_number = false;
        for (std::size_t k = 0; k < n; ++k) any_number = any_number || text::is_any_number(fields[k]);
        const bool word = !fields[2].empty() && std::isalpha(static_cast<unsigned char>(fields[2][0])) &&
                          !is_missing_mark(fields[2]);
        if (!any_number && word) continue;
      }
    }
    auto fail = [&](const std::string& what) {
      throw InputError(fmt::format("{}:{}: expected {}, got {}", source, line_no, what, text::quote_token(line, 80)));
    };
    const std::size_t n = split_fields(line, format, fields);
    if (!time_decided) {
      time_decided = true;
      with_time = format != RatingsFormat::libmf && n == 4;
      if (with_time) reserve_more(r.timestamp, lines);
    }
    if (n != (with_time ? 4u : 3u)) {
      const std::string_view hint = format == RatingsFormat::libmf ? "" : " as the first data line";
      fail(fmt::format("{} fields ({}) in {} format{}, found {}", with_time ? 4 : 3,
                       with_time ? "user item rating timestamp" : "user item rating", to_string(format), hint, n));
    }
    double value = 0;
    {
      const auto& f = fields[2];
      const auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), value);
      // Finite as a float too: 1e39 would train as inf.
      if (ec != std::errc() || p != f.data() + f.size() || !std::isfinite(static_cast<float>(value)))
        fail("a numeric rating in field 3 (finite, within float range)");
    }
    if (fields[0].empty() || fields[1].empty()) fail("non-empty user and item ids");
    if (with_time) {
      std::int64_t ts = 0;
      const auto& f = fields[3];
      const auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), ts);
      if (ec != std::errc() || p != f.data() + f.size()) {
        // A timestamp written as a float (978300760.0, 1.2e9): its whole seconds.
        double seconds = 0;
        const auto [q, ec2] = std::from_chars(f.data(), f.data() + f.size(), seconds);
        if (ec2 != std::errc() || q != f.data() + f.size() || !(std::abs(seconds) < 9.2e18))
          fail("a numeric timestamp in field 4");
        ts = static_cast<std::int64_t>(seconds);
      }
      r.timestamp.push_back(ts);
    }
    r.user.push_back(r.users.intern(fields[0]));
    r.item.push_back(r.items.intern(fields[1]));
    r.rating.push_back(static_cast<float>(value));
  }
  if (r.rating.empty()) throw InputError(fmt::format("{}: no ratings", source));
  return r;
}

Ratings read_ratings(const std::filesystem::path& path, RatingsFormat format, const Ratings* id_maps_from) {
  return parse_ratings(io::read_all(path, "a ratings file", kMaxRatingsLineBytes), io::display_name(path), format,
                       id_maps_from);
}

void write_ratings(const std::filesystem::path& path, const Ratings& r) {
  AtomicFile out(path);
  for (std::size_t i = 0; i < r.size(); ++i) {
    out.write(fmt::format("{} {} {}\n", r.users.name(r.user[i]), r.items.name(r.item[i]), r.rating[i]));
  }
  out.commit();
}

Split random_split(const Ratings& all, double test_fraction, std::uint64_t seed) {
  if (!(test_fraction >= 0 && test_fraction < 1)) {
    throw InputError(fmt::format("test fraction {}: expected [0, 1)", test_fraction));
  }
  // Selection sampling (Knuth's Algorithm S): exactly n_test rows, each
  // subset equally likely, in one sequential pass that yields both parts in
  // file order (a shuffle of 10M indices and two sorts took over a second).
  const std::size_t n = all.size();
  const auto n_test = static_cast<std::size_t>(std::llround(test_fraction * static_cast<double>(n)));
  std::mt19937_64 rng(seed);
  std::vector<std::size_t> train, test;
  train.reserve(n - n_test);
  test.reserve(n_test);
  for (std::size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    if (u * static_cast<double>(n - i) < static_cast<double>(n_test - test.size())) {
      test.push_back(i);
    } else {
      train.push_back(i);
    }
  }
  return {all.subset(train), all.subset(test)};
}

Split random_split_per_user(const Ratings& all, double test_fraction, std::uint64_t seed) {
  if (!(test_fraction >= 0 && test_fraction < 1)) {
    throw InputError(fmt::format("test fraction {}: expected [0, 1)", test_fraction));
  }
  std::vector<std::vector<std::size_t>> by_user(all.users.size());
  for (std::size_t i = 0; i < all.size(); ++i) by_user[all.user[i]].push_back(i);
  std::mt19937_64 rng(seed);
  std::vector<std::size_t> train, test;
  for (auto& rows : by_user) {
    shuffle_in_place(std::span<std::size_t>(rows), rng);
    std::size_t n_test = static_cast<std::size_t>(std::llround(test_fraction * static_cast<double>(rows.size())));
    if (n_test == 0 && rows.size() >= 2 && test_fraction > 0) n_test = 1;
    // At least one positive to train on: a user with none would be scored with its random start.
    n_test = std::min(n_test, rows.size() - std::min<std::size_t>(rows.size(), 1));
    test.insert(test.end(), rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(n_test));
    train.insert(train.end(), rows.begin() + static_cast<std::ptrdiff_t>(n_test), rows.end());
  }
  std::sort(train.begin(), train.end());
  std::sort(test.begin(), test.end());
  return {all.subset(train), all.subset(test)};
}

Split leave_k_out(const Ratings& all, std::size_t k) {
  std::vector<std::vector<std::size_t>> by_user(all.users.size());
  for (std::size_t i = 0; i < all.size(); ++i) by_user[all.user[i]].push_back(i);
  std::vector<std::size_t> train, test;
  for (auto& rows : by_user) {
    if (all.has_timestamps()) {
      std::stable_sort(rows.begin(), rows.end(),
                       [&](std::size_t a, std::size_t b) { return all.timestamp[a] < all.timestamp[b]; });
    }
    // The latest rating of each of the k most recent distinct items goes to test; the user's earlier ratings of
    // those items leave the training part too, so the model has never seen a held-out item (a log that repeats
    // an interaction would otherwise score an item it trained on as unseen).
    std::vector<std::uint32_t> held;  // the k most recent distinct items, and one more if the user has it
    for (auto r = rows.rbegin(); r != rows.rend() && held.size() <= k; ++r) {
      if (std::find(held.begin(), held.end(), all.item[*r]) == held.end()) held.push_back(all.item[*r]);
    }
    if (held.size() <= k) {  // k or fewer distinct items: all of them train (a user needs one to train on)
      train.insert(train.end(), rows.begin(), rows.end());
      continue;
    }
    held.pop_back();
    std::vector<std::uint32_t> placed;  // held items whose latest rating went to test
    for (auto r = rows.rbegin(); r != rows.rend(); ++r) {
      const std::uint32_t item = all.item[*r];
      if (std::find(held.begin(), held.end(), item) == held.end()) {
        train.push_back(*r);
      } else if (std::find(placed.begin(), placed.end(), item) == placed.end()) {
        placed.push_back(item);
        test.push_back(*r);
      }
    }
  }
  std::sort(train.begin(), train.end());
  std::sort(test.begin(), test.end());
  return {all.subset(train), all.subset(test)};
}

Ratings positives_of(const Ratings& r, float threshold) {
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (r.rating[i] >= threshold) rows.push_back(i);
  }
  return r.subset(rows);
}

}  // namespace asgd::sparse::mf
