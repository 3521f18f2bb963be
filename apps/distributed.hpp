// The flags of a multi-rank run (`mpirun -np N asgd linear|mf|w2v|cnn train
// ...`) and the process around net::MultiRank: MPI started when mpirun
// launched this process, rank 0 alone printing, and an error on any rank
// ending the whole job with "asgd: rank R: <cause>" (MPI_Abort), so no rank
// waits forever. The run itself (sharding, agreement, averaging, per-rank
// checkpoints) is net/multi_rank.hpp.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "asgd/net/multi_rank.hpp"
#include "cli_common.hpp"

namespace asgd::cli {

struct DistributedFlags {
  std::string allreduce = "ring";     // tree, ring or native
  std::string average_every = "epoch";  // "epoch" or K local steps
  bool weighted = false;              // weight ranks by examples trained
  std::size_t average_rank = 0;       // PowerSGD rank of averaging's rounds; 0: every parameter
  bool average_flush = false;         // with average_rank: a whole round at the end sends the kept error
  std::string combine = "mean";       // mean of models, or sum of updates (the app sets its default)
  std::string distributed = "averaging";  // or ps: a parameter server
  std::string ps_tau = "0";           // ps: rounds a rank may run ahead of the slowest (0: BSP; inf: ASP)
  std::string server_rule;            // ps: mean, sum or adagrad; empty: as combine
  float server_lr = 0.1f;             // ps: AdaGrad's step on the servers
  std::string push = "floats";        // ps: floats, int8 or sign
  float push_fraction = 1;            // ps: the changed keys pushed each round (top-k)
  bool error_feedback = true;         // ps: keep what a push leaves out for later
  std::string slow_rank;              // a bench's straggler, "R:F"; empty: none
  std::uint64_t warm_rounds = 0;      // ps: the first rounds bulk-synchronous
  bool overlap = true;                // ps: rounds overlap a period of compute (off: workers wait for each)
  std::string ps_transport = "auto";  // ps: auto, messages or one-sided
  std::size_t servers = 0;            // ps: dedicated server ranks, the last ones; 0: a server thread per rank
  std::string ps_checkpoint;          // ps: the servers' checkpoint prefix; empty: none
  double ps_checkpoint_seconds = 60;  // ps: seconds between the servers' checkpoint generations
  std::string ps_resume;              // ps: the prefix whose newest complete generation the servers start from
  std::vector<std::string> given;     // the flags above given on the command line, without dashes
  std::string dashes = "--";          // how the command spells its flags in messages (w2v: "-allreduce")
  std::string epochs_flag = "--epochs";  // the command's flag for the run's epochs (w2v: -iter)
  OptionNames names = {};  // the command's own spellings of library options in errors (cli_message)
};
// --allreduce, --average-every, --average-weighted, --combine, --distributed, --ps-tau, --server-rule,
// --server-lr.
void add_distributed_flags(CLI::App& app, DistributedFlags& flags);
// The default of sparse models (BPR, word2vec): sum the ranks' updates, since
// the mean divides each rank's step on the rows several ranks move
// (bench/RESULTS.md). Kept as it is when the user chose --combine, or a
// weighted mean.
void sum_unless_chosen(DistributedFlags& flags, bool combine_given);
// The flags as the library's options (InputError naming the flag); errors of the run spell options as flags.
net::MultiRankOptions to_multi_rank_options(const DistributedFlags& flags);

using Distributed = net::MultiRank;
using net::run_averaged;

// Runs `body` with this process's rank of the job (rank 0 of 1 without
// mpirun); a dedicated server rank (--servers) serves instead and returns 0. In a multi-rank job an error on this rank (bad input, I/O, NaN)
// ends every rank with the rank and the cause; in a single process it is
// rethrown (run_guarded reports it). On ranks other than 0, stdout goes to
// /dev/null.
int run_distributed(const DistributedFlags& flags, const std::function<int(Distributed&)>& body);

}  // namespace asgd::cli
