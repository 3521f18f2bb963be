// Matrix factorization: readers, id maps, splits, and biased MF reaching the
// noise floor of planted data.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "../common/limited_child.hpp"
#include "../common/message_of.hpp"
#include "../common/scratch_dir.hpp"
#include "asgd/engine/checkpoint.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/sparse/mf/bpr.hpp"
#include "asgd/sparse/mf/generator.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/mf/model_file.hpp"
#include "asgd/sparse/mf/ratings.hpp"
#include "asgd/sparse/mf/recommend.hpp"

namespace fs = std::filesystem;
using namespace asgd::sparse::mf;

namespace {

using asgd::testing::message_of;

}  // namespace

TEST(Ratings, ReadsEveryFormatAndDetectsIt) {
  const auto udata = parse_ratings("196\t242\t3\t881250949\n186\t302\t3\t891717742\r\n\n", "u.data",
                                   RatingsFormat::detect);
  ASSERT_EQ(udata.size(), 2u);
  EXPECT_EQ(udata.users.name(udata.user[1]), "186");
  EXPECT_EQ(udata.timestamp[0], 881250949);
  const auto dat = parse_ratings("1::1193::5::978300760\n1::661::3::978302109", "ratings.dat", RatingsFormat::detect);
  ASSERT_EQ(dat.size(), 2u);
  EXPECT_EQ(dat.items.name(dat.item[0]), "1193");
  EXPECT_EQ(dat.users.size(), 1u);
  const auto csv = parse_ratings("userId,movieId,rating,timestamp\n1,1,4.0,964982703\n1,3,4.5,964981247\n",
                                 "ratings.csv", RatingsFormat::detect);
  ASSERT_EQ(csv.size(), 2u);
  EXPECT_FLOAT_EQ(csv.rating[1], 4.5f);
  const auto libmf = parse_ratings("alice item-7 2.5\n  bob\titem-7   4\n", "libmf", RatingsFormat::detect);
  ASSERT_EQ(libmf.size(), 2u);
  EXPECT_EQ(libmf.items.size(), 1u);
  EXPECT_FALSE(libmf.has_timestamps());
  EXPECT_EQ(libmf.users.name(libmf.user[1]), "bob");
  // Blanks after a comma (a hand-written or spreadsheet CSV) are not part of the ids or the rating.
  const auto spaced = parse_ratings("user, item, rating\nu1, i2, 4\nu1,i2 ,3.5\n", "spaced.csv", RatingsFormat::detect);
  ASSERT_EQ(spaced.size(), 2u);
  EXPECT_EQ(spaced.users.size(), 1u);
  EXPECT_EQ(spaced.items.size(), 1u);
  EXPECT_EQ(spaced.items.name(spaced.item[0]), "i2");
  EXPECT_FLOAT_EQ(spaced.rating[0], 4.0f);
}

TEST(Ratings, MalformedLinesNameFileLineAndExpectation) {
  auto msg = message_of([] { parse_ratings("1\t2\t3\t4\n1\t2\tx\t4\n", "u.data", RatingsFormat::udata); });
  EXPECT_NE(msg.find("u.data:2: expected a numeric rating"), std::string::npos) << msg;
  msg = message_of([] { parse_ratings("1::2::3::4\n1::2::3\n", "r.dat", RatingsFormat::dat); });
  EXPECT_NE(msg.find("r.dat:2: expected 4 fields"), std::string::npos) << msg;
  msg = message_of([] { parse_ratings("userId,movieId,rating,timestamp\n1,2,3,soon\n", "r.csv", RatingsFormat::csv); });
  EXPECT_NE(msg.find("r.csv:2: expected a numeric timestamp"), std::string::npos) << msg;
  msg = message_of([] { parse_ratings("a b\n", "m.txt", RatingsFormat::libmf); });
  EXPECT_NE(msg.find("m.txt:1: expected 3 fields"), std::string::npos) << msg;
  msg = message_of([] { parse_ratings("a b nan\n", "m.txt", RatingsFormat::libmf); });
  EXPECT_NE(msg.find("numeric rating"), std::string::npos) << msg;
  EXPECT_NE(message_of([] { parse_ratings("\n\n", "e", RatingsFormat::detect); }).find("no ratings"),
            std::string::npos);
  EXPECT_THROW(read_ratings("/nonexistent/ratings"), asgd::InputError);
  EXPECT_THROW(parse_ratings_format("xml"), asgd::InputError);
}

// Input without end is judged as it streams in and refused after a bounded amount, from a device or a pipe: before,
// it was read whole (std::bad_alloc, naming no file). Each read runs in a child that may take 512 MB more.
TEST(Ratings, BinaryOrEndlessInputIsRefusedAsItStreams) {
  const asgd::testing::ScratchDir dir;
  constexpr std::uint64_t kRoom = std::uint64_t{512} << 20;
  EXPECT_EQ(asgd::testing::message_in_limited_child(kRoom, [] { read_ratings("/dev/zero"); }),
            "/dev/zero:1: byte 0 is NUL: this looks like a binary file, not a ratings file");
  const fs::path fifo = dir / "fifo";
  // Good lines for ever (a pipe that never ends), one NUL among them, or a line without end.
  EXPECT_EQ(asgd::testing::message_in_limited_child(kRoom,
                                                    [&] {
                                                      asgd::testing::endless_fifo(fifo, std::string("1 2 3\n\0", 7));
                                                      read_ratings(fifo);
                                                    }),
            fifo.string() + ":2: byte 6 is NUL: this looks like a binary file, not a ratings file");
  EXPECT_EQ(asgd::testing::message_in_limited_child(kRoom,
                                                    [&] {
                                                      asgd::testing::endless_fifo(fifo, "1,2,");
                                                      read_ratings(fifo);
                                                    }),
            fifo.string() + ":1: line longer than 1048576 bytes, the limit for a ratings file");
  std::string line((std::size_t{1} << 20) + 1, 'x');
  EXPECT_EQ(message_of([&] { parse_ratings("1 2 3\n" + line + "\n", "r.txt", RatingsFormat::libmf); }),
            "r.txt:2: line longer than 1048576 bytes, the limit for a ratings file");
}

