#include "asgd/sparse/linear_resume_check.hpp"

#include <fmt/format.h>

#include <string>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/json_metadata.hpp"
#include "asgd/sparse/linear_model_file.hpp"

namespace asgd::sparse {

namespace {

// Another kind of model (mf, w2v, cnn) is said first: its loss or layout would be refused as if an option were
// wrong (an mf model: "loss 'bpr': expected logistic, squared-hinge or hinge").
void check_kind_and_width(const std::string& metadata, const LinearFitOptions& options, std::uint64_t features) {
  const std::string resume = options.run.resume.string();
  const auto kind = JsonMetadata::parse(metadata, "TrainingRunOptions::resume " + resume);
  if (!kind || (!kind->holds("model", "logistic") && !kind->holds("model", "linear"))) {
    const auto other = kind ? kind->text_if("model") : std::nullopt;  // the kind it is, when it says one
    throw InputError(fmt::format("TrainingRunOptions::resume {}: not a linear model{}", resume,
                                 other ? fmt::format(" (its kind: {})", *other) : std::string()));
  }
  // Without `features` each run sizes the weights from its data's largest feature id.
  if (kind->has("features") && kind->whole("features") != features) {
    const auto saved = kind->whole("features");
    throw InputError(fmt::format("TrainingRunOptions::resume {}: trained with {} features, and this run has {}{}",
                                 resume, saved, features,
                                 options.features == 0 ? fmt::format(" (from LinearFitOptions::data's largest "
                                                                     "feature id): give LinearFitOptions::features {}",
                                                                     saved)
                                                       : std::string()));
  }
}

// Another loss or l2 is another objective: the run would go on towards another optimum.
void check_objective(const std::string& metadata, const LinearFitOptions& options) {
  const std::string resume = options.run.resume.string();
  const std::string where = "TrainingRunOptions::resume " + resume;
  if (const auto saved_loss = linear_model_loss(metadata, where); saved_loss != options.loss) {
    throw InputError(fmt::format("TrainingRunOptions::resume {}: trained with LinearFitOptions::loss {}, not {}",
                                 resume, to_string(saved_loss), to_string(options.loss)));
  }
  if (const double saved_l2 = linear_model_l2(metadata, where).value_or(options.l2); saved_l2 != options.l2) {
    throw InputError(fmt::format("TrainingRunOptions::resume {}: trained with LinearFitOptions::l2 {}, not {} (give "
                                 "LinearFitOptions::l2 {})",
                                 resume, saved_l2, options.l2, saved_l2));
  }
}

}  // namespace

void check_linear_resume(const CheckpointData& saved, const std::filesystem::path& read_from,
                         const LinearFitOptions& options, std::uint64_t features, int ranks) {
  const std::string resume = options.run.resume.string();
  check_kind_and_width(saved.metadata, options, features);
  check_objective(saved.metadata, options);
  // Each rank's sums fit the shard it trained: other ranks would take over sums built on other examples.
  const int wrote = rank_files_of(saved.metadata, "TrainingRunOptions::resume " + read_from.string());
  if (wrote != ranks && options.trainer.schedule.has_adagrad() && !saved.optimizer_state.empty()) {
    throw InputError(fmt::format("TrainingRunOptions::resume {}: written by an AdaGrad job of {} rank(s), each with "
                                 "its own sums; resume with {} rank(s), not {}",
                                 resume, wrote, wrote, ranks));
  }
  if (options.seed_given && options.trainer.seed != saved.state.seed)
    throw InputError(fmt::format("TrainerOptions::seed {}: {} was trained with seed {}, and a resumed run keeps it",
                                 options.trainer.seed, resume, saved.state.seed));
  const std::uint64_t last = options.until_epoch ? options.until_epoch : options.trainer.epochs;
  if (saved.state.epoch >= last)
    throw InputError(fmt::format("TrainingRunOptions::resume {}: {} epochs are done already; {} (give more)", resume,
                                 saved.state.epoch,
                                 options.until_epoch ? "LinearFitOptions::until_epoch is the last to train"
                                                     : "TrainerOptions::epochs is the run's total"));
}

}  // namespace asgd::sparse
