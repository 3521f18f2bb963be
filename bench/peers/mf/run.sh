#!/usr/bin/env bash
# asgd mf against LIBMF, side by side on the same files, threads and epochs:
# training time, rating updates/s and test RMSE. LIBMF is the shared library
# that the npm package `libmf` (ankane's LIBMF builds) ships, driven through
# its C API by libmf_run.py next to this file; there is no LIBMF in Debian.
#
# Each set is split once, 90/10 at random (awk, seed 42), into LIBMF text
# files with integer ids from 0 ("u v r"), and every tool reads those files.
# Sets: g10m (generated, shaped like MovieLens-10M: 70k users, 10k items,
# 10M ratings, planted rank 16, noise 0.5 = the best RMSE; made with `asgd mf
# generate`), ml-100k and ml-latest-small (from DATA_DIR, skipped when absent).
#
# Runs per set, threads and repeat, in that order:
#   libmf        LIBMF's defaults (-r 0.1 -l2 0.1, per-row AdaGrad, no biases), -k 32 -t 20 -s W
#   libmf-native the same, LIBMF built from its source for this machine (AVX, -march=native:
#                build_libmf_native.sh), when LIBMF_SRC names a checkout of it
#   asgd-default ours with every default (SGD -r 0.02 --l2 0.05, biases, --schedule auto: blocks on g10m,
#                hogwild on the MovieLens sets), -k 32 -t 20 -s W
#   asgd         ours, defaults but the blocks schedule
#   asgd-libmf   ours with LIBMF's rule: --no-biases --no-mean --scale-ratings --row-adagrad --head-first --init 1 -r 0.1 --l2 0.1, blocks
# Time: "train s" is LIBMF's mf_train call (its scaling, shuffling and grid
# included) and our "s of SGD" (the epochs; our grid is built before);
# "wall s" is the whole job: reading, training, scoring the test file.
#
# Variables (defaults in brackets): ASGD [<repo>/build/apps/asgd],
# LIBMF_SO [fetched: npm pack libmf@0.2.0 into CACHE_DIR], LIBMF_SRC [none: no native peer],
# CACHE_DIR [${XDG_CACHE_HOME:-$HOME/.cache}/asgd-mf-peers],
# DATA_DIR [<repo>/../shared/data], OUT [/tmp/asgd-mf-peers],
# SETS [g10m ml-100k ml-latest-small], THREADS [1 2], REPEATS [3],
# PYTHON [/usr/bin/python3] (standard library only).
# Smoke run: SETS=ml-100k THREADS=2 REPEATS=1 bench/peers/mf/run.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../../scripts/args.sh"
asgd_args none "${BASH_SOURCE[0]}" "$@"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
ASGD="${ASGD:-$root/build/apps/asgd}"
LIBMF_SO="${LIBMF_SO:-}"
CACHE_DIR="${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/asgd-mf-peers}"
DATA_DIR="${DATA_DIR:-$root/../shared/data}"
OUT="${OUT:-/tmp/asgd-mf-peers}"
SETS="${SETS:-g10m ml-100k ml-latest-small}"
THREADS="${THREADS:-1 2}"
REPEATS="${REPEATS:-3}"
PYTHON="${PYTHON:-/usr/bin/python3}"
[[ -x "$PYTHON" ]] || PYTHON=python3
K=32 EPOCHS=20

die() { echo "run.sh: $*" >&2; exit 2; }
note() { echo "run.sh: $*" >&2; }
[[ -x "$ASGD" ]] || die "asgd binary '$ASGD' not found: build it (cmake --build build --target asgd) or set ASGD=PATH"
mkdir -p "$OUT/data" "$OUT/logs"

if [[ -z "$LIBMF_SO" ]]; then
  LIBMF_SO="$CACHE_DIR/package/vendor/libmf.so"
  if [[ ! -s "$LIBMF_SO" ]]; then
    command -v npm > /dev/null || die "npm is needed to fetch LIBMF (apt-get install npm), or set LIBMF_SO=PATH"
    mkdir -p "$CACHE_DIR"
    (cd "$CACHE_DIR" && npm pack libmf@0.2.0 > /dev/null 2> "$OUT/logs/npm-pack.log" && tar xzf libmf-0.2.0.tgz) ||
      die "'npm pack libmf@0.2.0' failed (see $OUT/logs/npm-pack.log); set LIBMF_SO=PATH"
  fi