// What exports of ratings look like beyond MovieLens: no timestamps, a header with other names, a byte-order
// mark, timestamps as floats; each is read as the same ratings.
TEST(Ratings, TimestampsAreOptionalAndHeadersMayNameAnything) {
  const std::vector<std::pair<std::string, RatingsFormat>> same = {
      {"a\tx\t4\nb\ty\t2.5\n", RatingsFormat::detect},
      {"a::x::4\nb::y::2.5\n", RatingsFormat::detect},
      {"\xEF\xBB\xBFuser,item,stars\na,x,4\nb,y,2.5\n", RatingsFormat::detect},
  };
  for (std::size_t k = 0; k < same.size(); ++k) {
    const Ratings r = parse_ratings(same[k].first, "r", same[k].second);
    ASSERT_EQ(r.size(), 2u) << k;
    EXPECT_FALSE(r.has_timestamps()) << k;
    EXPECT_EQ(r.users.name(r.user[1]), "b") << k;
    EXPECT_EQ(r.items.name(r.item[0]), "x") << k;
    EXPECT_EQ(r.rating[1], 2.5f) << k;
  }
  const Ratings tsv = parse_ratings("user\titem\trating\ttime\na\tx\t4\t978300760.0\nb\ty\t2\t1.2e9\n", "r",
                                    RatingsFormat::detect);
  ASSERT_EQ(tsv.size(), 2u);
  EXPECT_EQ(tsv.timestamp, (std::vector<std::int64_t>{978300760, 1200000000}));
  // MovieLens's CSV names over tabs: the separator decides, not the names (was read as CSV and refused).
  EXPECT_EQ(parse_ratings("userId\tmovieId\trating\ttimestamp\n1\t2\t5\t100\n2\t1\t3\t200\n", "r",
                          RatingsFormat::detect)
                .size(),
            2u);
  // The data decide, not the header: three names over four fields, and four over three.
  const Ratings three = parse_ratings("user,item,rating\na,x,4,100\nb,y,2,101\n", "r", RatingsFormat::detect);
  ASSERT_EQ(three.size(), 2u);
  EXPECT_EQ(three.timestamp, (std::vector<std::int64_t>{100, 101}));
  const Ratings four = parse_ratings("user\titem\trating\ttime\na\tx\t4\nb\ty\t2\n", "r", RatingsFormat::detect);
  ASSERT_EQ(four.size(), 2u);
  EXPECT_FALSE(four.has_timestamps());
  // Every line as the first: a timestamp on one line and not the next is an error, not a guess.
  const auto msg = message_of([] { parse_ratings("a,x,4,5\nb,y,3\n", "r.csv", RatingsFormat::detect); });
  EXPECT_NE(msg.find("r.csv:2: expected 4 fields"), std::string::npos) << msg;
  // A first data line with a bad rating is an error, not a header: a header has no number in it.
  // Nor is one whose ids are names and whose rating is a missing-value mark.
  for (const char* text : {"1,10,,100\n1,11,4,101\n", "1\t10\tNA\t100\n1\t11\t4\t101\n", "1,10,4.0x\n1,11,4\n",
                           "alice,matrix,NA\nbob,matrix,4\n", "alice\tmatrix\tnull\nbob\tmatrix\t4\n"}) {
    const auto bad = message_of([&] { parse_ratings(text, "r", RatingsFormat::detect); });
    EXPECT_NE(bad.find("r:1: expected a numeric rating"), std::string::npos) << text << bad;
  }
  // A header is only a first line (a later non-numeric rating is an error), and not in LIBMF text.
  EXPECT_THROW(parse_ratings("a,x,4\nb,y,good\n", "r", RatingsFormat::detect), asgd::InputError);
  EXPECT_THROW(parse_ratings("user item rating\na x 4\n", "r", RatingsFormat::libmf), asgd::InputError);
}

// Numeric ids take an indexed fast path; names that only look numeric
// ("007", "-1", "1e3", ten digits) must stay distinct strings.
TEST(Ratings, IdMapKeepsNumericAndOtherNamesApart) {
  IdMap m;
  const std::vector<std::string> names = {"7", "007", "0", "00", "16777215", "16777216", "-1", "1e3", "x", "1234567890", "abcdefgh1", "abcdefgh2", "abcdefgh"};
  for (const auto& n : names) m.intern(n);
  ASSERT_EQ(m.size(), names.size());
  for (std::uint32_t id = 0; id < names.size(); ++id) {
    EXPECT_EQ(m.name(id), names[id]);
    EXPECT_EQ(m.intern(names[id]), id);
    EXPECT_EQ(m.find(names[id]), id);
  }
  EXPECT_FALSE(m.find("8"));
  EXPECT_FALSE(m.find("99999999"));
  EXPECT_FALSE(m.find("y"));
  EXPECT_EQ(m.intern("8"), names.size());
}

TEST(Ratings, IdMapsRoundTripThroughAFileAndAreShared) {
  const fs::path path = fs::temp_directory_path() / ("asgd-mf-" + std::to_string(::getpid()));
  const auto r = parse_ratings("x p 1\ny q 2\nx q 3\n", "in", RatingsFormat::libmf);
  write_ratings(path, r);
  const auto back = read_ratings(path);
  EXPECT_EQ(back.users.names(), r.users.names());
  EXPECT_EQ(back.items.names(), r.items.names());
  EXPECT_EQ(back.rating, r.rating);
  // A second file mapped with the first one's ids.
  const auto test = parse_ratings("y p 5\nz p 1\n", "test", RatingsFormat::libmf, &r);
  EXPECT_EQ(test.user[0], *r.users.find("y"));
  EXPECT_EQ(test.user[1], 2u);  // new user appended
  EXPECT_EQ(IdMap::from_names(r.users.names()).names(), r.users.names());
  EXPECT_THROW(IdMap::from_names({"a", "a"}), asgd::InputError);
  fs::remove(path);
}

