#include "staleness_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <sstream>
#include <utility>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/trainer.hpp"

namespace asgd::bench {

namespace {

constexpr std::pair<StalenessProblem, std::string_view> kProblems[] = {{StalenessProblem::linear, "linear"},
                                                                       {StalenessProblem::w2v, "w2v"},
                                                                       {StalenessProblem::mf, "mf"},
                                                                       {StalenessProblem::cnn, "cnn"}};

// The non-empty items of a comma-separated list; InputError naming `option` when there is none.
std::vector<std::string> split_list(const std::string& text, std::string_view option) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  if (out.empty()) throw InputError(fmt::format("StalenessOptions::{}: expected a comma-separated list", option));
  return out;
}

// The option's list, or the default when it is empty.
std::vector<std::string> list_or(const std::string& given, const char* fallback, std::string_view option) {
  return split_list(given.empty() ? std::string(fallback) : given, option);
}

std::vector<Setting> parse_settings(const StalenessOptions& o) {
  const StalenessDefaults d = staleness_defaults(o.problem);
  std::vector<Consistency> policies;
  for (const auto& p : list_or(o.policies, d.policies, "policies")) {
    try {
      policies.push_back(parse_consistency(p));
    } catch (const InputError& e) {
      throw InputError(fmt::format("StalenessOptions::policies: {}", e.what()));
    }
  }
  std::vector<std::size_t> workers;
  for (const auto& w : list_or(o.workers, d.workers, "workers")) {
    std::size_t v = 0;
    const auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (ec != std::errc() || p != w.data() + w.size() || v == 0 || v > kMaxWorkers) {
      throw InputError(fmt::format("StalenessOptions::workers: '{}': expected 1 to {}", w, kMaxWorkers));
    }
    workers.push_back(v);
  }
  std::vector<std::uint64_t> taus;
  for (const auto& t : list_or(o.taus, d.taus, "taus")) {
    try {
      taus.push_back(parse_tau(t));
    } catch (const InputError& e) {
      throw InputError(fmt::format("StalenessOptions::taus: {}", e.what()));
    }
  }
  return setting_grid(policies, workers, taus);
}

// mf: each schedule in turn; the block schedule has no delay to bound, so one run per (workers, policy).
std::vector<SweepRun> mf_runs(const StalenessOptions& o, const std::vector<Setting>& settings) {
  const auto schedules = split_list(o.schedules, "schedules");
  for (const auto& s : schedules) {
    if (s != "hogwild" && s != "blocks")
      throw InputError(fmt::format("StalenessOptions::schedules: '{}': expected hogwild or blocks", s));
  }
  std::vector<SweepRun> runs;
  for (const auto& schedule : schedules) {
    const bool blocks = schedule == "blocks";
    std::vector<std::pair<std::size_t, Consistency>> blocks_done;
    for (const auto& s : settings) {
      if (blocks) {
        const std::pair<std::size_t, Consistency> key{s.workers, s.policy};
        if (std::find(blocks_done.begin(), blocks_done.end(), key) != blocks_done.end()) continue;
        blocks_done.push_back(key);
      }
      runs.push_back({s, blocks, false});
    }
  }
  return runs;
}

// cnn: each setting under each compensation mode; compensation acts on a view's age, which tau 0 and inf do
// not have (one plain run each).
std::vector<SweepRun> cnn_runs(const StalenessOptions& o, const std::vector<Setting>& settings) {
  std::vector<bool> modes;
  for (const auto& c : split_list(o.compensation, "compensation")) {
    if (c != "off" && c != "on")
      throw InputError(fmt::format("StalenessOptions::compensation: '{}': expected off or on", c));
    modes.push_back(c == "on");
  }
  std::vector<SweepRun> runs;
  for (const auto& s : settings)
    for (const bool compensate : modes) {
      if (!compensate || (s.tau != 0 && s.tau != kUnbounded)) runs.push_back({s, false, compensate});
    }
  if (runs.empty()) {
    throw InputError(
        "StalenessOptions::compensation on: applies to a bounded tau > 0 only, and StalenessOptions::taus has none: "
        "nothing to run");
  }
  return runs;
}

}  // namespace

StalenessProblem parse_problem(std::string_view name) {
  std::string names;
  for (const auto& [problem, problem_name] : kProblems) {
    if (name == problem_name) return problem;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", problem_name);
  }
  throw InputError(fmt::format("StalenessOptions::problem '{}': expected one of {}", name, names));
}

std::string_view to_string(StalenessProblem problem) noexcept {
  for (const auto& [p, name] : kProblems) {
    if (p == problem) return name;
  }
  return "?";
}

StalenessDefaults staleness_defaults(StalenessProblem problem) noexcept {
  switch (problem) {
    case StalenessProblem::w2v: return {"racy,atomic,locked", "1,2,4", "inf", 5, 0};
    case StalenessProblem::mf: return {"racy", "1,2,4", "0,1,8,inf", 20, 4096};
    case StalenessProblem::cnn: return {"racy", "2", "0,1,4,16,inf", 10, 0};
    case StalenessProblem::linear: break;
  }
  return {"racy,atomic,locked", "1,2,4,8", "0,1,8,inf", 10, 256};
}

void check_options(const StalenessOptions& o) {
  // The options that mean something for some problems only (the others apply to every problem); each list of
  // problems in alphabetical order, as the error names them.
  static const std::pair<const char*, std::set<std::string_view>> only[] = {
      {"policies", {"linear", "w2v", "mf"}}, {"step_examples", {"linear", "w2v", "mf"}},
      {"gen.examples", {"linear"}},          {"gen.features", {"linear"}},
      {"gen.nnz_per_example", {"linear"}},   {"l2", {"linear"}},
      {"corpus", {"w2v"}},                   {"analogies", {"w2v"}},
      {"ratings", {"mf"}},                   {"schedules", {"mf"}},
      {"data", {"cnn"}},                     {"compensation", {"cnn"}}};
  const std::string_view problem = to_string(o.problem);
  for (const auto& [option, problems] : only) {
    if (o.given.count(option) && !problems.count(problem)) {
      std::string with;
      for (const auto& p : problems) with += fmt::format("{}{}", with.empty() ? "" : ", ", p);
      throw InputError(fmt::format("StalenessOptions::{}: does nothing with StalenessOptions::problem {} "
                                   "(it is for {})",
                                   option, problem, with));
    }
  }
  if ((o.given.count("epochs") || o.epochs != 0) && (o.epochs == 0 || o.epochs > kMaxEpochs))
    throw InputError(fmt::format("StalenessOptions::epochs {}: expected 1 to {}", o.epochs, kMaxEpochs));
  if (o.given.count("step_examples") && o.step_examples == 0)
    throw InputError("StalenessOptions::step_examples 0: expected at least 1 example");
  if (o.problem == StalenessProblem::w2v && o.corpus.empty()) {
    throw InputError(
        "StalenessOptions::problem w2v needs StalenessOptions::corpus FILE (e.g. scripts/fetch-brown.sh)");
  }
}

std::vector<SweepRun> staleness_runs(const StalenessOptions& o) {
  check_options(o);
  const auto settings = parse_settings(o);
  if (o.problem == StalenessProblem::mf) return mf_runs(o, settings);
  if (o.problem == StalenessProblem::cnn) return cnn_runs(o, settings);
  std::vector<SweepRun> runs;
  for (const auto& s : settings) runs.push_back({s, false, false});
  return runs;
}

}  // namespace asgd::bench
