// asgd._core's linear classifiers: sparse::fit_linear (what `asgd linear train` calls) on examples handed over as
// CSR arrays (sparse::dataset_from_csr), its weights returned as a numpy array that owns them (asgd.SGDClassifier's
// coef_ and intercept_ are views of it), and sparse::linear_margins for the decision function. No training logic
// here: arrays in, library calls with the GIL released, arrays out.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/rank_group.hpp"
#include "asgd/engine/schedule.hpp"
#include "asgd/sparse/csr_arrays.hpp"
#include "asgd/sparse/linear_fit.hpp"
#include "asgd/sparse/linear_model_file.hpp"
#include "asgd/sparse/linear_quality.hpp"
#include "interruptible.hpp"
#include "os_error.hpp"

namespace py = pybind11;
namespace sparse = asgd::sparse;

namespace {

template <class Index>
using IndexArray = py::array_t<Index, py::array::c_style>;
using FloatArray = py::array_t<float, py::array::c_style>;

// The estimator's arguments as the library takes them (asgd.SGDClassifier maps scikit-learn's names onto these);
// the defaults are `asgd linear train`'s.
struct LinearSettings {
  std::string loss = "logistic";  // or squared-hinge, hinge
  double l2 = 1e-4;
  std::size_t epochs = 10, threads = 1;
  std::string schedule = "linear";
  float learning_rate = 0.5f;
  std::uint64_t seed = 1;
  std::string policy = "racy", tau = "inf";
  float bias = 0;  // > 0: the intercept's constant feature (CsrArrays::bias)
};

// The library's names in its messages, as the estimator names them.
std::string python_names(std::string message) {
  constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"LinearFitOptions::data X", "X"},        {"LinearFitOptions::l2", "alpha"},
      {"LinearFitOptions::loss", "loss"},       {"TrainerOptions::epochs", "epochs"},
      {"TrainerOptions::workers", "n_jobs"},    {"Schedule::lr", "eta0"},
      {"CsrArrays::indptr", "X.indptr"},        {"CsrArrays::indices", "X.indices"},
      {"CsrArrays::values", "X"},               {"CsrArrays::labels", "y"},
      {"CsrArrays::features", "X"},             {"CsrArrays::bias", "intercept_scaling"}};
  for (const auto& [from, to] : kNames)
    for (auto at = message.find(from); at != std::string::npos; at = message.find(from, at + to.size()))
      message.replace(at, from.size(), to);
  return message;
}

// LinearFitOptions as `asgd linear train` makes them from its flags (apps/linear_cmd.cpp, cli_common.cpp:
// to_trainer_options): 256 examples a step, a rate floor of 1e-4, so that one worker and one seed give its weights
// byte for byte.
sparse::LinearFitOptions fit_options(const LinearSettings& s) {
  sparse::LinearFitOptions o;
  o.data = "X";
  o.l2 = s.l2;
  o.keep_weights = true;
  o.trainer.workers = s.threads;
  o.trainer.epochs = s.epochs;
  o.trainer.seed = s.seed;
  o.trainer.step_examples = 256;
  o.trainer.schedule.lr = s.learning_rate;
  o.trainer.schedule.floor = 1e-4f;
  try {
    o.loss = sparse::parse_linear_loss(s.loss);
    o.trainer.validate();
    o.trainer.schedule.kind = asgd::parse_schedule_kind(s.schedule);
    o.trainer.consistency = asgd::parse_consistency(s.policy);
    o.trainer.tau = asgd::parse_tau(s.tau);
  } catch (const asgd::InputError& e) {
    throw asgd::InputError(python_names(e.what()));
  }
  return o;
}

// A float32 array that owns `values` (no copy: the vector moves into the capsule that frees it).
py::array_t<float> owning_array(std::vector<float>&& values) {
  auto owned = std::make_unique<std::vector<float>>(std::move(values));
  const auto size = static_cast<py::ssize_t>(owned->size());
  float* data = owned->data();
  py::capsule free_it(owned.get(), [](void* p) { delete static_cast<std::vector<float>*>(p); });
  owned.release();
  return py::array_t<float>({size}, {static_cast<py::ssize_t>(sizeof(float))}, data, free_it);
}

template <class Index>
sparse::CsrArraysOf<Index> csr_of(const IndexArray<Index>& indptr, const IndexArray<Index>& indices,
                                  const FloatArray& values, const FloatArray& labels, std::uint64_t features,
                                  float bias) {
  return {.indptr = {indptr.data(), static_cast<std::size_t>(indptr.size())},
          .indices = {indices.data(), static_cast<std::size_t>(indices.size())},
          .values = {values.data(), static_cast<std::size_t>(values.size())},
          .labels = {labels.data(), static_cast<std::size_t>(labels.size())},
          .features = features,
          .bias = bias};
}

// The run's figures for SGDClassifier's report_.
py::dict report_of(const sparse::LinearFitReport& r) {
  py::dict d;
  std::vector<double> losses, seconds;
  for (const auto& e : r.training.epochs) {
    losses.push_back(e.loss);
    seconds.push_back(e.seconds);
  }
  d["losses"] = losses;
  d["epoch_seconds"] = seconds;
  d["train_seconds"] = r.training.seconds;
  d["examples_per_second"] = r.training.examples_per_second;
  d["updates"] = r.training.examples;
  d["objective"] = r.train ? r.train->objective : 0.0;
  d["train_accuracy"] = r.train ? r.train->accuracy : 0.0;
  return d;
}

