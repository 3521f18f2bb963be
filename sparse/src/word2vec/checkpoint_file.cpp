#include "asgd/sparse/word2vec/checkpoint_file.hpp"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>
#include <vector>

#include "asgd/engine/errors.hpp"

namespace asgd::sparse::w2v {

std::vector<OptionChange> changed_settings(const RunInfo& saved, const RunInfo& now) {
  OptionsRecord before, after;
  if (saved.alpha > 0) before["alpha"] = fmt::format("{}", saved.alpha), after["alpha"] = fmt::format("{}", now.alpha);
  if (saved.threads > 0)
    before["threads"] = fmt::format("{}", saved.threads), after["threads"] = fmt::format("{}", now.threads);
  if (!saved.policy.empty()) before["policy"] = saved.policy, after["policy"] = now.policy;
  if (!saved.tau.empty()) before["tau"] = saved.tau, after["tau"] = now.tau;
  return changed_options(before, after);
}

std::string checkpoint_metadata(const ModelOptions& m, const Vocabulary& vocab, const RunInfo& r) {
  nlohmann::json j{{"model", "word2vec"}, {"cbow", m.cbow},     {"dim", m.dim},
                   {"window", m.window},  {"negative", m.negative}, {"hs", m.hs},
                   {"sample", m.sample},  {"batch", m.batch},       {"words", vocab.size()},
                   {"alpha", r.alpha},    {"corpus_tokens", r.corpus_tokens}, {"iter", r.iter},
                   {"threads", r.threads}, {"policy", r.policy},    {"tau", r.tau}};
  if (r.min_count) j["min_count"] = *r.min_count;
  if (r.max_vocab) j["max_vocab"] = *r.max_vocab;
  std::string out = j.dump() + "\n";
  for (std::uint32_t i = 0; i < vocab.size(); ++i) {
    out += vocab.word(i);
    out += ' ';
    out += std::to_string(vocab.count(i));
    out += '\n';
  }
  return out;
}

SavedRun read_checkpoint_metadata(const std::string& path, const std::string& text) {
  const auto eol = text.find('\n');
  const auto j = nlohmann::json::parse(text.substr(0, eol), nullptr, false);
  if (eol == std::string::npos || j.is_discarded() || !j.is_object() || j.value("model", "") != "word2vec") {
    throw InputError(fmt::format("{}: not a word2vec checkpoint", path));
  }
  // A whole number as written (get<std::size_t> took 8.7 as 8 and -1 as 2^64 - 1).
  auto whole = [&](const char* key) {
    const auto& v = j.at(key);
    if (!v.is_number_unsigned()) throw InputError(fmt::format("{} is {}, not a whole number", key, v.dump()));
    return v.get<std::size_t>();
  };
  try {
    ModelOptions m;
    m.cbow = j.at("cbow").get<bool>();
    m.dim = whole("dim");
    m.window = whole("window");
    m.negative = whole("negative");
    m.hs = j.at("hs").get<bool>();
    m.sample = j.at("sample").get<double>();
    m.batch = j.value("batch", false);
    std::vector<std::string> words;
    std::vector<std::uint64_t> counts;
    std::size_t at = eol + 1;
    while (at < text.size()) {
      const auto end = text.find('\n', at);
      const std::string_view line(text.data() + at, (end == std::string::npos ? text.size() : end) - at);
      // "word count", a count of digits only (the Vocabulary checks the words).
      const auto space = line.rfind(' ');
      const std::string_view word = line.substr(0, space == std::string_view::npos ? 0 : space);
      const std::string_view digits = space == std::string_view::npos ? line : line.substr(space + 1);
      std::uint64_t count = 0;
      const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
      if (space == std::string_view::npos || ec != std::errc() || p != digits.data() + digits.size()) {
        throw InputError(fmt::format("vocabulary entry {} is '{}', not 'word count'", words.size() + 1,
                                     std::string(line.substr(0, 60))));
      }
      words.emplace_back(word);
      counts.push_back(count);
      at = end == std::string::npos ? text.size() : end + 1;
    }
    if (words.size() != whole("words")) throw InputError("vocabulary size differs from header");
    RunInfo info;
    info.alpha = j.value("alpha", 0.0f);
    info.corpus_tokens = j.value("corpus_tokens", std::uint64_t{0});
    info.iter = j.value("iter", std::uint64_t{0});
    if (j.contains("threads")) info.threads = whole("threads");
    info.policy = j.value("policy", std::string());
    info.tau = j.value("tau", std::string());
    if (j.contains("min_count")) info.min_count = whole("min_count");
    if (j.contains("max_vocab")) info.max_vocab = whole("max_vocab");
    return {m, Vocabulary(std::move(words), std::move(counts)), info};
  } catch (const std::exception& e) {
    throw InputError(fmt::format("{}: corrupt word2vec checkpoint metadata: {}", path, e.what()));
  }
}

}  // namespace asgd::sparse::w2v
