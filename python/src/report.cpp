// asgd._core's progress events and run reports (report.hpp): the engine's Progress and TrainReport as Python
// dicts of numbers and numpy arrays.
#include "report.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <utility>

#include "asgd/engine/bounded_delay.hpp"

namespace py = pybind11;

namespace asgd::python {

py::dict train_report(const TrainReport& r) {
  py::array_t<double> losses(static_cast<py::ssize_t>(r.epochs.size()));
  for (std::size_t e = 0; e < r.epochs.size(); ++e) {
    losses.mutable_at(e) = r.epochs[e].loss;
  }
  py::array_t<std::uint64_t> staleness(static_cast<py::ssize_t>(StalenessHistogram::kBuckets));
  for (std::size_t s = 0; s < StalenessHistogram::kBuckets; ++s) staleness.mutable_at(s) = r.staleness.bucket(s);
  py::dict d;
  d["losses"] = losses;
  d["seconds"] = r.seconds;
  d["examples"] = r.examples;
  d["examples_per_second"] = r.examples_per_second;
  d["staleness"] = staleness;
  d["mean_staleness"] = r.staleness.mean();
  d["max_staleness"] = r.staleness.max();
  d["max_lead"] = r.max_lead;
  d["stopped"] = r.stopped;
  d["stop_reason"] = r.stop_reason;
  d["summary"] = r.summary();
  return d;
}

ProgressCallback progress_callback(const py::object& callback, ProgressErrors& errors,
                                   const double* words_per_example) {
  if (callback.is_none()) return {};
  return [&callback, &errors, words_per_example](const Progress& p) {
    py::gil_scoped_acquire gil;
    if (errors.raised) return false;
    py::dict d;
    d["fraction"] = p.fraction;
    d["epoch"] = p.epoch;
    d["examples"] = p.examples;
    d["loss"] = p.loss;
    d["examples_per_second"] = p.examples_per_second;
    d["learning_rate"] = p.learning_rate;
    d["elapsed_seconds"] = p.elapsed_seconds;
    d["eta_seconds"] = p.eta_seconds;
    d["last"] = p.last;
    if (words_per_example != nullptr) d["words_per_second"] = p.examples_per_second * *words_per_example;
    try {
      callback(d);
    } catch (py::error_already_set& error) {
      errors.raised.emplace(std::move(error));
      return false;
    }
    return true;
  };
}

}  // namespace asgd::python
