#include "asgd/sparse/word2vec/training_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/trainer.hpp"

namespace asgd::sparse::w2v {

void Word2VecOptions::validate() const {
  if (corpus.empty() && resume.empty()) throw InputError("Word2VecOptions::corpus: required (the text to train on)");
  if (workers && (*workers == 0 || *workers > kMaxWorkers))
    throw InputError(fmt::format("Word2VecOptions::workers {}: expected 1 to {}", *workers, kMaxWorkers));
  if (classes > 0 && binary)
    throw InputError("Word2VecOptions::classes writes \"word class\" text lines: Word2VecOptions::binary 1 does "
                     "not apply");
  if (classes > 0 && output.empty())
    throw InputError("Word2VecOptions::classes: give Word2VecOptions::output, where the classes go");
  if (epochs && (*epochs == 0 || *epochs > kMaxEpochs))
    throw InputError(fmt::format("Word2VecOptions::epochs {}: expected 1 to {} epochs", *epochs, kMaxEpochs));
}

namespace {

template <class Parse>
auto parse_option(const char* name, Parse&& parse) {
  try {
    return parse();
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", name, e.what()));
  }
}

}  // namespace

Consistency policy_of(const Word2VecOptions& o) {
  return o.policy ? parse_option("Word2VecOptions::policy", [&] { return parse_consistency(*o.policy); })
                  : Consistency::racy;
}

std::uint64_t tau_of(const Word2VecOptions& o) {
  return o.tau ? parse_option("Word2VecOptions::tau", [&] { return parse_tau(*o.tau); }) : parse_tau("inf");
}

std::size_t workers_of(const Word2VecOptions& o) {
  return o.workers.value_or(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace asgd::sparse::w2v
