#!/bin/bash
# On a machine with an NVIDIA GPU, in one go: build with CUDA, run the GPU
# tests, train LeNet-5 on MNIST with `asgd cnn --device gpu` (kernel by kernel,
# --no-cuda-graphs, and with CUDA graphs) at batch 64, 256 and 1024 against PyTorch eager on
# the same GPU, a full-length accuracy run, the tau sweep over streams with
# its plot, and compute-sanitizer memcheck, initcheck, racecheck and
# synccheck over the GPU tests;
# prints a short table last. On the lent machine of the `device` tool, which
# has no libraries of ours and no network, bench/gpu/device.sh runs this
# script (see there).
# Variables: DATA [MNIST IDX dir: <repo>/../shared/data/mnist, else `builtin`],
#            BUILD [<repo>/build-gpu], OUT [<repo>/bench/results/gpu],
#            STAGES ["tests speed accuracy tau sanitize table": any of them, run in that order; every stage but
#                    `table` builds first (incrementally) and needs the GPU; `table` alone only reads OUT, so
#                    the results of several calls unpacked into one OUT make one table anywhere],
#            EPOCHS [3 timed epochs per batch size], ACC_EPOCHS [20],
#            TAU_EPOCHS [10], TAU_STREAMS [4: the sweep's streams; the CPU sweep ran 2 workers],
#            LIMIT [0: all training images; 2000 with EMULATE=1], PYTHON [python3 with torch],
#            SANITIZE_TIMEOUT [120 s per tool, 4 tools], RUN_TIMEOUT [300 s for each training run and for the
#            GPU tests: a hang costs that, not the whole call], TAUS ["0 1 4 16 inf 1c 4c 16c": the sweep's
#            runs; a run whose CSV holds all its epochs already is kept, so a call cut short goes on where it
#            stopped], CMAKE_ARGS [more -D options],
#            EMULATE [0; 1 runs the whole script on the emulated backend, no GPU
#                     needed, to check the script itself: its figures mean nothing].
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/args.sh"
asgd_args none "${BASH_SOURCE[0]}" "$@"
root="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$root/build-gpu}"; OUT="${OUT:-$root/bench/results/gpu}"
EPOCHS="${EPOCHS:-3}"; ACC_EPOCHS="${ACC_EPOCHS:-20}"; TAU_EPOCHS="${TAU_EPOCHS:-10}"; LIMIT="${LIMIT:-0}"
PYTHON="${PYTHON:-python3}"; SANITIZE_TIMEOUT="${SANITIZE_TIMEOUT:-120}"; EMULATE="${EMULATE:-0}"
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"; TAU_STREAMS="${TAU_STREAMS:-4}"
STAGES="${STAGES:-tests speed accuracy tau sanitize table}"
DATA="${DATA:-$root/../shared/data/mnist}"; [[ -d "$DATA" ]] || DATA=builtin
if [[ "$STAGES" == table ]]; then
  [[ -d "$OUT" ]] || { echo "run.sh: STAGES=table reads OUT=$OUT, which is not there" >&2; exit 2; }
else
  mkdir -p "$OUT"
fi
log() { echo "== $*" >&2; }
stage() { [[ " $STAGES " == *" $1 "* ]]; }
for s in $STAGES; do
  [[ " tests speed accuracy tau sanitize table " == *" $s "* ]] || { log "STAGES: unknown stage '$s'"; exit 2; }
done
read -r -a taus <<< "${TAUS:-0 1 4 16 inf 1c 4c 16c}"
# The rows of a CSV in OUT (its header included; 0 when it is not there): a run killed before its first epoch
# leaves the header alone.
rows() { if [[ -f "$OUT/$1" ]]; then wc -l < "$OUT/$1"; else echo 0; fi; }

