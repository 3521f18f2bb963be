#include "asgd/net/multi_rank.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/fingerprint.hpp"
#include "asgd/net/transport.hpp"

namespace asgd::net {

std::string MultiRankOptions::spelled(std::string_view option) const {
  if (spell) return spell(option);
  if (option == "resume") return "the checkpoint resumed";
  if (option == "epochs") return "TrainerOptions::epochs";
  if (option == "until-epoch") return "the epoch trained until";
  // The parameter server's options by their flags' names.
  constexpr std::pair<std::string_view, std::string_view> kPs[] = {
      {"tau", "tau"},
      {"server-rule", "rule"},
      {"server-lr", "server_lr"},
      {"key-floats", "key_floats"},
      {"ps-push", "push"},
      {"ps-push-fraction", "push_fraction"},
      {"ps-error-feedback", "error_feedback"},
      {"ps-warm-rounds", "warm_rounds"},
      {"ps-overlap", "overlap"},
      {"ps-transport", "transport"},
      {"adagrad-eps", "adagrad_eps"},
      {"servers", "servers"},
      {"ps-checkpoint", "checkpoint"},
      {"ps-checkpoint-seconds", "checkpoint_seconds"},
      {"ps-resume", "resume"}};
  for (const auto& [flag, member] : kPs)
    if (option == flag) return "PsOptions::" + std::string(member);
  std::string name(option);
  std::replace(name.begin(), name.end(), '-', '_');
  return "MultiRankOptions::" + name;
}

void MultiRankOptions::set_average_every(std::string_view text) {
  average_every = 0;
  if (text == "epoch") return;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), average_every);
  if (ec != std::errc{} || end != text.data() + text.size() || average_every == 0 ||
      average_every > ModelAverager::kMostEverySteps) {
    throw InputError(fmt::format("{} '{}': expected epoch or a number of steps from 1 to 2^40 - 1",
                                 spelled("average-every"), text));
  }
}

void MultiRankOptions::set_combine(std::string_view text) {
  if (text != "mean" && text != "sum")
    throw InputError(fmt::format("{} '{}': expected mean or sum", spelled("combine"), text));
  combine = text == "sum" ? Combine::sum : Combine::mean;
}

void MultiRankOptions::set_distributed(std::string_view text) {
  if (text != "averaging" && text != "ps")
    throw InputError(fmt::format("{} '{}': expected averaging or ps", spelled("distributed"), text));
  distributed = text == "ps" ? Distributed::ps : Distributed::averaging;
}

void MultiRankOptions::set_server_rule(std::string_view text) {
  if (text != "mean" && text != "sum" && text != "adagrad")
    throw InputError(fmt::format("{} '{}': expected mean, sum or adagrad", spelled("server-rule"), text));
  ps.rule = text == "adagrad" ? ServerRule::adagrad : text == "sum" ? ServerRule::sum : ServerRule::mean;
}

void MultiRankOptions::set_ps_transport(std::string_view text) {
  if (text != "auto" && text != "messages" && text != "one-sided")
    throw InputError(fmt::format("{} '{}': expected auto, messages or one-sided", spelled("ps-transport"), text));
  ps.transport = text == "one-sided" ? PsTransport::one_sided
                 : text == "messages" ? PsTransport::messages
                                      : PsTransport::automatic;
}

void MultiRankOptions::set_push(std::string_view text) {
  if (text != "floats" && text != "int8" && text != "sign")
    throw InputError(fmt::format("{} '{}': expected floats, int8 or sign", spelled("ps-push"), text));
  ps.push = text == "int8" ? PushEncoding::int8 : text == "sign" ? PushEncoding::sign : PushEncoding::floats;
}

void MultiRankOptions::set_slow_rank(std::string_view text) {
  // R:F, or R:F:N for a straggler that moves from rank to rank every N steps.
  const auto colon = text.find(':');
  const auto second = colon == std::string_view::npos ? colon : text.find(':', colon + 1);
  int rank = -1;
  double factor = 0;
  std::uint64_t turn = 0;
  const char* const end = text.data() + text.size();
  const char* const factor_end = second == std::string_view::npos ? end : text.data() + second;
  bool ok = colon != std::string_view::npos;
  if (ok) {
    const auto a = std::from_chars(text.data(), text.data() + colon, rank);
    const auto f = std::from_chars(text.data() + colon + 1, factor_end, factor);
    ok = a.ec == std::errc{} && a.ptr == text.data() + colon && rank >= 0 && f.ec == std::errc{} &&
         f.ptr == factor_end && factor >= 1 && factor <= 1000;
  }
  if (ok && second != std::string_view::npos) {
    const auto n = std::from_chars(factor_end + 1, end, turn);
    ok = n.ec == std::errc{} && n.ptr == end && turn >= 1 && turn <= (std::uint64_t{1} << 40);
  }
  if (!ok)
    throw InputError(fmt::format("{} '{}': expected RANK:FACTOR or RANK:FACTOR:STEPS, a rank, a factor from 1 to "
                                 "1000 and a number of steps from 1 to 2^40 (1:3 makes rank 1 three times slower; "
                                 "0:3:100 makes each rank in turn three times slower for 100 of its steps, rank 0 "
                                 "first)", spelled("slow-rank"), text));
  slow_rank = rank;
  slow_factor = factor;
  slow_turn_steps = turn;
}