fi
[[ -s "$LIBMF_SO" ]] || die "LIBMF_SO=$LIBMF_SO: no such library"
LIBMF_NATIVE=""
if [[ -n "${LIBMF_SRC:-}" ]]; then
  LIBMF_NATIVE=$("$here/build_libmf_native.sh" "$LIBMF_SRC" "$CACHE_DIR/native" 2> "$OUT/logs/libmf-native.log") ||
    die "building LIBMF from $LIBMF_SRC failed: see $OUT/logs/libmf-native.log"
fi

# split_set NAME: $OUT/data/NAME.tr and NAME.te from "user item rating" lines on stdin. Written under
# temporary names and renamed once whole: prepare() reuses the files of an earlier run, and a run stopped
# mid-split must not leave a cut-off set that both tools would then read without a word.
split_set() {
  # Ids renumbered from 0 in order of appearance: LIBMF sizes its factors by the largest id.
  local tr="$OUT/data/$1.tr" te="$OUT/data/$1.te"
  rm -f "$tr" "$te"
  awk -v tr="$tr.part" -v te="$te.part" 'BEGIN {srand(42)}
    {if (!($1 in u)) u[$1] = nu++; if (!($2 in v)) v[$2] = nv++
     if (rand() < 0.1) print u[$1], v[$2], $3 > te; else print u[$1], v[$2], $3 > tr}'
  mv "$te.part" "$te" && mv "$tr.part" "$tr"
}
prepare() {
  local set=$1
  [[ -s "$OUT/data/$set.tr" && -s "$OUT/data/$set.te" ]] && return 0
  case $set in
    g10m)
      rm -f "$OUT/data/g10m.txt"  # a stopped run's, perhaps cut off
      "$ASGD" mf generate "$OUT/data/g10m.txt" --users 70000 --items 10000 --ratings 10000000 --rank 16 \
        --noise 0.5 > "$OUT/logs/generate.log"
      # Ids u123 / i45 to integers.
      awk '{print substr($1, 2), substr($2, 2), $3}' "$OUT/data/g10m.txt" | split_set g10m
      rm -f "$OUT/data/g10m.txt" ;;
    ml-100k)
      [[ -s "$DATA_DIR/movielens/ml-100k-u.data" ]] || return 1
      split_set ml-100k < "$DATA_DIR/movielens/ml-100k-u.data" ;;
    ml-latest-small)
      [[ -s "$DATA_DIR/movielens/ml-latest-small-ratings.csv" ]] || return 1
      tail -n +2 "$DATA_DIR/movielens/ml-latest-small-ratings.csv" | tr ',' ' ' | split_set ml-latest-small ;;
    *) die "SETS: unknown set '$set' (g10m, ml-100k, ml-latest-small)" ;;
  esac
}

