#include "distributed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "asgd/config.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/engine/fingerprint.hpp"
#include "asgd/net/allreduce.hpp"
#include "asgd/net/averaging.hpp"
#include "cli_common.hpp"
#if ASGD_HAVE_MPI
#include "asgd/net/mpi.hpp"
#endif

namespace asgd::cli {

struct MpiParts {
#if ASGD_HAVE_MPI
  std::unique_ptr<net::MpiSession> session;
  std::unique_ptr<net::MpiTransport> transport;
  std::unique_ptr<net::Allreduce> allreduce;
#endif
};

void add_distributed_flags(CLI::App& app, DistributedFlags& flags) {
  const auto noted = [&flags](std::string name) {
    return [&flags, name = std::move(name)](const std::string&) { flags.given.push_back(name); };
  };
  app.add_option("--allreduce", flags.allreduce, "Under mpirun: tree, ring or native (MPI_Allreduce)")
      ->capture_default_str()
      ->each(noted("allreduce"));
  app.add_option("--average-every", flags.average_every,
                 "Under mpirun: average the ranks' models every epoch, or every K local steps (in the background; "
                 "cnn: a blocking round after every K updates)")
      ->capture_default_str()
      ->each(noted("average-every"));
  app.add_flag("--average-weighted", flags.weighted, "Under mpirun: weight each rank by the examples it trained")
      ->each(noted("average-weighted"));
  app.add_option("--combine", flags.combine,
                 "Under mpirun: mean (model averaging) or sum (add every rank's update since the last round: "
                 "sparse models); default mean, for mf --loss bpr sum unless --average-weighted")
      ->each(noted("combine"));
}

void sum_unless_chosen(DistributedFlags& flags, bool combine_given) {
  if (!combine_given && !flags.weighted) flags.combine = "sum";
}

namespace {

std::uint64_t parse_every(const std::string& s, const std::string& dashes) {
  if (s == "epoch") return 0;
  std::uint64_t k = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), k);
  if (ec != std::errc{} || end != s.data() + s.size() || k == 0 || k > net::ModelAverager::kMostEverySteps) {
    throw InputError(fmt::format("{}average-every '{}': expected epoch or a number of steps from 1 to 2^40 - 1",
                                 dashes, s));
  }
  return k;
}
}  // namespace

Distributed::Distributed(const DistributedFlags& flags) : mpi_(std::make_unique<MpiParts>()) {
  dashes_ = flags.dashes;
  const std::string& d = dashes_;
  every_steps_ = parse_every(flags.average_every, d);
  weighted_ = flags.weighted;
  if (flags.combine != "mean" && flags.combine != "sum") {
    throw InputError(fmt::format("{}combine '{}': expected mean or sum", d, flags.combine));
  }
  sum_ = flags.combine == "sum";
  if (sum_ && weighted_)
    throw InputError(fmt::format("{}average-weighted weights the mean; it does not apply to {}combine sum", d, d));
  algorithm_ = parse_flag(d + "allreduce", [&] { return net::parse_algorithm(flags.allreduce); });
#if ASGD_HAVE_MPI
  if (!net::MpiSession::launched_by_mpi()) return;
  mpi_->session = std::make_unique<net::MpiSession>(nullptr, nullptr, MPI_THREAD_SERIALIZED);
  mpi_->transport = std::make_unique<net::MpiTransport>();
  rank_ = mpi_->transport->rank();
  size_ = mpi_->transport->size();
  mpi_->allreduce = algorithm_ == net::Algorithm::native ? net::make_native_allreduce(*mpi_->transport)
                                                         : net::make_allreduce(algorithm_, *mpi_->transport);
  if (rank_ != 0) {
    // One rank speaks for the job; the others' errors still reach stderr.
    std::fflush(stdout);
    if (std::freopen("/dev/null", "w", stdout) == nullptr) std::fclose(stdout);
  }
#else
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v) != nullptr) {
      throw InputError("started by mpirun, but this asgd was built without MPI (ASGD_WITH_MPI)");
    }
  }
#endif
}

Distributed::~Distributed() {
  // After an error the communication thread may still be in a collective;
  // a successful run has stopped it in finish().
  if (averager_) {
    try {
      averager_->stop();
    } catch (...) {
    }
  }
}

