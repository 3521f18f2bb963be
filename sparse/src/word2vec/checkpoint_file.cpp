#include "asgd/sparse/word2vec/checkpoint_file.hpp"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/json_metadata.hpp"
#include "../text_util.hpp"

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

namespace {

// The "word count" lines after the header; InputError (without the path: the caller adds it) for a line that is not.
Vocabulary read_vocabulary_lines(std::string_view lines, std::uint64_t words_in_header) {
  std::vector<std::string> words;
  std::vector<std::uint64_t> counts;
  std::size_t at = 0;
  while (at < lines.size()) {
    const auto end = lines.find('\n', at);
    const std::string_view line = lines.substr(at, (end == std::string_view::npos ? lines.size() : end) - at);
    // "word count", a count of digits only (the Vocabulary checks the words).
    const auto space = line.rfind(' ');
    const std::string_view word = line.substr(0, space == std::string_view::npos ? 0 : space);
    const std::string_view digits = space == std::string_view::npos ? line : line.substr(space + 1);
    std::uint64_t count = 0;
    const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    if (space == std::string_view::npos || ec != std::errc() || p != digits.data() + digits.size()) {
      throw InputError(fmt::format("vocabulary entry {} is {}, not 'word count'", words.size() + 1,
                                   text::quote_token(line, 60)));
    }
    words.emplace_back(word);
    counts.push_back(count);
    at = end == std::string_view::npos ? lines.size() : end + 1;
  }
  if (words.size() != words_in_header) throw InputError("vocabulary size differs from header");
  return Vocabulary(std::move(words), std::move(counts));
}

}  // namespace

SavedRun read_checkpoint_metadata(const std::string& path, const std::string& text) {
  const auto eol = text.find('\n');
  const auto j = eol == std::string::npos ? std::nullopt
                                          : JsonMetadata::parse(std::string_view(text).substr(0, eol),
                                                                fmt::format("checkpoint {}", path));
  if (!j || !j->holds("model", "word2vec")) throw InputError(fmt::format("{}: not a word2vec checkpoint", path));
  // The header's keys (a missing one, or one of another kind, is said by JsonMetadata with the file and the key).
  ModelOptions m;
  m.cbow = j->flag("cbow");
  m.dim = j->whole("dim");
  m.window = j->whole("window");
  m.negative = j->whole("negative");
  m.hs = j->flag("hs");
  m.sample = j->number("sample");
  m.batch = j->flag_or("batch", false);
  RunInfo info;
  info.alpha = static_cast<float>(j->number_or("alpha", 0.0));
  info.corpus_tokens = j->whole_or("corpus_tokens", 0);
  info.iter = j->whole_or("iter", 0);
  info.threads = j->whole_or("threads", 0);
  info.policy = j->text_or("policy", std::string());
  info.tau = j->text_or("tau", std::string());
  if (j->has("min_count")) info.min_count = j->whole("min_count");
  if (j->has("max_vocab")) info.max_vocab = j->whole("max_vocab");
  const std::uint64_t words = j->whole("words");
  // Training refuses a corpus without words: a header of none is damaged, not a model to size by.
  if (words == 0)
    throw InputError(fmt::format("{}: corrupt word2vec checkpoint metadata: it records no words", path));
  try {
    return {m, read_vocabulary_lines(std::string_view(text).substr(eol + 1), words), info};
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: corrupt word2vec checkpoint metadata: {}", path, e.what()));
  }
}

}  // namespace asgd::sparse::w2v
