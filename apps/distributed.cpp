#include "distributed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>

#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/errors.hpp"
#include "asgd/net/allreduce.hpp"
#include "asgd/net/job.hpp"
#include "cli_common.hpp"

namespace asgd::cli {

void add_distributed_flags(CLI::App& app, DistributedFlags& flags) {
  const auto noted = [&flags](std::string name) {
    return [&flags, name = std::move(name)](const std::string&) { flags.given.push_back(name); };
  };
  // An option or flag whose use is noted in flags.given under its name, without the dashes.
  const auto option = [&](const std::string& name, auto& value, const std::string& help) {
    return app.add_option("--" + name, value, help)->each(noted(name));
  };
  const auto flag = [&](const std::string& name, bool& value, const std::string& help) {
    return app.add_flag("--" + name, value, help)->each(noted(name));
  };
  option("allreduce", flags.allreduce, "Under mpirun: tree, ring or native (MPI_Allreduce)")->capture_default_str();
  option("average-every", flags.average_every,
         "Under mpirun: average the ranks' models every epoch, or every K local steps (in the background; "
         "cnn: a blocking round after every K updates)")->capture_default_str();
  flag("average-weighted", flags.weighted, "Under mpirun: weight each rank by the examples it trained");
  option("average-rank", flags.average_rank,
         "Under mpirun, averaging: send rank-R factors of each matrix's update (PowerSGD, with error feedback) "
         "instead of every parameter; 0: every parameter")->capture_default_str();
  flag("average-flush", flags.average_flush,
       "Under mpirun, with --average-rank: a last round of every parameter sends what the factors left out, so "
       "the model is the mean of every update (one whole round more)");
  option("combine", flags.combine,
         "Under mpirun: mean (model averaging) or sum (add every rank's update since the last round: "
         "sparse models); default mean, for mf --loss bpr sum unless --average-weighted");
  option("distributed", flags.distributed,
         "Under mpirun: averaging (allreduce rounds) or ps (a parameter server: each rank pushes the rows "
         "it changed and pulls those others changed, every epoch or every --average-every steps)")
      ->capture_default_str();
  option("ps-tau", flags.ps_tau,
         "With --distributed ps: rounds a rank may run ahead of the slowest rank (0: bulk-synchronous; N: "
         "stale-synchronous; inf: asynchronous)")->capture_default_str();
  option("server-rule", flags.server_rule,
         "With --distributed ps: how servers apply a push: mean (each delta over the ranks), sum, or adagrad "
         "(per-parameter, on the server); default: as --combine");
  option("server-lr", flags.server_lr, "With --server-rule adagrad: the servers' step size")->capture_default_str();
  option("ps-push", flags.push,
         "With --distributed ps: how pushes encode deltas: floats, int8 (a byte a value) or sign (a bit a "
         "value, 1-bit SGD)")->capture_default_str();
  option("ps-push-fraction", flags.push_fraction,
         "With --distributed ps: push only this fraction of the changed rows, the largest changes first")
      ->capture_default_str();
  option("ps-error-feedback", flags.error_feedback,
         "With --distributed ps: keep what a compressed push leaves out for a later push (on) or drop it")
      ->capture_default_str();
  option("ps-warm-rounds", flags.warm_rounds,
         "With --distributed ps: the first N rounds bulk-synchronous whatever --ps-tau (DistBelief's warm "
         "start; rounds per epoch: N epochs)")->capture_default_str();
  option("ps-overlap", flags.overlap,
         "With --distributed ps: workers go on training while a round is in flight (on), or wait at each "
         "round's start until it ends (off: with --ps-tau 0, sequential consistency)")->capture_default_str();
  option("ps-transport", flags.ps_transport,
         "With --distributed ps: messages (to a server thread on each rank), one-sided (MPI_Accumulate and "
         "MPI_Get on the shards' windows; the mean or sum rule, float pushes), or auto: one-sided where it "
         "applies and all ranks share a host, messages otherwise")->capture_default_str();
  option("servers", flags.servers,
         "With --distributed ps: the last S ranks are dedicated servers that keep the shards and train nothing "
         "(messages transport); 0: a server thread on every rank")->capture_default_str();
  option("ps-checkpoint", flags.ps_checkpoint,
         "With --distributed ps: the servers write their shards (and AdaGrad's sums) as PREFIX.ps-* every "
         "--ps-checkpoint-seconds and at the end, one generation at a time (messages transport)");
  option("ps-checkpoint-seconds", flags.ps_checkpoint_seconds,
         "With --ps-checkpoint: seconds between the servers' generations")->capture_default_str();
  option("ps-resume", flags.ps_resume,
         "With --distributed ps: the servers start from the newest complete generation under PREFIX (any number "
         "of ranks; with --resume, one written at or after its epoch)");
  option("slow-rank", flags.slow_rank,
         "Under mpirun, for benchmarks: R:F makes rank R's workers F times slower (each step followed by a "
         "sleep of F - 1 times its compute; linear, mf, w2v); R:F:N makes the ranks F times slower in turn, "
         "N of their steps each, rank R first");
}

void sum_unless_chosen(DistributedFlags& flags, bool combine_given) {
  if (!combine_given && !flags.weighted) flags.combine = "sum";
}

net::MultiRankOptions to_multi_rank_options(const DistributedFlags& flags) {
  const std::string& d = flags.dashes;
  net::MultiRankOptions o;
  o.spell = [d, epochs = flags.epochs_flag](std::string_view option) {
    if (option == "epochs") return epochs;
    if (option == "tau") return d + "ps-tau";
    return d + std::string(option);
  };
  o.set_average_every(flags.average_every);
  o.average_weighted = flags.weighted;
  o.average_rank = flags.average_rank;
  o.average_flush = flags.average_flush;
  o.set_combine(flags.combine);
  o.set_distributed(flags.distributed);
  o.ps.tau = parse_flag(d + "ps-tau", [&] { return parse_tau(flags.ps_tau); });
  // The servers combine the ranks' deltas as averaging would (the app's default or --combine) unless told.
  o.set_server_rule(flags.server_rule.empty() ? flags.combine : flags.server_rule);
  o.ps.server_lr = flags.server_lr;
  o.set_push(flags.push);
  o.ps.push_fraction = flags.push_fraction;
  o.ps.error_feedback = flags.error_feedback;
  if (!flags.slow_rank.empty()) o.set_slow_rank(flags.slow_rank);
  o.ps.warm_rounds = flags.warm_rounds;
  o.ps.overlap = flags.overlap;
  o.set_ps_transport(flags.ps_transport);
  o.ps.servers = flags.servers;
  o.ps.checkpoint = flags.ps_checkpoint;
  o.ps.checkpoint_seconds = flags.ps_checkpoint_seconds;
  o.ps.resume = flags.ps_resume;
  o.validate();
  o.allreduce = parse_flag(d + "allreduce", [&] { return net::parse_algorithm(flags.allreduce); });
  return o;
}

namespace {

// Flags of a multi-rank job given to one process: checked, and said not to apply rather than passed over.
void note_flags_unused(const DistributedFlags& flags) {
  std::vector<std::string> given;  // in the order given, each once
  for (const auto& g : flags.given)
    if (std::find(given.begin(), given.end(), g) == given.end()) given.push_back(g);
  if (given.empty()) return;
  std::string names;
  for (const auto& g : given) names += (names.empty() ? "" : ", ") + flags.dashes + g;
  std::fprintf(stderr, "asgd: note: %s only %s under mpirun with 2 or more ranks; this is one process\n",
               names.c_str(), given.size() == 1 ? "applies" : "apply");
}

}  // namespace

namespace {

// One rank speaks for the job; the others' errors still reach stderr.
void silence_stdout() {
  std::fflush(stdout);
  if (std::freopen("/dev/null", "w", stdout) == nullptr) std::fclose(stdout);
}

// An error as the command says it: its own names, and the parameter server's options the library names
// without a spelling (ParameterServer and serve_dedicated) as the flags.
std::string spelled(const std::string& what, const DistributedFlags& flags) {
  const std::string& d = flags.dashes;
  const std::pair<std::string, std::string> ps[] = {{"PsOptions::checkpoint_seconds", d + "ps-checkpoint-seconds"},
                                                    {"PsOptions::checkpoint", d + "ps-checkpoint"},
                                                    {"PsOptions::resume", d + "ps-resume"},
                                                    {"PsOptions::servers", d + "servers"}};
  std::vector<std::pair<std::string_view, std::string_view>> names;
  for (const auto& [option, flag] : ps) names.emplace_back(option, flag);
  return cli_message(cli_message(what, flags.names), names);
}

// `part` on rank `rank` of a job: an error ends every rank with the rank and the cause.
int ended_on_error(net::Job& job, int rank, const DistributedFlags& flags, const std::function<int()>& part) {
  try {
    return part();
  } catch (const InputError& e) {
    job.abort(rank, fmt::format("error: {}", spelled(e.what(), flags)), 2);
  } catch (const nlohmann::json::exception& e) {
    job.abort(rank, fmt::format("error: a model file's metadata is malformed: {}", e.what()), 2);
  } catch (const std::exception& e) {
    job.abort(rank, fmt::format("error: {}", spelled(e.what(), flags)), 1);
  }
}

}  // namespace

int run_distributed(const DistributedFlags& flags, const std::function<int(Distributed&)>& body) {
  net::MultiRankOptions options = to_multi_rank_options(flags);
  net::Job job;
  net::Transport* transport = job.transport();
  if (transport != nullptr) {  // every job: a collective that only some ranks made would wait for ever
    ended_on_error(job, transport->rank(), flags, [&] {
      net::same_servers_on_all_ranks(*transport, options.ps.servers, flags.dashes + "servers");
      return 0;
    });
  }
  if (transport != nullptr && net::is_server_rank(options.ps, *transport)) {
    silence_stdout();
    return ended_on_error(job, transport->rank(), flags, [&] {
      net::serve_dedicated(*transport, options.ps);
      return 0;
    });
  }
  std::optional<Distributed> group;
  if (transport != nullptr) {
    // Refused options end every rank: the dedicated servers do not make this call and would wait for ever.
    ended_on_error(job, transport->rank(), flags, [&] {
      group.emplace(*transport, std::move(options));
      return 0;
    });
    if (!group->root()) silence_stdout();
  } else {
    group.emplace(std::move(options));
  }
  if (!group->active()) {
    note_flags_unused(flags);
    return body(*group);
  }
  return ended_on_error(job, group->rank(), flags, [&] {
    group->agree_on_options();
    const int rc = body(*group);
    group->finish();
    return rc;
  });
}

}  // namespace asgd::cli
