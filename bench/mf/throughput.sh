#!/usr/bin/env bash
# MF training speed on a generated set shaped like MovieLens-10M (70k users,
# 10k items, 10M ratings, planted rank 16, noise 0.5; 90 % = 9M ratings
# trained, 10 % test), k = 32, 20 epochs: rating updates/s over SGD time
# only, file loading apart, end-to-end wall time, and test RMSE, for both
# schedules at 1, 2 and 4 workers, REPEATS times in alternating order
# (medians; the machine is shared and noisy).
#
# Variables (defaults in brackets): ASGD [<repo>/build/apps/asgd],
# DATA [/tmp/asgd-mf-g10m.txt, generated when missing], OUT
# [/tmp/asgd-mf-throughput], WORKERS [1 2 4], SCHEDULES [hogwild blocks],
# REPEATS [3], PYTHON [/usr/bin/python3].
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/args.sh"
asgd_args none "${BASH_SOURCE[0]}" "$@"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ASGD="${ASGD:-$root/build/apps/asgd}"
DATA="${DATA:-/tmp/asgd-mf-g10m.txt}"
OUT="${OUT:-/tmp/asgd-mf-throughput}"
WORKERS="${WORKERS:-1 2 4}"
SCHEDULES="${SCHEDULES:-hogwild blocks}"
REPEATS="${REPEATS:-3}"
PYTHON="${PYTHON:-/usr/bin/python3}"
[[ -x "$PYTHON" ]] || PYTHON=python3
mkdir -p "$OUT"
if [[ ! -s "$DATA" ]]; then
  "$ASGD" mf generate "$DATA" --users 70000 --items 10000 --ratings 10000000 --rank 16 --noise 0.5
fi
runs="$OUT/runs.tsv"
printf 'repeat\tschedule\tworkers\tload_s\tsgd_s\tupdates_per_s\ttest_rmse\twall_s\n' > "$runs"
for rep in $(seq 1 "$REPEATS"); do
  for w in $WORKERS; do
    for sched in $SCHEDULES; do
      log="$OUT/$sched.w$w.r$rep.log"
      start=$(date +%s.%N)
      "$ASGD" mf train "$DATA" -k 32 -t 20 -s "$w" --schedule "$sched" --test-fraction 0.1 -q > "$log" 2>&1
      end=$(date +%s.%N)
      load=$(sed -n 's/.*loaded in \([0-9.]*\) s.*/\1/p' "$log")
      sgd=$(sed -n 's/.* epochs\{0,1\} in \([0-9.]*\) s of SGD.*/\1/p' "$log")
      ups=$(sed -n 's/.*(\([0-9.e+]*\) rating updates\/s.*/\1/p' "$log")
      rmse=$(awk '/^test:/ {gsub(",", "", $5); print $5}' "$log")
      wall=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f", b - a}')
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$sched" "$w" "$load" "$sgd" "$ups" "$rmse" "$wall" >> "$runs"
      echo "repeat $rep $sched w=$w: load ${load}s sgd ${sgd}s ${ups} updates/s RMSE $rmse wall ${wall}s"
    done
  done
done
"$PYTHON" - "$runs" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
keys = sorted({(r["schedule"], int(r["workers"])) for r in rows})
print(f"\n{'schedule':8} {'workers':>7} {'M updates/s':>12} {'SGD s':>7} {'load s':>7} {'wall s':>7} {'test RMSE':>9}  (medians of {len(rows) // max(1, len(keys))})")
for s, w in keys:
    sel = [r for r in rows if r["schedule"] == s and int(r["workers"]) == w]
    med = lambda k: statistics.median(float(r[k]) for r in sel)
    print(f"{s:8} {w:7} {med('updates_per_s') / 1e6:12.1f} {med('sgd_s'):7.2f} {med('load_s'):7.2f} {med('wall_s'):7.2f} {med('test_rmse'):9.4f}")
PY
