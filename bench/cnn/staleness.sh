#!/usr/bin/env bash
# LeNet-5 accuracy vs staleness on full MNIST: tau = 0 (synchronous), 1, 4,
# 16 and inf (Hogwild!), the bounded ones with and without staleness
# compensation; test error per epoch against epochs and against training
# seconds, one CSV and one plot.
#
# Variables (defaults in brackets): ASGD [<repo>/build/apps/asgd],
# DATA [<repo>/../shared/data/mnist], OUT [bench/results], EPOCHS [10],
# WORKERS [2], BATCH [64], LR [0.02], MOMENTUM [0.9], TAUS ["0 1 4 16 inf"],
# EXTRA ["--lr-schedule cosine --weight-decay 5e-4": the recipe that reaches
# 99 % at tau 0].
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ASGD="${ASGD:-$root/build/apps/asgd}"
DATA="${DATA:-$root/../shared/data/mnist}"
OUT="${OUT:-$root/bench/results}"
EPOCHS="${EPOCHS:-10}"
WORKERS="${WORKERS:-2}"
BATCH="${BATCH:-64}"
LR="${LR:-0.02}"
MOMENTUM="${MOMENTUM:-0.9}"
TAUS="${TAUS:-0 1 4 16 inf}"
EXTRA="${EXTRA:---lr-schedule cosine --weight-decay 5e-4}"
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
csv="$OUT/staleness_cnn.csv"
: > "$csv"
for tau in $TAUS; do
  modes=("")
  if [[ "$tau" != 0 && "$tau" != inf ]]; then modes+=(--compensate); fi
  for mode in "${modes[@]}"; do
    part="$work/tau$tau$mode.csv"
    "$ASGD" cnn train --data "$DATA" --epochs "$EPOCHS" --workers "$WORKERS" --batch "$BATCH" --lr "$LR" \
      --momentum "$MOMENTUM" --tau "$tau" $mode $EXTRA --csv "$part" -q
    if [[ ! -s "$csv" ]]; then cat "$part" > "$csv"; else tail -n +2 "$part" >> "$csv"; fi
  done
done
/usr/bin/python3 "$root/bench/plot_staleness.py" "$csv" "$OUT/staleness_cnn.png" \
  "LeNet-5 on MNIST: test error vs staleness ($WORKERS workers, batch $BATCH, momentum $MOMENTUM)"
echo "wrote $csv and $OUT/staleness_cnn.png"
