#!/bin/bash
# Allreduce bus bandwidth at P = 2 and 4 for tree, ring and native
# (MPI_Allreduce), 1 KB to 64 MB, with ours/native and the memcpy ceiling.
# Runs the whole sweep RUNS times (separate mpiexec launches, so a noisy
# minute of the shared machine touches one run) and prints, per P, the
# median over runs of each bandwidth and each ratio.
# Writes bench/results/allreduce_p{2,4}.csv (every run, a `run` column first).
# Variables: BUILD [<repo>/build], REPEATS [7], RUNS [3], RANKS ["2 4"], OUT [<repo>/bench/results].
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/args.sh"
asgd_args none "${BASH_SOURCE[0]}" "$@"
root="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$root/build}"; REPEATS="${REPEATS:-7}"; RUNS="${RUNS:-3}"; RANKS="${RANKS:-2 4}"; OUT="${OUT:-$root/bench/results}"
bin="$BUILD/bench/bench_allreduce"
[[ -x "$bin" ]] || { echo "missing $bin: cmake --build $BUILD --target bench_allreduce" >&2; exit 1; }
# Open MPI refuses root without these (containers, CI); 4 ranks share 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT"
echo "host: $(hostname), $(nproc) cores; $(mpiexec --version | head -n1); load: $(cut -d' ' -f1-3 /proc/loadavg)"
for p in $RANKS; do
  csv="$OUT/allreduce_p$p.csv"
  for run in $(seq 1 "$RUNS"); do
    mpiexec --oversubscribe -n "$p" "$bin" --repeats "$REPEATS" | awk -v run="$run" -v first="$run" \
      'NR == 1 { if (first == 1) print "run," $0; next } { print run "," $0 }'
  done > "$csv"
  echo
  echo "P = $p (bus bandwidth GB/s, median of $RUNS runs; ratio = ours / native, median of the runs' ratios; memcpy: one core copying the same bytes)"
  awk -F, 'function med(list,   a, k, i, j, t) { k = split(list, a, " ");
      for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
    NR > 1 {key = $3 "," $4; bw[key] = bw[key] " " $7; r[key] = r[key] " " $8; m[$3] = m[$3] " " $9;
      if (!($3 in seen)) {seen[$3] = 1; order[++n] = $3}}
    END {
      printf "| bytes | tree | ring | native | tree/native | ring/native | memcpy GB/s |\n|---|---|---|---|---|---|---|\n";
      for (i = 1; i <= n; i++) { b = order[i];
        printf "| %s | %.2f | %.2f | %.2f | %.2fx | %.2fx | %.1f |\n", b, med(bw[b ",tree"]), med(bw[b ",ring"]),
               med(bw[b ",native"]), med(r[b ",tree"]), med(r[b ",ring"]), med(m[b]) } }' "$csv"
done