std::vector<std::size_t> Distributed::shard(std::size_t n, std::string_view what, bool equal) const {
  // Every rank has the same n, so all refuse alike: no rank goes on to wait for the others in a round.
  if (n < static_cast<std::size_t>(size_)) {
    throw InputError(fmt::format("{} {} cannot be shared by {} ranks (a rank would train none)", n, what, size_));
  }
  if (equal) n -= n % static_cast<std::size_t>(size_);
  std::vector<std::size_t> rows;
  rows.reserve(n / static_cast<std::size_t>(size_) + 1);
  for (std::size_t i = static_cast<std::size_t>(rank_); i < n; i += static_cast<std::size_t>(size_)) rows.push_back(i);
  return rows;
}

std::string Distributed::describe() const {
  return fmt::format("{} ranks, {} allreduce, {} every {}{}", size_, net::to_string(algorithm_),
                     sum_ ? "summing updates" : "averaging models",
                     every_steps_ == 0 ? std::string("epoch") : fmt::format("{} local steps", every_steps_),
                     weighted_ ? " (weighted by examples)" : "");
}

std::string Distributed::traffic() const {
  return fmt::format("{} averaging rounds, {:.2f} s in allreduce", rounds(), communication_seconds());
}

void Distributed::prepare(TrainerOptions& options) {
  if (!active()) return;
  // Each rank its own random numbers: the draws of sampling models (BPR's
  // and word2vec's negatives) are seeded by (seed, epoch, local example), so
  // with one stream rank r's i-th example would draw what rank 0's does.
  // The stream is an option, not part of the checkpoint (which records the
  // run's seed), so it survives a resume; shuffles differ per rank too.
  options.stream = static_cast<std::uint64_t>(rank_);
  // Rank 0 writes the checkpoint; another rank only its own AdaGrad sums' (own_checkpoint names another file).
  const std::filesystem::path own = own_checkpoint(options.checkpoint_path, options);
  checkpoint_ = root() || own != options.checkpoint_path ? own : std::filesystem::path{};
  // Each rank its own file: a job killed between the ranks' writes leaves them a generation apart, and the ranks
  // ahead resume from the one kept (resume_own_checkpoint).
  options.checkpoint_keep_previous = !checkpoint_.empty() && own_files(options);
  checkpoint_every_ = options.checkpoint_every;
  if (every_epoch()) {
    options.checkpoint_path.clear();  // written after the average instead
  } else {
    options.checkpoint_path = checkpoint_;
    options.on_step = [this](std::uint64_t examples) { averager_->step_done(examples); };
  }
  if (!root()) options.on_progress = nullptr;
}

bool Distributed::own_files(const TrainerOptions& options) const {
  return active() && options.schedule.has_adagrad();
}

std::filesystem::path Distributed::own_checkpoint(const std::filesystem::path& path,
                                                  const TrainerOptions& options) const {
  if (!own_files(options) || root() || path.empty()) return path;
  return std::filesystem::path(path.string() + fmt::format(".rank{}", rank_));
}

