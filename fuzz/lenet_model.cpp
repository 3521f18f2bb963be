// LeNet-5 model files (read_lenet, recorded_epochs, resume_changes). Its parameters (61,706 floats) are too many
// for seed files, so the input is a choice byte and the metadata, and the target writes the file: LeNet-5's
// layout and zero parameters, the momentum buffer the choice byte says (none, whole, one short, one long), and
// the metadata.
#include <cstdint>
#include <vector>

#include "asgd/dense/fit.hpp"
#include "asgd/dense/lenet_file.hpp"
#include "asgd/dense/network.hpp"
#include "asgd/engine/options_record.hpp"
#include "checkpoint_bytes.hpp"
#include "fuzz_input.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::InputFile file("lenet-model");
  static const dense::Network net = dense::lenet5();
  static const std::vector<float> params(net.layout().size(), 0.0f);
  static const std::vector<float> momentum(net.layout().size() + 1, 0.0f);
  if (size < 1) return 0;
  const std::size_t momentum_sizes[] = {0, params.size(), params.size() - 1, params.size() + 1};
  const std::span<const float> optimizer(momentum.data(), momentum_sizes[data[0] & 3]);
  const std::string metadata(fuzz::as_text(data + 1, size - 1));
  const auto& path = file.write(fuzz::checkpoint_file(net.layout(), params, optimizer, 0, metadata));
  CheckpointData ck;
  if (!fuzz::reads({path.native()}, [&] { ck = dense::read_lenet(path, net); })) return 0;
  fuzz::require(ck.optimizer_state.empty() || ck.optimizer_state.size() == ck.params.size(), "momentum size");
  fuzz::reads({path.native()}, [&] { (void)dense::recorded_epochs(path, ck.metadata); });
  // What a resume compares with its own options.
  fuzz::reads({}, [&] { (void)dense::resume_changes(ck.metadata, OptionsRecord{{"epochs", "3"}}); });
  fuzz::reads({}, [&] { (void)run_id_of(ck.metadata); });
  return 0;
}