void MultiRankOptions::validate() const {
  if (average_every > ModelAverager::kMostEverySteps) {
    throw InputError(fmt::format("{} {}: expected epoch (0) or a number of steps from 1 to 2^40 - 1",
                                 spelled("average-every"), average_every));
  }
  if (average_rank != 0 && (distributed == Distributed::ps || average_weighted)) {
    throw InputError(fmt::format("{}: low-rank rounds are model averaging's, unweighted (not with {})",
                                 spelled("average-rank"),
                                 distributed == Distributed::ps ? spelled("distributed") + " ps"
                                                                : spelled("average-weighted")));
  }
  if (average_flush && average_rank == 0)
    throw InputError(fmt::format("{} sends what low-rank rounds left out; it needs {} 1 or more",
                                 spelled("average-flush"), spelled("average-rank")));
  if (average_rank > kMostAverageRank)
    throw InputError(fmt::format("{} {}: expected 0 (every parameter) to {}", spelled("average-rank"), average_rank,
                                 kMostAverageRank));
  if (distributed != Distributed::ps && ps.servers > 0) {
    throw InputError(fmt::format("{} {}: server ranks are the parameter server's ({} ps)", spelled("servers"),
                                 ps.servers, spelled("distributed")));
  }
  if (distributed != Distributed::ps && !(ps.checkpoint.empty() && ps.resume.empty())) {
    throw InputError(fmt::format("{}: the servers' checkpoints are the parameter server's ({} ps)",
                                 spelled(ps.checkpoint.empty() ? "ps-resume" : "ps-checkpoint"),
                                 spelled("distributed")));
  }
  if (distributed == Distributed::ps) {
    // A push carries a rank's update whole; weighting the mean is model averaging's.
    if (average_weighted)
      throw InputError(fmt::format("{} weights model averaging's mean; it does not apply to {} ps",
                                   spelled("average-weighted"), spelled("distributed")));
    // Ranks compare tau in 40 bits (agree_on_options).
    if (ps.tau != kUnbounded && ps.tau >= ModelAverager::kMostEverySteps)
      throw InputError(fmt::format("{} {}: expected 0 to 2^40 - 2 rounds, or inf", spelled("tau"), ps.tau));
    ps.validate([this](std::string_view option) { return spelled(option); });
  }
  if (combine == Combine::sum && average_weighted)
    throw InputError(fmt::format("{} weights the mean; it does not apply to {} sum", spelled("average-weighted"),
                                 spelled("combine")));
}

MultiRank::MultiRank(MultiRankOptions options) : options_(std::move(options)) { options_.validate(); }

MultiRank::MultiRank(Transport& transport, MultiRankOptions options) : MultiRank(std::move(options)) {
  transport_ = ps_transport_ = &transport;
  if (const std::size_t S = options_.distributed == Distributed::ps ? options_.ps.servers : 0; S > 0) {
    // The workers' collectives (agreement, setup sums) leave the server ranks out; the pushes and pulls do not.
    check_server_ranks(S, transport.size(), options_.spelled("servers"));
    if (is_server_rank(options_.ps, transport)) {
      throw InputError(fmt::format("rank {} is one of the {} dedicated server ranks: it serves (serve_dedicated) "
                                   "and trains nothing", transport.rank(), S));
    }
    workers_ = first_ranks(transport, transport.size() - static_cast<int>(S));
    transport_ = workers_.get();
  }
  rank_ = transport_->rank();
  size_ = transport_->size();
  if (options_.slow_rank >= size_) {
    throw InputError(fmt::format("{} {}: the job has {}ranks 0 to {}", options_.spelled("slow-rank"),
                                 options_.slow_rank, workers_ ? "worker " : "", size_ - 1));
  }
  allreduce_ = make_allreduce(options_.allreduce, *transport_);
  native_ = options_.allreduce == Algorithm::native ? nullptr : make_allreduce(Algorithm::native, *transport_);
}

MultiRank::~MultiRank() {
  // After an error the communication thread may still be in a collective; a successful run stopped it in finish().
  if (averager_) {
    try {
      averager_->stop();
    } catch (...) {
    }
  }
  ps_.reset();  // gives up a round in flight rather than wait for the other ranks
}

