// The options a run's checkpoints record, as text keyed by name, so that a
// resume can say which of them changed: a resumed run continues the saved
// one (the same rates, steps and updates) only with the same options.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "asgd/engine/trainer.hpp"

namespace asgd {

using OptionsRecord = std::map<std::string, std::string, std::less<>>;

// A run id is 40 bits: the processes of a multi-rank job compare ids exactly (20-bit halves in floats).
inline constexpr std::uint64_t kRunIdMask = (std::uint64_t{1} << 40) - 1;

// The engine options that shape a run's updates (validated, names in one
// spelling), keyed as the asgd command's flags without dashes: workers,
// policy, tau, step, schedule, lr, warmup, staleness-aware, adagrad;
// lr-floor for the linear schedule (the only one that uses it); epochs when
// the rates depend on it (the linear schedule decays over the whole run,
// warmup is a fraction of it); otherwise a longer run is the same run,
// continued.
OptionsRecord engine_options(const TrainerOptions& options);

// The record as a JSON object's text, as metadata keeps it under "options".
std::string options_json(const OptionsRecord& record);

// The "options" object a checkpoint's metadata recorded (its text values);
// none when it has none (written before options were recorded, or by a
// program that records none).
std::optional<OptionsRecord> saved_options(const std::string& metadata);

// The run id a checkpoint's metadata holds (options.run, 10 hex digits: TrainingRun::set_record); 0 when none (a
// file of an older asgd, or of a program that records none).
std::uint64_t run_id_of(const std::string& metadata);

// How many ranks' files hold a checkpoint's AdaGrad sums, each rank's its own beside rank 0's (net::MultiRank):
// its options' "ranks", which a fit on several ranks with AdaGrad records, or in linear models written before
// that, the metadata's own "ranks"; 1 when neither (one file holds them). InputError naming `where` and the key
// for a value that is no number of ranks.
int rank_files_of(const std::string& metadata, const std::string& where);
// `metadata` saying that `ranks` ranks' files hold its sums (1: the key removed), for sums cut again for another
// number of ranks. Metadata that is no JSON object is returned as it is.
std::string with_rank_files(const std::string& metadata, int ranks);

// A key of `now` that `before` holds with another value.
struct OptionChange {
  std::string key, now, before;
};
std::vector<OptionChange> changed_options(const OptionsRecord& before, const OptionsRecord& now);

// What a resumed run changes against the run it continues (`before`: the options its checkpoint recorded; none:
// it recorded none, so nothing can be told). The data: a digest of it under `digest_key` that differs while its
// size under `count_key` does not (another size is an option change). The options: changed_options, the digest
// left out (its hex means nothing to a reader).
struct ResumeChanges {
  bool data_differs = false;
  std::vector<OptionChange> options;
};
ResumeChanges resume_changes(const std::optional<OptionsRecord>& before, OptionsRecord now,
                             std::string_view digest_key, std::string_view count_key);

}  // namespace asgd
