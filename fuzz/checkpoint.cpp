// Engine checkpoints (read_checkpoint, load_checkpoint): each input read as it is, and repaired
// (checkpoint_bytes.hpp) so that a mutation past the header reaches the layout and value checks.
#include <cstdint>

#include "asgd/engine/checkpoint.hpp"
#include "checkpoint_bytes.hpp"
#include "fuzz_input.hpp"

using namespace asgd;

namespace {

void read(const std::filesystem::path& path) {
  CheckpointData d;
  if (!fuzz::reads({path.native()}, [&] { d = read_checkpoint(path); })) return;
  fuzz::require(d.params.size() == d.layout.size(), "parameters are not the layout's size");
  fuzz::require(d.row_head == 0 || d.optimizer_kind == OptimizerKind::row_adagrad, "a row head without row sums");
  // What a resume does with it: into a store of its layout.
  ParamStore store = ParamStore::on_heap(d.layout);
  std::vector<float> optimizer;
  std::string metadata;
  const std::size_t optimizer_values = d.optimizer_state.size();
  if (!fuzz::reads({path.native()}, [&] { load_checkpoint(std::move(d), path, store, &optimizer, &metadata); }))
    fuzz::finding("load_checkpoint refuses what read_checkpoint read, into a store of its own layout");
  fuzz::require(optimizer.size() == optimizer_values, "load_checkpoint lost optimizer values");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile raw("checkpoint"), repaired("checkpoint-repaired");
  read(raw.write({data, size}));
  read(repaired.write(fuzz::repair_checkpoint({data, size})));
  return 0;
}
