// Ratings for matrix factorization: a COO list of (user, item, rating
// [, timestamp]) with external ids (integers or string tokens) remapped to
// dense ids, and readers for MovieLens u.data / ratings.dat / ratings.csv and
// LIBMF text, plus random and per-user leave-k-out splits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace asgd::sparse::mf {

// External ids <-> dense ids 0..size()-1, in order of first appearance.
class IdMap {
 public:
  // The dense id of `name`, adding it when new.
  std::uint32_t intern(std::string_view name);
  std::optional<std::uint32_t> find(std::string_view name) const noexcept;
  const std::string& name(std::uint32_t id) const noexcept { return names_[id]; }
  const std::vector<std::string>& names() const noexcept { return names_; }
  std::size_t size() const noexcept { return names_.size(); }
  // From names in id order (a saved map); InputError on a duplicate.
  static IdMap from_names(std::vector<std::string> names);

 private:
  static constexpr std::uint32_t kAbsent = 0xffffffffu;
  // Ids written as small canonical decimals (MovieLens, LIBMF: "0" or no
  // leading zero, below kMaxNumber) are found by indexing. Any other name
  // goes through an open-addressing table whose slots hold the name's first
  // 8 bytes, length and a hash tag, so a name of up to 8 bytes is matched
  // within the slot (one cache miss per lookup) and a longer one is compared
  // against names_ only on a full match of those: reading a ratings file is
  // mostly these lookups.
  static constexpr std::uint64_t kMaxNumber = 1u << 24;
  static bool small_number(std::string_view name, std::uint64_t& value) noexcept;
  struct Slot {
    std::uint64_t head = 0;  // the name's first 8 bytes, zero-padded
    std::uint32_t tag = 0;   // hash bits and the length
    std::uint32_t id = kAbsent;
  };
  struct Key {
    std::uint64_t hash, head;
    std::uint32_t tag;
  };
  static Key key_of(std::string_view name) noexcept;
  std::size_t probe(std::string_view name, const Key& key) const noexcept;  // its slot, or the empty one
  void grow();
  std::vector<std::string> names_;
  std::vector<std::uint32_t> by_number_;  // number -> id, kAbsent where none
  std::vector<Slot> slots_;               // power-of-two size, at most half full
  std::size_t hashed_ = 0;
};

// How a model's sum s = b_u + b_i + p_u . q_i maps to a rating: offset +
// scale * s. The default is centred: offset = the training mean, scale 1.
// LIBMF's form (MfOptions::center false, scale_ratings true) has offset 0 and
// scale = the ratings' standard deviation: the factors fit r / sd. A pair
// with a side the model knows nothing about (an id outside it, or a cold
// one) predicts the mean plus the known side's bias, as LIBMF predicts its
// mean; not centred, the biases hold the mean, so the known side's bias
// counts by its distance from that side's mean bias (with_bias_means, in
// model.hpp, finds those).
struct RatingScale {
  float mean = 0, offset = 0, scale = 1;
  float user_bias_mean = 0, item_bias_mean = 0;  // not centred: the trained rows' mean biases
  RatingScale() = default;
  explicit RatingScale(float centred_mean) noexcept : mean(centred_mean), offset(centred_mean) {}
  RatingScale(float mean_, float offset_, float scale_) noexcept : mean(mean_), offset(offset_), scale(scale_) {}
  bool centred() const noexcept { return offset == mean; }
  // A pair with an unknown side, from the biases of the sides that are known.
  float unknown(std::optional<float> b_u, std::optional<float> b_i) const noexcept {
    float d = 0;
    if (b_u) d += centred() ? *b_u : *b_u - user_bias_mean;
    if (b_i) d += centred() ? *b_i : *b_i - item_bias_mean;
    return mean + scale * d;
  }
};

struct Ratings {
  std::vector<std::uint32_t> user;
  std::vector<std::uint32_t> item;
  std::vector<float> rating;
  std::vector<std::int64_t> timestamp;  // empty when the file has none
  IdMap users, items;

  std::size_t size() const noexcept { return rating.size(); }
  bool has_timestamps() const noexcept { return !timestamp.empty(); }
  // Appends `user_name`'s rating of `item_name` (external ids, interned in the maps), for ratings built in memory:
  // InputError unless it is finite. Without timestamps (the ratings must have none).
  void add(std::string_view user_name, std::string_view item_name, float value);
  // InputError starting "WHAT: " unless the ratings are well formed, as the readers make them: user, item and
  // rating (and timestamp, when there are any) with one entry per rating, every id below its map's size (ids
  // come from the maps, not assigned by hand) and every rating finite. The models check their training set so.
  void check(std::string_view what) const;
  double mean() const noexcept;
  // The ratings' standard deviation (of the population; 0 when empty).
  double deviation() const noexcept;
  // The entries `rows` (in that order) with the same id maps.
  Ratings subset(std::span<const std::size_t> rows) const;
  // mf::id_maps_tag of these ratings' maps: a factor model's layout tag.
  std::string id_maps_tag() const;
};

