// What a fit tells Python besides its model: the engine's progress events handed to a Python callable while
// training runs (verbose=True prints them), and the run's report (losses per epoch, updates/s, the staleness
// histogram) as a dict of numpy arrays and numbers, the same for every model the package trains.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <memory>
#include <optional>

#include "asgd/engine/trainer.hpp"

namespace asgd::python {

// The report of a run (TrainReport) as a dict: losses (float64 per epoch), seconds, examples,
// examples_per_second, staleness (uint64 counts of the steps by how many updates other workers landed while they
// ran, index s for s of them, the last index for StalenessHistogram::kBuckets - 1 or more), mean_staleness,
// max_staleness, max_lead, stopped, stop_reason and summary (TrainReport::summary, as the CLI prints it).
pybind11::dict train_report(const TrainReport& report);

// A progress callback calling `callback(progress)` with the GIL taken for it alone (the other workers keep going
// meanwhile), progress a dict of Progress's fields (fraction, epoch, examples, loss, examples_per_second,
// learning_rate, elapsed_seconds, eta_seconds, last) plus words_per_second = examples_per_second x
// `*words_per_example` when that is given (word2vec's examples are sentences). An exception the callable raises
// stops the run (the callback returns false) and is kept in `raised`, to be raised once the fit has returned.
// None gives no callback.
struct ProgressErrors {
  std::optional<pybind11::error_already_set> raised;  // destroyed with the GIL held (by the fit that owns it)
};
ProgressCallback progress_callback(const pybind11::object& callback, ProgressErrors& errors,
                                   const double* words_per_example = nullptr);

}  // namespace asgd::python
