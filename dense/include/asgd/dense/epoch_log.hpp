// The per-epoch CSV log of a dense training run (one row per epoch, the
// columns bench/plot_staleness.py reads); a resumed run continues its file.
#pragma once

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "asgd/dense/trainer.hpp"

namespace asgd::dense {

class EpochLog {
 public:
  // Opens `path` ("-": stdout). A fresh run (`resumed_after` none) starts it
  // with the header; a run resumed after epoch E keeps the file's header and
  // rows through E (a row written after the checkpoint, before a crash, is
  // dropped) and counts its seconds on from the last kept row's. A regular
  // file is replaced at once by what is kept; stdout, stderr, a pipe or a
  // device are written in place (never read back). InputError naming
  // FitOptions::csv when it cannot be written.
  EpochLog(std::string path, std::optional<std::size_t> resumed_after);
  EpochLog(const EpochLog&) = delete;
  EpochLog& operator=(const EpochLog&) = delete;
  ~EpochLog();

  // One epoch's row, flushed (a full disk or a closed pipe is said now, as a RuntimeError, not found later as
  // missing rows). `seconds` counts the training of this run; the row adds the resumed run's.
  void write(const EpochReport& epoch, const TrainOptions& options, double seconds);
  // RuntimeError when the file cannot be written to its end.
  void close();

  // The rows of the log at `path` that a run resumed after epoch `done`
  // keeps (the header first); `seconds` gets the last kept row's. None when there is no file.
  static std::vector<std::string> kept_rows(const std::string& path, std::size_t done, double& seconds);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  bool owned_ = false;  // opened here (not stdout or stderr)
  double seconds_before_ = 0;
};

}  // namespace asgd::dense