TEST(Ratings, SplitsAreSeededAndLeaveKOutTakesTheLatest) {
  RatingsGeneratorOptions g;
  g.users = 50;
  g.items = 40;
  g.ratings = 600;
  const auto all = generate_ratings(g);
  const auto a = random_split(all, 0.1, 42), b = random_split(all, 0.1, 42), c = random_split(all, 0.1, 43);
  EXPECT_EQ(a.test.size(), 60u);
  EXPECT_EQ(a.train.size(), 540u);
  EXPECT_EQ(a.test.rating, b.test.rating);
  EXPECT_NE(a.test.rating, c.test.rating);
  const auto loo = leave_k_out(all, 1);
  std::set<std::uint32_t> users(loo.test.user.begin(), loo.test.user.end());
  EXPECT_EQ(users.size(), loo.test.size());  // one per user
  for (std::size_t i = 0; i < loo.test.size(); ++i) {
    for (std::size_t j = 0; j < loo.train.size(); ++j) {
      if (loo.train.user[j] == loo.test.user[i]) {
        EXPECT_LT(loo.train.timestamp[j], loo.test.timestamp[i]);
      }
    }
  }
}

// A log that repeats an interaction: the held-out item leaves the training part with every earlier rating of it
// (it stayed there, and the sampled protocol scored a trained item as unseen: HR@10 0.99 against 0.21 without
// the repeats). A user with one distinct item keeps it for training.
TEST(Ratings, LeaveKOutHoldsOutItemsTheModelNeverSees) {
  Ratings all;
  const auto add = [&](std::uint32_t u, std::uint32_t i, std::int64_t t) {
    all.user.push_back(u);
    all.item.push_back(i);
    all.rating.push_back(1.0f);
    all.timestamp.push_back(t);
  };
  all.users = IdMap::from_names({"u0", "u1", "u2"});
  all.items = IdMap::from_names({"i0", "i1", "i2"});
  add(0, 0, 1);
  add(0, 1, 2);
  add(0, 0, 3);  // u0's latest repeats i0
  add(1, 2, 1);
  add(1, 2, 2);  // u1 has one distinct item
  add(2, 1, 5);
  add(2, 2, 4);
  const auto loo = leave_k_out(all, 1);
  ASSERT_EQ(loo.test.size(), 2u);
  EXPECT_EQ(loo.test.user[0], 0u);
  EXPECT_EQ(loo.test.item[0], 0u);
  EXPECT_EQ(loo.test.timestamp[0], 3);
  EXPECT_EQ(loo.test.user[1], 2u);
  EXPECT_EQ(loo.test.item[1], 1u);
  for (std::size_t j = 0; j < loo.train.size(); ++j) {
    for (std::size_t i = 0; i < loo.test.size(); ++i) {
      EXPECT_FALSE(loo.train.user[j] == loo.test.user[i] && loo.train.item[j] == loo.test.item[i]) << j;
    }
  }
  EXPECT_EQ(loo.train.size(), 4u);  // u0: i1; u1: both; u2: i2
}

namespace {
// Planted rank-4 ratings with noise 0.5: ~180 ratings per user and ~360 per
// item, so estimation error stays small next to the noise and the floor is
// within reach. Trains 50 epochs (block schedule with `bins` > 0) and
// returns the held-out errors.
constexpr double kPlantedNoise = 0.5;
struct PlantedResult {
  ErrorMetrics test;
  std::size_t test_size = 0;
};
PlantedResult planted_run(std::size_t bins, std::size_t workers, bool libmf_form = false) {
  RatingsGeneratorOptions g;
  g.users = 1000;
  g.items = 500;
  g.ratings = 200000;
  g.rank = 4;
  g.noise = kPlantedNoise;
  const auto split = random_split(generate_ratings(g), 0.1, 42);
  MfOptions mo;
  mo.factors = 6;
  mo.l2 = 0.02f;
  mo.bias_l2 = 0.02f;
  mo.bins = bins;
  mo.center = !libmf_form;
  mo.scale_ratings = libmf_form;
  const BiasedMf problem(split.train, mo);
  auto store = asgd::ParamStore::on_heap(problem.layout());
  initialize_factors(store, 1, mo.init_scale);
  asgd::TrainerOptions o;
  o.workers = workers;
  o.epochs = 50;
  o.step_examples = 4096;
  o.blocks = bins > 0;
  o.schedule.kind = asgd::ScheduleKind::linear;
  o.schedule.lr = 0.02f;
  o.schedule.floor = 0.0f;
  const auto report = asgd::Trainer(store, o).run(problem);
  EXPECT_EQ(report.examples, 50u * split.train.size());  // every rating once per epoch
  return {evaluate_errors(store, problem.rating_scale(), split.test), split.test.size()};
}
}  // namespace

TEST(BiasedMf, BlockScheduleReachesTheNoiseFloorToo) {
  for (std::size_t workers : {1u, 2u, 3u}) {
    const double rmse = planted_run(2 * workers + 1, workers).test.rmse;
    EXPECT_LT(rmse, 1.05 * kPlantedNoise) << workers << " workers";
    EXPECT_GT(rmse, 0.9 * kPlantedNoise);
  }
}

// What one rating's gradient touches: the user and item rows, read back from the offsets of its dot product.
struct RowsTouched {
  std::size_t p = 0, q = 0, stride = 1;
  std::uint32_t user = 0, item = 0;
  void prefetch(std::size_t, std::size_t = 1) const noexcept {}
  float dot(std::size_t a, std::size_t b, std::size_t) noexcept {
    user = static_cast<std::uint32_t>((a - p) / stride);
    item = static_cast<std::uint32_t>((b - q) / stride);
    return 0;
  }
  float read(std::size_t) const noexcept { return 0; }
  void add_bilinear_gradient(std::size_t, std::size_t, std::size_t, float, float) noexcept {}
  void add_gradient(std::size_t, float) noexcept {}
  std::uint64_t epoch() const noexcept { return 0; }
};