// Trains on the examples X (CSR arrays, `features` wide) labelled +1/-1 as `settings` say; Ctrl-C stops it at its
// next step (KeyboardInterrupt). Returns (weights: features + 1 with a bias, its weight last; report dict).
// X's ids are int32 or int64 as scipy holds them (Index).
template <class Index>
py::tuple fit(const IndexArray<Index>& indptr, const IndexArray<Index>& indices, const FloatArray& values,
              const FloatArray& labels, std::uint64_t features, const LinearSettings& settings) {
  const sparse::LinearFitOptions o = fit_options(settings);
  std::atomic<bool> stop{false};
  sparse::LinearFitEvents events;
  events.stop_from_here = [&stop] { return &stop; };
  sparse::LinearFitReport r;
  try {
    r = asgd::python::run_interruptible(stop, [&] {
      asgd::RankGroup one_process;
      return sparse::fit_linear(sparse::dataset_from_csr(csr_of(indptr, indices, values, labels, features,
                                                                settings.bias)),
                                o, one_process, events);
    });
  } catch (const asgd::InputError& e) {
    throw asgd::InputError(python_names(e.what()));
  }
  if (r.training.stopped)  // a stop nobody asked for here (a signal's is raised above)
    throw asgd::RuntimeError("SGDClassifier: stopped before its last epoch (" + r.training.stop_reason + ")");
  py::dict report = report_of(r);
  return py::make_tuple(owning_array(std::move(r.weights)), report);
}

// w.x (+ the bias feature's weight times `bias`) of every example of X, float64.
template <class Index>
py::array_t<double> margins(const IndexArray<Index>& indptr, const IndexArray<Index>& indices,
                            const FloatArray& values, std::uint64_t features, float bias, const FloatArray& weights) {
  const auto rows = static_cast<py::ssize_t>(indptr.size() > 0 ? indptr.size() - 1 : 0);
  py::array_t<double> out(rows);
  double* first = out.mutable_data();
  const FloatArray no_labels(0);  // made with the GIL held: data to score
  const sparse::CsrArraysOf<Index> csr = csr_of(indptr, indices, values, no_labels, features, bias);
  try {
    py::gil_scoped_release release;
    const sparse::SparseDataset data = sparse::dataset_from_csr(csr);
    sparse::linear_margins(data, {weights.data(), static_cast<std::size_t>(weights.size())},
                           {first, static_cast<std::size_t>(rows)});
  } catch (const asgd::InputError& e) {
    throw asgd::InputError(python_names(e.what()));
  }
  return out;
}

// A model file `asgd linear train --model` wrote: (weights, loss, l2 or None).
py::tuple read_model(const std::string& path) {
  sparse::LinearModelFile file;
  try {
    py::gil_scoped_release release;
    file = sparse::read_linear_model(path);
  } catch (const asgd::Error& e) {
    asgd::python::raise_if_file_error(e.what(), path, false);
    throw;
  }
  const std::string loss(sparse::to_string(file.loss()));
  const std::optional<double> l2 = file.l2();
  return py::make_tuple(owning_array(std::move(file.weights)), loss, l2);
}

}  // namespace

void bind_linear(py::module_& m) {
  py::class_<LinearSettings>(m, "LinearSettings")
      .def(py::init<>())
      .def_readwrite("loss", &LinearSettings::loss)
      .def_readwrite("l2", &LinearSettings::l2)
      .def_readwrite("epochs", &LinearSettings::epochs)
      .def_readwrite("threads", &LinearSettings::threads)
      .def_readwrite("schedule", &LinearSettings::schedule)
      .def_readwrite("learning_rate", &LinearSettings::learning_rate)
      .def_readwrite("seed", &LinearSettings::seed)
      .def_readwrite("policy", &LinearSettings::policy)
      .def_readwrite("tau", &LinearSettings::tau)
      .def_readwrite("bias", &LinearSettings::bias);
  // int32 ids first: pybind11 takes the first overload whose dtypes match without a conversion.
  m.def("fit_linear", &fit<std::int32_t>, py::arg("indptr"), py::arg("indices"), py::arg("values"),
        py::arg("labels"), py::arg("features"), py::arg("settings"),
        "Trains a linear classifier on CSR arrays (int32 or int64 ids) labelled +1/-1: (weights, report). Ctrl-C "
        "stops it.");
  m.def("fit_linear", &fit<std::int64_t>, py::arg("indptr"), py::arg("indices"), py::arg("values"),
        py::arg("labels"), py::arg("features"), py::arg("settings"));
  m.def("linear_margins", &margins<std::int32_t>, py::arg("indptr"), py::arg("indices"), py::arg("values"),
        py::arg("features"), py::arg("bias"), py::arg("weights"),
        "w.x of every row of the CSR arrays (int32 or int64 ids), float64.");
  m.def("linear_margins", &margins<std::int64_t>, py::arg("indptr"), py::arg("indices"), py::arg("values"),
        py::arg("features"), py::arg("bias"), py::arg("weights"));
  m.def("read_linear_model", &read_model, py::arg("path"),
        "A model file as `asgd linear train --model` writes it: (weights, loss, l2 or None).");
}
