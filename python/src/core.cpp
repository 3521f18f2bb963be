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
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/schedule.hpp"
#include "asgd/sparse/mf/arrays.hpp"
#include "asgd/sparse/mf/fit.hpp"
#include "asgd/sparse/mf/fold_in.hpp"
#include "asgd/sparse/mf/saved_model.hpp"
#include "asgd/sparse/mf/similar.hpp"
#include "interruptible.hpp"
#include "report.hpp"

namespace py = pybind11;
using namespace asgd::sparse::mf;

void bind_w2v(py::module_& m);  // w2v.cpp
void bind_linear(py::module_& m);  // linear.cpp

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
      {"MfOptions::l2", "regularization"},    {"TrainerOptions::workers", "threads"},
      {"FitOptions::positive", "positive"},   {"TrainerOptions::tau", "tau"},
      {"FitOptions::order", "schedule"}};
  for (const auto& [from, to] : kNames)
    for (auto at = message.find(from); at != std::string::npos; at = message.find(from, at + to.size()))
      message.replace(at, from.size(), to);
  return message;
}

struct MfSettings {
  std::size_t factors = 32, epochs = 20, threads = 1;
  float learning_rate = 0.02f, l2 = 0.05f, bias_l2 = 0.05f;
  std::uint64_t seed = 1;
  std::string policy = "racy", tau = "inf", schedule = "auto";
  bool adagrad = false;
  std::string loss = "squared";  // or "bpr" (implicit feedback: the ratings >= positive)
  float positive = 4.0f;
  // Train in this shared segment (empty: the heap), the model file written as training begins and at its end.
  std::string shm, model_file;
};

// FitOptions as `asgd mf train` makes them from its flags (apps/mf_cmd.cpp: trainer_options, fit_options), so
// that one worker and one seed give its model byte for byte: a constant rate (bpr: linear) with no floor, 4096
// ratings a step.
FitOptions fit_options(const MfSettings& s) {
  FitOptions o;
  o.loss = parse_loss(s.loss);
  const bool bpr = o.loss == Loss::bpr;
  o.positive = s.positive;
  o.shm = s.shm;
  o.model_file = s.model_file;
  o.model.factors = s.factors;
  o.model.l2 = s.l2;
  o.model.bias_l2 = s.bias_l2;
  o.trainer.workers = s.threads;
  o.trainer.epochs = s.epochs;
  o.trainer.seed = s.seed;
  o.trainer.step_examples = 4096;
  o.trainer.schedule.kind = bpr ? asgd::ScheduleKind::linear : asgd::ScheduleKind::constant;
  o.trainer.schedule.lr = s.learning_rate;
  o.trainer.schedule.floor = 0.0f;
  o.trainer.schedule.adagrad = s.adagrad;
  o.trainer.consistency = asgd::parse_consistency(s.policy);
  o.trainer.tau = asgd::parse_tau(s.tau);
  try {
    o.order = parse_order(s.schedule);
    o.validate();  // the model's, the engine's and fit's own
  } catch (const asgd::InputError& e) {
    throw asgd::InputError(python_names(e.what()));
  }
  return o;
}

// What fit_mf tells of each epoch: (epoch, loss, seconds, validation RMSE or None), as Python reads it back.
using EpochRecord = std::tuple<std::uint64_t, double, double, std::optional<double>>;