// "user and item ids " and a fingerprint of the first `users` user names and `items` item names (all of them by
// default), in id order: a factor model's layout tag, so that parameters whose rows are other ids (another file,
// or the same ratings in another order) are refused, not read as this model's. Maps that extend a model's (a
// test file read with its training set's) give the model's tag over its users and items.
std::string id_maps_tag(const IdMap& users, const IdMap& items, std::size_t first_users = SIZE_MAX,
                        std::size_t first_items = SIZE_MAX);
// Whether `tag` is one id_maps_tag makes (older model files carry another tag, or none).
bool is_id_maps_tag(std::string_view tag) noexcept;

// `ratings` with each id mapped by name onto `id_maps_from`'s maps (names new to them are added after theirs),
// as read_ratings(..., id_maps_from) maps a file: a test set built in memory with maps of its own then shares a
// model's dense ids. The model's evaluations refuse ratings whose maps are not the model's.
Ratings remap_ids(const Ratings& ratings, const Ratings& id_maps_from);

// udata, dat and csv take the timestamp or leave it out, as the first data
// line does (every line alike; a header's names do not count); a timestamp may be a float (its whole seconds).
// A first line whose rating field is not a number is a header in csv and
// udata (any names); a UTF-8 byte-order mark is skipped.
enum class RatingsFormat {
  detect,    // by the first line: "userId" or a comma / "::" / tabs / spaces
  udata,     // MovieLens 100K u.data: user \t item \t rating [\t timestamp]
  dat,       // MovieLens 1M/10M ratings.dat: user::item::rating[::timestamp]
  csv,       // MovieLens ratings.csv: header userId,movieId,rating,timestamp
  libmf,     // LIBMF text: user item rating (whitespace)
};
RatingsFormat parse_ratings_format(std::string_view name);  // InputError naming the choices
std::string_view to_string(RatingsFormat f) noexcept;

// Reads a whole file, gzipped or not (one pass over memory, std::from_chars,
// no iostream per line). Blank lines, CRLF and a missing final newline are fine; a malformed
// line is InputError "file:line: expected ..., got '...'". Ids are tokens
// (any non-separator bytes): integers are kept as their text. With
// `id_maps_from`, ids are mapped with (and added to) its maps, so a test file
// shares the training file's dense ids.
// Judged as it is read, so that binary or endless input stops early: a NUL byte
// is refused at the 1 MiB chunk holding it, a line longer than
// kMaxRatingsLineBytes within a chunk of passing it, and text growing past the
// memory available before it does. What ids cost is bounded by the input: an
// id is interned once however large its number (numbers below 2^24 index a
// table of at most 64 MiB, larger ones are hashed), so the maps grow with the
// distinct ids read, never with an id's value.
inline constexpr std::size_t kMaxRatingsLineBytes = std::size_t{1} << 20;
Ratings read_ratings(const std::filesystem::path& path, RatingsFormat format = RatingsFormat::detect,
                     const Ratings* id_maps_from = nullptr);
Ratings parse_ratings(std::string_view text, std::string_view source, RatingsFormat format,
                      const Ratings* id_maps_from = nullptr);

// LIBMF text ("user item rating" per line, external ids) written atomically.
void write_ratings(const std::filesystem::path& path, const Ratings& ratings);

// The ratings of `r` at or above `threshold`, with r's id maps: implicit feedback (BPR's positives) from explicit
// ratings.
Ratings positives_of(const Ratings& r, float threshold);

struct Split {
  Ratings train, test;
};
// A seeded random split: each rating goes to test with probability about
// `test_fraction` (exactly round(n * fraction) ratings, chosen by shuffle).
Split random_split(const Ratings& all, double test_fraction, std::uint64_t seed);
// Per user, a seeded random `test_fraction` of the user's ratings (rounded,
// at least one when the user has two or more) goes to test.
Split random_split_per_user(const Ratings& all, double test_fraction, std::uint64_t seed);
// Per user, the latest rating of each of the k most recently rated distinct
// items (by timestamp; file order when there are none) goes to test, and the
// user's other ratings of those items are dropped, so no held-out item was
// trained on; users with <= k distinct items keep all in train.
Split leave_k_out(const Ratings& all, std::size_t k);

}  // namespace asgd::sparse::mf
