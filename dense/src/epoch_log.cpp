#include "asgd/dense/epoch_log.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::dense {

namespace {
constexpr const char* kHeader =
    "policy,workers,tau,epoch,seconds,images_per_s,train_loss,test_error,test_accuracy,mean_staleness,momentum,lr\n";
}  // namespace

std::vector<std::string> EpochLog::kept_rows(const std::string& path, std::size_t done, double& seconds) {
  std::vector<std::string> kept;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (kept.empty()) {
      kept.push_back(line);  // the header
      continue;
    }
    std::vector<std::string> fields;  // policy,workers,tau,epoch,seconds,...
    std::stringstream row(line);
    for (std::string field; std::getline(row, field, ',');) fields.push_back(field);
    if (fields.size() < 5 || std::strtoull(fields[3].c_str(), nullptr, 10) > done) continue;
    seconds = std::strtod(fields[4].c_str(), nullptr);
    kept.push_back(line);
  }
  return kept;
}

EpochLog::EpochLog(std::string path, std::optional<std::size_t> resumed_after) : path_(std::move(path)) {
  // Reading a pipe this process writes would wait for ever, so only a file is read back.
  std::error_code ec;
  const bool on_stdout = AtomicFile::writes_to(path_, STDOUT_FILENO);
  const bool file =
      !on_stdout && (!std::filesystem::exists(path_, ec) || std::filesystem::is_regular_file(path_, ec));
  const auto kept = resumed_after && file ? kept_rows(path_, *resumed_after, seconds_before_)
                                          : std::vector<std::string>{};
  std::string start = kept.empty() ? kHeader : "";
  for (const auto& line : kept) start += line + "\n";
  if (AtomicFile::replaces(path_)) {
    // Its kept rows replace it at once (a run killed before its first epoch leaves them there).
    AtomicFile first(path_);
    first.write(start);
    first.commit();
    file_ = std::fopen(path_.c_str(), "a");
    owned_ = true;
  } else {
    // stdout and stderr through their descriptors (not reopened: /dev/stderr redirected to a log would be
    // truncated); a pipe or a device opened to append.
    const bool on_stderr = !on_stdout && AtomicFile::writes_to(path_, STDERR_FILENO);
    owned_ = !on_stdout && !on_stderr;
    file_ = on_stdout ? stdout : on_stderr ? stderr : std::fopen(path_.c_str(), "a");
    if (file_ != nullptr) std::fputs(start.c_str(), file_);
  }
  if (file_ == nullptr) throw InputError(fmt::format("FitOptions::csv {}: cannot write", path_));
}

EpochLog::~EpochLog() {
  if (owned_ && file_ != nullptr) std::fclose(file_);
}

void EpochLog::write(const EpochReport& r, const TrainOptions& o, double seconds) {
  std::fprintf(file_, "%s,%zu,%s,%zu,%.4f,%.1f,%.6f,%.6f,%.6f,%.4f,%.4f,%.6f\n",
               o.compensate ? "compensated" : "plain", o.workers, tau_to_string(o.tau).c_str(), r.epoch,
               seconds_before_ + seconds, r.images_per_second, r.mean_loss, 1.0 - r.test_accuracy, r.test_accuracy,
               r.mean_staleness, r.momentum, r.lr);
  if (std::fflush(file_) != 0 || std::ferror(file_))
    throw RuntimeError(fmt::format("FitOptions::csv {}: cannot write: {}", path_, std::strerror(errno)));
}

void EpochLog::close() {
  if (!owned_ || file_ == nullptr) return;
  std::FILE* const f = std::exchange(file_, nullptr);
  if (std::fclose(f) != 0)
    throw RuntimeError(fmt::format("FitOptions::csv {}: cannot write: {}", path_, std::strerror(errno)));
}

}  // namespace asgd::dense
