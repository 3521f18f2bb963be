// asgd._core's word2vec: sparse::w2v::train_word2vec on a corpus file (the Python package streams an iterable of
// sentences to one), the vectors it keeps (Word2VecOptions::keep_vectors) as a numpy view, and the library's
// neighbours, analogies, similarity pairs and word2vec-format files on them. No training logic here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/rank_group.hpp"
#include "asgd/sparse/word2vec/embeddings.hpp"
#include "asgd/sparse/word2vec/evaluation.hpp"
#include "asgd/sparse/word2vec/training.hpp"
#include "interruptible.hpp"
#include "os_error.hpp"
#include "report.hpp"

namespace py = pybind11;
namespace w2v = asgd::sparse::w2v;

namespace {

// The constructor's arguments as asgd.Word2Vec (gensim) names them; 0 for max_vocab and workers: none, all cores.
struct W2vSettings {
  std::string corpus;
  std::size_t vector_size = 100, window = 5, min_count = 5, max_vocab = 0, workers = 0, negative = 5, epochs = 5;
  bool sg = false, hs = false;
  std::optional<bool> batch;  // None: HogBatch wherever it applies (the library's default)
  double sample = 1e-3;
  float alpha = 0.025f;
  std::uint64_t seed = 1;
  std::string policy = "racy", tau = "inf";
};

// The library's names of the options in its messages, as the Python constructor names them.
std::string python_names(std::string message) {
  constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"Word2VecOptions::corpus", "corpus_file"}, {"Word2VecOptions::dim", "vector_size"},
      {"ModelOptions::dim", "vector_size"},       {"Word2VecOptions::window", "window"},
      {"ModelOptions::window", "window"},         {"Word2VecOptions::negative", "negative"},
      {"ModelOptions::negative", "negative"},     {"Word2VecOptions::sample", "sample"},
      {"ModelOptions::sample", "sample"},         {"Word2VecOptions::min_count", "min_count"},
      {"VocabOptions::min_count", "min_count"},   {"Word2VecOptions::max_vocab", "max_final_vocab"},
      {"Word2VecOptions::workers", "workers"},    {"Word2VecOptions::epochs", "epochs"},
      {"Word2VecOptions::alpha", "alpha"},        {"Word2VecOptions::policy", "policy"},
      {"Word2VecOptions::tau", "tau"},            {"Word2VecOptions::seed", "seed"},
      {"Word2VecOptions::hs", "hs"},              {"ModelOptions::hs", "hs"},
      {"Word2VecOptions::cbow", "sg"},            {"ModelOptions::cbow", "sg"},
      {"Word2VecOptions::batch", "batch"},        {"ModelOptions::batch", "batch"}};
  for (const auto& [from, to] : kNames)
    for (auto at = message.find(from); at != std::string::npos; at = message.find(from, at + to.size()))
      message.replace(at, from.size(), to);
  return message;
}

// Word2VecOptions as `asgd w2v` makes them from the same flags (-cbow, -size, ... -threads, -seed), so that one
// worker and one seed give its vectors byte for byte.
w2v::Word2VecOptions word2vec_options(const W2vSettings& s) {
  w2v::Word2VecOptions o;
  o.corpus = s.corpus;
  o.cbow = !s.sg;
  o.hs = s.hs;
  o.batch = s.batch;
  o.dim = s.vector_size;
  o.window = s.window;
  o.negative = s.negative;
  o.sample = s.sample;
  o.min_count = s.min_count;
  if (s.max_vocab > 0) o.max_vocab = s.max_vocab;
  if (s.workers > 0) o.workers = s.workers;
  o.epochs = s.epochs;
  o.alpha = s.alpha;
  o.seed = s.seed;
  o.policy = s.policy;
  o.tau = s.tau;
  o.keep_vectors = true;
  return o;
}

// Trained (or read) vectors: the library's Embeddings, and the unit vectors and lowercase index the neighbour
// calls and evaluations need, made on their first use (a copy, as gensim's norms: change `vectors` in place and
// call forget_index() for the calls to see it).
struct Vectors {
  w2v::Embeddings embeddings;
  std::unique_ptr<w2v::EmbeddingIndex> index_;

  const w2v::EmbeddingIndex& index() {
    if (!index_) {
      py::gil_scoped_release release;
      index_ = std::make_unique<w2v::EmbeddingIndex>(embeddings);
    }
    return *index_;
  }
};

