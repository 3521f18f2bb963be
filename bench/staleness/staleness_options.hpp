// What a staleness sweep is asked for (`asgd bench staleness`): the problem,
// its settings as comma-separated lists, and the runs they make. Errors
// name the option (`StalenessOptions::workers`), never a flag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "asgd/sparse/generator.hpp"
#include "asgd/sparse/linear_reference.hpp"
#include "staleness.hpp"

namespace asgd::bench {

enum class StalenessProblem { linear, w2v, mf, cnn };

// "linear", "w2v", "mf" or "cnn"; InputError naming StalenessOptions::problem otherwise.
StalenessProblem parse_problem(std::string_view name);
std::string_view to_string(StalenessProblem problem) noexcept;

struct StalenessOptions {
  StalenessProblem problem = StalenessProblem::linear;
  // Comma-separated lists (empty items skipped); empty: the problem's default (staleness_defaults).
  std::string policies, workers, taus;
  std::uint64_t epochs = 0;       // per setting; 0: the problem's default
  std::size_t step_examples = 0;  // examples per step; 0: the problem's default
  sparse::GeneratorOptions gen;   // linear: the generated data
  double l2 = sparse::kReferenceL2;  // linear
  std::string corpus;     // w2v: one sentence per line (required)
  std::string analogies;  // w2v: questions-words file scoring each setting's last epoch; empty: none
  std::string ratings;    // mf: a ratings file; empty: 4M generated ratings (mf_generated_ratings)
  std::string schedules = "hogwild,blocks";  // mf: hogwild, blocks, or both
  std::string data = "builtin";  // cnn: MNIST's folder (CnnExperiment::load), or builtin (the CLI resolves it)
  std::string compensation = "off,on";  // cnn: without and with staleness compensation
  std::string out = "staleness";  // the folder of the CSV and PNG
  // The options the caller set, by member name ("l2", "gen.features", "step_examples"): one that does nothing
  // for the problem is refused (check_options), rather than ignored.
  std::set<std::string, std::less<>> given;
};

// A problem's defaults for the lists and counts left empty or 0.
struct StalenessDefaults {
  const char* policies;
  const char* workers;
  const char* taus;
  std::uint64_t epochs;
  std::size_t step_examples;  // 0: none fixed (w2v: the model's ~10,000 words of sentences; cnn: batch 64)
};
StalenessDefaults staleness_defaults(StalenessProblem problem) noexcept;

// The problem's own checks, before any list is read: every option in `given` applies to the problem, epochs
// and steps set are not 0 (0 is "the default" only when not set: a typo would run another sweep), w2v has a
// corpus. InputError naming the option.
void check_options(const StalenessOptions& o);

// One run of a sweep: a setting and, per problem, how it is run.
struct SweepRun {
  Setting setting;
  bool blocks = false;      // mf: LIBMF's block schedule (no delay to bound)
  bool compensate = false;  // cnn: staleness compensation
};

// Every run the options ask for, in order (check_options first): the setting grid of the policies, workers and
// taus (staleness_defaults for those left empty); for mf, under each schedule, the block schedule once per
// (workers, policy); for cnn, each setting without and/or with compensation, compensated only at a bounded
// tau > 0 (tau 0 and inf have no view's age to act on). InputError naming the option for a value that is not
// understood, or for a cnn sweep left with nothing to run.
std::vector<SweepRun> staleness_runs(const StalenessOptions& o);

}  // namespace asgd::bench
