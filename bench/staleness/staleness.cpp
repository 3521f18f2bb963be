#include "staleness.hpp"

#include <fmt/format.h>

#include <utility>

#include "asgd/dense/trainer.hpp"
#include "asgd/engine/atomic_file.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/sparse/mf/metrics.hpp"
#include "asgd/sparse/mf/model.hpp"
#include "asgd/sparse/word2vec/embeddings.hpp"

namespace asgd::bench {

std::vector<Setting> setting_grid(std::span<const Consistency> policies, std::span<const std::size_t> workers,
                                  std::span<const std::uint64_t> taus) {
  std::vector<Setting> out;
  for (auto p : policies)
    for (auto w : workers)
      for (auto t : taus) out.push_back({p, w, t});
  return out;
}

CsvLog::CsvLog(std::filesystem::path path, std::string header) : path_(std::move(path)), header_(std::move(header)) {
  try {
    AtomicFile::check(path_);
  } catch (const InputError& e) {
    throw InputError(fmt::format("cannot write the CSV: {}", e.what()));
  }
}

void CsvLog::begin() {
  out_.open(path_);
  out_ << header_ << '\n';
  if (!out_.flush()) throw InputError(fmt::format("{}: cannot write the CSV", path_.string()));
}

void CsvLog::row(std::string_view line) {
  out_ << line;
  if (!out_.flush()) throw RuntimeError(fmt::format("{}: writing the CSV failed", path_.string()));
}

void CsvLog::close() {
  out_.close();
  if (!out_) throw RuntimeError(fmt::format("{}: writing the CSV failed", path_.string()));
}

namespace {

// The engine options of one swept setting; the caller adds the schedule.
TrainerOptions setting_options(const Setting& s, std::uint64_t epochs, std::size_t step_examples) {
  TrainerOptions o;
  o.workers = s.workers;
  o.epochs = epochs;
  o.consistency = s.policy;
  o.tau = s.tau;
  o.step_examples = step_examples;
  return o;
}

}  // namespace

LinearSweep::LinearSweep(const sparse::GeneratorOptions& gen, double l2) : reference_(gen, l2) {}

const char* LinearSweep::csv_header() {
  return "problem,policy,workers,tau,epoch,seconds,objective,relative_gap,mean_staleness,max_staleness,max_lead,"
         "examples_per_second";
}

SettingResult LinearSweep::run(const Setting& s, std::uint64_t epochs, std::size_t step_examples, CsvLog& csv) const {
  TrainerOptions o = setting_options(s, epochs, step_examples);
  o.schedule = sparse::reference_schedule();
  auto store = ParamStore::on_heap(reference_.problem.layout());
  Trainer trainer(store, o);
  SettingResult result;
  TrainReport total;  // its seconds leave out the evaluation between epochs
  for (std::uint64_t e = 1; e <= epochs; ++e) {
    const auto r = trainer.run(reference_.problem, e);
    total.append(r);
    result.objective = reference_.problem.objective(store.snapshot());
    result.gap = (result.objective - reference_.optimum.objective) / reference_.optimum.objective;
    csv.row(fmt::format("linear,{},{},{},{},{:.6f},{:.10f},{:.6e},{:.4f},{},{},{:.1f}\n", to_string(s.policy),
                        s.workers, tau_to_string(s.tau), e, total.seconds, result.objective, result.gap,
                        r.staleness.mean(), r.staleness.max(), r.max_lead, r.examples_per_second));
  }
  result.missed_optimum = !(result.gap <= kOptimumGap);
  result.seconds = total.seconds;
  result.mean_staleness = total.staleness.mean();
  result.max_lead = total.max_lead;
  return result;
}

W2vSweep::W2vSweep(const std::filesystem::path& corpus, const std::filesystem::path& analogies) {
  namespace w2v = sparse::w2v;
  w2v::TokenReader reader(corpus.string());
  w2v::CorpusStats counted;
  vocab_ = w2v::count_vocabulary(reader, {5, 0}, &counted);
  corpus_ = w2v::encode_corpus(reader, vocab_, counted.kept_tokens);  // reserved at once
  options_.cbow = false;
  options_.sample = 1e-4;
  model_ = std::make_unique<w2v::Word2Vec>(corpus_, vocab_, options_);
  if (!analogies.empty()) questions_ = w2v::read_analogy_questions(analogies.string());
}

const char* W2vSweep::csv_header() {
  return "problem,policy,workers,tau,epoch,seconds,loss,mean_staleness,max_staleness,max_lead,words_per_second,"
         "analogy_accuracy";
}

SettingResult W2vSweep::run(const Setting& s, std::uint64_t epochs, std::size_t step_examples, CsvLog& csv) const {
  namespace w2v = sparse::w2v;
  TrainerOptions o = setting_options(s, epochs, step_examples);
  o.schedule.kind = ScheduleKind::linear;
  o.schedule.lr = 0.025f;
  o.schedule.floor = 1e-4f;
  auto store = ParamStore::on_heap(model_->layout());
  model_->initialize(store, o.seed);
  Trainer trainer(store, o);
  SettingResult result;
  std::uint64_t examples = 0;
  for (std::uint64_t e = 1; e <= epochs; ++e) {
    const auto r = trainer.run(*model_, e);
    result.seconds += r.seconds;
    examples += r.examples;
    result.loss = r.epochs.back().loss;
    std::string accuracy;
    if (e == epochs && !questions_.empty()) {
      w2v::Embeddings vectors{vocab_.words(), options_.dim, store.snapshot("input")};
      result.analogy_accuracy =
          w2v::evaluate_analogies(w2v::EmbeddingIndex(std::move(vectors)), questions_).accuracy();
      accuracy = fmt::format("{:.6f}", result.analogy_accuracy);
    }
    csv.row(fmt::format("w2v,{},{},{},{},{:.6f},{:.6f},{:.4f},{},{},{:.0f},{}\n", to_string(s.policy), s.workers,
                        tau_to_string(s.tau), e, result.seconds, result.loss, r.staleness.mean(), r.staleness.max(),
                        r.max_lead, r.examples_per_second * model_->words_per_example(), accuracy));
  }
  result.rate = static_cast<double>(examples) * model_->words_per_example() / result.seconds;
  return result;
}

MfSweep::MfSweep(sparse::mf::Ratings all, std::string_view source) : split_(sparse::mf::random_split(all, 0.1, 42)) {
  if (split_.test.size() == 0 || split_.train.size() == 0) {
    throw InputError(fmt::format("{}: {} rating(s) leave {} for the test split (10 %); give more ratings", source,
                                 all.size(), split_.test.size()));
  }
}

const char* MfSweep::csv_header() {
  return "problem,schedule,policy,workers,tau,epoch,seconds,loss,test_rmse,mean_staleness,max_staleness,max_lead,"
         "examples_per_second";
}

SettingResult MfSweep::run(const Setting& s, bool blocks, std::uint64_t epochs, std::size_t step_examples,
                           CsvLog& csv) const {
  namespace mf = sparse::mf;
  mf::MfOptions mo;
  mo.factors = 32;
  if (blocks) mo.bins = 2 * s.workers + 1;
  const mf::BiasedMf problem(split_.train, mo, 1);
  TrainerOptions o = setting_options(s, epochs, step_examples);
  if (blocks) o.tau = kUnbounded;
  o.blocks = blocks;
  o.schedule.kind = ScheduleKind::constant;
  o.schedule.lr = 0.02f;
  auto store = ParamStore::on_heap(problem.layout());
  mf::initialize_factors(store, o.seed, mo.init_scale);
  Trainer trainer(store, o);
  SettingResult result;
  StalenessHistogram stale;
  const std::string tau = blocks ? "blocks" : tau_to_string(s.tau);
  for (std::uint64_t e = 1; e <= epochs; ++e) {
    const auto r = trainer.run(problem, e);
    result.seconds += r.seconds;
    stale.merge(r.staleness);
    result.test_rmse = mf::evaluate_errors(store, problem.rating_scale(), split_.test).rmse;
    csv.row(fmt::format("mf,{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.4f},{},{},{:.1f}\n",
                        blocks ? "blocks" : "hogwild", to_string(s.policy), s.workers, tau, e, result.seconds,
                        2.0 * r.epochs.back().loss, result.test_rmse, r.staleness.mean(), r.staleness.max(),
                        r.max_lead, r.examples_per_second));
  }
  result.rate = static_cast<double>(problem.num_examples()) * static_cast<double>(epochs) / result.seconds;
  result.mean_staleness = stale.mean();
  return result;
}

CnnSweep::CnnSweep(dense::TrainTest data) : data_(std::move(data)), net_(dense::lenet5()) {}

const char* CnnSweep::csv_header() {
  return "problem,policy,workers,tau,epoch,seconds,images_per_s,train_loss,test_error,test_accuracy,"
         "mean_staleness,max_staleness,momentum,lr";
}

SettingResult CnnSweep::run(const Setting& s, bool compensate, std::uint64_t epochs, CsvLog& csv) const {
  ParamStore store = ParamStore::on_heap(net_.layout());
  std::vector<float> init(store.size()), momentum;
  net_.initialize(init, 1);
  store.assign(init);
  dense::TrainOptions o;
  o.epochs = epochs;
  o.batch = 64;
  o.workers = s.workers;
  o.tau = s.tau;
  o.lr = 0.02f;
  o.momentum = 0.9f;
  o.weight_decay = 5e-4f;
  o.schedule = dense::TrainOptions::Schedule::cosine;
  o.compensate = compensate;
  const char* policy = compensate ? "compensated" : "plain";
  SettingResult result;
  dense::train(net_, store, momentum, data_.train, &data_.test, o, [&](const dense::EpochReport& r) {
    result.seconds += r.seconds;
    result.mean_staleness = r.mean_staleness;
    result.test_accuracy = r.test_accuracy;
    csv.row(fmt::format("cnn,{},{},{},{},{:.4f},{:.1f},{:.6f},{:.6f},{:.6f},{:.4f},{},{:.4f},{:.6f}\n", policy,
                        s.workers, tau_to_string(s.tau), r.epoch, result.seconds, r.images_per_second, r.mean_loss,
                        1.0 - r.test_accuracy, r.test_accuracy, r.mean_staleness, r.max_staleness, r.momentum,
                        r.lr));
  });
  result.rate = static_cast<double>(data_.train.size()) * static_cast<double>(epochs) / result.seconds;
  return result;
}

}  // namespace asgd::bench
