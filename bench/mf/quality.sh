#!/usr/bin/env bash
# MF quality on MovieLens with hyperparameters chosen on a validation set,
# never on the test set: the issue's protocol (90/10 random split, seed 42,
# k = 32, 20 epochs, 2 threads), with 10 % of the training part held out as
# validation (split seed 43) for a small grid over the learning rate and L2,
# for plain SGD at a constant rate and decayed linearly to 0, per-parameter
# AdaGrad and per-row AdaGrad (LIBMF 2's rule,
# with LIBMF's initial scale). The best setting by validation RMSE is then
# trained on the whole training part and its test RMSE reported.
#
# Variables (defaults in brackets): ASGD [<repo>/build/apps/asgd],
# DATA_DIR [<repo>/../shared/data], OUT [/tmp/asgd-mf-quality],
# SCHEDULE [hogwild], THREADS [2].
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/args.sh"
asgd_args none "${BASH_SOURCE[0]}" "$@"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ASGD="${ASGD:-$root/build/apps/asgd}"
DATA_DIR="${DATA_DIR:-$root/../shared/data}"
OUT="${OUT:-/tmp/asgd-mf-quality}"
SCHEDULE="${SCHEDULE:-hogwild}"
THREADS="${THREADS:-2}"
mkdir -p "$OUT"
common=(-k 32 -t 20 -s "$THREADS" --schedule "$SCHEDULE" --test-fraction 0.1 --split-seed 42 -q)

declare -A grid=(
  [sgd]="0.01 0.015 0.02 0.03"
  [sgd-linear]="0.02 0.03 0.05 0.08"
  [adagrad]="0.02 0.05 0.1 0.2"
  [row-adagrad]="0.05 0.1 0.2"
)
declare -A flags=([sgd]="" [sgd-linear]="--lr-schedule linear" [adagrad]="--adagrad"
                  [row-adagrad]="--row-adagrad --init 1")
l2s="0.03 0.04 0.05 0.06 0.07 0.08 0.1"

summary="$OUT/summary.tsv"
printf 'data\trule\tr\tl2\tvalidation_rmse\ttest_rmse\n' > "$summary"
for data in ml-latest-small-ratings.csv ml-100k-u.data; do
  file="$DATA_DIR/movielens/$data"
  [[ -f "$file" ]] || { echo "missing $file" >&2; exit 1; }
  for rule in sgd sgd-linear adagrad row-adagrad; do
    read -r -a extra <<< "${flags[$rule]}"
    best=""; best_val=9
    for r in ${grid[$rule]}; do
      for l2 in $l2s; do
        log="$OUT/$data.$rule.r$r.l2$l2.val.log"
        "$ASGD" mf train "$file" "${common[@]}" "${extra[@]}" -r "$r" -l2 "$l2" --validation-fraction 0.1 > "$log" 2>&1
        val=$(awk '/^validation:/ {gsub(",", "", $5); print $5}' "$log")
        echo "$data $rule r=$r l2=$l2 validation RMSE $val"
        if awk -v a="$val" -v b="$best_val" 'BEGIN {exit !(a < b)}'; then best_val=$val; best="$r $l2"; fi
      done
    done
    read -r r l2 <<< "$best"
    log="$OUT/$data.$rule.best.log"
    "$ASGD" mf train "$file" "${common[@]}" "${extra[@]}" -r "$r" -l2 "$l2" > "$log" 2>&1
    test_rmse=$(awk '/^test:/ {gsub(",", "", $5); print $5}' "$log")
    echo "$data $rule: chosen r=$r l2=$l2 (validation $best_val) -> test RMSE $test_rmse"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$data" "$rule" "$r" "$l2" "$best_val" "$test_rmse" >> "$summary"
  done
done
echo
column -t "$summary"
