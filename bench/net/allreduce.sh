#!/bin/bash
# Allreduce bus bandwidth at P = 2 and 4 for tree, ring and native
# (MPI_Allreduce), 1 KB to 64 MB, with ours/native and the memcpy ceiling.
# Writes bench/results/allreduce_p{2,4}.csv and prints a table per P.
# Variables: BUILD [<repo>/build], REPEATS [7], RANKS ["2 4"], OUT [<repo>/bench/results].
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$root/build}"; REPEATS="${REPEATS:-7}"; RANKS="${RANKS:-2 4}"; OUT="${OUT:-$root/bench/results}"
bin="$BUILD/bench/bench_allreduce"
[[ -x "$bin" ]] || { echo "missing $bin: cmake --build $BUILD --target bench_allreduce" >&2; exit 1; }
# Open MPI refuses root without these (containers, CI); 4 ranks share 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT"
echo "host: $(hostname), $(nproc) cores; $(mpiexec --version | head -n1); load: $(cut -d' ' -f1-3 /proc/loadavg)"
for p in $RANKS; do
  csv="$OUT/allreduce_p$p.csv"
  mpiexec --oversubscribe -n "$p" "$bin" --repeats "$REPEATS" > "$csv"
  echo
  echo "P = $p (bus bandwidth GB/s; ratio = ours / native; memcpy: one core copying the same bytes)"
  awk -F, 'NR > 1 {bw[$2 "," $3] = $6; r[$2 "," $3] = $7; m[$2] = $8; if (!($2 in seen)) {seen[$2] = 1; order[++n] = $2}}
    END {
      printf "| bytes | tree | ring | native | tree/native | ring/native | memcpy GB/s |\n|---|---|---|---|---|---|---|\n";
      for (i = 1; i <= n; i++) { b = order[i];
        printf "| %s | %.2f | %.2f | %.2f | %.2fx | %.2fx | %.1f |\n", b, bw[b ",tree"], bw[b ",ring"], bw[b ",native"],
               r[b ",tree"], r[b ",ring"], m[b] } }' "$csv"
done
