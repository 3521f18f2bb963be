// bench_consistency: parameter writes per second under the Racy, Atomic and
// Locked policies, through the real Trainer on sparse logistic regression and
// as the bare write primitive. Figures and commands: bench/RESULTS.md.
//
//   train/<policy>/workers:<W>    one epoch per iteration of asgd::Trainer;
//                                 items/s = parameter writes (non-zeros) per s
//   write/<policy>/threads:<T>    T threads each calling policy.add on random
//                                 floats of one shared 100k-float vector
#include <benchmark/benchmark.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "asgd/engine/bounded_delay.hpp"
#include "asgd/engine/consistency.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/schedule.hpp"
#include "asgd/engine/trainer.hpp"
#include "asgd/sparse/linear_reference.hpp"
#include "asgd/sparse/generator.hpp"
#include "asgd/sparse/linear.hpp"

namespace {

using asgd::Consistency;

// ---------------------------------------------------------------------------
// Through the trainer: the problem of `asgd demo`.

constexpr std::uint64_t kCheckEpochs = 10;
constexpr double kCheckGap = 1e-3;  // relative to the L-BFGS optimum

asgd::TrainerOptions trainer_options(Consistency policy, std::size_t workers, std::uint64_t epochs) {
  asgd::TrainerOptions o;
  o.workers = workers;
  o.epochs = epochs;
  o.consistency = policy;
  o.tau = asgd::kUnbounded;
  o.schedule = asgd::sparse::reference_schedule();
  return o;
}

// Built once, on first use, so that filtering to the write benchmarks skips
// the generator and L-BFGS. 100k examples x 100k features x 20 non-zeros.
asgd::sparse::LinearReference& linear_data() {
  static asgd::sparse::LinearReference data;
  return data;
}

struct CheckResult {
  double gap = 0;
  std::string error;  // empty: the configuration reached the optimum
};

// The result check that precedes any timing: kCheckEpochs epochs of this
// configuration from w = 0 must end within kCheckGap of the L-BFGS optimum.
// Done once per configuration; Google Benchmark calls the function again for
// every repetition.
const CheckResult& check_configuration(Consistency policy, std::size_t workers) {
  static std::map<std::pair<Consistency, std::size_t>, CheckResult> checked;
  const auto key = std::pair(policy, workers);
  if (const auto it = checked.find(key); it != checked.end()) return it->second;
  CheckResult result;
  try {
    asgd::sparse::LinearReference& data = linear_data();
    auto store = asgd::ParamStore::on_heap(data.problem.layout());
    asgd::Trainer trainer(store, trainer_options(policy, workers, kCheckEpochs));
    const asgd::TrainReport report = trainer.run(data.problem);
    result.gap = data.relative_gap(store.snapshot());
    if (!(result.gap <= kCheckGap)) {
      char text[256];
      std::snprintf(text, sizeof text,
                    "after %llu epochs the objective is %.2e (relative) above the L-BFGS optimum, expected <= %.0e "
                    "(staleness mean %.1f, max %llu steps; lead max %llu steps)",
                    static_cast<unsigned long long>(kCheckEpochs), result.gap, kCheckGap, report.staleness.mean(),
                    static_cast<unsigned long long>(report.staleness.max()),
                    static_cast<unsigned long long>(report.max_lead));
      result.error = text;
    }
  } catch (const std::exception& e) {
    result.error = std::string("check run failed: ") + e.what();
  }
  return checked.emplace(key, std::move(result)).first->second;
}

// One epoch per iteration (the schedule's full 0.5 -> 0 decay), continuing
// from the previous iteration's weights with a fresh shuffle seed.
void train_epoch(benchmark::State& state, Consistency policy, std::size_t workers) {
  const CheckResult& check = check_configuration(policy, workers);
  state.counters["check_gap"] = check.gap;
  if (!check.error.empty()) {
    state.SkipWithError(check.error.c_str());
    return;
  }
  asgd::sparse::LinearReference& data = linear_data();
  auto store = asgd::ParamStore::on_heap(data.problem.layout());
  asgd::Trainer trainer(store, trainer_options(policy, workers, 1));
  std::uint64_t seed = 1;
  asgd::TrainReport total;  // staleness and lead over every iteration
  for (auto _ : state) {
    trainer.set_state({.epoch = 0, .examples = 0, .seed = seed++});
    try {
      const asgd::TrainReport report = trainer.run(data.problem);
      if (report.examples != data.problem.num_examples()) {  // items/s below assumes whole epochs
        state.SkipWithError("an epoch ended before processing every example");
        break;
      }
      total.append(report);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      break;
    }
  }
  const auto iterations = static_cast<std::int64_t>(state.iterations());
  state.SetItemsProcessed(iterations * static_cast<std::int64_t>(data.generated.data.nnz()));
  state.counters["examples/s"] = benchmark::Counter(
      static_cast<double>(iterations) * static_cast<double>(data.problem.num_examples()), benchmark::Counter::kIsRate);
  // Staleness: other workers' steps that finished while a step ran, about
  // W - 1 when the workers overlap and near 0 when they ran one after
  // another. Lead: steps a worker ran ahead of the slowest (at tau inf a
  // worker that takes others' steps pulls ahead for the rest of the run).
  state.counters["staleness_mean"] = total.staleness.mean();
  state.counters["staleness_max"] = static_cast<double>(total.staleness.max());
  state.counters["lead_max"] = static_cast<double>(total.max_lead);
}

// ---------------------------------------------------------------------------
// The bare write primitive, without the trainer.

constexpr std::size_t kTableSize = 100000;
constexpr std::size_t kWritesPerIteration = 256;
constexpr std::size_t kIndicesPerThread = 1 << 16;  // a multiple of kWritesPerIteration

struct alignas(asgd::kCacheLine) WriteTable {
  std::array<float, kTableSize> values{};
};

WriteTable& write_table() {
  static const auto table = std::make_unique<WriteTable>();
  return *table;
}

// Adds 1.0f at random indices, so that afterwards the table's sum says how
// many writes landed: all of them under Atomic and Locked (checked), and
// under Racy the shortfall is the fraction of updates lost to collisions.
template <asgd::ConsistencyPolicy Policy>
void write_primitive(benchmark::State& state, const Policy& policy) {
  auto& table = write_table().values;
  // Drawn before timing, so that the loop measures the writes alone.
  std::vector<std::uint32_t> indices(kIndicesPerThread);
  std::mt19937_64 rng(1000 + static_cast<std::uint64_t>(state.thread_index()));
  for (auto& i : indices) i = static_cast<std::uint32_t>(rng() % kTableSize);
  // The start of the timed loop is a barrier for all threads.
  if (state.thread_index() == 0) {
    for (auto& x : table) asgd::store_param(x, 0.0f);
  }
  std::size_t next = 0;
  for (auto _ : state) {
    const std::uint32_t* batch = indices.data() + next;
    for (std::size_t k = 0; k < kWritesPerIteration; ++k) policy.add(table[batch[k]], 1.0f);
    next = (next + kWritesPerIteration) % kIndicesPerThread;
  }
  const auto writes = static_cast<std::int64_t>(state.iterations() * kWritesPerIteration);
  state.SetItemsProcessed(writes);
  // The end of the timed loop is a barrier too: every thread's writes are in.
  if (state.thread_index() == 0) {
    double landed = 0;
    for (const auto& x : table) landed += asgd::load_param(x);  // exact: integers far below 2^24
    const double expected = static_cast<double>(writes) * state.threads();
    const double lost = 1.0 - landed / expected;
    state.counters["lost"] = lost;  // only thread 0 sets it, so the sum over threads is this
    const bool may_lose = Policy::kind == Consistency::racy && state.threads() > 1;
    if (lost != 0.0 && !may_lose) {
      state.SkipWithError("updates were lost under a policy (or thread count) that must not lose any");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  const asgd::Racy racy;
  const asgd::Atomic atomic;
  const asgd::Locked locked;               // the default: 4096 stripes, the trainer's
  const asgd::Locked locked_global(1);     // one mutex for the whole vector
  const std::string stripes = "locked_" + std::to_string(locked.stripes());
  auto register_write = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(("write/" + name).c_str(), fn)->ThreadRange(1, 4)->UseRealTime();
  };
  register_write("racy", [&](benchmark::State& s) { write_primitive(s, racy); });
  register_write("atomic", [&](benchmark::State& s) { write_primitive(s, atomic); });
  register_write(stripes, [&](benchmark::State& s) { write_primitive(s, locked); });
  register_write("locked_1", [&](benchmark::State& s) { write_primitive(s, locked_global); });

  for (const Consistency policy : {Consistency::racy, Consistency::atomic, Consistency::locked}) {
    for (const std::size_t workers : {1, 2, 4}) {
      const std::string name = "train/" + std::string(asgd::to_string(policy)) + "/workers:" + std::to_string(workers);
      benchmark::RegisterBenchmark(name.c_str(), [policy, workers](benchmark::State& s) {
        train_epoch(s, policy, workers);
      })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MeasureProcessCPUTime();
    }
  }

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