if [[ "$STAGES" != table ]]; then
  log "build ($BUILD)"
  # shellcheck disable=SC2086  # CMAKE_ARGS: words
  cmake -S "$root" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DASGD_WITH_CUDA=ON -DASGD_WITH_MPI=OFF \
    -DASGD_BUILD_TESTS=ON -DASGD_BUILD_BENCH=OFF ${CMAKE_ARGS:-} > "$OUT/configure.log"
  targets=(asgd test_gpu)
  [[ "$EMULATE" == 1 ]] && targets+=(asgd_gpu_emulated)
  cmake --build "$BUILD" -j "$(nproc)" --target "${targets[@]}" > "$OUT/build.log"
  if [[ "$EMULATE" == 1 ]]; then
    export ASGD_GPU_BACKEND="$BUILD/gpu/libasgd_gpu_emulated.so"
    [[ "$LIMIT" == 0 ]] && LIMIT=2000  # the emulator trains a few thousand images/s
    log "EMULATE=1: the emulated backend ($ASGD_GPU_BACKEND); the figures below say nothing about a GPU"
  fi
  "$BUILD/apps/asgd" cnn train --data "$DATA" --device gpu --epochs 1 --limit 1000 -q > /dev/null  # fails loudly without a GPU
  "$BUILD/apps/asgd" cnn floor --device gpu --size 64 --repeats 1 | sed -n 's/^device: //p' > "$OUT/device.txt"
  echo "$DATA$([[ -f "$DATA/SOURCE" ]] && echo " (from $(cat "$DATA/SOURCE"))")" > "$OUT/data.txt"
fi
asgd="$BUILD/apps/asgd"
# SIGTERM at RUN_TIMEOUT: asgd stops at its next step (exit 143), its CSV holding the epochs done.
train() { timeout "$RUN_TIMEOUT" "$asgd" cnn train --data "$DATA" --device gpu --limit "$LIMIT" -q "$@"; }

if stage tests; then
  log "GPU tests"
  tests=pass
  timeout "$RUN_TIMEOUT" "$BUILD/tests/gpu/test_gpu" 2>&1 | tee "$OUT/test_gpu.log" | tail -n 3 >&2 || tests=FAIL
  echo "$tests" > "$OUT/tests.txt"
fi