// The block grid's groups are contiguous ids (so that two workers' rows, and the biases packed 16 to a cache line,
// are not interleaved) holding nearly equal numbers of ratings, on ratings whose items are Zipf-skewed.
TEST(BiasedMf, BlockGroupsAreContiguousIdsWithNearlyEqualRatings) {
  RatingsGeneratorOptions g;
  g.users = 500;
  g.items = 300;
  g.ratings = 40000;
  g.zipf = 1.0;
  const Ratings ratings = generate_ratings(g);
  MfOptions mo;
  mo.factors = 4;
  const std::size_t bins = 4;
  mo.bins = bins;
  const BiasedMf problem(ratings, mo, 3);
  const asgd::Layout layout = problem.layout();
  RowsTouched sink{layout["P"].offset, layout["Q"].offset, layout["P"].row_stride};
  ASSERT_EQ(layout["Q"].row_stride, sink.stride);
  std::vector<std::uint64_t> user_count(ratings.users.size()), item_count(ratings.items.size());
  for (std::size_t i = 0; i < ratings.size(); ++i) ++user_count[ratings.user[i]], ++item_count[ratings.item[i]];
  const std::uint64_t most_user = *std::max_element(user_count.begin(), user_count.end());
  const std::uint64_t most_item = *std::max_element(item_count.begin(), item_count.end());
  // Per block row r (and column c): the lowest and highest id its ratings touch, and how many ratings it holds.
  std::vector<std::uint32_t> user_lo(bins, UINT32_MAX), user_hi(bins, 0), item_lo(bins, UINT32_MAX), item_hi(bins, 0);
  std::vector<std::uint64_t> in_row(bins, 0), in_column(bins, 0);
  for (std::size_t r = 0; r < bins; ++r)
    for (std::size_t c = 0; c < bins; ++c) {
      const auto [first, last] = problem.block_range(r, c);
      for (std::uint64_t i = first; i < last; ++i) {
        problem.gradient(i, sink);
        user_lo[r] = std::min(user_lo[r], sink.user), user_hi[r] = std::max(user_hi[r], sink.user);
        item_lo[c] = std::min(item_lo[c], sink.item), item_hi[c] = std::max(item_hi[c], sink.item);
      }
      in_row[r] += last - first;
      in_column[c] += last - first;
    }
  const double share = static_cast<double>(ratings.size()) / bins;
  for (std::size_t b = 0; b < bins; ++b) {
    if (b > 0) {
      EXPECT_LT(user_hi[b - 1], user_lo[b]) << "user groups " << b - 1 << " and " << b << " overlap";
      EXPECT_LT(item_hi[b - 1], item_lo[b]) << "item groups " << b - 1 << " and " << b << " overlap";
    }
    EXPECT_NEAR(static_cast<double>(in_row[b]), share, static_cast<double>(most_user)) << "block row " << b;
    EXPECT_NEAR(static_cast<double>(in_column[b]), share, static_cast<double>(most_item)) << "block column " << b;
  }
}

TEST(BiasedMf, ReachesTheNoiseFloorOnPlantedData) {
  const auto r = planted_run(0, 2);
  EXPECT_EQ(r.test.count, r.test_size);
  EXPECT_LT(r.test.rmse, 1.05 * kPlantedNoise) << "noise floor " << kPlantedNoise;
  std::printf("test RMSE %.4f, noise floor %.2f\n", r.test.rmse, kPlantedNoise);
  EXPECT_GT(r.test.rmse, 0.9 * kPlantedNoise);  // below the floor would mean leakage
}

// LIBMF's form: ratings divided by their deviation, no mean. It fits as well
// (in rating units), and the scale is undone wherever a rating is predicted.
TEST(BiasedMf, LibmfsFormFitsRatingsScaledAndUncentred) {
  const auto r = planted_run(0, 2, true);
  EXPECT_LT(r.test.rmse, 1.05 * kPlantedNoise) << "noise floor " << kPlantedNoise;
  EXPECT_GT(r.test.rmse, 0.9 * kPlantedNoise);

  const Ratings train = parse_ratings("a x 5\na y 3\nb x 4\nb y 1\nc y 2\nd z 3\n", "train", RatingsFormat::libmf);
  MfOptions mo;
  mo.factors = 4;
  mo.center = false;
  mo.scale_ratings = true;
  const BiasedMf problem(train, mo, 1);
  const RatingScale& rs = problem.rating_scale();
  EXPECT_FLOAT_EQ(rs.mean, static_cast<float>(train.mean()));
  EXPECT_EQ(rs.offset, 0.0f);
  EXPECT_FLOAT_EQ(rs.scale, static_cast<float>(train.deviation()));
  EXPECT_NEAR(train.deviation(), std::sqrt((4.0 + 0.0 + 1.0 + 4.0 + 1.0 + 0.0) / 6), 1e-6);  // mean 3
  auto store = asgd::ParamStore::on_heap(problem.layout());
  initialize_factors(store, 1, 1.0f);
  asgd::TrainerOptions o;
  o.workers = 1;
  o.epochs = 20;
  o.schedule.lr = 0.05f;
  const auto report = asgd::Trainer(store, o).run(problem);
  const FactorLayout f = FactorLayout::of(store.layout());
  // The loss is in squared rating units: what the predictions' errors say, up to the updates within the epoch.
  const ErrorMetrics on_train = evaluate_errors(store, rs, train);
  EXPECT_NEAR(2.0 * report.epochs.back().loss, on_train.rmse * on_train.rmse, 0.25 * on_train.rmse * on_train.rmse + 1e-3);
  float sum = store.load(f.user_bias + 1) + store.load(f.item_bias + 0);  // b rates x
  for (std::size_t c = 0; c < f.factors; ++c) sum += store.load(f.p + 1 * f.stride + c) * store.load(f.q + c);
  EXPECT_NEAR(predict(store, f, rs, 1, 0), rs.scale * sum, 1e-5);
  // A cold or unknown side predicts the mean plus the known side's bias measured from its side's mean bias, never
  // 0 (d and z are cold here), and not the mean plus the bias itself: not centred, the biases hold the mean.
  const ColdIds cold{{3}, {2}};
  const RatingScale known = with_bias_means(rs, store, &cold);
  const float b_x = store.load(f.item_bias + 0), b_y = store.load(f.item_bias + 1);
  EXPECT_FLOAT_EQ(known.item_bias_mean, (b_x + b_y) / 2);  // z is cold
  EXPECT_FLOAT_EQ(predict_or_fallback(store, f, known, 3, 0, &cold), rs.mean + rs.scale * (b_x - known.item_bias_mean));
  EXPECT_FLOAT_EQ(predict_or_fallback(store, f, known, 3, 2, &cold), rs.mean);
  EXPECT_FLOAT_EQ(predict_or_fallback(store, f, known, 9, 9), rs.mean);
  EXPECT_NE(predict_or_fallback(store, f, known, 3, 2), rs.mean);  // without `cold`: d's row and z's, as trained
  // evaluate_errors finds the mean biases itself, from the scale as the problem gives it.
  const Ratings d_rates_x = parse_ratings("d x 3\n", "test", RatingsFormat::libmf, &train);
  EXPECT_NEAR(evaluate_errors(store, rs, d_rates_x, 0, 0, &cold).rmse,
              std::abs(predict_or_fallback(store, f, known, 3, 0, &cold) - 3.0f), 1e-6);
  EXPECT_FLOAT_EQ(with_bias_means(problem.rating_scale(), store).item_bias_mean, (b_x + b_y + store.load(f.item_bias + 2)) / 3);
  // recommend() scores as predict() does.
  const std::vector<std::uint32_t> users = {1};
  const auto lists = recommend(store, rs, nullptr, users, 3);
  ASSERT_EQ(lists[0].size(), 3u);
  for (const auto& item : lists[0]) EXPECT_NEAR(item.score, predict(store, f, rs, 1, item.item), 1e-5);
}

