// Sparse labelled datasets (CSR) and the libsvm text format: read, parse, write.
// A linear model over a dataset indexes its weights directly by feature id.
//
// Format, one example per line:
//
//   label id:value id:value ...   # optional comment
//
//  * label: a number equal to +1, -1 or 0, in any spelling std::from_chars
//    reads (1, +1, 1.0, -1, 0, ...). 0 means -1 (the {0,1} convention), so
//    labels are always stored as +1.0f / -1.0f. Any other value (2, 0.5, a
//    class name) is an error: multi-class and regression files are not binary
//    classification, and guessing a mapping would train the wrong model.
//  * id: a decimal integer in 0..2^31-1 (kMaxFeatureId). Ids are used as they
//    are, not remapped: the weight vector has num_features = max id + 1
//    entries, i.e. 4 bytes x num_features of memory, however few ids occur.
//    A file with ids near 2^31 therefore needs 8 GiB of weights, and
//    `asgd linear train` twice that at its peak (the parameters and the
//    model's per-feature regulariser weights; measured: 2.1 GB for ids up
//    to 2^28 - 1), more with --test (a copy of the weights and a second
//    problem); remap such ids before training.
//  * value: a finite float (std::from_chars, so no hex, no locale); explicit
//    zeros are kept.
//  * Tokens are separated by spaces, tabs or '\r' (so CRLF files read as they
//    are). '#' starts a comment that runs to the end of the line; blank and
//    comment-only lines are skipped, but still count for line numbers.
//  * A line with a label and no features is an example with no features.
//  * A line may hold at most kMaxLibsvmLineBytes (64 MiB; a line of a
//    million features is about 15 MB): a file with no newline, or one whose
//    lines end in a lone '\r', is refused after that much, not read whole.
//    A NUL byte means a binary file: refused at the 1 MiB chunk holding it.
//  * An id may appear once per line; a repeat is an error. Ids out of
//    increasing order are sorted (UnsortedIds::sort, the default: many tools
//    write them unsorted and the order carries no meaning) or rejected
//    (UnsortedIds::reject, for callers who want to know the file is canonical).
//
// Every error is an asgd::InputError whose message starts with
// "SOURCE:LINE:COLUMN: " (line and column 1-based, columns count bytes) and
// says what was expected and what was found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace asgd::sparse {

inline constexpr std::uint32_t kMaxFeatureId = 2147483647;  // 2^31 - 1
inline constexpr std::size_t kMaxLibsvmLineBytes = std::size_t{64} << 20;

// The widest data a caller takes: a feature id at or above `features` is
// refused at its line ("FILE:LINE:COLUMN: " and what `why(id)` says: what set
// the limit, what the id would cost), as soon as it is read. A model sized by
// the data's largest id sets one, so that one id in the input cannot ask for
// more memory than there is (see fit_linear).
struct FeatureLimit {
  std::uint64_t features = std::uint64_t{kMaxFeatureId} + 1;
  std::function<std::string(std::uint32_t id)> why;  // called only to refuse an id
};

// Examples in compressed sparse rows: example r has the features
// index[row_ptr[r] .. row_ptr[r+1]) (strictly increasing) with those values.
struct SparseDataset {
  std::vector<std::uint64_t> row_ptr;  // rows() + 1 entries, starting at 0
  std::vector<std::uint32_t> index;    // feature ids
  std::vector<float> value;
  std::vector<float> label;            // +1 or -1
  // Width of a weight vector over this data: read_libsvm sets max id + 1 (0
  // with no features); the generator sets the requested width, which may
  // exceed the largest id that happened to be drawn.
  std::uint32_t num_features = 0;

  std::size_t rows() const noexcept { return row_ptr.empty() ? 0 : row_ptr.size() - 1; }
  std::size_t nnz() const noexcept { return index.size(); }

  // Throws InputError naming the first inconsistency: sizes, row_ptr not
  // starting at 0 or decreasing, ids not strictly increasing within a row or
  // not below num_features, non-finite values, labels other than +1/-1.
  // Models call this once, so that their hot loops need no bounds checks.
  void validate() const;
  // A digest of the rows, ids, values and labels (not a cryptographic one):
  // a resumed run compares it with its checkpoint's, to warn when it trains
  // on other data. About a second per 10^9 non-zeros.
  std::uint64_t checksum() const noexcept;
};

enum class UnsortedIds { sort, reject };
// "sort" or "reject"; InputError otherwise.
UnsortedIds parse_unsorted_ids(std::string_view name);

// Reads a whole libsvm file, gzipped or not. InputError for a file that
// cannot be opened, does not parse, or is a cut-off gzip stream; RuntimeError
// for a failure while reading.
// The text is judged as it is read (io::read_all): a NUL byte or a line
// longer than kMaxLibsvmLineBytes is refused there, and a file (or pipe)
// larger than the memory available is refused before the text passes it.
SparseDataset read_libsvm(const std::filesystem::path& path, UnsortedIds unsorted = UnsortedIds::sort,
                          const FeatureLimit& limit = {});

// Parses libsvm text; `source_name` prefixes error messages (a file name).
SparseDataset parse_libsvm(std::string_view text, std::string_view source_name,
                           UnsortedIds unsorted = UnsortedIds::sort, const FeatureLimit& limit = {});

// Writes `data` (validated first) with labels +1/-1 and values in their
// shortest form that reads back to the same float, so write -> read
// round-trips exactly (num_features aside: reading gives max id + 1). The
// text goes to a temporary file beside `path`, is flushed to disk and then
// renamed over `path`, so readers never see a half-written file.
// InputError when the data is invalid or the directory cannot be written to;
// RuntimeError when writing fails part-way (the temporary is removed).
// `first_id` is added to every feature id: 1 writes LIBSVM's and LIBLINEAR's
// convention (ids from 1; they refuse an id 0), 0 the ids as they are.
void write_libsvm(const std::filesystem::path& path, const SparseDataset& data, std::uint32_t first_id = 0);

// `weights` (a model's) to score `data` with: the features the model never
// saw weigh 0, so they are left out of `data` (widening the weights to the
// data's largest id instead would let one line with feature 2^31 - 1 ask for
// 8 GB), and `data` is widened to cover every weight. Returns the weights.
std::vector<float> narrow_to_weights(SparseDataset& data, std::vector<float> weights);

// Rows [begin, end) of `data` as a dataset of their own (same num_features).
SparseDataset slice_rows(const SparseDataset& data, std::size_t begin, std::size_t end);
// The rows `rows` of `data`, in that order (same num_features): a rank's shard.
SparseDataset select_rows(const SparseDataset& data, std::span<const std::size_t> rows);

}  // namespace asgd::sparse