if stage speed; then
  log "speed: asgd (kernel by kernel, --no-cuda-graphs, and with CUDA graphs) vs PyTorch eager, same GPU, batch 64/256/1024"
  : > "$OUT/speed.tsv"
  for b in 64 256 1024; do
    for mode in asgd asgd_graphs; do
      graphs=(--no-cuda-graphs); [[ "$mode" == asgd_graphs ]] && graphs=(--cuda-graphs)
      train --epochs $((EPOCHS + 1)) --batch "$b" --lr 0.01 "${graphs[@]}" --csv "$OUT/${mode}_b$b.csv" \
        > "$OUT/${mode}_b$b.log" 2>&1 || { log "$mode at batch $b failed (see ${mode}_b$b.log)"; continue; }
      # median images/s over the epochs after the first (warm-up), accuracy after the last
      rate=$(awk -F, 'NR > 2 {print $6}' "$OUT/${mode}_b$b.csv" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
      acc=$(awk -F, 'END {print $9}' "$OUT/${mode}_b$b.csv")
      printf "%s\t%s\t%s\t%s\n" "$mode" "$b" "$rate" "$acc" >> "$OUT/speed.tsv"
    done
  done
  if [[ "$DATA" != builtin && "$EMULATE" != 1 ]] && "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    # A failure here is logged, and the stages after it still run (under set -e it ended the script).
    timeout "$RUN_TIMEOUT" "$PYTHON" "$root/bench/peers/cnn_gpu/lenet_torch_gpu.py" --data "$DATA" --epochs "$EPOCHS" \
      > "$OUT/torch.jsonl" 2> "$OUT/torch.log" || log "PyTorch failed or ran out of time (see torch.log)"
    "$PYTHON" -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print("pytorch\t%s\t%.0f\t%.4f\t%.0f" % (r["batch"], r["images_per_s_median"], r["test_accuracy"], r["sgemm_gflops"]))
  ' "$OUT/torch.jsonl" >> "$OUT/speed.tsv" || log "PyTorch failed (see torch.log)"
  else
    log "no PyTorch with CUDA (or builtin data): the peer is skipped"
  fi

  log "floor: LeNet-5's FLOPs per training image over the measured cuBLAS SGEMM rate"
  floor_size=4096; [[ "$EMULATE" == 1 ]] && floor_size=256
  if floor_line=$("$asgd" cnn floor --device gpu --size "$floor_size" --repeats 10 -q); then
    echo "$floor_size $floor_line" > "$OUT/floor.txt"
  else
    log "cnn floor failed"; rm -f "$OUT/floor.txt"
  fi
fi

if stage accuracy; then
  # The CPU's recipe for >= 99 % (bench/RESULTS.md): 2 workers (here streams) at batch 64, tau 0, lr 0.02 with a
  # cosine schedule, weight decay 5e-4; on the CPU 20 epochs gave 99.14 / 99.07 / 99.18 % over seeds 1-3.
  log "accuracy: $ACC_EPOCHS epochs, 2 streams x batch 64, tau 0, cosine schedule, weight decay 5e-4"
  train --epochs "$ACC_EPOCHS" --workers 2 --tau 0 --batch 64 --lr 0.02 --lr-schedule cosine --weight-decay 5e-4 \
    --csv "$OUT/accuracy.csv" --model "$OUT/lenet.asgd" > "$OUT/accuracy.log" 2>&1 ||
    log "the accuracy run failed (see accuracy.log)"
  # Inference with that model: the test set at batch 1000, passes timed over one upload (median of 5).
  rm -f "$OUT/eval.txt"
  if [[ -s "$OUT/lenet.asgd" ]]; then
    timeout "$RUN_TIMEOUT" "$asgd" cnn eval --data "$DATA" --device gpu --model "$OUT/lenet.asgd" --batch 1000 \
      --repeats 5 2>&1 | sed -n 's/^test accuracy .*; inference \([0-9]*\) images\/s.*/\1/p' > "$OUT/eval.txt" ||
      log "cnn eval failed"
  fi
fi

if stage tau; then
  log "tau sweep: $TAU_STREAMS streams, runs ${taus[*]} (c: with --compensate), $TAU_EPOCHS epochs"
  # The CPU sweep's recipe (bench/RESULTS.md, "Accuracy vs tau"), on TAU_STREAMS streams (the CPU's ran 2).
  first=1
  for run in "${taus[@]}"; do
    tau="${run%c}"; compensate=(--no-compensate); [[ "$run" == *c ]] && compensate=(--compensate)
    # Kept only when it holds all its epochs on as many streams (column 2) as this sweep asks for.
    if [[ $(rows "tau_$run.csv") -gt $TAU_EPOCHS &&
          $(awk -F, 'END {print $2}' "$OUT/tau_$run.csv") == "$TAU_STREAMS" ]]; then
      log "tau $run: done already (tau_$run.csv)"
    else
      rm -f "$OUT/tau_$run.csv"
      train --workers "$TAU_STREAMS" --tau "$tau" "${compensate[@]}" --epochs "$TAU_EPOCHS" --batch 64 --lr 0.02 \
        --lr-schedule cosine --weight-decay 5e-4 --csv "$OUT/tau_$run.csv" > "$OUT/tau_$run.log" ||
        log "tau $run failed or ran out of time (see tau_$run.log)"
    fi
    [[ $(rows "tau_$run.csv") -ge 2 ]] || continue
    if [[ $first == 1 ]]; then cat "$OUT/tau_$run.csv"; first=0; else tail -n +2 "$OUT/tau_$run.csv"; fi
  done > "$OUT/staleness_cnn_gpu.csv"
  "$PYTHON" "$root/bench/plot_staleness.py" "$OUT/staleness_cnn_gpu.csv" "$OUT/staleness_cnn_gpu.png" \
    "LeNet-5 on the GPU: $TAU_STREAMS streams, test error vs seconds per tau" > /dev/null 2>&1 || log "no plot (matplotlib?)"
fi

# Last, each under a time limit: a slow tool costs no figure above.
if stage sanitize; then
  summary=""
  have_cs=0
  if [[ "$EMULATE" != 1 ]] && { command -v compute-sanitizer > /dev/null || [[ -x /usr/local/cuda/bin/compute-sanitizer ]]; }; then
    cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"; have_cs=1
  else
    log "compute-sanitizer: $([[ "$EMULATE" == 1 ]] && echo "not under EMULATE=1" || echo "not found (PATH, /usr/local/cuda/bin)")"
  fi
  # The parity tests cover every kernel; two training tests cover the streams: a captured graph per stream, and
  # 2 streams at tau 2 with view copies and the update hook (the tau sweep itself would take too long under a
  # tool). memcheck: out-of-bounds and leaks; initcheck: reads of memory never written; racecheck: shared-memory
  # hazards (compute-sanitizer has no tool for global memory ordering between streams: the emulator under
  # ThreadSanitizer checks that, in CI); synccheck: barriers.
  training='GpuTraining.CudaGraphsTrainAsKernelByKernel:GpuTraining.AfterUpdatesHookAsOnTheCpu'
  # racecheck and synccheck look at shared memory and barriers, which only our sum_kernel uses: instrumenting
  # every cuBLAS GEMM too could take them past SANITIZE_TIMEOUT. The option that picks kernels by name is
  # --kernel-name in newer compute-sanitizers and --filter in older ones (asked of its --help).
  ours=()
  if [[ $have_cs == 1 ]]; then
    cs_help=$("$cs" --help 2>&1 || true)
    if [[ "$cs_help" == *--kernel-name* ]]; then ours=(--kernel-name kns=sum_kernel)
    elif [[ "$cs_help" == *--filter* ]]; then ours=(--filter kns=sum_kernel)
    else log "compute-sanitizer: no option to pick kernels; racecheck and synccheck instrument cuBLAS too"; fi
  fi
  for tool in memcheck initcheck racecheck synccheck; do
    result=skipped
    if [[ $have_cs == 1 ]]; then
      case $tool in
        memcheck) extra=(--leak-check full); filter="GpuParity.*:GpuApi.*:$training" ;;
        initcheck) extra=(); filter="GpuParity.*:$training" ;;
        *) extra=("${ours[@]}"); filter='GpuParity.*' ;;
      esac
      log "compute-sanitizer $tool (at most $SANITIZE_TIMEOUT s)"
      timeout "$SANITIZE_TIMEOUT" "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 9 "$BUILD/tests/gpu/test_gpu" \
        --gtest_filter="$filter" > "$OUT/$tool.log" 2>&1 && result=clean ||
        result="exit $? (see $tool.log; 124: out of time)"
    fi
    summary+="${summary:+, }$tool: $result"
  done
  echo "compute-sanitizer $summary" > "$OUT/sanitize.txt"