// Trains on ratings given as arrays (ids kept as rows: user_count and item_count rows), with an optional
// validation set of the same ids scored after every epoch (squared only), from `initial`'s factors when given
// (more epochs on a model trained before; its rows must be at most the counts). `callback(epoch, loss)` runs
// after each epoch on the training thread with the GIL taken for it alone (the workers keep going meanwhile);
// an exception it raises, or one `progress` (report.hpp) raises, stops the run and is raised here. Returns
// (model, the epochs' records, the run's report, interrupt): on Ctrl-C the model of the last finished epoch
// (None when none finished) and the KeyboardInterrupt for the caller to raise once it has kept them; else None.
py::tuple fit_mf(const IdArray& users, const IdArray& items, const FloatArray& ratings, std::size_t user_count,
                 std::size_t item_count, const MfSettings& settings, const std::optional<IdArray>& valid_users,
                 const std::optional<IdArray>& valid_items, const std::optional<FloatArray>& valid_ratings,
                 const py::object& callback, const SavedModel* initial, const py::object& progress) {
  FitOptions o = fit_options(settings);
  Ratings data = ratings_from_arrays(span_of(users), span_of(items), span_of(ratings), user_count, item_count);
  std::optional<Ratings> validation;
  if (valid_users) {
    validation = ratings_from_arrays(span_of(*valid_users), span_of(*valid_items), span_of(*valid_ratings),
                                     user_count, item_count);
  }
  std::atomic<bool> stop{false};
  o.stop = &stop;
  o.keep_last_epoch = true;
  asgd::python::ProgressErrors progress_errors;
  o.on_progress = asgd::python::progress_callback(progress, progress_errors);
  if (initial != nullptr) o.initial = &*initial->model.store;
  std::vector<EpochRecord> records;
  std::optional<py::error_already_set> raised;  // by the callback; destroyed here, with the GIL held
  FitEvents events;
  events.on_epoch = [&](const FitEpoch& e) {
    records.emplace_back(e.epoch, e.loss, e.seconds, e.validation_rmse);
    if (callback.is_none() || raised) return;
    py::gil_scoped_acquire gil;
    try {
      callback(e.epoch, e.loss);
    } catch (py::error_already_set& error) {
      raised.emplace(std::move(error));
      stop.store(true, std::memory_order_relaxed);
    }
  };
  auto [report, interrupt] = asgd::python::run_interruptible_keeping(stop, [&] {
    asgd::RankGroup one_process;
    return fit(std::move(data), o, one_process, events, std::move(validation));
  });
  if (raised) throw std::move(*raised);
  if (progress_errors.raised) throw std::move(*progress_errors.raised);
  if (report.train.stopped && !interrupt) {  // a stop nobody asked for here
    throw asgd::RuntimeError("fit: stopped before its last epoch (" + report.train.stop_reason + ")");
  }
  py::dict run = asgd::python::train_report(report.train);
  py::object model = py::none();
  if (report.model) model = py::cast(saved_model(std::move(report)));
  return py::make_tuple(model, records, run, interrupt ? interrupt->value() : py::none());
}

SavedModel load(const std::string& path) {
  try {
    return read_saved_model(path);
  } catch (const asgd::Error& e) {
    if (const int err = file_errno(path, false)) raise_os_error(err, e.what(), path);
    throw;
  }
}

// A model served live from the shared segment `shm` that a fit trains (read-only), its ids and scale from the
// model file that fit wrote as training began (load_model's errors; OSError when the file cannot be read).
SavedModel attach(const std::string& shm, const std::string& path) {
  SavedModel s;
  try {
    py::gil_scoped_release release;
    s.model = load_model(path, shm);
  } catch (const asgd::Error& e) {
    if (const int err = file_errno(path, false)) raise_os_error(err, e.what(), path);
    throw;
  }
  return s;
}