// LIBMF's first epoch (MfOptions::head_first, with row AdaGrad's row head):
// only the first 8 factors of each row move, the rest (and their sums) wait
// for the second epoch; the prediction uses them all throughout.
TEST(BiasedMf, HeadFirstTrainsTheHeadAloneInTheFirstEpoch) {
  RatingsGeneratorOptions g;
  g.users = 200;
  g.items = 100;
  g.ratings = 5000;
  const auto all = generate_ratings(g);
  MfOptions mo;
  mo.factors = 16;
  mo.biases = false;
  mo.center = false;
  mo.head_first = 8;
  const BiasedMf problem(all, mo);
  auto store = asgd::ParamStore::on_heap(problem.layout());
  initialize_factors(store, 2, 1.0f);
  const std::vector<float> start = store.snapshot();
  asgd::TrainerOptions o;
  o.workers = 1;
  o.epochs = 2;
  o.schedule.lr = 0.1f;
  o.schedule.row_adagrad = true;
  o.schedule.row_head = 8;
  asgd::Trainer trainer(store, o);
  trainer.run(problem, 1);
  const FactorLayout f = FactorLayout::of(store.layout());
  std::size_t head_moved = 0;
  for (std::size_t u = 0; u < f.users; ++u)
    for (std::size_t c = 0; c < f.factors; ++c) {
      const std::size_t at = f.p + u * f.stride + c;
      if (c >= 8) EXPECT_EQ(store.load(at), start[at]) << "user " << u << " factor " << c;
      else head_moved += store.load(at) != start[at];
    }
  EXPECT_GT(head_moved, f.users * 8 / 2);
  trainer.run(problem, 2);
  std::size_t tail_moved = 0;
  for (std::size_t c = 8; c < f.factors; ++c) tail_moved += store.load(f.p + c) != start[f.p + c];
  EXPECT_GT(tail_moved, 0u) << "the second epoch trains the whole rows";
}

TEST(Recommend, TopKIsTheBestUnseenItemsBestFirst) {
  RatingsGeneratorOptions g;
  g.users = 300;
  g.items = 200;
  g.ratings = 12000;
  const auto all = generate_ratings(g);
  MfOptions mo;
  mo.factors = 8;
  const BiasedMf problem(all, mo);
  auto store = asgd::ParamStore::on_heap(problem.layout());
  initialize_factors(store, 3, mo.init_scale);
  asgd::TrainerOptions o;
  o.epochs = 3;
  o.schedule.lr = 0.02f;
  asgd::Trainer(store, o).run(problem);
  const SeenItems seen(all, g.users);
  std::vector<std::uint32_t> users(g.users);
  for (std::uint32_t u = 0; u < g.users; ++u) users[u] = u;
  const auto lists = recommend(store, problem.rating_scale(), &seen, users, 10, 64);
  const auto f = FactorLayout::of(store.layout());
  for (std::uint32_t u = 0; u < g.users; ++u) {
    ASSERT_EQ(lists[u].size(), 10u);
    // Brute force: every unseen item's prediction, sorted.
    std::vector<std::pair<float, std::uint32_t>> all_scores;
    for (std::uint32_t i = 0; i < g.items; ++i) {
      if (!seen.contains(u, i)) all_scores.push_back({-predict(store, f, problem.rating_scale(), u, i), i});
    }
    std::sort(all_scores.begin(), all_scores.end());
    for (std::size_t j = 0; j < 10; ++j) {
      EXPECT_FALSE(seen.contains(u, lists[u][j].item)) << "user " << u << " was recommended a seen item";
      EXPECT_NEAR(lists[u][j].score, -all_scores[j].first, 1e-4) << "user " << u << " rank " << j;
    }
  }
  // Without exclusion a user's seen items may come back; k larger than the catalogue is cut.
  const std::vector<std::uint32_t> one = {0};
  EXPECT_EQ(recommend(store, problem.rating_scale(), nullptr, one, 1000)[0].size(), g.items);
}

// The block schedule resumed from a checkpoint whose example count is not
// this problem's (rank 0's, under mpirun with unequal shards) takes the
// uninterrupted run's rates and blocks: the same factors, bit for bit.
TEST(BiasedMf, ABlockScheduleResumesAsTheUninterruptedRun) {
  RatingsGeneratorOptions g;
  g.users = 200;
  g.items = 100;
  g.ratings = 5000;
  MfOptions mo;
  mo.factors = 4;
  mo.bins = 3;
  const BiasedMf problem(generate_ratings(g), mo);
  asgd::TrainerOptions o;
  o.workers = 1;  // one worker: a deterministic run
  o.epochs = 6;
  o.blocks = true;
  o.schedule.kind = asgd::ScheduleKind::linear;
  o.schedule.lr = 0.02f;
  const auto fresh = [&] {
    auto store = asgd::ParamStore::on_heap(problem.layout());
    initialize_factors(store, 1, mo.init_scale);
    return store;
  };
  auto whole = fresh();
  asgd::Trainer(whole, o).run(problem);
  const fs::path ckpt = fs::temp_directory_path() / ("asgd-mf-blocks-" + std::to_string(::getpid()));
  {
    auto store = fresh();
    asgd::Trainer t(store, o);
    t.run(problem, 3);
    auto state = t.state();
    state.examples += 7;
    asgd::save_checkpoint(ckpt, store, state, {});
  }
  auto resumed = fresh();
  asgd::Trainer t(resumed, o);
  t.load_checkpoint(ckpt);
  t.run(problem);
  EXPECT_EQ(resumed.snapshot(), whole.snapshot());
  fs::remove(ckpt);
}

