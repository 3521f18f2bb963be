// Linear model files (read_linear_model: a checkpoint with a "weights" tensor, and the objective in its
// metadata; check_linear_resume: whether a fit may go on from it), repaired (checkpoint_bytes.hpp) so that
// mutations reach the layout and the metadata.
#include <cstdint>

#include "asgd/engine/checkpoint.hpp"
#include "asgd/sparse/linear_fit.hpp"
#include "asgd/sparse/linear_model_file.hpp"
#include "asgd/sparse/linear_resume_check.hpp"
#include "checkpoint_bytes.hpp"
#include "fuzz_input.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile file("linear-model");
  const auto& path = file.write(fuzz::repair_checkpoint({data, size}));
  sparse::LinearModelFile m;
  if (!fuzz::reads({path.native()}, [&] { m = sparse::read_linear_model(path); })) return 0;
  // What eval and a resume ask of the metadata: their errors name the file.
  fuzz::reads({path.native()}, [&] { (void)m.l2(); });
  fuzz::reads({path.native()}, [&] { (void)m.loss(); });
  fuzz::reads({path.native()}, [&] {
    fuzz::require(rank_files_of(m.metadata, path.native()) >= 1, "fewer than one rank");
  });
  // A resume from it, by a fit of the defaults on one rank and the model's width.
  sparse::LinearFitOptions options;
  options.run.resume = path;
  const CheckpointData saved = read_checkpoint(path);
  fuzz::reads({path.native()}, [&] { sparse::check_linear_resume(saved, path, options, m.weights.size(), 1); });
  return 0;
}
