// Ratings files, in the format ASGD_FUZZ_RATINGS (udata, dat, csv or libmf; one target each), and detected.
#include <cmath>
#include <cstdint>

#include "asgd/sparse/mf/ratings.hpp"
#include "fuzz_input.hpp"

using namespace asgd;
using sparse::mf::RatingsFormat;

namespace {

void check(const sparse::mf::Ratings& r) {
  r.check("fuzzed ratings");  // what the models require of a training set (InputError is a finding here)
  fuzz::require(r.user.size() == r.size() && r.item.size() == r.size(), "one user and item per rating");
  fuzz::require(!r.has_timestamps() || r.timestamp.size() == r.size(), "timestamps for some ratings only");
  for (const float v : r.rating) fuzz::require(std::isfinite(v), "a rating that is not finite");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile file("ratings");
  const auto& path = file.write({data, size});
  for (const RatingsFormat format : {RatingsFormat::ASGD_FUZZ_RATINGS, RatingsFormat::detect}) {
    sparse::mf::Ratings r;
    if (!fuzz::reads({path.string()}, [&] { r = sparse::mf::read_ratings(path, format); })) continue;
    if (!fuzz::reads({}, [&] { check(r); })) fuzz::finding("read_ratings returned ratings that check() refuses");
  }
  return 0;
}