// BPR's per-user split holds out about the fraction of each user's
// positives, yet always leaves one to train on: a user with none would be
// scored on its random start.
TEST(Ratings, APerUserSplitLeavesEveryUserSomethingToTrainOn) {
  Ratings all;
  for (int u = 0; u < 50; ++u) {
    for (int k = 0; k <= u % 4; ++k) {  // 1 to 4 positives each
      all.user.push_back(all.users.intern("u" + std::to_string(u)));
      all.item.push_back(all.items.intern("i" + std::to_string(k)));
      all.rating.push_back(5.0f);
    }
  }
  for (const double fraction : {0.2, 0.5, 0.9}) {
    const Split s = random_split_per_user(all, fraction, 7);
    EXPECT_EQ(s.train.size() + s.test.size(), all.size());
    std::set<std::uint32_t> trained(s.train.user.begin(), s.train.user.end());
    EXPECT_EQ(trained.size(), 50u) << "fraction " << fraction;
  }
}

// Ids first seen in a validation file (rows in the model, no training rating) and ids outside the model both
// predict from the mean and the biases that are known, every test rating counts in the errors, and items never
// trained are never recommended.
TEST(BiasedMf, UntrainedAndUnknownIdsPredictFromTheMeanAndKnownBiases) {
  const Ratings train = parse_ratings("a x 5\na y 3\nb x 4\nb y 1\nc y 2\n", "train", RatingsFormat::libmf);
  // d and z only in the validation file: rows, never trained.
  const Ratings validation = parse_ratings("d x 4\na z 3\n", "val", RatingsFormat::libmf, &train);
  Ratings with_rows = train;
  with_rows.users = validation.users;
  with_rows.items = validation.items;
  MfOptions mo;
  mo.factors = 4;
  const BiasedMf problem(with_rows, mo, 1);
  auto store = asgd::ParamStore::on_heap(problem.layout());
  initialize_factors(store, 1, mo.init_scale, &with_rows);
  const FactorLayout f = FactorLayout::of(store.layout());
  ASSERT_EQ(f.users, 4u);
  ASSERT_EQ(f.items, 3u);
  const ColdIds cold = cold_ids(f.users, f.items, with_rows);
  EXPECT_EQ(cold.users, std::vector<std::uint32_t>{3});  // d
  EXPECT_EQ(cold.items, std::vector<std::uint32_t>{2});  // z
  for (std::size_t c = 0; c < f.factors; ++c) {
    EXPECT_EQ(store.load(f.p + 3 * f.stride + c), 0.0f);
    EXPECT_EQ(store.load(f.q + 2 * f.stride + c), 0.0f);
    EXPECT_NE(store.load(f.p + 0 * f.stride + c), 0.0f);
  }
  // The trained rows start as they would without `trained`.
  auto plain = asgd::ParamStore::on_heap(problem.layout());
  initialize_factors(plain, 1, mo.init_scale);
  for (std::size_t c = 0; c < f.factors; ++c) EXPECT_EQ(plain.load(f.q + 1 * f.stride + c), store.load(f.q + 1 * f.stride + c));

  asgd::TrainerOptions o;
  o.workers = 1;
  o.epochs = 30;
  o.schedule.lr = 0.05f;
  asgd::Trainer(store, o).run(problem);
  const float mean = problem.global_mean();
  const RatingScale& rs = problem.rating_scale();
  const float b_x = store.load(f.item_bias + 0), b_a = store.load(f.user_bias + 0);
  EXPECT_NE(b_x, 0.0f);
  EXPECT_FLOAT_EQ(predict(store, f, rs, 3, 0), mean + b_x);  // d (a zero row) rates x
  EXPECT_FLOAT_EQ(predict_or_fallback(store, f, rs, 7, 0), mean + b_x);  // a user outside the model
  EXPECT_FLOAT_EQ(predict_or_fallback(store, f, rs, 0, 9), mean + b_a);  // an item outside the model
  EXPECT_FLOAT_EQ(predict_or_fallback(store, f, rs, 7, 9), mean);

  // Every rating counts; `known` says how many pairs the model has.
  const Ratings test = parse_ratings("a x 5\nnew x 4\na new 3\n", "test", RatingsFormat::libmf, &with_rows);
  const ErrorMetrics e = evaluate_errors(store, rs, test);
  EXPECT_EQ(e.count, 3u);
  EXPECT_EQ(e.known, 1u);
  const double e0 = predict(store, f, rs, 0, 0) - 5.0, e1 = mean + b_x - 4.0, e2 = mean + b_a - 3.0;
  EXPECT_NEAR(e.rmse, std::sqrt((e0 * e0 + e1 * e1 + e2 * e2) / 3), 1e-5);
  Ratings empty = test.subset({});
  EXPECT_TRUE(std::isnan(evaluate_errors(store, rs, empty).rmse));

  // z is never recommended; with x excluded for a, only y is left.
  const std::vector<std::uint32_t> users = {0, 3};
  const auto lists = recommend(store, rs, nullptr, users, 10, 128, cold.items);
  ASSERT_EQ(lists[0].size(), 2u);
  for (const auto& r : lists[1]) EXPECT_NE(r.item, 2u);
  const SeenItems seen(parse_ratings("a x 1\na z 1\na z 1\n", "seen", RatingsFormat::libmf, &with_rows), f.users);
  const auto without = recommend(store, rs, &seen, users, 10, 128, cold.items);
  ASSERT_EQ(without[0].size(), 1u);
  EXPECT_EQ(without[0][0].item, 1u);
}

