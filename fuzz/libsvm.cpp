// libsvm text (read_libsvm), with unsorted ids sorted and refused.
#include <cstdint>

#include "asgd/sparse/libsvm.hpp"
#include "fuzz_input.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile file("libsvm");
  const auto& path = file.write({data, size});
  sparse::SparseDataset sorted;
  if (!fuzz::reads({path.string()}, [&] { sorted = sparse::read_libsvm(path); })) return 0;
  // What the models rely on instead of checking in their loops.
  if (!fuzz::reads({}, [&] { sorted.validate(); })) fuzz::finding("read_libsvm returned data validate() refuses");
  sparse::SparseDataset strict;
  if (fuzz::reads({path.string()}, [&] { strict = sparse::read_libsvm(path, sparse::UnsortedIds::reject); })) {
    fuzz::require(strict.checksum() == sorted.checksum() && strict.num_features == sorted.num_features,
                  "sorted and strict reads of a sorted file differ");
  }
  return 0;
}
