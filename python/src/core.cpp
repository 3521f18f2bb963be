// asgd._core: the bindings of the library calls the Python package asgd is built on (python/asgd). No training
// logic here: arrays in, library calls with the GIL released, arrays (views of the model where the layout allows)
// out. The library's InputError is ValueError, its RuntimeError RuntimeError, a file that cannot be read or
// written OSError, all with the library's message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <utility>

#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/schedule.hpp"
#include "asgd/sparse/mf/arrays.hpp"
#include "asgd/sparse/mf/fit.hpp"
#include "asgd/sparse/mf/saved_model.hpp"
#include "interruptible.hpp"

namespace py = pybind11;
using namespace asgd::sparse::mf;

void bind_w2v(py::module_& m);  // w2v.cpp

namespace {

using IdArray = py::array_t<std::int64_t, py::array::c_style>;
using FloatArray = py::array_t<float, py::array::c_style>;

std::span<const std::int64_t> span_of(const IdArray& a) { return {a.data(), static_cast<std::size_t>(a.size())}; }
std::span<const float> span_of(const FloatArray& a) { return {a.data(), static_cast<std::size_t>(a.size())}; }

// OSError(err, message, path): Python picks the subclass (FileNotFoundError for ENOENT).
[[noreturn]] void raise_os_error(int err, const std::string& message, const std::filesystem::path& path) {
  const py::object error = py::module_::import("builtins").attr("OSError")(err, message, path.string());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

// Why `path` cannot be read or written as a file, as an errno; 0 when it can.
int file_errno(const std::filesystem::path& path, bool write) {
  std::error_code ec;
  const auto target = write ? (path.has_parent_path() ? path.parent_path() : ".") : path;
  if (!std::filesystem::exists(target, ec)) return ENOENT;
  if (std::filesystem::is_directory(path, ec)) return EISDIR;
  if (write) return std::filesystem::is_directory(target, ec) ? 0 : ENOTDIR;
  if (!std::filesystem::is_regular_file(path, ec)) return EINVAL;
  return std::ifstream(path).good() ? 0 : EACCES;
}

// The library's names of the options in its messages, as the Python constructor names them.
std::string python_names(std::string message) {
  constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"MfOptions::factors", "factors"},      {"TrainerOptions::epochs", "iterations"},
      {"Schedule::lr", "learning_rate"},      {"MfOptions::bias_l2", "bias_regularization"},
      {"MfOptions::l2", "regularization"},    {"TrainerOptions::workers", "threads"}};
  for (const auto& [from, to] : kNames)
    for (auto at = message.find(from); at != std::string::npos; at = message.find(from, at + to.size()))
      message.replace(at, from.size(), to);
  return message;
}

struct MfSettings {
  std::size_t factors = 32, epochs = 20, threads = 1;
  float learning_rate = 0.02f, l2 = 0.05f, bias_l2 = 0.05f;
  std::uint64_t seed = 1;
  std::string policy = "racy", tau = "inf", schedule = "hogwild";
  bool adagrad = false;
};

// FitOptions as `asgd mf train` makes them from its flags (apps/mf_cmd.cpp: trainer_options, fit_options), so
// that one worker and one seed give its model byte for byte: a constant rate with no floor, 4096 ratings a step.
FitOptions fit_options(const MfSettings& s) {
  FitOptions o;
  o.model.factors = s.factors;
  o.model.l2 = s.l2;
  o.model.bias_l2 = s.bias_l2;
  o.trainer.workers = s.threads;
  o.trainer.epochs = s.epochs;
  o.trainer.seed = s.seed;
  o.trainer.step_examples = 4096;
  o.trainer.schedule.kind = asgd::ScheduleKind::constant;
  o.trainer.schedule.lr = s.learning_rate;
  o.trainer.schedule.floor = 0.0f;
  o.trainer.schedule.adagrad = s.adagrad;
  o.trainer.consistency = asgd::parse_consistency(s.policy);
  o.trainer.tau = asgd::parse_tau(s.tau);
  if (s.schedule != "hogwild" && s.schedule != "blocks")
    throw asgd::InputError("schedule '" + s.schedule + "': expected hogwild or blocks");
  o.trainer.blocks = s.schedule == "blocks";
  try {
    o.model.validate();
    o.trainer.validate();
    o.validate();
  } catch (const asgd::InputError& e) {
    throw asgd::InputError(python_names(e.what()));
  }
  return o;
}

SavedModel fit_mf(const IdArray& users, const IdArray& items, const FloatArray& ratings, std::size_t user_count,
                  std::size_t item_count, const MfSettings& settings) {
  const FitOptions base = fit_options(settings);
  Ratings data = ratings_from_arrays(span_of(users), span_of(items), span_of(ratings), user_count, item_count);
  std::atomic<bool> stop{false};
  FitOptions o = base;
  o.stop = &stop;
  FitReport report = asgd::python::run_interruptible(stop, [&] { return fit(std::move(data), o); });
  if (report.train.stopped) {  // a stop nobody asked for here (a signal's raised above): no model to return
    throw asgd::RuntimeError("fit: stopped before its last epoch (" + report.train.stop_reason + ")");
  }
  return saved_model(std::move(report), base);
}

SavedModel load(const std::string& path) {
  try {
    return read_saved_model(path);
  } catch (const asgd::Error& e) {
    if (const int err = file_errno(path, false)) raise_os_error(err, e.what(), path);
    throw;
  }
}

void save(const SavedModel& m, const std::string& path) {
  try {
    py::gil_scoped_release release;
    write_saved_model(path, m);
  } catch (const asgd::Error& e) {
    const int err = file_errno(path, true);
    raise_os_error(err ? err : EIO, e.what(), path);
  }
}