void MultiRank::add_to_record(OptionsRecord& record) const {
  if (!active()) return;
  record["average-every"] = every_epoch() ? std::string("epoch") : std::to_string(options_.average_every);
  if (options_.distributed == Distributed::ps) {
    record["distributed"] = "ps";
    record["tau"] = tau_to_string(options_.ps.tau);
    record["server-rule"] = std::string(to_string(options_.ps.rule));
    if (options_.ps.rule == ServerRule::adagrad) record["server-lr"] = fmt::format("{}", options_.ps.server_lr);
    record["ps-push"] = std::string(to_string(options_.ps.push));
    record["ps-push-fraction"] = fmt::format("{}", options_.ps.push_fraction);
    record["ps-error-feedback"] = options_.ps.error_feedback ? "on" : "off";
    record["ps-warm-rounds"] = std::to_string(options_.ps.warm_rounds);
    record["ps-transport"] = std::string(to_string(ps_transport()));
    record["ps-overlap"] = options_.ps.overlap ? "on" : "off";
    return;
  }
  record["combine"] = options_.combine == Combine::sum ? "sum" : "mean";
  record["average-weighted"] = options_.average_weighted ? "on" : "off";
  if (options_.average_rank != 0) record["average-rank"] = std::to_string(options_.average_rank);
  if (options_.average_flush) record["average-flush"] = "on";
}