// The run's figures for Word2Vec's report: the engine's (report.hpp: losses, staleness, ...; its examples are
// sentences) and words, those of the corpus file (every token, as gensim's raw word count), per epoch, over the
// training seconds (reading the corpus not included).
py::dict report_of(const w2v::Word2VecReport& r) {
  py::dict d = asgd::python::train_report(r.train);
  const double words = static_cast<double>(r.start.corpus.tokens) * static_cast<double>(r.train.epochs.size());
  d["vocabulary"] = r.vocabulary;
  d["workers"] = r.workers;
  d["epochs"] = r.train.epochs.size();
  d["corpus_words"] = r.start.corpus.tokens;
  d["kept_words"] = r.start.corpus.kept_tokens;
  d["prepare_seconds"] = r.prepare_seconds;
  d["train_seconds"] = r.train.seconds;
  d["words_per_second"] = r.train.seconds > 0 ? words / r.train.seconds : 0.0;
  return d;
}

// Trains on settings.corpus, telling `progress` (report.hpp, with words_per_second) while it runs; Ctrl-C stops
// training at its next step (KeyboardInterrupt). Returns (vectors, report). A corpus that cannot be read is
// OSError.
py::tuple train(const W2vSettings& settings, const py::object& progress) {
  const w2v::Word2VecOptions o = word2vec_options(settings);
  std::atomic<bool> stop{false};
  double words_per_sentence = 0;  // known once the corpus is read, before the first progress event
  asgd::python::ProgressErrors progress_errors;
  w2v::Word2VecEvents events;
  events.on_start = [&](const w2v::Word2VecStart& start, asgd::TrainingRun& run) {
    words_per_sentence = start.words_per_sentence;
    run.use_stop_flag(&stop);
  };
  events.on_progress = asgd::python::progress_callback(progress, progress_errors, &words_per_sentence);
  w2v::Word2VecReport r;
  try {
    r = asgd::python::run_interruptible(stop, [&] {
      asgd::RankGroup one_process;
      return w2v::train_word2vec(o, one_process, events);
    });
  } catch (const asgd::InputError& e) {
    asgd::python::raise_if_file_error(python_names(e.what()), o.corpus, false);
    throw asgd::InputError(python_names(e.what()));
  }
  if (progress_errors.raised) throw std::move(*progress_errors.raised);
  if (r.train.stopped || !r.vectors)  // a stop nobody asked for here (a signal's raised above)
    throw asgd::RuntimeError("Word2Vec: stopped before its last epoch (" + r.train.stop_reason + ")");
  auto vectors = std::make_unique<Vectors>();
  vectors->embeddings = std::move(*r.vectors);
  return py::make_tuple(py::cast(std::move(vectors)), report_of(r));
}

std::unique_ptr<Vectors> load(const std::string& path) {
  auto v = std::make_unique<Vectors>();
  try {
    py::gil_scoped_release release;
    v->embeddings = w2v::read_word2vec(path);
  } catch (const asgd::Error& e) {
    asgd::python::raise_if_file_error(e.what(), path, false);
    throw;
  }
  return v;
}

void save(const Vectors& v, const std::string& path, bool binary) {
  try {
    py::gil_scoped_release release;
    w2v::write_word2vec(path, binary, v.embeddings);
  } catch (const asgd::Error& e) {
    const int err = asgd::python::file_errno(path, true);
    asgd::python::raise_os_error(err ? err : EIO, e.what(), path);
  }
}

// The vectors, words x dim float32, a view of the library's Embeddings (kept alive by `self`), writable.
py::array vectors_view(const py::object& self) {
  w2v::Embeddings& e = self.cast<Vectors&>().embeddings;
  const std::size_t rows = e.size(), cols = e.dim;
  return py::array(py::dtype::of<float>(), {rows, cols}, {cols * sizeof(float), sizeof(float)}, e.vectors.data(),
                   self);
}

