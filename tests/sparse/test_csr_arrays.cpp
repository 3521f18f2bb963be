// dataset_from_csr: scipy's CSR arrays become the SparseDataset a linear model trains on, with the bias feature
// when asked, and an array that is wrong is named with its row.
#include "asgd/sparse/csr_arrays.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/message_of.hpp"

namespace asgd::sparse {
namespace {

using asgd::testing::message_of;

// Two rows: {0: 1.5, 2: -2} labelled +1 and {1: 0.25} labelled -1, three features wide.
struct TwoRows {
  std::vector<std::int64_t> indptr{0, 2, 3}, indices{0, 2, 1};
  std::vector<float> values{1.5f, -2.0f, 0.25f}, labels{1.0f, -1.0f};
  CsrArrays arrays(float bias = 0) const {
    return {.indptr = indptr, .indices = indices, .values = values, .labels = labels, .features = 3, .bias = bias};
  }
};

TEST(CsrArrays, BecomeTheDatasetTheyDescribe) {
  const TwoRows rows;
  const SparseDataset d = dataset_from_csr(rows.arrays());
  EXPECT_EQ(d.row_ptr, (std::vector<std::uint64_t>{0, 2, 3}));
  EXPECT_EQ(d.index, (std::vector<std::uint32_t>{0, 2, 1}));
  EXPECT_EQ(d.value, rows.values);
  EXPECT_EQ(d.label, rows.labels);
  EXPECT_EQ(d.num_features, 3u);
  EXPECT_NO_THROW(d.validate());
  // scipy's 32-bit ids, taken as they are, give the same dataset.
  const std::vector<std::int32_t> indptr32{0, 2, 3}, indices32{0, 2, 1};
  const SparseDataset d32 = dataset_from_csr(CsrArrays32{.indptr = indptr32,
                                                         .indices = indices32,
                                                         .values = rows.values,
                                                         .labels = rows.labels,
                                                         .features = 3,
                                                         .bias = 0});
  EXPECT_EQ(d32.row_ptr, d.row_ptr);
  EXPECT_EQ(d32.index, d.index);
  EXPECT_EQ(d32.value, d.value);
  EXPECT_EQ(d32.label, d.label);
  EXPECT_EQ(d32.num_features, d.num_features);
}

TEST(CsrArrays, ABiasIsOneMoreFeatureInEveryRow) {
  const TwoRows rows;
  const SparseDataset d = dataset_from_csr(rows.arrays(1.0f));
  EXPECT_EQ(d.num_features, 4u);
  EXPECT_EQ(d.row_ptr, (std::vector<std::uint64_t>{0, 3, 5}));
  EXPECT_EQ(d.index, (std::vector<std::uint32_t>{0, 2, 3, 1, 3}));
  EXPECT_EQ(d.value, (std::vector<float>{1.5f, -2.0f, 1.0f, 0.25f, 1.0f}));
  // A row with no features still gets the bias: an intercept applies to every example.
  const std::vector<std::int64_t> indptr{0, 0};
  const SparseDataset empty_row = dataset_from_csr(
      CsrArrays{.indptr = indptr, .indices = {}, .values = {}, .labels = {}, .features = 5, .bias = 2.0f});
  EXPECT_EQ(empty_row.index, (std::vector<std::uint32_t>{5}));
  EXPECT_EQ(empty_row.value, (std::vector<float>{2.0f}));
  EXPECT_EQ(empty_row.label, (std::vector<float>{1.0f}));  // no labels: data to score
}

TEST(CsrArrays, AWrongArrayIsNamedWithItsRow) {
  TwoRows rows;
  rows.values[2] = NAN;
  EXPECT_EQ(message_of([&] { dataset_from_csr(rows.arrays()); }),
            "CsrArrays::values: row 1, feature 1: nan, expected finite");
  rows = TwoRows();
  rows.indices[1] = 3;
  EXPECT_EQ(message_of([&] { dataset_from_csr(rows.arrays()); }),
            "CsrArrays::indices: row 0: feature id 3, expected 0 to 2");
  rows.indices[1] = 0;
  EXPECT_EQ(message_of([&] { dataset_from_csr(rows.arrays()); }),
            "CsrArrays::indices: row 0: feature ids not strictly increasing (0 after 0)");
  rows = TwoRows();
  rows.labels[1] = 0.0f;
  EXPECT_EQ(message_of([&] { dataset_from_csr(rows.arrays()); }), "CsrArrays::labels: row 1: 0, expected +1 or -1");
  rows.labels.pop_back();
  EXPECT_EQ(message_of([&] { dataset_from_csr(rows.arrays()); }), "CsrArrays::labels: 1 labels for 2 rows");
  rows = TwoRows();
  rows.indptr = {0, 3, 2};
  EXPECT_EQ(message_of([&] { dataset_from_csr(rows.arrays()); }),
            "CsrArrays::indptr: ends at 2, expected the 3 CsrArrays::indices");
  rows.indptr = {0, 3, 3};
  rows.indptr[1] = -1;
  EXPECT_EQ(message_of([&] { dataset_from_csr(rows.arrays()); }), "CsrArrays::indptr: row 0 runs from 0 to -1");
  rows = TwoRows();
  EXPECT_EQ(message_of([&] { dataset_from_csr(rows.arrays(-1.0f)); }), "CsrArrays::bias -1: expected finite and >= 0");
  CsrArrays wide = rows.arrays(1.0f);
  wide.features = std::uint64_t{kMaxFeatureId} + 1;
  EXPECT_EQ(message_of([&] { dataset_from_csr(wide); }),
            "CsrArrays::features 2147483648: wider than the 2^31 a model takes (with the bias feature)");
  EXPECT_EQ(message_of([&] { dataset_from_csr(CsrArrays{}); }),
            "CsrArrays::indptr: empty, expected rows + 1 entries (a 0 first)");
}

}  // namespace
}  // namespace asgd::sparse