std::vector<std::size_t> MultiRank::shard(std::size_t n, std::string_view what, bool equal) const {
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

PsTransport MultiRank::ps_transport() const noexcept {
  return ps_transport_ != nullptr ? resolve_transport(options_.ps, *ps_transport_) : options_.ps.transport;
}

std::string MultiRank::describe() const {
  if (options_.distributed == Distributed::ps) {
    const PsOptions& ps = options_.ps;
    std::string push;
    if (ps.push != PushEncoding::floats || ps.push_fraction < 1) {
      push = fmt::format(", pushes {}{}{}", to_string(ps.push),
                         ps.push_fraction < 1 ? fmt::format(" of the top {:g} % of keys", 100.0 * ps.push_fraction)
                                              : std::string(),
                         ps.error_feedback ? " with error feedback" : " without error feedback");
    }
    const std::string servers =
        ps.servers > 0 ? fmt::format(" and {} server rank{}", ps.servers, ps.servers > 1 ? "s" : "") : "";
    return fmt::format("{} ranks{}, parameter server ({}{}, tau {}{}{}{}), rounds every {}{}", size_, servers,
                       to_string(ps.rule),
                       ps.rule == ServerRule::adagrad ? fmt::format(" lr {}", ps.server_lr) : std::string(),
                       tau_to_string(ps.tau),
                       ps.warm_rounds > 0 ? fmt::format(" after {} synchronous rounds", ps.warm_rounds) : std::string(),
                       push, ", " + std::string(to_string(ps_transport())),
                       every_epoch() ? std::string("epoch") : fmt::format("{} local steps", every_steps()),
                       ps.overlap ? "" : ", workers waiting for each round");
  }
  const bool sum = options_.combine == Combine::sum;
  return fmt::format("{} ranks, {} allreduce, {} every {}{}{}", size_, to_string(options_.allreduce),
                     sum ? "summing updates" : "averaging models",
                     every_epoch() ? std::string("epoch") : fmt::format("{} local steps", every_steps()),
                     options_.average_weighted ? " (weighted by examples)" : "",
                     options_.average_rank != 0
                         ? fmt::format(", rank-{} factors of each matrix's update with error feedback{}",
                                       options_.average_rank,
                                       options_.average_flush ? ", the kept error sent whole at the end" : "")
                         : std::string());
}

std::string MultiRank::traffic() const {
  if (const auto s = ps_stats()) {
    return fmt::format("{} rounds, {:.1f} MB pushed ({} keys), {:.1f} MB pulled ({} keys), {:.2f} s waiting for pulls; "
                       "{}{}",
                       s->rounds, static_cast<double>(s->bytes_pushed) * 1e-6, s->keys_pushed,
                       static_cast<double>(s->bytes_pulled) * 1e-6, s->keys_pulled, s->wait_seconds,
                       options_.ps.servers > 0 && !root()
                           ? std::string("staleness and clock gaps are measured on the server ranks")
                           : fmt::format("staleness {}: mean {:.2f}, max {}; clock gap at most {}",
                                         options_.ps.servers > 0                    ? "at the server ranks"
                                         : ps_transport() == PsTransport::one_sided ? "of this rank's pushes"
                                                                                    : "at this rank's shard",
                                         s->staleness.mean(), s->staleness.max(), s->max_clock_gap),
                       options_.ps.checkpoint.empty()
                           ? std::string()
                           : fmt::format("; {} checkpoint generation{} written by {}", s->generations,
                                         s->generations == 1 ? "" : "s",
                                         options_.ps.servers > 0 ? "the server ranks" : "this rank's shard"));
  }
  std::string sent;
  if (averager_) {
    // Everything this rank put into allreduces: the rounds, and the option checks and means beside them.
    const double other = static_cast<double>(other_floats_);
    const double mb = (static_cast<double>(averager_->floats_sent()) + other) * 4e-6;
    const double dense = (static_cast<double>(averager_->floats_dense()) + other) * 4e-6;
    sent = options_.average_rank != 0 && mb > 0
               ? fmt::format(", {:.2f} MB into allreduces ({:.1f}x fewer than whole rounds)", mb, dense / mb)
               : fmt::format(", {:.2f} MB into allreduces", mb);
  }
  return fmt::format("{} averaging rounds, {:.2f} s in allreduce{}", rounds(), communication_seconds(), sent);
}

void MultiRank::prepare(TrainerOptions& options) {
  if (!active()) return;
  // Each rank its own random numbers: the draws of sampling models (BPR's and word2vec's negatives) are seeded by
  // (seed, epoch, local example), so with one stream rank r's i-th example would draw what rank 0's does. The
  // stream is an option, not part of the checkpoint (which records the run's seed), so it survives a resume.
  options.stream = static_cast<std::uint64_t>(rank_);
  // Rank 0 writes the checkpoint; another rank only its own AdaGrad sums' (own_checkpoint names another file).
  const std::filesystem::path own = own_checkpoint(options.checkpoint_path, options);
  checkpoint_ = root() || own != options.checkpoint_path ? own : std::filesystem::path{};
  // Each rank its own file: a job killed between the ranks' writes leaves them a generation apart, and the ranks
  // ahead resume from the one kept (resume_own_checkpoint).
  options.checkpoint_keep_previous = !checkpoint_.empty() && own_files(options);
  // Each rank's file says how many ranks' files hold the sums, whatever the caller recorded: a resume by another
  // number of ranks reads them all (recut_checkpoints).
  if (own_files(options)) options.checkpoint_metadata = with_rank_files(options.checkpoint_metadata, size_);
  checkpoint_every_ = options.checkpoint_every;
  const bool slow = options_.slow_factor > 1 &&
                    (options_.slow_rank == rank_ || (options_.slow_rank >= 0 && options_.slow_turn_steps > 0));
  if (every_epoch()) {
    options.checkpoint_path.clear();  // written after the average instead
    if (slow)
      options.on_step = [this](std::uint64_t) {
        slow_down_step();
        start_step_clock();
      };
  } else {
    options.checkpoint_path = checkpoint_;
    options.on_step = [this, slow](std::uint64_t examples) {
      if (slow) slow_down_step();
      if (ps_) {
        ps_->step_done(examples);
      } else {
        averager_->step_done(examples);
      }
      // After step_done: a wait there for a round (longest under BSP) is not the step's compute.
      if (slow) start_step_clock();
    };
  }
  if (!root()) options.on_progress = nullptr;
}

namespace {
using Clock = std::chrono::steady_clock;
// When this worker's step began: after the previous step's sleep and round bookkeeping.
Clock::time_point& step_clock() {
  thread_local Clock::time_point start{};
  return start;
}
}  // namespace

void MultiRank::start_step_clock() { step_clock() = Clock::now(); }

void MultiRank::slow_down_step() {
  // The time since start_step_clock is this step's compute: sleep (F - 1) times that. A gap of over half a
  // second is not a step (an epoch's end, an evaluation) and is not stretched.
  const Clock::time_point last = step_clock();
  const auto elapsed = Clock::now() - last;
  bool my_turn = true;  // a rank slow all the time, or whose turn it is
  if (const std::uint64_t turn = options_.slow_turn_steps; turn > 0) {
    const std::uint64_t step = slow_steps_.fetch_add(1, std::memory_order_relaxed);
    const auto first = static_cast<std::uint64_t>(options_.slow_rank), ranks = static_cast<std::uint64_t>(size_);
    my_turn = (first + step / turn) % ranks == static_cast<std::uint64_t>(rank_);
  }
  if (my_turn && last != Clock::time_point{} && elapsed < std::chrono::milliseconds(500))
    std::this_thread::sleep_for(std::chrono::duration_cast<Clock::duration>(elapsed * (options_.slow_factor - 1)));
}

namespace {
// The generation before `own`, if this rank kept one (one that cannot be read is none).
std::optional<CheckpointData> read_previous(const std::filesystem::path& previous) {
  std::error_code ec;
  if (!std::filesystem::exists(previous, ec)) return std::nullopt;
  try {
    return read_checkpoint(previous);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

// Rank r's file of a set: rank 0's is `path` itself.
std::filesystem::path rank_file(const std::filesystem::path& path, std::size_t r) {
  return r == 0 ? path : std::filesystem::path(path.string() + fmt::format(".rank{}", r));
}

// The epoch a set of rank files resumes from, given each file's epoch and its .prev's + 1 (0: none), in pairs: the
// one furthest behind, which every file must hold as itself or as its .prev. InputError listing them when one does
// not.
std::uint64_t common_epoch(std::span<const std::uint64_t> pairs, const std::string& resume,
                           const std::filesystem::path& path) {
  const std::size_t n = pairs.size() / 2;
  std::uint64_t shared = pairs[0];
  for (std::size_t r = 1; r < n; ++r) shared = std::min(shared, pairs[2 * r]);
  bool reachable = true;
  std::string each;
  for (std::size_t r = 0; r < n; ++r) {
    const std::uint64_t epoch = pairs[2 * r], before = pairs[2 * r + 1];
    reachable = reachable && (epoch == shared || before == shared + 1);
    each += fmt::format("{}rank {}: epoch {} ({})", r ? ", " : "", r, epoch,
                        before == 0 ? "no .prev" : fmt::format(".prev: epoch {}", before - 1));
  }
  if (!reachable) {
    throw InputError(fmt::format("{} {}: the ranks' checkpoints have no epoch in common ({}): each rank "
                                 "resumes from its own file or the one before it (.prev), at the epoch of the rank "
                                 "furthest behind; resume from an earlier copy of all of them, or start again",
                                 resume, path.string(), each));
  }
  return shared;
}

// The file of rank `rank` of the `wrote` ranks whose files hold the sums is not there.
[[noreturn]] void refuse_missing(const std::string& resume, const std::filesystem::path& path, int wrote, int rank,
                                 const std::filesystem::path& file) {
  throw InputError(fmt::format("{} {}: written by {} ranks, each with its own AdaGrad sums, and rank {}'s ({}) is "
                               "missing",
                               resume, path.string(), wrote, rank, file.string()));
}

// Files of one job carry its id, a digest of its settings and seed: a rank's file, or .prev, left at the path by a
// job with other settings would otherwise be taken for this one's.
void check_one_run(std::span<const std::uint64_t> ids, const std::string& resume, const std::filesystem::path& path) {
  if (std::adjacent_find(ids.begin(), ids.end(), std::not_equal_to<>()) == ids.end()) return;
  std::string which;
  for (std::size_t r = 0; r < ids.size(); ++r) which += fmt::format("{}rank {}: {:010x}", r ? ", " : "", r, ids[r]);
  throw InputError(fmt::format("{} {}: the ranks' checkpoints are of different runs (run ids {}); resume from files "
                               "of one job",
                               resume, path.string(), which));
}
}  // namespace

bool MultiRank::own_files(const TrainerOptions& options) const { return active() && options.schedule.has_adagrad(); }

std::filesystem::path MultiRank::own_checkpoint(const std::filesystem::path& path,
                                                const TrainerOptions& options) const {
  if (!own_files(options) || root() || path.empty()) return path;
  return rank_file(path, static_cast<std::size_t>(rank_));
}

std::optional<MultiRank::Resumed> MultiRank::resume_checkpoint(const std::filesystem::path& path,
                                                              const TrainerOptions& options) {
  if (options.schedule.has_adagrad()) {
    // Rank 0's file says how many ranks' files hold the sums; another number of ranks cuts them again. Read by rank
    // 0 and sent to all, so that every rank takes the same branch (one that cut again while the others gathered
    // would leave them waiting).
    const std::uint64_t mine[] = {
        root() ? static_cast<std::uint64_t>(
                     rank_files_of(read_checkpoint(path).metadata, options_.spelled("resume") + " " + path.string()))
               : 0};
    const auto wrote = static_cast<int>(gather(mine, "the ranks whose files hold the AdaGrad sums", false)[0]);
    if (wrote != size_) return recut_checkpoints(path, wrote);
  }
  const std::filesystem::path own = own_checkpoint(path, options);
  if (own != path && !std::filesystem::exists(own)) refuse_missing(options_.spelled("resume"), path, size_, rank_, own);
  return resume_own_checkpoint(path, options);
}

void MultiRank::check_generation_ranks(const CheckpointData& chosen, int wrote, std::uint64_t epoch,
                                       const std::filesystem::path& path) const {
  const std::string resume = options_.spelled("resume");
  const int of = rank_files_of(chosen.metadata, resume + " " + path.string());
  if (of == wrote) return;
  throw InputError(fmt::format("{} {}: the epoch the ranks' files share ({}) is of a job of {} rank(s), and rank "
                               "0's newest file of a job of {}: a job that resumed them with another number of "
                               "ranks was stopped before every rank wrote its file; move {} back over {} and "
                               "resume again",
                               resume, path.string(), epoch, of, wrote, previous_checkpoint(path).string(),
                               path.string()));
}

MultiRank::Resumed MultiRank::recut_checkpoints(const std::filesystem::path& path, int wrote) {
  namespace fs = std::filesystem;
  const std::string resume = options_.spelled("resume");
  const auto W = static_cast<std::size_t>(wrote);
  std::vector<std::uint64_t> pairs(2 * W);
  for (std::size_t w = 0; w < W; ++w) {
    const fs::path file = rank_file(path, w);
    if (!fs::exists(file)) refuse_missing(resume, path, wrote, static_cast<int>(w), file);
    const std::optional<CheckpointData> kept = read_previous(previous_checkpoint(file));
    pairs[2 * w] = read_checkpoint(file).state.epoch;
    pairs[2 * w + 1] = kept ? kept->state.epoch + 1 : 0;
  }
  const std::uint64_t shared = common_epoch(pairs, resume, path);
  // The sums of the W ranks, over this job's P: each new rank trains 1/P of the examples, whose squared gradients
  // the W files hold together.
  std::vector<double> total;
  std::vector<std::uint64_t> ids(W);
  std::optional<Resumed> out;
  std::string other_size;  // said after the run ids: a file of another job is named as such first
  for (std::size_t w = 0; w < W; ++w) {
    const fs::path file = pairs[2 * w] == shared ? rank_file(path, w) : previous_checkpoint(rank_file(path, w));
    CheckpointData data = read_checkpoint(file);
    ids[w] = run_id_of(data.metadata);
    if (w == 0) total.assign(data.optimizer_state.size(), 0.0);
    if (data.optimizer_state.size() != total.size()) {
      if (other_size.empty()) {
        other_size = fmt::format("{} {}: {} holds {} AdaGrad sums and rank 0's {}", resume, path.string(),
                                 file.string(), data.optimizer_state.size(), total.size());
      }
      continue;
    }
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += data.optimizer_state[i];
    if (w == 0) out = Resumed{std::move(data), file};
  }
  check_one_run(ids, resume, path);
  if (!other_size.empty()) throw InputError(other_size);
  check_generation_ranks(out->data, wrote, shared, path);
  for (std::size_t i = 0; i < total.size(); ++i)
    out->data.optimizer_state[i] = static_cast<float>(total[i] / static_cast<double>(size_));
  out->data.metadata = with_rank_files(out->data.metadata, size_);
  if (root() && !total.empty()) {
    fmt::print(stderr, "asgd: {}: {}, resumed by {}\n", path.string(),
               W == 1 ? std::string("one process's AdaGrad sums") : fmt::format("the AdaGrad sums of {} ranks", W),
               size_ == 1 ? std::string("one process: it starts from their sum")
                          : fmt::format("{} ranks: each starts from their sum over {}", size_, size_));
  }
  return std::move(*out);
}

MultiRank::Resumed MultiRank::resume_own_checkpoint(const std::filesystem::path& path,
                                                    const TrainerOptions& options) {
  namespace fs = std::filesystem;
  const fs::path own = own_checkpoint(path, options);
  CheckpointData saved = read_checkpoint(own);
  if (!own_files(options)) return {std::move(saved), own};
  const fs::path previous = previous_checkpoint(own);
  std::optional<CheckpointData> kept = read_previous(previous);
  // The rank whose file is behind decides the generation; every rank must have it, as its file or its .prev.
  // Nothing is changed on disk here: a refusal leaves every file as it was.
  const std::uint64_t mine[] = {saved.state.epoch, kept ? kept->state.epoch + 1 : 0};  // 0: no .prev
  const auto all = gather(mine, "the epochs of the ranks' checkpoints", false);
  const std::string resume = options_.spelled("resume");
  const std::uint64_t shared = common_epoch(all, resume, path);
  const bool back = saved.state.epoch != shared;
  Resumed out{back ? std::move(*kept) : std::move(saved), back ? previous : own};
  const std::uint64_t id[] = {run_id_of(out.data.metadata)};
  check_one_run(gather(id, "the run ids of the ranks' checkpoints", false), resume, path);
  check_generation_ranks(out.data, size_, shared, path);
  if (back) {
    fmt::print(stderr,
               "asgd: rank {}: {} holds epoch {} and another rank's checkpoint epoch {} (the job was stopped between "
               "their writes): this rank resumes from {}, its checkpoint of epoch {}\n",
               rank_, own.string(), all[2 * static_cast<std::size_t>(rank_)], shared, previous.string(), shared);
  }
  return out;
}

void MultiRank::start(Trainer& trainer, ParamStore& store) {
  trainer_ = &trainer;
  start(std::span<float>(store.data(), store.size()), store.layout());
  if (averager_ && !every_epoch()) averager_->start(every_steps());
  if (ps_ && !every_epoch()) ps_->start(every_steps());
}

void MultiRank::start(std::span<float> params, const Layout& layout) {
  if (!active()) return;
  if (trainer_ == nullptr && options_.slow_rank >= 0)
    throw InputError(fmt::format("{} slows the workers of the sparse Trainer (linear, mf, w2v), not this model's",
                                 options_.spelled("slow-rank")));
  // The first round sums params.size() floats on every rank: ranks whose models differ in size (other data
  // dimensions, other model settings) would fail inside the allreduce without a word of why.
  const std::uint64_t count[] = {params.size()};
  same_on_all_ranks(count, "the number of parameters (every rank needs data of the same dimensions and the same "
                           "model flags)");
  // As many parameters is not the same model: rows are padded to whole cache lines (mf -k 8, 12 and 16 take
  // as many floats), and mf numbers its users and items in the order of its file.
  const std::uint64_t digest[] = {layout.hash() & kDigestMask};
  same_on_all_ranks(digest, "the model's layout digest (its tensors, their shapes and what the rows stand for: "
                            "every rank needs the same model flags and, for mf, the same ratings file)");
  if (options_.distributed == Distributed::ps) {
    ps_ = std::make_unique<ParameterServer>(*ps_transport_, params, options_.ps);
    // The servers take rank 0's parameters (or a generation of their checkpoints), and every rank pulls them.
    const std::uint64_t epoch = trainer_ != nullptr ? trainer_->state().epoch : 0;
    if (const auto g = ps_->share(root(), epoch, layout.hash() & kDigestMask)) {
      const bool sums = options_.ps.rule == ServerRule::adagrad && g->rule == ServerRule::adagrad;
      fmt::print(stderr, "asgd: the servers start from {} of {} ({} shard{}, every worker past epoch {}): {}{}\n",
                 g->name(), g->prefix.string(), g->shards, g->shards > 1 ? "s" : "", g->epoch,
                 g->values_taken ? "its parameters" : fmt::format("the parameters of epoch {} resumed", epoch),
                 sums                                        ? ", with its AdaGrad sums"
                 : options_.ps.rule == ServerRule::adagrad ? ", AdaGrad's sums from zero (it holds none)"
                                                           : "");
    }
    return;
  }
  averager_ = std::make_unique<ModelAverager>(*allreduce_, params,
                                              AveragingOptions{.weighted = options_.average_weighted,
                                                               .combine = options_.combine,
                                                               .low_rank = options_.average_rank},
                                              &layout);
  averager_->share(root());  // a common start, rank 0's, whatever each rank initialised or resumed
}

void MultiRank::epoch_done(const TrainReport& epoch) {
  if (!active()) return;
  if (ps_ && trainer_ != nullptr) ps_->epoch_done(trainer_->state().epoch);
  if (every_epoch()) average(static_cast<double>(epoch.examples));
  if (every_epoch() && !checkpoint_.empty() && trainer_ != nullptr) {
    const auto e = trainer_->state().epoch;
    if (e % checkpoint_every_ == 0 || e == trainer_->options().epochs) trainer_->save_checkpoint(checkpoint_);
  }
}

void MultiRank::finish() {
  stop_rounds();
  if (averager_ && options_.average_flush) averager_->flush();  // what low-rank rounds left out, sent whole (once)
}

void MultiRank::end_after_error() { stop_rounds(); }

void MultiRank::stop_rounds() {
  if (averager_) averager_->stop();
  if (ps_) ps_->stop();
}

void MultiRank::timed_sum(std::span<float> data) {
  other_floats_ += data.size();
  const auto t0 = std::chrono::steady_clock::now();
  allreduce_->sum(data);
  other_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::uint64_t> MultiRank::gather(std::span<const std::uint64_t> values, std::string_view what,
                                             bool native) {
  const std::size_t P = static_cast<std::size_t>(size_), V = values.size(), me = static_cast<std::size_t>(rank_);
  std::vector<std::uint64_t> all(P * V);
  if (!active()) {
    std::copy(values.begin(), values.end(), all.begin());
    return all;
  }
  // Each rank writes its values into its own slots, in 20-bit halves (exact in floats), and one sum gives every
  // rank all of them.
  for (const std::uint64_t v : values)
    if (v >> 40 != 0) throw InputError(fmt::format("{}: {} is too large to compare across ranks", what, v));
  std::vector<float> slots(2 * V * P, 0.0f);
  for (std::size_t j = 0; j < V; ++j) {
    slots[2 * (me * V + j)] = static_cast<float>(values[j] & 0xFFFFF);
    slots[2 * (me * V + j) + 1] = static_cast<float>(values[j] >> 20);
  }
  if (native) {
    (native_ ? *native_ : *allreduce_).sum(slots);
  } else {
    timed_sum(slots);
  }
  for (std::size_t at = 0; at < P * V; ++at)
    all[at] = static_cast<std::uint64_t>(slots[2 * at]) | static_cast<std::uint64_t>(slots[2 * at + 1]) << 20;
  return all;
}

void MultiRank::agree_on_options() {
  if (!active()) return;
  // Over the native allreduce: ranks given different algorithms would otherwise wait in their first round for
  // messages of another algorithm, for ever.
  const PsOptions& ps = options_.ps;
  const bool is_ps = options_.distributed == Distributed::ps;
  std::uint32_t lr_bits = 0;
  static_assert(sizeof lr_bits == sizeof ps.server_lr);
  std::memcpy(&lr_bits, &ps.server_lr, sizeof lr_bits);
  const std::uint64_t mine[] = {static_cast<std::uint64_t>(options_.allreduce),
                                options_.combine == Combine::sum ? 1u : 0u,
                                options_.average_weighted ? 1u : 0u,
                                options_.average_every,
                                is_ps ? 1u : 0u,
                                is_ps ? std::min<std::uint64_t>(ps.tau, kDigestMask) : 0,
                                is_ps ? static_cast<std::uint64_t>(ps.rule) : 0,
                                is_ps && ps.rule == ServerRule::adagrad ? lr_bits : 0u,
                                is_ps ? ps.key_floats : 0,
                                is_ps ? static_cast<std::uint64_t>(ps.push) : 0,
                                is_ps ? static_cast<std::uint64_t>(std::lround(ps.push_fraction * 1e6)) : 0,
                                is_ps && !ps.error_feedback ? 1u : 0u,
                                is_ps ? std::min<std::uint64_t>(ps.warm_rounds, kDigestMask) : 0,
                                is_ps ? static_cast<std::uint64_t>(ps.transport) : 0,
                                std::min<std::uint64_t>(options_.average_rank, kDigestMask),
                                options_.average_flush ? 1u : 0u,
                                is_ps && !ps.overlap ? 1u : 0u};
  constexpr std::size_t V = std::size(mine);
  const auto all = gather(mine, "options", true);
  const auto text = [&](std::size_t rank, std::size_t j) -> std::string {
    const std::uint64_t v = all[rank * V + j];
    switch (j) {
      case 0: return std::string(to_string(static_cast<Algorithm>(v)));
      case 1: return v ? "sum" : "mean";
      case 2: return v ? "on" : "off";
      case 3: return v == 0 ? "epoch" : fmt::format("{}", v);
      case 4: return v ? "ps" : "averaging";
      case 5: return v == kDigestMask ? "inf" : fmt::format("{}", v);
      case 6: return std::string(to_string(static_cast<ServerRule>(v)));
      case 7: {
        float lr = 0;
        const auto bits = static_cast<std::uint32_t>(v);
        std::memcpy(&lr, &bits, sizeof lr);
        return fmt::format("{}", lr);
      }
      case 9: return std::string(to_string(static_cast<PushEncoding>(v)));
      case 10: return fmt::format("{}", static_cast<double>(v) * 1e-6);
      case 11: return v ? "off" : "on";
      case 13: return std::string(to_string(static_cast<PsTransport>(v)));
      case 15: return v ? "on" : "off";
      case 16: return v ? "off" : "on";
      default: return fmt::format("{}", v);
    }
  };
  static constexpr const char* kOptions[V] = {"allreduce", "combine",     "average-weighted", "average-every",
                                              "distributed", "tau",       "server-rule",      "server-lr",
                                              "key-floats", "ps-push",    "ps-push-fraction", "ps-error-feedback",
                                              "ps-warm-rounds", "ps-transport", "average-rank", "average-flush",
                                              "ps-overlap"};
  for (std::size_t j = 0; j < V; ++j) {
    std::string each;
    bool same = true;
    for (std::size_t r = 0; r < static_cast<std::size_t>(size_); ++r) {
      same = same && all[r * V + j] == all[j];
      each += fmt::format("{}rank {} {}", r ? ", " : "", r, text(r, j));
    }
    if (!same)
      throw InputError(fmt::format("the ranks were given different {}: {}; every rank needs the same",
                                   options_.spelled(kOptions[j]), each));
  }
}

void MultiRank::same_settings(std::span<const std::pair<std::string_view, std::string>> settings) {
  if (!active()) return;
  const std::uint64_t count = settings.size();
  same_on_all_ranks(std::span(&count, 1), "the number of model settings (every rank needs the same command)");
  std::vector<std::uint64_t> digests;
  for (const auto& [flag, value] : settings) digests.push_back(fnv1a(kFnv1aStart, value) & kDigestMask);
  const auto all = gather(digests, "model settings", false);
  // Every rank has every digest: all name the same settings and ranks; each adds its own value (only digests travel).
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

void MultiRank::same_on_all_ranks(std::span<const std::uint64_t> values, std::string_view what) {
  if (!active()) return;
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
}

void MultiRank::mean_of_ranks(std::span<float> data) {
  if (!active()) return;
  timed_sum(data);
  const float scale = 1.0f / static_cast<float>(size_);
  for (float& x : data) x *= scale;
}

void MultiRank::sum_of_ranks(std::span<float> data) {
  if (!active()) return;
  (native_ ? *native_ : *allreduce_).sum(data);
}

void MultiRank::average(double weight) {
  if (averager_) averager_->average(weight);
  if (ps_) ps_->round();
}

double MultiRank::communication_seconds() const noexcept {
  return (averager_ ? averager_->communication_seconds() : 0.0) + other_seconds_;
}

std::uint64_t MultiRank::rounds() const noexcept {
  if (ps_) return ps_->stats().rounds;
  return averager_ ? averager_->rounds() : 0;
}

std::optional<PsStats> MultiRank::ps_stats() const {
  if (!ps_) return std::nullopt;
  return ps_->stats();
}

void MultiRank::check_same_plan(const Trainer& trainer, std::uint64_t until_epoch) {
  if (!active()) return;
  MultiRank& group = *this;
  // Every rank must run as many blocking rounds: a job whose ranks were given different plans would wait forever.
  const std::uint64_t plan[] = {trainer.state().epoch, until_epoch, trainer.options().epochs, group.every_steps()};
  const auto& o = group.options();
  const std::string epochs = o.spelled("epochs"), every = o.spelled("average-every"), resume = o.spelled("resume");
  const std::string what =
      fmt::format("epochs done/last epoch/{}/K of {} (0: epoch) (every rank needs the same {}, {}, {} and {}", epochs,
                  every, resume, epochs, o.spelled("until-epoch"), every) +
      (trainer.options().schedule.has_adagrad()
           ? "; with AdaGrad each rank resumes from its own file, CHECKPOINT.rank<r> beside rank 0's)"
           : ")");
  group.same_on_all_ranks(plan, what);
}

}  // namespace asgd::net
