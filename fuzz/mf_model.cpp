// Matrix-factorisation model files (load_model: a checkpoint whose metadata holds the id maps and the scale),
// repaired (checkpoint_bytes.hpp) so that mutations reach the metadata.
#include <cmath>
#include <cstdint>

#include "asgd/sparse/mf/model_file.hpp"
#include "checkpoint_bytes.hpp"
#include "fuzz_input.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile file("mf-model");
  const auto& path = file.write(fuzz::repair_checkpoint({data, size}));
  sparse::mf::LoadedModel m;
  if (!fuzz::reads({path.native()}, [&] { m = sparse::mf::load_model(path); })) return 0;
  fuzz::require(m.store.has_value(), "a model without parameters");
  fuzz::require(std::isfinite(m.scale.mean) && std::isfinite(m.scale.offset) && m.scale.scale > 0,
                "a scale that is not finite and positive");
  fuzz::require(m.range.lo <= m.range.hi, "a rating range upside down");
  for (const auto& row : {m.users.size(), m.items.size()})
    fuzz::require(row <= m.store->size(), "more ids than parameters");
  return 0;
}