py::tuple most_similar(Vectors& v, const std::vector<std::size_t>& positive, const std::vector<std::size_t>& negative,
                       std::size_t k) {
  const w2v::EmbeddingIndex& index = v.index();
  std::vector<std::pair<std::size_t, float>> near;
  {
    py::gil_scoped_release release;
    near = index.most_similar(positive, negative, k);
  }
  py::array_t<std::int64_t> ids(static_cast<py::ssize_t>(near.size()));
  py::array_t<float> scores(static_cast<py::ssize_t>(near.size()));
  for (std::size_t i = 0; i < near.size(); ++i) {
    ids.mutable_at(i) = static_cast<std::int64_t>(near[i].first);
    scores.mutable_at(i) = near[i].second;
  }
  return py::make_tuple(ids, scores);
}

py::dict evaluate_analogies(Vectors& v, const std::string& path, std::size_t restrict_vocab) {
  const w2v::EmbeddingIndex& index = v.index();
  w2v::AnalogyReport r;
  try {
    py::gil_scoped_release release;
    r = w2v::evaluate_analogies(index, path, restrict_vocab);
  } catch (const asgd::InputError& e) {
    asgd::python::raise_if_file_error(e.what(), path, false);
    throw;
  }
  py::list sections;
  for (const auto& s : r.sections) {
    py::dict d;
    d["section"] = s.name;
    d["correct"] = s.correct;
    d["seen"] = s.seen;
    d["total"] = s.total;
    sections.append(d);
  }
  py::dict d;
  d["accuracy"] = r.accuracy();
  d["correct"] = r.correct;
  d["seen"] = r.seen;
  d["total"] = r.total;
  d["semantic_accuracy"] = r.semantic_accuracy;
  d["syntactic_accuracy"] = r.syntactic_accuracy;
  d["sections"] = sections;
  return d;
}

py::tuple evaluate_similarity(Vectors& v, const std::string& path) {
  const w2v::EmbeddingIndex& index = v.index();
  w2v::SimilarityReport r;
  try {
    py::gil_scoped_release release;
    r = w2v::evaluate_similarity(index, path);
  } catch (const asgd::InputError& e) {
    asgd::python::raise_if_file_error(e.what(), path, false);
    throw;
  }
  return py::make_tuple(r.spearman, r.pairs_used, r.pairs_total);
}

}  // namespace

void bind_w2v(py::module_& m) {
  py::class_<W2vSettings>(m, "W2vSettings")
      .def(py::init<>())
      .def_readwrite("corpus", &W2vSettings::corpus)
      .def_readwrite("vector_size", &W2vSettings::vector_size)
      .def_readwrite("window", &W2vSettings::window)
      .def_readwrite("min_count", &W2vSettings::min_count)
      .def_readwrite("max_vocab", &W2vSettings::max_vocab)
      .def_readwrite("workers", &W2vSettings::workers)
      .def_readwrite("negative", &W2vSettings::negative)
      .def_readwrite("epochs", &W2vSettings::epochs)
      .def_readwrite("sg", &W2vSettings::sg)
      .def_readwrite("hs", &W2vSettings::hs)
      .def_readwrite("batch", &W2vSettings::batch)
      .def_readwrite("sample", &W2vSettings::sample)
      .def_readwrite("alpha", &W2vSettings::alpha)
      .def_readwrite("seed", &W2vSettings::seed)
      .def_readwrite("policy", &W2vSettings::policy)
      .def_readwrite("tau", &W2vSettings::tau);
  py::class_<Vectors>(m, "Vectors", "Word vectors (asgd.KeyedVectors holds one).")
      .def_property_readonly("vectors", &vectors_view)
      .def_property_readonly("words", [](const Vectors& v) { return v.embeddings.words; })
      .def_property_readonly("binary", [](const Vectors& v) { return v.embeddings.binary; })
      .def("forget_index", [](Vectors& v) { v.index_.reset(); })
      .def("save", &save, py::arg("path"), py::arg("binary"))
      .def("most_similar", &most_similar, py::arg("positive"), py::arg("negative"), py::arg("k"))
      .def("similarity", [](Vectors& v, std::size_t a, std::size_t b) { return v.index().similarity(a, b); })
      .def("evaluate_analogies", &evaluate_analogies, py::arg("path"), py::arg("restrict_vocab"))
      .def("evaluate_similarity", &evaluate_similarity, py::arg("path"));
  m.def("train_w2v", &train, py::arg("settings"), py::arg("progress") = py::none(),
        "Trains word2vec on settings.corpus (a file); returns (Vectors, report dict). Ctrl-C stops it.");
  m.def("load_w2v", &load, py::arg("path"), "Word vectors from a word2vec text or binary file (detected).");
}