// Removes the shared segment a model was trained in (this segment only, not one made again under its name);
// false when it holds none or it is gone.
bool remove_segment(const SavedModel& m) {
  const asgd::ParamStore& store = *m.model.store;
  if (!store.is_shared()) return false;
  return asgd::ParamStore::remove_shared(store.segment_name(), store.segment_id());
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

// Lists (one per row) as (ids, scores) arrays `width` wide, padded with id -1 and score -inf.
template <class List, class Id, class Score>
py::tuple padded_lists(const std::vector<List>& lists, std::size_t width, Id id_of, Score score_of) {
  const std::size_t n = lists.size();
  py::array_t<std::int32_t> ids({n, width});
  py::array_t<float> scores({n, width});
  auto id = ids.mutable_unchecked<2>();
  auto score = scores.mutable_unchecked<2>();
  for (std::size_t u = 0; u < n; ++u) {
    for (std::size_t j = 0; j < width; ++j) {
      const bool have = j < lists[u].size();
      id(u, j) = have ? static_cast<std::int32_t>(id_of(lists[u][j])) : -1;
      score(u, j) = have ? score_of(lists[u][j]) : -std::numeric_limits<float>::infinity();
    }
  }
  return py::make_tuple(ids, scores);
}

// Top-k lists as (ids, scores), one row per user, k = min(k, items) wide: a row with fewer items (seen ones
// and filter_items left out) is padded with id -1 and score -inf.
py::tuple recommend(const SavedModel& m, const IdArray& users, std::size_t k, const IdArray& seen_users,
                    const IdArray& seen_items, const IdArray& filter_items) {
  const FactorLayout f = FactorLayout::of(m.model.store->layout());
  std::vector<std::vector<Recommendation>> lists;
  {
    py::gil_scoped_release release;
    const SeenItems seen = seen_items_from_arrays(span_of(seen_users), span_of(seen_items), f.users, f.items);
    lists = recommend_rows(m.model, seen_users.size() ? &seen : nullptr, span_of(users), k, span_of(filter_items));
  }
  return padded_lists(lists, std::min(k, f.items), [](const Recommendation& r) { return r.item; },
                      [](const Recommendation& r) { return r.score; });
}

// Top-k lists of users folded in from their items (fold_in_user with `l2`): user j's items and ratings are
// items[indptr[j]:indptr[j+1]] (a CSR matrix's rows); with `exclude`, their items are left out of their list,
// and filter_items out of every list.
py::tuple recommend_folded_rows(const SavedModel& m, const IdArray& indptr, const IdArray& items,
                                const FloatArray& ratings, float l2, std::size_t k, bool exclude,
                                const IdArray& filter_items) {
  const FactorLayout f = FactorLayout::of(m.model.store->layout());
  const auto rows = indptr.size() ? static_cast<std::size_t>(indptr.size() - 1) : 0;
  std::vector<std::vector<Recommendation>> lists(rows);
  {
    py::gil_scoped_release release;
    if (items.size() != ratings.size()) throw asgd::InputError("recalculate_user: items and ratings differ in length");
    std::vector<std::uint32_t> mine, left_out, filtered;
    for (const std::int64_t i : span_of(filter_items)) {
      if (i < 0 || static_cast<std::size_t>(i) >= f.items) {
        throw asgd::InputError("filter_items: item " + std::to_string(i) + ": the model has " +
                               std::to_string(f.items) + " items");
      }
      filtered.push_back(static_cast<std::uint32_t>(i));
    }
    for (std::size_t u = 0; u < rows; ++u) {
      const std::int64_t from = indptr.data()[u], to = indptr.data()[u + 1];
      if (from < 0 || to < from || to > items.size()) throw asgd::InputError("recalculate_user: a bad row pointer");
      mine.clear();
      for (std::int64_t j = from; j < to; ++j) {
        const std::int64_t i = items.data()[j];
        if (i < 0 || static_cast<std::size_t>(i) >= f.items) {
          throw asgd::InputError("user_items: item " + std::to_string(i) + ": the model has " +
                                 std::to_string(f.items) + " items");
        }
        mine.push_back(static_cast<std::uint32_t>(i));
      }
      const std::span<const float> given(ratings.data() + from, static_cast<std::size_t>(to - from));
      const FoldedUser user = fold_in_user(m.model, mine, given, l2);
      left_out = filtered;
      if (exclude) left_out.insert(left_out.end(), mine.begin(), mine.end());
      lists[u] = recommend_folded(m.model, user, left_out, k);
    }
  }
  return padded_lists(lists, std::min(k, f.items), [](const Recommendation& r) { return r.item; },
                      [](const Recommendation& r) { return r.score; });
}

// The k nearest users or items of `rows` by cosine (similar_rows), as (ids, scores).
py::tuple similar(const SavedModel& m, bool users, const IdArray& rows, std::size_t k) {
  const FactorLayout f = FactorLayout::of(m.model.store->layout());
  std::vector<std::vector<Neighbour>> lists;
  {
    py::gil_scoped_release release;
    lists = similar_rows(*m.model.store, users ? FactorSide::users : FactorSide::items, span_of(rows), k);
  }
  return padded_lists(lists, std::min(k, users ? f.users : f.items), [](const Neighbour& n) { return n.row; },
                      [](const Neighbour& n) { return n.cosine; });
}

// (rmse, mae) of the model's predictions of ratings of its rows (error_metrics_rows).
py::tuple error_metrics(const SavedModel& m, const IdArray& users, const IdArray& items, const FloatArray& ratings) {
  ErrorMetrics e;
  {
    py::gil_scoped_release release;
    e = error_metrics_rows(m.model, span_of(users), span_of(items), span_of(ratings));
  }
  return py::make_tuple(e.rmse, e.mae);
}

// Ranking metrics at k of the model's full ranking (ranking_metrics_rows) as a dict: implicit's precision (hits
// over min(k, relevant), summed over the users), map, ndcg and auc, and the library's mean precision@k, recall,
// hit rate and the users scored.
py::dict ranking_metrics(const SavedModel& m, const IdArray& train_users, const IdArray& train_items,
                         const IdArray& test_users, const IdArray& test_items, std::size_t k) {
  RankingMetrics r;
  {
    py::gil_scoped_release release;
    r = ranking_metrics_rows(m.model, span_of(train_users), span_of(train_items), span_of(test_users),
                             span_of(test_items), k);
  }
  py::dict out;
  out["precision"] = r.capped_relevant ? static_cast<double>(r.hits) / static_cast<double>(r.capped_relevant) : 0.0;
  out["map"] = r.map;
  out["ndcg"] = r.ndcg;
  out["auc"] = r.auc;
  out["precision_at_k"] = r.precision;
  out["recall"] = r.recall;
  out["hit_rate"] = r.hit_rate;
  out["users"] = r.users;
  return out;
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
      .def("recommend", &recommend, py::arg("users"), py::arg("k"), py::arg("seen_users"), py::arg("seen_items"),
           py::arg("filter_items"))
      .def("recommend_folded", &recommend_folded_rows, py::arg("indptr"), py::arg("items"), py::arg("ratings"),
           py::arg("l2"), py::arg("k"), py::arg("exclude"), py::arg("filter_items"))
      .def("similar", &similar, py::arg("users"), py::arg("rows"), py::arg("k"))
      .def("remove_segment", &remove_segment)
      .def_property_readonly("segment", [](const SavedModel& s) {
        return s.model.store->is_shared() ? s.model.store->segment_name() : std::string();
      })
      .def("error_metrics", &error_metrics, py::arg("users"), py::arg("items"), py::arg("ratings"))
      .def("ranking_metrics", &ranking_metrics, py::arg("train_users"), py::arg("train_items"),
           py::arg("test_users"), py::arg("test_items"), py::arg("k"))
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
      .def_property_readonly("positive", [](const SavedModel& s) { return s.model.positive; })
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
      .def_readwrite("adagrad", &MfSettings::adagrad)
      .def_readwrite("loss", &MfSettings::loss)
      .def_readwrite("positive", &MfSettings::positive)
      .def_readwrite("shm", &MfSettings::shm)
      .def_readwrite("model_file", &MfSettings::model_file);
  bind_model(m);
  bind_w2v(m);
  bind_linear(m);
  m.def("fit_mf", &fit_mf, py::arg("users"), py::arg("items"), py::arg("ratings"), py::arg("user_count"),
        py::arg("item_count"), py::arg("settings"), py::arg("valid_users") = py::none(),
        py::arg("valid_items") = py::none(), py::arg("valid_ratings") = py::none(),
        py::arg("callback") = py::none(), py::arg("initial") = static_cast<const SavedModel*>(nullptr),
        py::arg("progress") = py::none(),
        "Trains a squared-loss or bpr model on ratings given as arrays (ids kept as rows): (model, epochs, report, "
        "interrupt); Ctrl-C stops it at its last finished epoch.");
  m.def("load", &load, py::arg("path"), "A model file as `asgd mf train` writes it.");
  m.def("attach", &attach, py::arg("shm"), py::arg("path"),
        "A read-only model on the live shared segment a fit trains, its ids from the fit's model file.");
}
