// A word2vec checkpoint's metadata (read_checkpoint_metadata: a JSON line with the model's shape and the run's
// settings, then the vocabulary): the input is the metadata (the checkpoint around it is the checkpoint
// target's).
#include <cstdint>

#include "asgd/sparse/word2vec/checkpoint_file.hpp"
#include "fuzz_input.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "fuzz-w2v.ckpt";
  const std::string metadata(fuzz::as_text(data, size));
  sparse::w2v::SavedRun run;
  if (!fuzz::reads({path}, [&] { run = sparse::w2v::read_checkpoint_metadata(path, metadata); })) return 0;
  fuzz::require(run.vocab.size() > 0, "a checkpoint with no words");
  fuzz::reads({}, [&] { (void)sparse::w2v::changed_settings(run.info, run.info); });
  return 0;
}