fi

stage table || exit 0
# The table: from the files in OUT alone ("not run" where a stage's are missing).
or_not_run() { if [[ -s "$1" ]]; then cat "$1"; else echo "${2:-not run}"; fi; }
echo
echo "device: $(or_not_run "$OUT/device.txt" unknown); data: $(or_not_run "$OUT/data.txt" unknown)"
echo "tests: $(or_not_run "$OUT/tests.txt"); $(or_not_run "$OUT/sanitize.txt" "compute-sanitizer: not run")"
# The epochs as run (column 4 of the last line), not as this call's variables say.
last_of() { awk -F, -v c="$2" 'END {print $c}' "$OUT/$1"; }
if [[ $(rows accuracy.csv) -ge 2 ]]; then
  awk -F, 'END {printf "LeNet-5, %d epochs (2 streams x 64, tau 0): test accuracy %.2f %% (target >= 99.0 %%)\n", $4, 100 * $9}' \
    "$OUT/accuracy.csv"
else
  echo "LeNet-5 accuracy run: not run"
fi
if [[ -s "$OUT/eval.txt" ]]; then
  echo "inference with that model (cnn eval, batch 1000, median of 5): $(cat "$OUT/eval.txt") images/s"
fi
floor=0
if [[ -s "$OUT/floor.txt" ]]; then
  read -r floor_size flops sgemm floor < "$OUT/floor.txt"
  awk -v f="$flops" -v g="$sgemm" -v fl="$floor" -v n="$floor_size" \
    'BEGIN {printf "floor: %.3f MFLOP per training image over SGEMM %d^3 at %.0f GFLOP/s = %.0f images/s\n", f / 1e6, n, g, fl}'