py::array_t<float> predict(const SavedModel& m, const IdArray& users, const IdArray& items) {
  py::array_t<float> out(users.size());
  const std::span<float> values(out.mutable_data(), static_cast<std::size_t>(out.size()));
  py::gil_scoped_release release;
  predict_rows(m.model, span_of(users), span_of(items), values);
  return out;
}

// Top-k lists as (ids, scores), one row per user, k = min(k, items) wide: a row with fewer items (seen ones
// left out) is padded with id -1 and score -inf.
py::tuple recommend(const SavedModel& m, const IdArray& users, std::size_t k, const IdArray& seen_users,
                    const IdArray& seen_items) {
  const FactorLayout f = FactorLayout::of(m.model.store->layout());
  std::vector<std::vector<Recommendation>> lists;
  {
    py::gil_scoped_release release;
    const SeenItems seen = seen_items_from_arrays(span_of(seen_users), span_of(seen_items), f.users, f.items);
    lists = recommend_rows(m.model, seen_users.size() ? &seen : nullptr, span_of(users), k);
  }
  const std::size_t n = lists.size(), width = std::min(k, f.items);
  py::array_t<std::int32_t> ids({n, width});
  py::array_t<float> scores({n, width});
  auto id = ids.mutable_unchecked<2>();
  auto score = scores.mutable_unchecked<2>();
  for (std::size_t u = 0; u < n; ++u) {
    for (std::size_t j = 0; j < width; ++j) {
      const bool have = j < lists[u].size();
      id(u, j) = have ? static_cast<std::int32_t>(lists[u][j].item) : -1;
      score(u, j) = have ? lists[u][j].score : -std::numeric_limits<float>::infinity();
    }
  }
  return py::make_tuple(ids, scores);
}

// rows x cols floats of the model's parameters from `offset`, rows `stride` floats apart: a view that keeps the
// model (`self`) alive, writable when the store is.
py::array parameter_view(const py::object& self, std::size_t offset, std::size_t rows, std::size_t cols,
                         std::size_t stride) {
  const asgd::ParamStore& store = *self.cast<const SavedModel&>().model.store;
  auto* first = const_cast<float*>(store.data()) + offset;
  py::array view(py::dtype::of<float>(), {rows, cols}, {stride * sizeof(float), sizeof(float)}, first, self);
  if (!store.writable()) view.attr("setflags")(py::arg("write") = false);
  return view;
}

FactorLayout layout_of(const py::object& self) {
  return FactorLayout::of(self.cast<const SavedModel&>().model.store->layout());
}

void bind_model(py::module_& m) {
  py::class_<SavedModel>(m, "Model", "A trained mf model (asgd.MatrixFactorization holds one).")
      .def("save", &save, py::arg("path"))
      .def("predict", &predict, py::arg("users"), py::arg("items"))
      .def("recommend", &recommend, py::arg("users"), py::arg("k"), py::arg("seen_users"), py::arg("seen_items"))
      .def_property_readonly("user_factors", [](const py::object& self) {
        const FactorLayout f = layout_of(self);
        return parameter_view(self, f.p, f.users, f.factors, f.stride);
      })
      .def_property_readonly("item_factors", [](const py::object& self) {
        const FactorLayout f = layout_of(self);
        return parameter_view(self, f.q, f.items, f.factors, f.stride);
      })
      .def_property_readonly("user_biases", [](const py::object& self) -> py::object {
        const FactorLayout f = layout_of(self);
        if (!f.has_user_bias) return py::none();
        return parameter_view(self, f.user_bias, f.users, 1, 1).attr("reshape")(f.users);
      })
      .def_property_readonly("item_biases", [](const py::object& self) {
        const FactorLayout f = layout_of(self);
        return parameter_view(self, f.item_bias, f.items, 1, 1).attr("reshape")(f.items);
      })
      .def_property_readonly("user_names", [](const SavedModel& s) { return s.model.users.names(); })
      .def_property_readonly("item_names", [](const SavedModel& s) { return s.model.items.names(); })
      .def_property_readonly("loss", [](const SavedModel& s) { return s.model.loss; })
      .def_property_readonly("epochs", [](const SavedModel& s) { return s.model.epochs; })
      .def_property_readonly("cold_users", [](const SavedModel& s) { return s.model.cold.users; })
      .def_property_readonly("cold_items", [](const SavedModel& s) { return s.model.cold.items; });
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "asgd's library calls for the asgd package (use asgd, not asgd._core)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const asgd::InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const asgd::RuntimeError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  py::class_<MfSettings>(m, "MfSettings")
      .def(py::init<>())
      .def_readwrite("factors", &MfSettings::factors)
      .def_readwrite("epochs", &MfSettings::epochs)
      .def_readwrite("threads", &MfSettings::threads)
      .def_readwrite("learning_rate", &MfSettings::learning_rate)
      .def_readwrite("l2", &MfSettings::l2)
      .def_readwrite("bias_l2", &MfSettings::bias_l2)
      .def_readwrite("seed", &MfSettings::seed)
      .def_readwrite("policy", &MfSettings::policy)
      .def_readwrite("tau", &MfSettings::tau)
      .def_readwrite("schedule", &MfSettings::schedule)
      .def_readwrite("adagrad", &MfSettings::adagrad);
  bind_model(m);
  bind_w2v(m);
  m.def("fit_mf", &fit_mf, py::arg("users"), py::arg("items"), py::arg("ratings"), py::arg("user_count"),
        py::arg("item_count"), py::arg("settings"),
        "Trains a squared-loss model on ratings given as arrays (ids kept as rows); Ctrl-C stops it.");
  m.def("load", &load, py::arg("path"), "A model file as `asgd mf train` writes it.");
}