// Ratings built in memory meet the checks the readers make: a model refuses ids assigned by hand past the maps
// (it sized itself from the maps and would index past its rows), lengths that differ, and a NaN.
TEST(Ratings, InMemoryRatingsAreCheckedAsTheReadersCheckTheirs) {
  Ratings r;
  r.add("a", "x", 4);
  r.add("b", "y", 2);
  r.add("a", "y", 3);
  EXPECT_EQ(r.users.size(), 2u);
  EXPECT_EQ(r.item[2], 1u);
  EXPECT_NE(message_of([&] { r.add("c", "x", std::nanf("")); }).find("expected a finite number"),
            std::string::npos);
  EXPECT_EQ(r.size(), 3u);
  EXPECT_NO_THROW(BiasedMf(r, {}, 1));

  Ratings by_hand = r;
  by_hand.user.push_back(5);  // no sixth user in the maps
  by_hand.item.push_back(0);
  by_hand.rating.push_back(1);
  for (const auto& [model, run] :
       {std::pair<std::string, std::function<void()>>{"mf", [&] { BiasedMf(by_hand, {}, 1); }},
        std::pair<std::string, std::function<void()>>{"bpr", [&] { BprMf(by_hand, {}, 1); }}}) {
    const auto msg = message_of(run);
    EXPECT_NE(msg.find(model + ": rating 3 has user id 5"), std::string::npos) << msg;
  }
  Ratings short_items = r;
  short_items.item.pop_back();
  short_items.item.shrink_to_fit();  // read past, AddressSanitizer would see it
  EXPECT_NE(message_of([&] { BiasedMf(short_items, {}, 1); }).find("expected one each"), std::string::npos);
  EXPECT_NE(message_of([&] { BprMf(short_items, {}, 1); }).find("bpr: 3 ratings with 3 user ids, 2 item ids"),
            std::string::npos);
  Ratings nan = r;
  nan.rating[1] = std::nanf("");
  EXPECT_NE(message_of([&] { BiasedMf(nan, {}, 1); }).find("mf: rating 1 is nan"), std::string::npos);
}

// A test set with maps of its own numbers its ids from 0: evaluated as it is, it would score other users' pairs.
// The evaluations refuse it; remap_ids gives it the model's ids, as reading it with the training maps does.
TEST(BiasedMf, EvaluationsRefuseRatingsWhoseIdsAreNotTheModels) {
  Ratings train;
  for (int u = 0; u < 4; ++u)
    for (int i = 0; i < 3; ++i) train.add("u" + std::to_string(u), "i" + std::to_string(i), 1.0f + u + i);
  BiasedMf problem(train, {}, 1);
  auto store = asgd::ParamStore::on_heap(problem.layout());
  initialize_factors(store, 1, 0.1f);
  asgd::TrainerOptions o;
  o.workers = 1;
  o.epochs = 5;
  asgd::Trainer(store, o).run(problem);

  Ratings own;  // "u3" is its user 0
  own.add("u3", "i2", 6);
  own.add("new", "i0", 2);
  const auto msg = message_of([&] { evaluate_errors(store, problem.rating_scale(), own); });
  EXPECT_NE(msg.find("evaluate: the ratings' ids are not the model's"), std::string::npos) << msg;
  EXPECT_NE(message_of([&] { initialize_factors(store, 1, 0.1f, &own); }).find("not the model's"),
            std::string::npos);

  const Ratings mapped = remap_ids(own, train);
  EXPECT_EQ(mapped.user[0], 3u);
  EXPECT_EQ(mapped.user[1], 4u);  // new: after the model's users
  EXPECT_EQ(mapped.users.size(), 5u);
  const Ratings read = parse_ratings("u3 i2 6\nnew i0 2\n", "test", RatingsFormat::libmf, &train);
  const ErrorMetrics a = evaluate_errors(store, problem.rating_scale(), mapped);
  const ErrorMetrics b = evaluate_errors(store, problem.rating_scale(), read);
  EXPECT_EQ(a.known, 1u);
  EXPECT_EQ(a.rmse, b.rmse);
  EXPECT_EQ(a.mae, b.mae);

  // Serving: an id from a request past the model is refused, not read past the rows, and so are seen lists that
  // cover fewer users than the model (those users would have nothing excluded).
  const std::vector<std::uint32_t> past = {4};
  EXPECT_NE(message_of([&] { recommend(store, problem.rating_scale(), nullptr, past, 3); })
                .find("recommend: user 4: the model has 4 users"),
            std::string::npos);
  const FactorLayout f = FactorLayout::of(store.layout());
  EXPECT_NE(message_of([&] { predict(store, f, problem.rating_scale(), 0, 3); }).find("predict: user 0 and item 3"),
            std::string::npos);
  const SeenItems too_few(train, 2);
  const std::vector<std::uint32_t> first = {0};
  EXPECT_NE(message_of([&] { recommend(store, problem.rating_scale(), &too_few, first, 3); })
                .find("the seen items cover 2 users, the model has 4"),
            std::string::npos);
  const SeenItems all(train, f.users);
  EXPECT_TRUE(recommend(store, problem.rating_scale(), &all, first, 3)[0].empty());  // u0 has rated every item
}