fi
# PyTorch's own SGEMM rate (torch.matmul, 4096^3, FP32 with TF32 off), measured in its run: the same GPU's rate
# seen from the peer, so a floor that differs from it shows.
if [[ -s "$OUT/speed.tsv" ]]; then
  awk -F'\t' '$1 == "pytorch" && $5 > 0 {r = $5} END {if (r) printf "PyTorch SGEMM 4096^3: %.0f GFLOP/s\n", r}' "$OUT/speed.tsv"
fi
if [[ -s "$OUT/speed.tsv" ]]; then
  awk -F'\t' -v fl="$floor" '$1 ~ /^asgd/ && $2 == 256 && fl > 0 {
    printf "%s at batch 256: %.0f images/s, %.2f %% of the floor\n", $1, $3, 100 * $3 / fl}' "$OUT/speed.tsv"
  echo
  echo "| batch | asgd --no-cuda-graphs img/s | asgd (CUDA graphs, the default) img/s | graphs/kernels | PyTorch eager img/s | best asgd/PyTorch | kernels acc | graphs acc | PyTorch acc |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for b in 64 256 1024; do
    awk -F'\t' -v b="$b" '$2 == b && $1 == "asgd" {a = $3; aa = $4} $2 == b && $1 == "asgd_graphs" {g = $3; ga = $4}
      $2 == b && $1 == "pytorch" {t = $3; ta = $4}
      END {best = a > g ? a : g
           # a run that failed has no row: "-", not 0
           printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", b, a ? sprintf("%.0f", a) : "-",
             g ? sprintf("%.0f", g) : "-", a && g ? sprintf("%.2fx", g / a) : "-", t ? t : "-",
             t && best ? sprintf("%.2fx", best / t) : "-", a ? sprintf("%.4f", aa) : "-", g ? sprintf("%.4f", ga) : "-",
             t ? sprintf("%.4f", ta) : "-"}' "$OUT/speed.tsv"
  done
else
  echo "speed: not run"
fi
echo
echo "tau sweep ($([[ $(rows tau_0.csv) -ge 2 ]] && last_of tau_0.csv 2 || echo "$TAU_STREAMS") streams, $([[ $(rows tau_0.csv) -ge 2 ]] && last_of tau_0.csv 4 || echo "$TAU_EPOCHS") epochs): final test accuracy, seconds, mean staleness"
for run in "${taus[@]}"; do
  [[ $(rows "tau_$run.csv") -ge 2 ]] || { echo "  tau $run: failed or not run"; continue; }
  awk -F, -v t="${run%c}" -v c="$([[ $run == *c ]] && echo ', compensated')" \
    'END {printf "  tau %s%s: %.4f in %.1f s, staleness %.2f\n", t, c, $9, $5, $10}' "$OUT/tau_$run.csv"
done