Distributed::Resumed Distributed::resume_own_checkpoint(const std::filesystem::path& path,
                                                     const TrainerOptions& options) {
  namespace fs = std::filesystem;
  const fs::path own = own_checkpoint(path, options);
  CheckpointData saved = read_checkpoint(own);
  if (!own_files(options)) return {std::move(saved), own};
  // The generation before, if this rank kept one (one that cannot be read is none).
  const fs::path previous = previous_checkpoint(own);
  std::optional<CheckpointData> kept;
  std::error_code ec;
  if (fs::exists(previous, ec)) {
    try {
      kept = read_checkpoint(previous);
    } catch (const InputError&) {
    }
  }
  // The rank whose file is behind decides the generation; every rank must have it, as its file or its .prev.
  // Nothing is changed on disk here: a refusal leaves every file as it was.
  const std::uint64_t mine[] = {saved.state.epoch, kept ? kept->state.epoch + 1 : 0};  // 0: no .prev
  const auto all = gather(mine, "the epochs of the ranks' checkpoints", false);
  const std::size_t P = static_cast<std::size_t>(size_);
  std::uint64_t shared = all[0];
  for (std::size_t r = 1; r < P; ++r) shared = std::min(shared, all[2 * r]);
  bool reachable = true;
  std::string each;
  for (std::size_t r = 0; r < P; ++r) {
    const std::uint64_t epoch = all[2 * r], before = all[2 * r + 1];
    reachable = reachable && (epoch == shared || before == shared + 1);
    each += fmt::format("{}rank {}: epoch {} ({})", r ? ", " : "", r, epoch,
                        before == 0 ? "no .prev" : fmt::format(".prev: epoch {}", before - 1));
  }
  if (!reachable) {
    throw InputError(fmt::format("--resume {}: the ranks' checkpoints have no epoch in common ({}): each rank "
                                 "resumes from its own file or the one before it (.prev), at the epoch of the rank "
                                 "furthest behind; resume from an earlier copy of all of them, or start again",
                                 path.string(), each));
  }
  const bool back = saved.state.epoch != shared;
  Resumed out{back ? std::move(*kept) : std::move(saved), back ? previous : own};
  // Files of one job carry its id, a digest of its settings and seed: a rank's file, or .prev, left at the path by
  // a job with other settings would otherwise be taken for this one's.
  const std::uint64_t id[] = {run_id_of(out.data.metadata)};
  const auto ids = gather(id, "the run ids of the ranks' checkpoints", false);
  if (std::adjacent_find(ids.begin(), ids.end(), std::not_equal_to<>()) != ids.end()) {
    std::string which;
    for (std::size_t r = 0; r < P; ++r) which += fmt::format("{}rank {}: {:010x}", r ? ", " : "", r, ids[r]);
    throw InputError(fmt::format("--resume {}: the ranks' checkpoints are of different runs (run ids {}); resume "
                                 "from files of one job",
                                 path.string(), which));
  }
  if (back) {
    fmt::print(stderr,
               "asgd: rank {}: {} holds epoch {} and another rank's checkpoint epoch {} (the job was stopped between "
               "their writes): this rank resumes from {}, its checkpoint of epoch {}\n",
               rank_, own.string(), all[2 * static_cast<std::size_t>(rank_)], shared, previous.string(), shared);
  }
  return out;
}

std::uint64_t Distributed::run_id_of(const std::string& metadata) {
  const nlohmann::json options = saved_options(metadata);
  if (!options.is_object() || !options.contains("run") || !options["run"].is_string()) return 0;
  const std::string text = options["run"].get<std::string>();
  std::uint64_t id = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id, 16);
  return ec == std::errc() && end == text.data() + text.size() ? id & kDigestMask : 0;
}

void Distributed::start(Trainer& trainer, ParamStore& store) {
  trainer_ = &trainer;
  start(std::span<float>(store.data(), store.size()), store.layout());
  if (averager_ && !every_epoch()) averager_->start(every_steps_);
}

void Distributed::start(std::span<float> params, const Layout& layout) {
  if (!active()) return;
#if ASGD_HAVE_MPI
  // The first round sums params.size() floats on every rank: ranks whose models differ in size (other data
  // dimensions, other model flags) would fail inside MPI without a word of why.
  const std::uint64_t count[] = {params.size()};
  same_on_all_ranks(count, "the number of parameters (every rank needs data of the same dimensions and the same "
                           "model flags)");
  // As many parameters is not the same model: rows are padded to whole cache lines (mf -k 8, 12 and 16 take
  // as many floats), and mf numbers its users and items in the order of its file. Averaging such models mixes
  // unrelated rows without a word.
  const std::uint64_t digest[] = {layout.hash() & kDigestMask};
  same_on_all_ranks(digest, "the model's layout digest (its tensors, their shapes and what the rows stand for: "
                            "every rank needs the same model flags and, for mf, the same ratings file)");
  averager_ = std::make_unique<net::ModelAverager>(
      *mpi_->allreduce, params,
      net::AveragingOptions{.weighted = weighted_, .combine = sum_ ? net::Combine::sum : net::Combine::mean});
  averager_->share(root());  // a common start, rank 0's, whatever each rank initialised or resumed
#else
  (void)params;
  (void)layout;
#endif
}

