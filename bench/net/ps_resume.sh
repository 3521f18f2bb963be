#!/bin/bash
# Elastic resume after a killed rank: a job under the parameter server (SSP(4), one-sided on one host) checkpoints
# after every epoch; one of its ranks is killed (SIGKILL) once the checkpoint of epoch K is written, and the run
# goes on from that checkpoint with fewer ranks. Compared with one process trained uninterrupted, same flags.
#  mf   on RATINGS (-k 32, 20 epochs, 1 thread a rank, --test-fraction 0.1, rounds every 100 steps): 4 ranks killed
#       after epoch 10, resumed by 2 ranks and by one process; test RMSE.
#  w2v  on text8-prefix in lines of 1,000 words (as ps_w2v.sh, 5 epochs, rounds every 5 steps): 2 ranks killed
#       after epoch 2, resumed by one process; analogy accuracy.
#  mf-adagrad  mf as above under the servers' AdaGrad rule, which also write their shards and sums every 2 s
#       (--ps-checkpoint): 4 ranks killed after epoch 10, resumed by 2 ranks from the model checkpoint with the
#       servers' newest complete generation (--ps-resume) and without it (sums from zero); against the
#       uninterrupted 4-rank run.
#  mf-avg-adagrad  mf averaged every epoch with each rank's own AdaGrad sums (--adagrad), checkpoints every epoch
#       (every rank its sums' file): 4 ranks killed after epoch 10, resumed by 2 ranks and by one process, which add
#       the 4 ranks' sums up and cut them again; against the uninterrupted 4-rank run.
# PART: mf, mf-adagrad, mf-avg-adagrad, w2v or all.
# Usage: bench/net/ps_resume.sh ASGD RATINGS [DATA_DIR] [PART]   (DATA_DIR: ../shared/data/text)
set -uo pipefail
asgd=$(realpath "$1")
ratings="$2"
data="${3:-../shared/data/text}"
part="${4:-all}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The epoch a checkpoint holds (its header's u64 at byte 40: engine/checkpoint.hpp); 0 while there is none.
epoch_of() { [[ -f "$1" ]] && od -An -tu8 -j40 -N8 "$1" | tr -d ' ' || echo 0; }

# Runs the job (mpiexec -n RANKS ASGD ARGS...) in the background, kills its rank 1 (SIGKILL) once CHECKPOINT holds
# epoch K, and waits for the job to end.
kill_rank_after() {  # CHECKPOINT K RANKS ARGS...
  local checkpoint="$1" k="$2" n="$3"; shift 3
  mpiexec --oversubscribe -n "$n" "$asgd" "$@" > "$work/log" 2>&1 &
  local job=$! victim=""
  until [[ $(epoch_of "$checkpoint") -ge "$k" ]]; do
    kill -0 "$job" 2>/dev/null || { echo "the job ended before epoch $k"; tail -5 "$work/log"; return 1; }
    sleep 0.05
  done
  for p in $(pgrep -f "$asgd $1 " || true); do
    r=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [[ "$r" == 1 ]] && victim=$p
  done
  [[ -n "$victim" ]] || { echo "no rank 1 to kill"; kill "$job"; return 1; }
  local start rc; start=$(date +%s.%N)
  kill -9 "$victim"
  wait "$job"; rc=$?
  printf "  rank 1 of %s killed once the checkpoint held epoch %s: the job ended %.2f s later (exit %s); the " \
    "$n" "$k" "$(echo "$(date +%s.%N) - $start" | bc)" "$rc"
  echo "checkpoint holds epoch $(epoch_of "$checkpoint")"
}

if [[ "$part" == mf || "$part" == all ]]; then
  mf=(mf train "$ratings" -k 32 -t 20 -s 1 --test-fraction 0.1)
  rmse() { sed -n 's/^test: .* RMSE \([0-9.]*\).*/\1/p' "$work/log"; }
  "$asgd" "${mf[@]}" > "$work/log" 2>&1 || { echo "mf, one process: failed"; tail -5 "$work/log"; }
  echo "mf, one process, uninterrupted: test RMSE $(rmse)"
  ps=(--distributed ps --ps-tau 4 --average-every 100 --checkpoint "$work/mf.ckpt")
  kill_rank_after "$work/mf.ckpt" 10 4 "${mf[@]}" "${ps[@]}"
  cp "$work/mf.ckpt" "$work/mf-10.ckpt"
  for n in 2 1; do
    cp "$work/mf-10.ckpt" "$work/mf.ckpt"
    start=$(date +%s.%N)
    if [[ "$n" == 1 ]]; then
      "$asgd" "${mf[@]}" --resume "$work/mf.ckpt" > "$work/log" 2>&1
    else
      mpiexec --oversubscribe -n "$n" "$asgd" "${mf[@]}" "${ps[@]}" --resume "$work/mf.ckpt" > "$work/log" 2>&1
    fi || { echo "mf, resumed by $n: failed"; tail -5 "$work/log"; continue; }
    printf "mf, 4 ranks killed, %s by %s rank(s) to epoch 20: test RMSE %s (%.1f s)\n" \
      "$(grep -o "resumed from .* at epoch [0-9]*" "$work/log" | sed "s|$work/||")" "$n" "$(rmse)" \
      "$(echo "$(date +%s.%N) - $start" | bc)"
  done
fi

