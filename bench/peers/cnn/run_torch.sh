#!/usr/bin/env bash
# PyTorch side of the LeNet-5 / MNIST benchmark: runs lenet_torch.py (next to this file)
# at each batch size REPEATS times and writes one TSV row per batch size with the
# median training images/s, the test accuracy after the last epoch and the median
# inference images/s (batch EVAL_BATCH over the 10,000 test images).
#
# Settings are environment variables (defaults in brackets):
#   DATA       MNIST IDX directory (.gz or raw)          [/work/shared/data/mnist]
#   THREADS    torch.set_num_threads (and OpenBLAS)      [2]
#   EPOCHS     training epochs per run                   [1]
#   REPEATS    runs per batch size; medians reported     [3]
#   BATCHES    training batch sizes                      [64 256]
#   LR         SGD learning rate (momentum 0.9)          [0.01]
#   SEED       seed for init and shuffles (same every repeat) [1]
#   EVAL_BATCH inference/test batch size                 [1000]
#   EXTRA      more arguments for lenet_torch.py, e.g. "--mkldnn off" or "--limit-train 6000"
#   PYTHON     interpreter with python3-torch            [/usr/bin/python3]
#   OUT        results: torch.tsv, per-run JSON and logs [/tmp/asgd-cnn-peer]
#   QUIET_WAIT before each run, wait up to this many seconds for the machine to be
#              quiet (CPU busy + steal below QUIET_BUSY % over 2 s); 0 = don't [300]
#   QUIET_BUSY [15]
#   MAX_OTHER  rerun a repeat when other processes used more than this many CPUs on
#              average while it trained (the last try is kept; its log says so) [0.1]
#   RETRIES    at most this many reruns per repeat           [2]
#
# Repeats are interleaved (repeat 1 of every batch size, then repeat 2, ...) so that
# load from other processes spreads over the batch sizes instead of hitting one.
# TSV columns: peer batch threads epochs train_images_per_s_median test_accuracy
#   infer_images_per_s, then train_images_per_s_steady_median (the epoch without its
#   first 20 batches), final_train_loss, runs, other_cpu_s_median (CPU seconds other
#   processes used while we trained: a check on the noise; ~0 is a clean run).  test_accuracy and final_train_loss
#   are medians over the repeats (all repeats use the same seed).
#
# Example:  REPEATS=1 EPOCHS=1 bench/peers/cnn/run_torch.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

DATA="${DATA:-/work/shared/data/mnist}"
THREADS="${THREADS:-2}"
EPOCHS="${EPOCHS:-1}"
REPEATS="${REPEATS:-3}"
BATCHES="${BATCHES:-64 256}"
LR="${LR:-0.01}"
SEED="${SEED:-1}"
EVAL_BATCH="${EVAL_BATCH:-1000}"
EXTRA="${EXTRA:-}"
PYTHON="${PYTHON:-/usr/bin/python3}"
OUT="${OUT:-/tmp/asgd-cnn-peer}"
QUIET_WAIT="${QUIET_WAIT:-300}"
QUIET_BUSY="${QUIET_BUSY:-15}"
MAX_OTHER="${MAX_OTHER:-0.1}"
RETRIES="${RETRIES:-2}"

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0
fi
die() { echo "run_torch.sh: $*" >&2; exit 2; }
[[ "$REPEATS" =~ ^[1-9][0-9]*$ ]] || die "REPEATS must be a positive integer, got '$REPEATS'"
[[ "$EPOCHS" =~ ^[1-9][0-9]*$ ]] || die "EPOCHS must be a positive integer, got '$EPOCHS'"
[[ -d "$DATA" ]] || die "DATA directory '$DATA' not found"
"$PYTHON" -c 'import torch' 2>/dev/null || die "'$PYTHON' cannot import torch (apt-get install python3-torch)"