void Distributed::epoch_done(const TrainReport& epoch) {
  if (!active()) return;
  if (every_epoch()) average(static_cast<double>(epoch.examples));
  if (every_epoch() && !checkpoint_.empty() && trainer_ != nullptr) {
    const auto e = trainer_->state().epoch;
    if (e % checkpoint_every_ == 0 || e == trainer_->options().epochs) trainer_->save_checkpoint(checkpoint_);
  }
}

void Distributed::finish() {
  if (averager_) averager_->stop();
}

void Distributed::timed_sum(std::span<float> data) {
#if ASGD_HAVE_MPI
  const auto t0 = std::chrono::steady_clock::now();
  mpi_->allreduce->sum(data);
  other_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#else
  (void)data;
#endif
}

std::vector<std::uint64_t> Distributed::gather(std::span<const std::uint64_t> values, std::string_view what,
                                               bool native) {
  const std::size_t P = static_cast<std::size_t>(size_), V = values.size(), me = static_cast<std::size_t>(rank_);
  std::vector<std::uint64_t> all(P * V);
#if ASGD_HAVE_MPI
  // Each rank writes its values into its own slots, in 20-bit halves (exact
  // in floats), and one sum gives every rank all of them.
  for (const std::uint64_t v : values)
    if (v >> 40 != 0) throw InputError(fmt::format("{}: {} is too large to compare across ranks", what, v));
  std::vector<float> slots(2 * V * P, 0.0f);
  for (std::size_t j = 0; j < V; ++j) {
    slots[2 * (me * V + j)] = static_cast<float>(values[j] & 0xFFFFF);
    slots[2 * (me * V + j) + 1] = static_cast<float>(values[j] >> 20);
  }
  if (native) {
    net::make_native_allreduce(*mpi_->transport)->sum(slots);
  } else {
    timed_sum(slots);
  }
  for (std::size_t at = 0; at < P * V; ++at)
    all[at] = static_cast<std::uint64_t>(slots[2 * at]) | static_cast<std::uint64_t>(slots[2 * at + 1]) << 20;
#else
  (void)what;
  (void)native;
  std::copy(values.begin(), values.end(), all.begin() + static_cast<std::ptrdiff_t>(me * V));
#endif
  return all;
}

void Distributed::agree_on_flags() {
  if (!active()) return;
  // Over MPI_Allreduce itself: ranks given different --allreduce would otherwise wait in their first round for
  // messages of another algorithm, for ever.
  const std::uint64_t mine[] = {static_cast<std::uint64_t>(algorithm_), sum_ ? 1u : 0u,
                                weighted_ ? 1u : 0u, every_steps_};
  constexpr std::size_t V = std::size(mine);
  const auto all = gather(mine, "flags", true);
  const auto text = [&](std::size_t rank, std::size_t j) -> std::string {
    const std::uint64_t v = all[rank * V + j];
    switch (j) {
      case 0: return std::string(net::to_string(static_cast<net::Algorithm>(v)));
      case 1: return v ? "sum" : "mean";
      case 2: return v ? "on" : "off";
      default: return v == 0 ? "epoch" : fmt::format("{}", v);
    }
  };
  static constexpr const char* kFlags[V] = {"allreduce", "combine", "average-weighted", "average-every"};
  for (std::size_t j = 0; j < V; ++j) {
    std::string each;
    bool same = true;
    for (std::size_t r = 0; r < static_cast<std::size_t>(size_); ++r) {
      same = same && all[r * V + j] == all[j];
      each += fmt::format("{}rank {} {}", r ? ", " : "", r, text(r, j));
    }
    if (!same)
      throw InputError(
          fmt::format("the ranks were given different {}{}: {}; every rank needs the same", dashes_, kFlags[j], each));
  }
}