if [[ "$part" == mf-adagrad || "$part" == all ]]; then
  mf=(mf train "$ratings" -k 32 -t 20 -s 1 --test-fraction 0.1)
  rmse() { sed -n 's/^test: .* RMSE \([0-9.]*\).*/\1/p' "$work/log"; }
  ps=(--distributed ps --ps-tau 4 --average-every 100 --server-rule adagrad)
  mpiexec --oversubscribe -n 4 "$asgd" "${mf[@]}" "${ps[@]}" > "$work/log" 2>&1 ||
    { echo "mf-adagrad, 4 ranks: failed"; tail -5 "$work/log"; }
  echo "mf, 4 ranks, server AdaGrad, uninterrupted: test RMSE $(rmse)"
  kill_rank_after "$work/ag.ckpt" 10 4 "${mf[@]}" "${ps[@]}" --checkpoint "$work/ag.ckpt" \
    --ps-checkpoint "$work/ag" --ps-checkpoint-seconds 2
  echo "  the servers' files: $(cd "$work" && ls ag.ps-* | sed 's/ag.ps-[0-9a-f]*-//' | tr '\n' ' ')"
  cp "$work/ag.ckpt" "$work/ag-10.ckpt"
  for with in "--ps-resume $work/ag" ""; do
    cp "$work/ag-10.ckpt" "$work/ag.ckpt"
    # shellcheck disable=SC2086  # $with is two words or none
    mpiexec --oversubscribe -n 2 "$asgd" "${mf[@]}" "${ps[@]}" --resume "$work/ag.ckpt" $with > "$work/log" 2>&1 ||
      { echo "mf-adagrad, resumed by 2: failed"; tail -5 "$work/log"; continue; }
    [[ -n "$with" ]] && how="with --ps-resume" || how="without --ps-resume"
    echo "mf, 4 ranks killed, resumed by 2 ranks $how:" \
      "$(grep -o "resumed from .* at epoch [0-9]*" "$work/log" | sed "s|$work/||")," \
      "test RMSE $(rmse)"
    grep "servers start from" "$work/log" | sed "s|$work/||; s/^/  /"
  done
fi

if [[ "$part" == mf-avg-adagrad || "$part" == all ]]; then
  mf=(mf train "$ratings" -k 32 -t 20 -s 1 --test-fraction 0.1 --adagrad)
  rmse() { sed -n 's/^test: .* RMSE \([0-9.]*\).*/\1/p' "$work/log"; }
  mpiexec --oversubscribe -n 4 "$asgd" "${mf[@]}" > "$work/log" 2>&1 ||
    { echo "mf-avg-adagrad, 4 ranks: failed"; tail -5 "$work/log"; }
  echo "mf, 4 ranks averaged every epoch, --adagrad, uninterrupted: test RMSE $(rmse)"
  kill_rank_after "$work/aa.ckpt" 10 4 "${mf[@]}" --checkpoint "$work/aa.ckpt"
  keep() {  # FROM TO: the ranks' files and their .prev (a rank killed between writes leaves them apart)
    for f in "$work/$1"*; do [[ "$f" == *.lock ]] || cp "$f" "$work/$2${f#"$work/$1"}"; done
  }
  keep aa.ckpt aa-10.ckpt
  for n in 2 1; do
    keep aa-10.ckpt aa.ckpt
    if [[ "$n" == 1 ]]; then
      "$asgd" "${mf[@]}" --resume "$work/aa.ckpt" > "$work/log" 2>&1
    else
      mpiexec --oversubscribe -n "$n" "$asgd" "${mf[@]}" --resume "$work/aa.ckpt" > "$work/log" 2>&1
    fi || { echo "mf-avg-adagrad, resumed by $n: failed"; tail -5 "$work/log"; continue; }
    echo "mf, 4 ranks killed, resumed by $n rank(s):" \
      "$(grep -o "resumed from .* at epoch [0-9]*" "$work/log" | sed "s|$work/||")," "test RMSE $(rmse)"
    grep "AdaGrad sums of" "$work/log" | sed "s|$work/||; s/^/  /"
  done
fi

if [[ "$part" == w2v || "$part" == all ]]; then
  zcat "$data/text8-prefix.gz" | tr -s ' ' '\n' | grep -v '^$' |
    awk '{ printf "%s%s", $0, (NR % 1000 == 0 ? "\n" : " ") } END { print "" }' > "$work/corpus.txt"
  w2v=(w2v -train "$work/corpus.txt" -cbow 0 -size 100 -window 5 -negative 5 -sample 1e-4 -min-count 5 -iter 5
       -threads 1 -binary 1 -seed 1 -output "$work/v.bin")
  accuracy() {
    "$asgd" w2v-eval --vectors "$work/v.bin" --analogies "$data/questions-words.txt" |
      sed -n 's/^analogies: accuracy \([0-9.]*\) %.*/\1/p'
  }
  "$asgd" "${w2v[@]}" > "$work/log" 2>&1 || { echo "w2v, one process: failed"; tail -5 "$work/log"; }
  echo "w2v, one process, uninterrupted: analogies $(accuracy) %"
  rm -f "$work/v.bin"
  kill_rank_after "$work/w2v.ckpt" 2 2 "${w2v[@]}" -distributed ps -ps-tau 4 -average-every 5 -checkpoint "$work/w2v.ckpt"
  "$asgd" "${w2v[@]}" -resume "$work/w2v.ckpt" > "$work/log" 2>&1 ||
    { echo "w2v, resumed: failed"; tail -5 "$work/log"; }
  echo "w2v, 2 ranks killed, resumed by one process to epoch 5: analogies $(accuracy) %"
fi