now() { date +%s.%N; }
# record TOOL TRAIN_S RMSE START END: one row of runs.tsv for the current set, threads and repeat.
record() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$set" "$w" "$rep" "$1" "$2" \
    "$(awk -v n="$nnz" -v t="$2" -v e=$EPOCHS 'BEGIN {printf "%.0f", n * e / t}')" "$3" \
    "$(awk -v a="$4" -v b="$5" 'BEGIN {printf "%.2f", b - a}')" >> "$runs"
}
runs="$OUT/runs.tsv"
printf 'set\tthreads\trepeat\ttool\ttrain_s\tupdates_per_s\ttest_rmse\twall_s\n' > "$runs"
for set in $SETS; do
  prepare "$set" || { note "SKIP $set: not in $DATA_DIR"; continue; }
  tr="$OUT/data/$set.tr" te="$OUT/data/$set.te"
  nnz=$(wc -l < "$tr")
  for rep in $(seq 1 "$REPEATS"); do
    for w in $THREADS; do
      # LIBMF: the npm build, and the native one when there is one.
      for tool in libmf ${LIBMF_NATIVE:+libmf-native}; do
        so="$LIBMF_SO"
        [[ $tool == libmf-native ]] && so="$LIBMF_NATIVE"
        log="$OUT/logs/$set.$tool.s$w.r$rep.log"
        start=$(now)
        "$PYTHON" "$here/libmf_run.py" "$so" "$tr" "$te" -k $K -t $EPOCHS -s "$w" > "$log" 2>&1 ||
          die "LIBMF failed: see $log"
        end=$(now)
        train=$(sed -n 's/.*train_s=\([0-9.]*\).*/\1/p' "$log")
        rmse=$(sed -n 's/.*test_rmse=\([0-9.na]*\).*/\1/p' "$log")
        record "$tool" "$train" "$rmse" "$start" "$end"
      done
      # Ours: every default (hogwild), the blocks schedule, and LIBMF's step rule on blocks.
      for tool in asgd-default asgd asgd-libmf; do
        extra=(--schedule blocks)
        [[ $tool == asgd-default ]] && extra=()
        [[ $tool == asgd-libmf ]] && extra+=(--no-biases --no-mean --scale-ratings --row-adagrad --head-first --init 1 -r 0.1 --l2 0.1)
        log="$OUT/logs/$set.$tool.s$w.r$rep.log"
        start=$(now)
        "$ASGD" mf train "$tr" "$OUT/$set.model" --format libmf -k $K -t $EPOCHS -s "$w" \
          "${extra[@]}" -q > "$log" 2>&1 || die "asgd mf train failed: see $log"
        "$ASGD" mf eval "$te" "$OUT/$set.model" --format libmf >> "$log" 2>&1 || die "asgd mf eval failed: see $log"
        end=$(now)
        train=$(sed -n 's/.* epochs\{0,1\} in \([0-9.]*\) s of SGD.*/\1/p' "$log")
        rmse=$(sed -n 's/.*RMSE \([0-9.na]*\),.*/\1/p' "$log")
        record "$tool" "$train" "$rmse" "$start" "$end"
      done
      note "$set, $w threads, repeat $rep: $(awk -F'\t' -v s="$set" -v w="$w" -v r="$rep" \
        '$1 == s && $2 == w && $3 == r {printf "%s %.2fs RMSE %s; ", $4, $5, $7}' "$runs")"
    done
  done
done

"$PYTHON" - "$runs" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
med = lambda sel, k: statistics.median(float(r[k]) for r in sel)
print("\n| set | threads | tool | train s | M updates/s | test RMSE | wall s | train speed ours/LIBMF | wall ours/LIBMF |")
print("|---|---|---|---|---|---|---|---|---|")
groups = []
for r in rows:
    if (r["set"], r["threads"]) not in groups:
        groups.append((r["set"], r["threads"]))
for s, w in groups:
    g = [r for r in rows if r["set"] == s and r["threads"] == w]
    # The ratios are against the harder peer: LIBMF built natively when it ran, else the npm build.
    peer = "libmf-native" if any(r["tool"] == "libmf-native" for r in g) else "libmf"
    theirs = [r for r in g if r["tool"] == peer]
    for tool in ("libmf", "libmf-native", "asgd-default", "asgd", "asgd-libmf"):
        sel = [r for r in g if r["tool"] == tool]
        if not sel:
            continue
        ratio = wall = ""
        if not tool.startswith("libmf") and theirs:
            # Same-repeat ratios, then their median: the machine's state is shared within a repeat.
            pairs = [(o, t) for o in sel for t in theirs if o["repeat"] == t["repeat"]]
            ratio = f"{statistics.median(float(t['train_s']) / float(o['train_s']) for o, t in pairs):.2f}x"
            wall = f"{statistics.median(float(t['wall_s']) / float(o['wall_s']) for o, t in pairs):.2f}x"
        print(f"| {s} | {w} | {tool} | {med(sel, 'train_s'):.2f} | {med(sel, 'updates_per_s') / 1e6:.1f} | "
              f"{med(sel, 'test_rmse'):.4f} | {med(sel, 'wall_s'):.2f} | {ratio} | {wall} |")
print(f"\n(medians of {max(len({r['repeat'] for r in rows}), 1)} repeats; ratios: LIBMF's time over ours, per repeat, "
      "median; against libmf-native where it ran)")
PY
