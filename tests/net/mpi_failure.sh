#!/bin/bash
# A 4-rank `asgd linear train` job under mpiexec, three ways:
#  1. a rank is killed (SIGKILL): the whole job must end within 10 s, and
#     mpiexec's message must name the rank and the signal;
#  2. a rank meets bad input (a malformed line in its own file): the job
#     ends with "asgd: rank R: error: FILE:LINE ..." naming it;
#  3. rank 0's checkpoint after epoch 2 lets a new job resume to epoch 4.
# Usage: mpi_failure.sh ASGD MPIEXEC
set -uo pipefail
asgd="$1"; mpiexec="$2"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
fail() { echo "FAIL: $*"; [[ -f "$work/log" ]] && cat "$work/log"; exit 1; }
run4() { "$mpiexec" --oversubscribe -n 4 "$asgd" linear train "$@"; }

"$asgd" linear generate --out "$work/train.svm" --examples 20000 --features 500 --nnz 10 --seed 5 > /dev/null ||
  fail "generate"

# 1. Killed rank. Train "forever", kill rank 2 once all four run.
run4 --data "$work/train.svm" --epochs 1000000 --workers 1 -q > "$work/log" 2>&1 &
job=$!
victim=""
for _ in $(seq 1 200); do
  for p in $(pgrep -f "linear train --data $work/train.svm" || true); do
    r=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [[ "$r" == 2 ]] && victim=$p
  done
  [[ -n "$victim" && $(grep -c "^mpi:" "$work/log") -ge 1 ]] && break
  victim=""; sleep 0.1
done
[[ -n "$victim" ]] || { kill "$job"; fail "rank 2 never started"; }
sleep 1  # let the ranks get into their training and averaging rounds
start=$(date +%s.%N)
kill -9 "$victim"
for _ in $(seq 1 150); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$job" 2>/dev/null; then
  pkill -9 -f "linear train --data $work/train.svm"; kill -9 "$job"
  fail "the job still runs 15 s after rank 2 was killed"
fi
wait "$job"; rc=$?
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "killed rank 2: job ended in ${took} s with exit code $rc"
[[ $rc -ne 0 ]] || fail "exit code 0 after a killed rank"
awk -v t="$took" 'BEGIN {exit !(t < 10)}' || fail "took ${took} s (limit 10 s)"
grep -q "rank 2 .*signal 9" "$work/log" || fail "no message naming rank 2 and signal 9"
pgrep -f "linear train --data $work/train.svm" > /dev/null && fail "ranks left running"

# 2. Bad input on one rank: each rank reads its own file (--data with
# {rank}), and rank 2's has a malformed line.
for r in 0 1 2 3; do cp "$work/train.svm" "$work/part$r.svm"; done
awk 'NR == 3 {print "1 7:0.5 x:1"; next} {print}' "$work/train.svm" > "$work/part2.svm"
run4 --data "$work/part{rank}.svm" --features 500 --epochs 5 --workers 1 -q > "$work/log" 2>&1; rc=$?
[[ $rc -ne 0 ]] || fail "exit code 0 with bad input on rank 2"
grep -q "asgd: rank 2: error: .*part2.svm" "$work/log" || fail "no message naming rank 2 and its file"
echo "bad input on rank 2: exit code $rc, $(grep -m1 'asgd: rank 2' "$work/log")"

# 3. Checkpoint and resume.
run4 --data "$work/train.svm" --epochs 4 --until-epoch 2 --workers 1 --checkpoint "$work/ck" -q > "$work/log" 2>&1 ||
  fail "first half"
[[ -s "$work/ck" ]] || fail "rank 0 wrote no checkpoint"
run4 --data "$work/train.svm" --epochs 4 --workers 1 --resume "$work/ck" --model "$work/model" > "$work/log" 2>&1 ||
  fail "resume"
grep -q "resumed from .* at epoch 2" "$work/log" || fail "did not resume at epoch 2"
grep -q "epoch   4" "$work/log" || fail "no epoch 4 after resuming"
[[ -s "$work/model" ]] || fail "no model written"
echo "checkpoint at epoch 2, resumed to epoch 4: ok"
echo PASS