# busy percentage of all CPUs over 2 seconds, from /proc/stat (we run nothing meanwhile)
busy_pct() {
  local a b
  read -r -a a < <(head -n1 /proc/stat)
  sleep 2
  read -r -a b < <(head -n1 /proc/stat)
  local busy=$(( (b[1]+b[2]+b[3]+b[6]+b[7]+b[8]) - (a[1]+a[2]+a[3]+a[6]+a[7]+a[8]) ))
  local idle=$(( (b[4]+b[5]) - (a[4]+a[5]) ))
  echo $(( 100 * busy / (busy + idle + 1) ))
}
wait_quiet() {
  [[ "$QUIET_WAIT" -gt 0 && -r /proc/stat ]] || return 0
  local waited=0 pct
  while pct=$(busy_pct); [[ "$pct" -ge "$QUIET_BUSY" ]]; do
    waited=$((waited + 2))
    if [[ "$waited" -ge "$QUIET_WAIT" ]]; then
      echo "run_torch.sh: machine still ${pct}% busy after ${QUIET_WAIT}s, running anyway" >&2
      return 0
    fi
  done
  [[ "$waited" -eq 0 ]] || echo "run_torch.sh: waited ${waited}s for a quiet machine" >&2
}

mkdir -p "$OUT/runs"
runs=()
for ((r = 1; r <= REPEATS; r++)); do
  for b in $BATCHES; do
    tag="b${b}_t${THREADS}_e${EPOCHS}_r${r}"
    for ((try = 0; ; try++)); do
      wait_quiet
      echo "run_torch.sh: batch $b, repeat $r/$REPEATS, try $((try + 1))" >&2
      # shellcheck disable=SC2086  # EXTRA is meant to split into words
      "$PYTHON" "$here/lenet_torch.py" --json --data "$DATA" --threads "$THREADS" \
        --batch "$b" --epochs "$EPOCHS" --lr "$LR" --seed "$SEED" --eval-batch "$EVAL_BATCH" \
        $EXTRA >"$OUT/runs/$tag.json" 2>"$OUT/runs/$tag.log" \
        || { cat "$OUT/runs/$tag.log" >&2; die "run $tag failed"; }
      grep -E '^epoch|^inference' "$OUT/runs/$tag.log" | sed 's/^/  /' >&2
      # share of the machine other processes took while we trained
      other=$("$PYTHON" -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print("%.3f" % (r.get("train_other_cpu_s", 0.0) / r["train_seconds"]))' "$OUT/runs/$tag.json")
      if "$PYTHON" -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$other" "$MAX_OTHER" \
         || [[ "$try" -ge "$RETRIES" ]]; then
        break
      fi
      echo "run_torch.sh: other processes took $other CPUs while training (> MAX_OTHER=$MAX_OTHER): again" >&2
      mv "$OUT/runs/$tag.log" "$OUT/runs/$tag.noisy$try.log"
    done
    runs+=("$OUT/runs/$tag.json")
  done
done
head -n 6 "$OUT/runs/$(basename "${runs[0]}" .json).log" >"$OUT/environment.txt"

"$PYTHON" - "$OUT/torch.tsv" "${runs[@]}" <<'EOF'
import json, statistics, sys
out, files = sys.argv[1], sys.argv[2:]
groups = {}
for f in files:
    with open(f) as fh:
        r = json.loads(fh.read().strip().splitlines()[-1])
    groups.setdefault((r["batch"], r["threads"], r["epochs"]), []).append(r)
med = statistics.median
cols = ["peer", "batch", "threads", "epochs", "train_images_per_s_median", "test_accuracy",
        "infer_images_per_s", "train_images_per_s_steady_median", "final_train_loss", "runs",
        "other_cpu_s_median"]
with open(out, "w") as fh:
    fh.write("\t".join(cols) + "\n")
    for (batch, threads, epochs), rs in sorted(groups.items()):
        steady = [r["train_images_per_s_steady"] for r in rs if r["train_images_per_s_steady"]]
        row = ["torch", batch, threads, epochs,
               "%.1f" % med(r["train_images_per_s"] for r in rs),
               "%.4f" % med(r["test_accuracy"] for r in rs),
               "%.1f" % med(r["infer_images_per_s"] for r in rs),
               "%.1f" % med(steady) if steady else "",
               "%.4f" % med(r["final_train_loss"] for r in rs),
               len(rs),
               "%.1f" % med(r.get("train_other_cpu_s", 0.0) for r in rs)]
        fh.write("\t".join(str(v) for v in row) + "\n")
EOF
echo "run_torch.sh: wrote $OUT/torch.tsv (environment in $OUT/environment.txt)" >&2
cat "$OUT/torch.tsv"