void Distributed::same_settings(std::span<const std::pair<std::string_view, std::string>> settings) {
  if (!active()) return;
  const std::uint64_t count = settings.size();
  same_on_all_ranks(std::span(&count, 1), "the number of model settings (every rank needs the same command)");
  std::vector<std::uint64_t> digests;
  for (const auto& [flag, value] : settings) digests.push_back(fnv1a(kFnv1aStart, value) & kDigestMask);
  const auto all = gather(digests, "model settings", false);
  // Every rank has every digest: all name the same flags and ranks; each adds its own value (only digests travel).
  std::string differ;
  for (std::size_t j = 0; j < digests.size(); ++j) {
    std::string ranks;
    std::size_t other = 0;  // ranks whose value is not rank 0's
    for (std::size_t r = 1; r < static_cast<std::size_t>(size_); ++r)
      if (all[r * digests.size() + j] != all[j]) ranks += fmt::format("{}{}", other++ ? ", " : "", r);
    if (other != 0)
      differ += fmt::format("{}{} ({} {} from rank 0; here {})", differ.empty() ? "" : ", ", settings[j].first,
                            other == 1 ? "rank " + ranks : "ranks " + ranks, other == 1 ? "differs" : "differ",
                            settings[j].second);
  }
  if (!differ.empty())
    throw InputError(fmt::format("the ranks differ in {}; every rank needs the same (their models are averaged)",
                                 differ));
}

void Distributed::same_on_all_ranks(std::span<const std::uint64_t> values, std::string_view what) {
  if (!active()) return;
#if ASGD_HAVE_MPI
  const std::size_t P = static_cast<std::size_t>(size_), V = values.size();
  const auto all = gather(values, what, false);
  const auto value = [&](std::size_t rank, std::size_t j) { return all[rank * V + j]; };
  bool same = true;
  for (std::size_t r = 1; r < P; ++r)
    for (std::size_t j = 0; j < V; ++j) same = same && value(r, j) == value(0, j);
  if (same) return;
  std::string each;
  for (std::size_t r = 0; r < P; ++r) {
    each += fmt::format("{}rank {}: ", r ? ", " : "", r);
    for (std::size_t j = 0; j < V; ++j) each += fmt::format("{}{}", j ? "/" : "", value(r, j));
  }
  throw InputError(fmt::format("the ranks differ in {}: {}", what, each));
#else
  (void)values;
  (void)what;
#endif
}

void Distributed::mean_of_ranks(std::span<float> data) {
  if (!active()) return;
#if ASGD_HAVE_MPI
  timed_sum(data);
  const float scale = 1.0f / static_cast<float>(size_);
  for (float& x : data) x *= scale;
#else
  (void)data;
#endif
}

void Distributed::sum_of_ranks(std::span<float> data) {
  if (!active()) return;
#if ASGD_HAVE_MPI
  net::make_native_allreduce(*mpi_->transport)->sum(data);
#else
  (void)data;
#endif
}

void Distributed::average(double weight) {
  if (averager_) averager_->average(weight);
}

double Distributed::communication_seconds() const noexcept {
  return (averager_ ? averager_->communication_seconds() : 0.0) + other_seconds_;
}

std::uint64_t Distributed::rounds() const noexcept { return averager_ ? averager_->rounds() : 0; }

void Distributed::abort(const std::string& message, int code) {
#if ASGD_HAVE_MPI
  if (mpi_->transport) mpi_->transport->abort(message, code);
#endif
  std::fprintf(stderr, "asgd: rank %d: %s\n", rank_, message.c_str());
  std::exit(code);
}

int run_distributed(const DistributedFlags& flags, const std::function<int(Distributed&)>& body) {
  Distributed dist(flags);
  if (!dist.active()) {
    // Checked (a bad value is still an error), but nothing to do in one process: said, not passed over in silence.
    std::vector<std::string> given;  // in the order given, each once
    for (const auto& g : flags.given)
      if (std::find(given.begin(), given.end(), g) == given.end()) given.push_back(g);
    if (!given.empty()) {
      std::string names;
      for (const auto& g : given) names += (names.empty() ? "" : ", ") + flags.dashes + g;
      std::fprintf(stderr, "asgd: note: %s only %s under mpirun with 2 or more ranks; this is one process\n",
                   names.c_str(), given.size() == 1 ? "applies" : "apply");
    }
    return body(dist);
  }
  try {
    dist.agree_on_flags();
    const int rc = body(dist);
    dist.finish();
    return rc;
  } catch (const InputError& e) {
    dist.abort(fmt::format("error: {}", e.what()), 2);
  } catch (const nlohmann::json::exception& e) {
    dist.abort(fmt::format("error: a model file's metadata is malformed: {}", e.what()), 2);
  } catch (const std::exception& e) {
    dist.abort(fmt::format("error: {}", e.what()), 1);
  }
}

}  // namespace asgd::cli