// A model file whose metadata is damaged: each fault named with the file and the key in plain words (before: an id
// listed twice was "id map: '1' appears twice", naming no file; a key of another kind leaked the JSON library's
// exception text, or escaped as its exception).
TEST(ModelFile, DamagedMetadataNamesTheFileAndWhatInIt) {
  Ratings train;
  train.add("1", "x", 1);
  train.add("2", "y", 5);
  MfOptions mo;
  mo.factors = 2;
  BiasedMf problem(train, mo, 1);
  auto store = asgd::ParamStore::on_heap(problem.layout());
  const std::string good = model_metadata(train, {}, problem.rating_scale(), mo, "squared");
  const fs::path path = fs::temp_directory_path() / ("asgd-damaged-model-" + std::to_string(::getpid()));
  const auto read_with = [&](const std::string& from, const std::string& to) {
    std::string metadata = good;
    const auto at = metadata.find(from);
    EXPECT_NE(at, std::string::npos) << from << " in " << metadata;
    metadata.replace(at, from.size(), to);
    asgd::save_checkpoint(path, store, {1, 2, 1}, {}, metadata);
    return message_of([&] { read_model_info(asgd::read_checkpoint(path), path); });
  };
  const std::string malformed = path.string() + ": its metadata is malformed: ";
  struct Case {
    std::string from, to, message;
  };
  const Case cases[] = {
      {R"("users":["1","2"])", R"("users":["1","1"])", malformed + "users: '1' is listed twice (as ids 0 and 1)"},
      {R"("items":["x","y"])", R"("items":["x","\u0007","\u0007"])",
       malformed + "items: '\\x07' is listed twice (as ids 1 and 2)"},
      {R"("users":["1","2"])", R"("users":[1,2])", malformed + "users holds 1 at position 1, not a string"},
      {R"("mean":)", R"("nomean":)", path.string() + ": its metadata has no 'mean'"},
      {R"("loss":"squared")", R"("loss":5)", malformed + "loss is 5, not a string"},
      {R"("loss":"squared")", R"("loss":"bpr2")", malformed + "loss 'bpr2', expected squared or bpr"},
      {R"("scale":1.0)", R"("scale":0)", malformed + "scale 0, expected > 0"},
      {R"("scale":1.0)", R"("scale":1e300)", malformed + "scale is 1e+300, not a finite float"},
      {R"("min_rating":1.0)", R"("min_rating":9.0)", malformed + "min_rating 9 above max_rating 5"},
      {R"("factors")", R"("cold_users":"x","factors")", malformed + "cold_users is \"x\", not a list"},
      {R"("offset":)", R"("offset":"3","x":)", malformed + "offset is not a number"},
      {R"("factors")", R"("cold_items":[-1],"factors")",
       malformed + "cold_items holds -1, not a row number"},
      {R"("factors")", R"("cold_items":[4294967296],"factors")",
       malformed + "cold_items holds 4294967296, not a row number"},
      {R"("model":"mf")", R"("model":5)", path.string() + ": not an asgd mf model"},
  };
  for (const auto& c : cases) {
    const std::string message = read_with(c.from, c.to);
    EXPECT_EQ(message, c.message);
    EXPECT_EQ(message.find("json"), std::string::npos) << message;
  }
  fs::remove(path);
}

TEST(Ratings, PositivesAreTheRatingsAtOrAboveTheThresholdWithTheSameIds) {
  Ratings r;
  r.add("a", "x", 5);
  r.add("b", "y", 3);
  r.add("c", "x", 4);
  const Ratings p = positives_of(r, 4);
  EXPECT_EQ(p.size(), 2u);
  EXPECT_EQ(p.rating, (std::vector<float>{5, 4}));
  EXPECT_EQ(p.users.size(), 3u);  // every id keeps its row, positive or not
  EXPECT_EQ(p.user, (std::vector<std::uint32_t>{0, 2}));
}

// A model file through the library alone: what `asgd mf train` writes, read back with what serving needs (ids,
// scale, range, cold rows); names that are not UTF-8 byte for byte; a file whose names were changed is refused.
TEST(ModelFile, RoundTripsWhatServingNeedsAndRefusesOtherNames) {
  Ratings train;
  train.add("a", "x", 1);
  train.add("b\xff", "y", 5);  // not UTF-8: kept as hex
  train.add("a", "y", 4);
  train.items.intern("z");      // an id only a test file had: a cold row
  MfOptions mo;
  mo.factors = 4;
  BiasedMf problem(train, mo, 1);
  auto store = asgd::ParamStore::on_heap(problem.layout());
  initialize_factors(store, 1, mo.init_scale, &train);
  const ColdIds cold = cold_ids(train.users.size(), train.items.size(), train);
  const fs::path path = fs::temp_directory_path() / ("asgd-model-file-" + std::to_string(::getpid()));
  asgd::save_checkpoint(path, store, {1, 3, 1}, {},
                        model_metadata(train, cold, problem.rating_scale(), mo, "squared"));
  const asgd::CheckpointData d = asgd::read_checkpoint(path);
  const ModelInfo info = read_model_info(d, path);
  EXPECT_EQ(info.loss, "squared");
  EXPECT_EQ(info.users.names(), train.users.names());
  EXPECT_EQ(info.items.names(), train.items.names());
  EXPECT_EQ(info.cold.items, std::vector<std::uint32_t>{2});
  EXPECT_FLOAT_EQ(info.scale.mean, problem.rating_scale().mean);
  EXPECT_FLOAT_EQ(info.range.lo, 1.0f);
  EXPECT_FLOAT_EQ(info.range.hi, 5.0f);
  // load_model: the same, with the factors (row padding and all) and the epochs the file holds.
  const LoadedModel loaded = load_model(path);
  EXPECT_EQ(loaded.users.names(), train.users.names());
  EXPECT_EQ(loaded.epochs, 1u);
  ASSERT_TRUE(loaded.store.has_value());
  EXPECT_EQ(loaded.store->snapshot(), store.snapshot());
  EXPECT_EQ(loaded.store->layout().hash(), store.layout().hash());
  // With a segment, the factors are the segment's, live: the file gives the ids.
  const std::string shm = "asgd-test-model-file-" + std::to_string(::getpid());
  {
    auto live = asgd::ParamStore::create_shared(shm, problem.layout());
    live.assign(store.snapshot());
    live.store(0, 42.0f);
    const LoadedModel served = load_model(path, shm);
    EXPECT_TRUE(served.store->is_shared());
    EXPECT_EQ(served.store->load(0), 42.0f);
    EXPECT_EQ(served.items.names(), train.items.names());
  }
  asgd::ParamStore::remove_shared(shm);

  Ratings renamed = train;
  renamed.users = IdMap::from_names({"b\xff", "a"});  // the rows' ids swapped
  asgd::save_checkpoint(path, store, {1, 3, 1}, {},
                        model_metadata(renamed, cold, problem.rating_scale(), mo, "squared"));
  auto msg = message_of([&] { read_model_info(asgd::read_checkpoint(path), path); });
  EXPECT_NE(msg.find("its ids are not the ones its factors were trained with"), std::string::npos) << msg;
  asgd::save_checkpoint(path, store, {1, 3, 1}, {}, R"({"model": "linear"})");
  msg = message_of([&] { read_model_info(asgd::read_checkpoint(path), path); });
  EXPECT_NE(msg.find("not an asgd mf model"), std::string::npos) << msg;
  fs::remove(path);
}
