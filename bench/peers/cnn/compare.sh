#!/usr/bin/env bash
# asgd vs PyTorch on LeNet-5 / MNIST, side by side on the same machine:
# same net, data (full MNIST), SGD momentum 0.9, lr 0.01, 1 epoch, 2 threads
# (asgd: 2 workers at tau 0, i.e. synchronous data-parallel; PyTorch:
# torch.set_num_threads(2) with OpenBLAS's threaded build). Runs alternate
# between the two peers so that drifts of the machine hit both; medians of
# REPEATS. Never run it beside another job: PyTorch's spinning thread pools
# collapse under contention (see RESULTS.md).
#
# Variables: ASGD [<repo>/build/apps/asgd], DATA [<repo>/../shared/data/mnist],
# BATCHES ["64 256"], REPEATS [3], OUT [/tmp/asgd-cnn-compare].
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../../scripts/args.sh"
asgd_args none "${BASH_SOURCE[0]}" "$@"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
ASGD="${ASGD:-$root/build/apps/asgd}"
DATA="${DATA:-$root/../shared/data/mnist}"
BATCHES="${BATCHES:-64 256}"
REPEATS="${REPEATS:-3}"
OUT="${OUT:-/tmp/asgd-cnn-compare}"
# PyTorch and OpenBLAS's threaded build from Debian, when missing (apt-get as root, sudo otherwise).
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null || ! dpkg -s libopenblas0-pthread >/dev/null 2>&1; then
  bash "$root/scripts/install-deps.sh" --bench
fi
mkdir -p "$OUT"
tsv="$OUT/compare.tsv"
printf 'peer\tbatch\trepeat\ttrain_images_per_s\ttest_accuracy\tinfer_images_per_s\n' > "$tsv"
for r in $(seq 1 "$REPEATS"); do
  for b in $BATCHES; do
    log="$OUT/asgd.b$b.r$r.log"
    "$ASGD" cnn train --data "$DATA" --epochs 1 --batch "$b" --workers 2 --tau 0 --lr 0.01 --momentum 0.9 \
      --model "$OUT/lenet.b$b.model" > "$log"
    train=$(awk '/^epoch 1\/1/ {for (i = 1; i <= NF; ++i) if ($(i) == "images/s,") print $(i-1)}' "$log")
    acc=$(awk '/^test accuracy .* after 1 epoch/ {print $3 / 100}' "$log")
    infer=$("$ASGD" cnn eval --data "$DATA" --model "$OUT/lenet.b$b.model" --batch 1000 --workers 2 --repeats 5 |
      awk '/inference/ {for (i = 1; i <= NF; ++i) if ($(i) == "images/s") print $(i-1)}')
    printf 'asgd\t%s\t%s\t%s\t%s\t%s\n' "$b" "$r" "$train" "$acc" "$infer" >> "$tsv"
    /usr/bin/python3 "$here/lenet_torch.py" --data "$DATA" --threads 2 --batch "$b" --epochs 1 --lr 0.01 \
      --eval-batch 1000 --json 2> "$OUT/torch.b$b.r$r.log" > "$OUT/torch.b$b.r$r.json"
    /usr/bin/python3 - "$OUT/torch.b$b.r$r.json" "$b" "$r" >> "$tsv" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"torch\t{sys.argv[2]}\t{sys.argv[3]}\t{d['train_images_per_s']:.0f}\t{d['test_accuracy']:.4f}\t{d['infer_images_per_s']:.0f}")
PY
  done
done
/usr/bin/python3 - "$tsv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
med = {}
for peer in ("asgd", "torch"):
    for b in sorted({r["batch"] for r in rows}, key=int):
        sel = [r for r in rows if r["peer"] == peer and r["batch"] == b]
        med[peer, b] = {k: statistics.median(float(r[k]) for r in sel)
                        for k in ("train_images_per_s", "test_accuracy", "infer_images_per_s")}
print("batch  asgd train/s  torch train/s  ratio  | asgd infer/s  torch infer/s  ratio | acc asgd  acc torch")
for b in sorted({k[1] for k in med}, key=int):
    a, t = med["asgd", b], med["torch", b]
    print(f"{b:>5}  {a['train_images_per_s']:12.0f}  {t['train_images_per_s']:13.0f}  {a['train_images_per_s'] / t['train_images_per_s']:5.2f}"
          f"  | {a['infer_images_per_s']:12.0f}  {t['infer_images_per_s']:13.0f}  {a['infer_images_per_s'] / t['infer_images_per_s']:5.2f}"
          f" | {a['test_accuracy']:8.4f}  {t['test_accuracy']:9.4f}")
PY
