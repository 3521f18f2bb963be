#!/bin/bash
# Model averaging against one rank, the figures of issue 6 (bench/RESULTS.md):
#   linear  generated 200,000 x 20,000 (30 non-zeros): gap to the L-BFGS optimum, 4 ranks
#   mf      ml-100k, 90/10 split seed 42, k 32, 20 epochs: test RMSE, 1 rank vs 4
#   w2v     text8-prefix, skip-gram, 15 epochs: analogy accuracy, 1 rank vs 2
#   cnn     MNIST (60,000 images), LeNet-5, 10 epochs: test accuracy and seconds, 1 rank x P workers at tau 0
#           against P ranks x 1 worker averaging every epoch, every 100, 10 and 1 updates (REPEATS runs each,
#           P in CNN_RANKS [2])
# Variables: ASGD [<repo>/build/apps/asgd], DATA_DIR [<repo>/../shared/data],
#            OUT [/tmp/asgd-averaging], PARTS ["linear mf w2v"] (cnn: PARTS=cnn), REPEATS [2],
#            CNN_RANKS [2].
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/args.sh"
asgd_args none "${BASH_SOURCE[0]}" "$@"
root="$(cd "$(dirname "$0")/../.." && pwd)"
ASGD="${ASGD:-$root/build/apps/asgd}"; DATA_DIR="${DATA_DIR:-$root/../shared/data}"
OUT="${OUT:-/tmp/asgd-averaging}"; PARTS="${PARTS:-linear mf w2v}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() { local n="$1"; shift; mpiexec --oversubscribe -n "$n" "$ASGD" "$@"; }
mkdir -p "$OUT"
for part in $PARTS; do
  case "$part" in
    linear)
      [[ -f "$OUT/linear.svm" ]] || "$ASGD" linear generate --out "$OUT/linear.svm" --examples 200000 \
        --features 20000 --nnz 30 --seed 11 > /dev/null
      echo "linear, 1 rank x 2 workers: $("$ASGD" linear train --data "$OUT/linear.svm" --epochs 10 --workers 2 \
        --reference -q | sed -n 's/.*ours is \(.*\) relative above/\1/p')"
      for ar in tree ring native; do
        for every in epoch 10; do
          echo "linear, 4 ranks x 1 worker, $ar, every $every: $(mpi 4 linear train --data "$OUT/linear.svm" \
            --epochs 10 --workers 1 --reference -q --allreduce "$ar" --average-every "$every" |
            sed -n 's/.*ours is \(.*\) relative above/\1/p')"
        done
      done ;;
    mf)
      f="$DATA_DIR/movielens/ml-100k-u.data"
      c=(-k 32 -t 20 --test-fraction 0.1 --split-seed 42 -q -l2 0.05)
      echo "mf ml-100k, 1 rank x 2 threads, -r 0.02: $("$ASGD" mf train "$f" "${c[@]}" -s 2 -r 0.02 | grep '^test')"
      for r in 0.02 0.08; do
        echo "mf ml-100k, 4 ranks x 1 thread, -r $r: $(mpi 4 mf train "$f" "${c[@]}" -s 1 -r "$r" | grep '^test')"
      done ;;
    w2v)
      [[ -f "$OUT/text8" ]] || zcat "$DATA_DIR/text/text8-prefix.gz" > "$OUT/text8"
      q="$DATA_DIR/text/questions-words.txt"
      c=(-train "$OUT/text8" -size 100 -window 5 -sample 1e-4 -hs 0 -negative 5 -iter 15 -min-count 5
         -alpha 0.025 -cbow 0 -quiet 1)
      for seed in 1 2; do
        "$ASGD" w2v "${c[@]}" -threads 2 -seed "$seed" -output "$OUT/one.vec" 2> /dev/null
        echo "w2v 1 rank x 2 threads, seed $seed: $("$ASGD" w2v-eval --vectors "$OUT/one.vec" --analogies "$q" | grep analogies)"
        mpi 2 w2v "${c[@]}" -threads 1 -seed "$seed" -output "$OUT/two.vec" 2> /dev/null
        echo "w2v 2 ranks x 1 thread, seed $seed: $("$ASGD" w2v-eval --vectors "$OUT/two.vec" --analogies "$q" | grep analogies)"
      done ;;
    cnn)
      # P ranks x batch 64 averaging every update at tau 0 take the steps of 1 rank x P workers x batch 64 at
      # tau 0 (the mean gradient of 64 P images), on other minibatches: the same rate fits both.
      c=(cnn train --data "$DATA_DIR/mnist" --epochs 10 --batch 64 --lr 0.02 --momentum 0.9 --lr-schedule cosine
         --weight-decay 5e-4 --tau 0 -q)
      summary() { sed -n 's/^test accuracy \(.*\) after .*; training \([0-9.]*\) s.*/\1, \2 s of training/p'; }
      for p in ${CNN_RANKS:-2}; do
        for run in $(seq 1 "${REPEATS:-2}"); do
          echo "cnn, run $run, 1 rank x $p workers: $("$ASGD" "${c[@]}" --seed "$run" --workers "$p" | summary)"
          for every in epoch 100 10 1; do
            echo "cnn, run $run, $p ranks x 1 worker, every $every: $(mpi "$p" "${c[@]}" --seed "$run" --workers 1 \
              --average-every "$every" | summary)"
          done
        done
      done ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac
done
