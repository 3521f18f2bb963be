#!/bin/bash
# Every `train` command under mpiexec on small generated data, end to end:
#  linear  4 ranks, tree, background averaging every 5 steps: within 1e-3
#          of the L-BFGS optimum, and every round accounted for; 2 ranks
#          stopped at a checkpoint and resumed give the uninterrupted model;
#  mf      2 ranks, per-epoch averaging: rank 0 alone prints and writes the
#          model, which `mf eval` reads back with the RMSE rank 0 printed;
#          BPR (--loss bpr) on 2 ranks beats most-popular by NDCG@10;
#  w2v     2 ranks over a generated corpus: one vectors file with the whole
#          vocabulary, the ranks' updates summed by default; ranks given
#          other corpora or another -window (linear: another --l2) refused;
#  cnn     2 ranks over synthetic MNIST-format digits: the model is written
#          and `cnn eval` on it reports rank 0's accuracy, after an
#          averaging round per epoch, and with low-rank rounds
#          (--average-rank 2) above 80 % with 5x fewer floats sent, and with
#          --average-flush the model written above 80 %; stopped at a checkpoint and resumed
#          (the ranks' momentum is averaged with their models) it gives the
#          uninterrupted model; averaging every 4 updates makes the rounds
#          it should on equal shards, and ranks that would disagree on them
#          are refused; with the emulated GPU backend, the job on 2 streams
#          per rank with --device gpu reaches the CPU's accuracy within a
#          point, and averages every 4 updates too.
# Usage: mpi_apps.sh ASGD MPIEXEC [EMULATED_GPU_BACKEND]
set -uo pipefail
asgd="$1"; mpiexec="$2"; emulated="${3:-}"
source "$(dirname "$0")/mpi_common.sh"

# linear
"$asgd" linear generate --out "$work/train.svm" --examples 20000 --features 500 --nnz 10 --seed 5 > /dev/null ||
  fail "linear generate"
mpi 4 linear train --data "$work/train.svm" --epochs 8 --workers 1 --allreduce tree --average-every 5 \
  --reference > "$work/log" 2>&1 || fail "linear under mpiexec"
gap=$(sed -n 's/.*ours is \(.*\) relative above.*/\1/p' "$work/log")
rounds=$(sed -n 's/^mpi: \([0-9]*\) averaging rounds.*/\1/p' "$work/log")
[[ -n "$gap" && -n "$rounds" ]] || fail "linear: no gap or rounds line"
awk -v g="$gap" 'BEGIN { exit !(g < 1e-3) }' || fail "linear: $gap above the optimum (want < 1e-3)"
# 5,000 examples per rank in steps of 256: 20 steps per epoch, 160 in all,
# a round at every 5th: at least 32.
[[ "$rounds" -ge 32 ]] || fail "linear: $rounds rounds, expected at least 32"
echo "linear, 4 ranks: $gap above the optimum, $rounds rounds"
# Rare features (20,000 examples over 200,000 features): each rank regularises with the whole set's counts, so the
# ranks' mean reaches the optimum (with each rank's own counts a feature only one rank holds was regularised half as
# much at P = 2, and the job ended 3e-2 above it).
"$asgd" linear generate --out "$work/rare.svm" --examples 20000 --features 200000 --nnz 10 > /dev/null ||
  fail "linear generate (rare)"
mpi 2 linear train --data "$work/rare.svm" --features 200000 --epochs 20 --workers 1 -q --reference \
  --model "$work/rare-shards.model" > "$work/log" 2>&1 || fail "linear (rare features) under mpiexec"
gap=$(sed -n 's/.*ours is \(.*\) relative above.*/\1/p' "$work/log")
awk -v g="$gap" 'BEGIN { exit !(g != "" && g < 1e-3) }' || fail "linear, rare features: $gap above the optimum"
echo "linear, 2 ranks, rare features: $gap above the optimum"
# The same rows as one file per rank (--data part{rank}.svm; rank r's shard is rows r, r + 2, ...): the ranks
# sum their feature counts, so each trains with the whole set's weights and the model is the one above.
awk -v dir="$work" '{ print > (dir "/rare-part" ((NR - 1) % 2) ".svm") }' "$work/rare.svm"
mpi 2 linear train --data "$work/rare-part{rank}.svm" --features 200000 --epochs 20 --workers 1 -q \
  --model "$work/rare-files.model" > "$work/log" 2>&1 || fail "linear (rare features, a file per rank)"
grep -q "rank 0 trains 10000 of 20000 examples" "$work/log" || fail "linear, a file per rank: the examples line"
objective() { "$asgd" linear eval --data "$work/rare.svm" --model "$1" | sed -n 's/.*objective \([^ ,;]*\).*/\1/p'; }
shards=$(objective "$work/rare-shards.model"); files=$(objective "$work/rare-files.model")
awk -v a="$shards" -v b="$files" 'BEGIN { d = a - b; exit !(a != "" && d < 1e-6 && -d < 1e-6) }' ||
  fail "linear, a file per rank: objective $files, against $shards from the shards of one file"
echo "linear, 2 ranks, a file per rank: objective $files (one file sharded: $shards)"

# refused_at_start WHAT PATTERN MPIEXEC-ARGS...: the job must end with an error (not hang) that says PATTERN.
refused_at_start() {
  local what="$1" pattern="$2"
  shift 2
  timeout 60 "$mpiexec" --oversubscribe "$@" > "$work/log" 2>&1
  local status=$?
  [[ $status -ne 0 && $status -ne 124 ]] || fail "$what (exit $status; 124: it hung)"
  grep -q -- "$pattern" "$work/log" || fail "$what: no message '$pattern'"
}
two=("$asgd" linear train --workers 1 -q)
# Ranks given different plans (here --epochs 2 and 3: one more blocking round on rank 1) are refused at the start,
# naming each rank's plan, instead of waiting forever.
refused_at_start "linear: ranks with different --epochs" 'the ranks differ in epochs done/last epoch/--epochs' \
  -n 1 "${two[@]}" --data "$work/train.svm" --epochs 2 : -n 1 "${two[@]}" --data "$work/train.svm" --epochs 3
echo "linear, 2 ranks given different --epochs: refused at the start"
# So are ranks given different --allreduce (compared over MPI_Allreduce: each would wait for the other's messages
# of another algorithm), and ranks whose models differ in size (the data's dimensions here).
refused_at_start "linear: ranks with different --allreduce" \
  'the ranks were given different --allreduce: rank 0 native, rank 1 ring, rank 2 ring' \
  -n 1 "${two[@]}" --data "$work/train.svm" --allreduce native : -n 2 "${two[@]}" --data "$work/train.svm"
"$asgd" linear generate --out "$work/wider.svm" --examples 2000 --features 900 --nnz 10 --seed 5 > /dev/null ||
  fail "linear generate"
refused_at_start "linear: ranks with models of two sizes" 'the ranks differ in the number of parameters' \
  -n 1 "${two[@]}" --data "$work/train.svm" : -n 1 "${two[@]}" --data "$work/wider.svm"
echo "linear, ranks given different --allreduce or data of other dimensions: refused at the start"
# Ranks that disagree on {rank} in --data, or on --features with it, are refused at the start too (before: the job
# hung, or died inside MPI with "message truncated", in the sum of the ranks' feature counts). Every {rank} in the
# path is the rank's number (before: only the first).
refused_at_start "linear: ranks with and without {rank}" 'the ranks differ in --data with or without {rank}/--features' \
  -n 1 "${two[@]}" --data "$work/rare-part{rank}.svm" --features 200000 : \
  -n 1 "${two[@]}" --data "$work/rare.svm" --features 200000
refused_at_start "linear: ranks with other --features" 'the ranks differ in --data with or without {rank}/--features' \
  -n 1 "${two[@]}" --data "$work/rare-part{rank}.svm" --features 200000 : \
  -n 1 "${two[@]}" --data "$work/rare-part{rank}.svm" --features 300000
mkdir "$work/d0" "$work/d1" && cp "$work/rare-part0.svm" "$work/d0/p0.svm" && cp "$work/rare-part1.svm" "$work/d1/p1.svm"
mpi 2 linear train --data "$work/d{rank}/p{rank}.svm" --features 200000 --epochs 1 --workers 1 -q > "$work/log" 2>&1 ||
  fail "linear: --data with {rank} twice"
echo "linear, ranks that disagree on {rank} or --features: refused at the start; {rank} twice in a path: both replaced"
# Ranks that would average models of different objectives are refused too (before: trained, and averaged).
refused_at_start "linear: ranks with other --l2" 'the ranks differ in --l2 (rank 1 differs from rank 0' \
  -n 1 "${two[@]}" --data "$work/train.svm" : -n 1 "${two[@]}" --data "$work/train.svm" --l2 0.01
echo "linear, ranks given different --l2: refused at the start"
# Fewer examples than ranks: said so (before: "the dataset has no examples" from the rank left without one).
head -n 3 "$work/train.svm" > "$work/three.svm"
mpi 4 linear train --data "$work/three.svm" -q > "$work/log" 2>&1 && fail "linear: 3 examples on 4 ranks ran"
grep -q '3 examples cannot be shared by 4 ranks' "$work/log" || fail "linear: no message for 3 examples on 4 ranks"
echo "linear, 4 ranks and 3 examples: refused, and said why"

# --model -: rank 0's model is the whole of the job's stdout, and its report alone goes to stderr (the other ranks'
# stdout is /dev/null, and their reports stay there).
mpi 2 linear train --data "$work/train.svm" --epochs 2 --workers 1 --model - > "$work/piped.asgd" 2> "$work/log" ||
  fail "linear --model - under mpiexec"
[[ $(grep -c '^trained:' "$work/log") -eq 1 ]] || fail "linear --model -: not one 'trained:' line on stderr"
"$asgd" linear eval --data "$work/train.svm" --model "$work/piped.asgd" > /dev/null 2>&1 ||
  fail "linear --model -: stdout is not the model"
echo "linear, 2 ranks, --model -: stdout is the model, stderr rank 0's report"

# linear, stopped and resumed: 2 ranks (one worker each, per-epoch averaging,
# so a run is deterministic) stop after epoch 3 with rank 0's checkpoint of
# the averaged model, and a second job resumes from it to epoch 6. The model
# must be the uninterrupted run's, bit for bit: the checkpoint carries the
# epoch and seeds, and every rank starts again from the same parameters.
# stopped_and_resumed NAME EPOCH JOB: JOB (a function given more flags) runs whole, stopped after EPOCH with
# --checkpoint, and resumed from it; the resumed model must be the whole run's, bit for bit.
stopped_and_resumed() {
  local name="$1" epoch="$2" job="$3"
  "$job" --model "$work/$name-whole" > "$work/log" 2>&1 || fail "$name: the uninterrupted run"
  "$job" --checkpoint "$work/$name-ck" --until-epoch "$epoch" > "$work/log" 2>&1 ||
    fail "$name: the run stopped at epoch $epoch"
  "$job" --resume "$work/$name-ck" --model "$work/$name-resumed" > "$work/log" 2>&1 || fail "$name: the resumed run"
  [[ $(grep -c "^resumed from .* at epoch $epoch" "$work/log") -eq 1 ]] ||
    fail "$name: not one 'resumed at epoch $epoch' line"
  cmp -s "$work/$name-whole" "$work/$name-resumed" || fail "$name: the resumed model differs from the uninterrupted one"
  echo "$name, 2 ranks: stopped at epoch $epoch and resumed, the same model as one run"
}
# On 20,001 examples the shards are unequal (10,001 and 10,000): rank 1 resumes from rank 0's count of examples
# and must still take its own rates.
"$asgd" linear generate --out "$work/odd.svm" --examples 20001 --features 500 --nnz 10 --seed 6 > /dev/null ||
  fail "linear generate (odd)"
linear_job() { mpi 2 linear train --data "$work/odd.svm" --epochs 6 --workers 1 --features 500 -q "$@"; }
stopped_and_resumed linear 3 linear_job
# With AdaGrad each rank keeps its own sums: every rank checkpoints them (rank 1's in CK.rank1) and resumes from
# its own (before: every rank resumed from rank 0's sums, and the model differed).
linear_adagrad_job() { linear_job --adagrad "$@"; }
stopped_and_resumed linear-adagrad 3 linear_adagrad_job
[[ -f "$work/linear-adagrad-ck.rank1" ]] || fail "linear-adagrad: no rank-1 checkpoint"
# A job killed between the ranks' checkpoint writes leaves their files a generation apart (here rank 1's is put
# back to epoch 3 after a run to epoch 4): rank 0 resumes from the file its last write replaced (CK.prev, epoch 3),
# and the job is the uninterrupted one (before: refused, and the run was lost).
cp "$work/linear-adagrad-ck.rank1" "$work/rank1-at-3"
torn_at_4() {  # CK and CK.rank1 at epoch 4, each with its .prev at 3; then rank 1's put back to 3
  linear_adagrad_job --resume "$1" --checkpoint "$work/linear-adagrad-ck" --until-epoch 4 > "$work/log" 2>&1 ||
    fail "linear-adagrad: the run to epoch 4 (resumed from $1)"
  [[ -f "$work/linear-adagrad-ck.prev" && -f "$work/linear-adagrad-ck.rank1.prev" ]] ||
    fail "linear-adagrad: no previous checkpoints kept (resumed from $1)"
  cp "$work/rank1-at-3" "$work/linear-adagrad-ck.rank1"
}
torn_at_4 "$work/linear-adagrad-ck"
# A job refused before it trains leaves the .prev files alone (they are removed only as another run first writes).
linear_adagrad_job --checkpoint "$work/linear-adagrad-ck" --until-epoch 9 > "$work/log" 2>&1 &&
  fail "linear-adagrad: --until-epoch past --epochs ran"
[[ -f "$work/linear-adagrad-ck.prev" ]] || fail "linear-adagrad: a refused job removed a .prev"
linear_adagrad_job --resume "$work/linear-adagrad-ck" --model "$work/linear-adagrad-torn" > "$work/log" 2>&1 ||
  fail "linear-adagrad: the resume of checkpoints a generation apart"
grep -q "rank 0: .*linear-adagrad-ck holds epoch 4 and another rank's checkpoint epoch 3" "$work/log" ||
  fail "linear-adagrad: rank 0 did not say it resumes from its previous checkpoint"
cmp -s "$work/linear-adagrad-whole" "$work/linear-adagrad-torn" ||
  fail "linear-adagrad: resumed from checkpoints a generation apart, the model differs from the uninterrupted one"
# Resumed from a torn set into the same files (and the path spelt ./): the generation resumed from stays kept, so
# the job stopped the same way again still resumes (before the review: the file ahead became the next write's
# .prev, and epoch 3 was lost).
linear_adagrad_job --resume "$work/./linear-adagrad-ck" --checkpoint "$work/linear-adagrad-ck" --until-epoch 4 \
  > "$work/log" 2>&1 || fail "linear-adagrad: the run to epoch 4 from the torn set"
cp "$work/rank1-at-3" "$work/linear-adagrad-ck.rank1"
linear_adagrad_job --resume "$work/linear-adagrad-ck" --model "$work/linear-adagrad-torn2" > "$work/log" 2>&1 ||
  fail "linear-adagrad: the second resume of checkpoints a generation apart"
cmp -s "$work/linear-adagrad-whole" "$work/linear-adagrad-torn2" ||
  fail "linear-adagrad: the second torn resume's model differs from the uninterrupted one"
echo "linear-adagrad, 2 ranks: checkpoints a generation apart resume from the one they share, as one run, twice"
# Two generations apart: refused with every rank's epochs, and nothing on disk changed.
linear_adagrad_job --checkpoint "$work/rank-at-2" --until-epoch 2 > "$work/log" 2>&1 ||
  fail "linear-adagrad: the run to epoch 2"
torn_at_4 "$work/./linear-adagrad-ck"
cp "$work/rank-at-2.rank1" "$work/linear-adagrad-ck.rank1"
cp "$work/linear-adagrad-ck" "$work/rank0-before"
linear_adagrad_job --resume "$work/linear-adagrad-ck" > "$work/log" 2>&1 && fail "linear-adagrad: a torn resume ran"
grep -q "no epoch in common (rank 0: epoch 4 (.prev: epoch 3), rank 1: epoch 2 (.prev: epoch 3))" "$work/log" ||
  fail "linear-adagrad: no message naming the ranks' epochs"
cmp -s "$work/linear-adagrad-ck" "$work/rank0-before" && [[ -f "$work/linear-adagrad-ck.prev" ]] ||
  fail "linear-adagrad: a refused resume changed the files"
echo "linear-adagrad, 2 ranks: checkpoints two generations apart are refused, and said why"
# Files another job left at the path are not this job's generations: a fresh job removes the .prev it finds as it
# first writes, and ranks whose files are of a job with other settings (here --seed) are refused (before the
# review: rank 1 resumed from the other job's .prev).
linear_adagrad_job --seed 7 --checkpoint "$work/linear-adagrad-ck" --until-epoch 1 > "$work/log" 2>&1 ||
  fail "linear-adagrad: a fresh job over the same checkpoint path"
[[ ! -e "$work/linear-adagrad-ck.prev" && ! -e "$work/linear-adagrad-ck.rank1.prev" ]] ||
  fail "linear-adagrad: a fresh job kept another job's .prev"
linear_adagrad_job --resume "$work/linear-adagrad-ck" --checkpoint "$work/linear-adagrad-ck" --until-epoch 3 \
  > "$work/log" 2>&1 || fail "linear-adagrad: the fresh job to epoch 3"
cp "$work/rank1-at-3" "$work/linear-adagrad-ck.rank1"
linear_adagrad_job --resume "$work/linear-adagrad-ck" > "$work/log" 2>&1 && fail "linear-adagrad: two jobs' files resumed"
grep -q "the ranks' checkpoints are of different runs" "$work/log" || fail "linear-adagrad: no message for two jobs"
echo "linear-adagrad, 2 ranks: another job's files are not taken for this one's"
# Resumed by another number of ranks than wrote it: the ranks' sums are added and cut again (each rank starts from
# their sum over its job's ranks), and rank 0 says so (before: refused).
linear_adagrad_job --checkpoint "$work/recut-ck" --until-epoch 3 > "$work/log" 2>&1 ||
  fail "linear-adagrad: the run to epoch 3 to cut again"
"$asgd" linear train --data "$work/odd.svm" --epochs 6 --workers 1 --features 500 -q --adagrad \
  --resume "$work/recut-ck" > "$work/log" 2>&1 || fail "linear-adagrad: a 2-rank checkpoint resumed by one"
grep -q 'the AdaGrad sums of 2 ranks, resumed by one process: it starts from their sum' "$work/log" ||
  fail "linear-adagrad: one process did not say it cut the sums of 2 ranks again"
mpi 3 linear train --data "$work/odd.svm" --epochs 6 --workers 1 --features 500 -q --adagrad \
  --resume "$work/recut-ck" > "$work/log" 2>&1 || fail "linear-adagrad: a 2-rank checkpoint resumed by 3"
grep -q 'the AdaGrad sums of 2 ranks, resumed by 3 ranks: each starts from their sum over 3' "$work/log" ||
  fail "linear-adagrad: 3 ranks did not say they cut the sums of 2 ranks again"
echo "linear-adagrad: a 2-rank checkpoint is resumed by one process and by 3 ranks, its sums cut again"
# The model file is rank 0's alone (no rank files): one process may resume it.
linear_adagrad_job --until-epoch 1 --model "$work/adagrad-model" > "$work/log" 2>&1 || fail "linear-adagrad --model"
"$asgd" linear train --data "$work/odd.svm" --epochs 6 --workers 1 --features 500 -q --adagrad \
  --resume "$work/adagrad-model" > "$work/log" 2>&1 || fail "linear-adagrad: its --model file could not be resumed"
echo "linear-adagrad: a 2-rank job's --model file is resumed by one process"
# Resumed with fewer epochs than the checkpoint holds: refused on every rank, as in one process.
linear_job --resume "$work/linear-ck" --until-epoch 2 --model "$work/back" > "$work/log" 2>&1 &&
  fail "linear: resumed past --until-epoch and went on"
grep -q '3 epochs are done already; --until-epoch is the last to train' "$work/log" || fail "linear: no message for a resume past the end"
[[ ! -e "$work/back" ]] || fail "linear: a model written after a resume past the end"
echo "linear, 2 ranks: a resume past --until-epoch is refused"
# Two jobs writing one --checkpoint path: the ranks of a job share it (rank 0 holds its lock; with AdaGrad rank 1
# writes its own file beside it), and a second job is refused at its start, told the holder's pid, while the first
# runs; once the holder is killed (kill -9: no chance to let go), the second runs.
mpi 2 linear train --data "$work/odd.svm" --epochs 100000 --workers 1 --features 500 -q --adagrad \
  --checkpoint "$work/held-ck" > "$work/first-log" 2>&1 &
first=$!
for _ in $(seq 600); do [[ -f "$work/held-ck.rank1" ]] && break; sleep 0.1; done
[[ -f "$work/held-ck.rank1" && -f "$work/held-ck.lock" ]] ||
  { cat "$work/first-log"; fail "two jobs: the first job wrote no checkpoint, or holds no lock"; }
holder=$(cut -d' ' -f1 "$work/held-ck.lock")
linear_adagrad_job --checkpoint "$work/held-ck" --until-epoch 1 > "$work/log" 2>&1 && fail "two jobs: the second ran"
grep -q "checkpoint $work/held-ck: another run is writing it (pid $holder)" "$work/log" ||
  fail "two jobs: the refusal names not the checkpoint and its holder"
kill -9 "$holder"
wait "$first"
linear_adagrad_job --checkpoint "$work/held-ck" --until-epoch 1 > "$work/log" 2>&1 ||
  fail "two jobs: the second, once the first was killed"
echo "linear, 2 ranks: a second job on one --checkpoint is refused while the first runs, and runs once it is killed"

# mf
"$asgd" mf generate "$work/ratings.txt" --users 300 --items 200 --ratings 20000 --seed 3 > /dev/null ||
  fail "mf generate"
head -n 18000 "$work/ratings.txt" > "$work/mf-train.txt"; tail -n 2000 "$work/ratings.txt" > "$work/mf-val.txt"
mpi 2 mf train "$work/mf-train.txt" "$work/mf.model" -k 8 -t 10 -s 1 -r 0.05 -p "$work/mf-val.txt" \
  > "$work/log" 2>&1 || fail "mf under mpiexec"
rmse=$(sed -n 's/^validation: .* RMSE \([0-9.]*\).*/\1/p' "$work/log")
[[ -n "$rmse" && -f "$work/mf.model" ]] || fail "mf: no validation RMSE or no model"
[[ $(grep -c '^validation:' "$work/log") -eq 1 ]] || fail "mf: more than one rank printed"
"$asgd" mf eval "$work/mf-val.txt" "$work/mf.model" > "$work/eval" 2>&1 || fail "mf eval"
grep -q "RMSE $rmse" "$work/eval" || { cat "$work/eval"; fail "mf eval disagrees with rank 0's RMSE $rmse"; }
echo "mf, 2 ranks: validation RMSE $rmse, read back by mf eval"
# The model file of an AdaGrad job is the job's (rank 0's sums times the ranks, no rank files): one process and
# 3 ranks resume it (before: refused, naming a missing .rank1).
mpi 2 mf train "$work/mf-train.txt" "$work/mf-adagrad.model" -k 8 -t 2 -s 1 --adagrad > "$work/log" 2>&1 ||
  fail "mf --adagrad under mpiexec"
"$asgd" mf train "$work/mf-train.txt" "$work/mf-adagrad-1.model" -k 8 -t 3 -s 1 --adagrad \
  --resume "$work/mf-adagrad.model" > "$work/log" 2>&1 || fail "mf --adagrad: the 2-rank model file resumed by one"
mpi 3 mf train "$work/mf-train.txt" "$work/mf-adagrad-3.model" -k 8 -t 3 -s 1 --adagrad \
  --resume "$work/mf-adagrad.model" > "$work/log" 2>&1 || fail "mf --adagrad: the 2-rank model file resumed by 3"
echo "mf --adagrad: a 2-rank job's model file is resumed by one process and by 3 ranks"

# mf --loss bpr: implicit feedback over 2 ranks, summing their updates (its
# default under mpirun); the full-ranking NDCG@10 of rank 0's averaged model
# must beat most-popular (one process reaches 0.23 against 0.17 on these data).
"$asgd" mf generate "$work/implicit.txt" --users 500 --items 300 --ratings 40000 --rank 4 --noise 0.3 --seed 3 \
  > /dev/null || fail "mf generate (bpr)"
mpi 2 mf train --loss bpr --positive 4 -k 8 -t 50 -r 0.1 -s 1 --test-fraction 0.2 \
  "$work/implicit.txt" "$work/bpr.model" > "$work/log" 2>&1 || fail "mf --loss bpr under mpiexec"
ndcg=$(sed -n 's/^full ranking.* BPR .*NDCG@10 \([0-9.]*\).*/\1/p' "$work/log")
pop=$(sed -n 's/^ *most-popular .*NDCG@10 \([0-9.]*\).*/\1/p' "$work/log")
rounds=$(sed -n 's/^mpi: \([0-9]*\) averaging rounds.*/\1/p' "$work/log")
[[ -n "$ndcg" && -n "$pop" && -f "$work/bpr.model" ]] || fail "bpr: no NDCG lines or no model"
grep -q '^mpi: .*rank 0 trains 3517 of 7034 positives' "$work/log" || fail "bpr: rank 0 does not train half"
grep -q '^mpi: 2 ranks, .* allreduce, summing updates' "$work/log" || fail "bpr: does not sum the ranks' updates by default"
[[ "$rounds" -eq 51 ]] || fail "bpr: $rounds averaging rounds, expected 51 (a common start and one per epoch)"
awk -v a="$ndcg" -v b="$pop" 'BEGIN { exit !(a > b + 0.02) }' || fail "bpr: NDCG@10 $ndcg, most-popular $pop"
echo "mf --loss bpr, 2 ranks: NDCG@10 $ndcg against most-popular $pop, $rounds rounds"
# Ranks whose models take as many floats but are not the same model are refused (before: trained, and averaged
# unrelated rows): -k 8 and -k 16 pad to the same row stride, and two ratings files of the same users and items
# number them in another order.
mf_rank=("$asgd" mf train -t 1 -s 1 -q)
"$asgd" mf generate "$work/ratings-other.txt" --users 300 --items 200 --ratings 20000 --seed 4 > /dev/null ||
  fail "mf generate (other)"
refused_at_start "mf: ranks with -k 8 and 16" "the ranks differ in the model's layout digest" \
  -n 1 "${mf_rank[@]}" -k 16 "$work/ratings.txt" : -n 1 "${mf_rank[@]}" -k 8 "$work/ratings.txt"
refused_at_start "mf: ranks with other ratings files" "the ranks differ in the model's layout digest" \
  -n 1 "${mf_rank[@]}" "$work/ratings.txt" : -n 1 "${mf_rank[@]}" "$work/ratings-other.txt"
echo "mf, ranks given -k 8 and 16, or other ratings files: refused at the start"

# w2v: sentences over two topics of 20 words each
write_corpus "$work/corpus.txt"
mpi 2 w2v -train "$work/corpus.txt" -output "$work/vec.txt" -size 16 -window 3 -negative 3 -iter 2 \
  -min-count 1 -sample 0 -threads 1 -allreduce ring > "$work/log" 2>&1 || fail "w2v under mpiexec"
read -r words dims < "$work/vec.txt"
[[ "$words" == 40 && "$dims" == 16 ]] || fail "w2v: header '$words $dims', expected '40 16'"
grep -q 'mpi: 2 ranks, ring allreduce, summing updates' "$work/log" || fail "w2v: does not sum the ranks' updates by default"
echo "w2v, 2 ranks: $words words x $dims"
# Each rank reads the whole corpus: ranks given other corpora of the same vocabulary size, or another window, are
# refused (before: each trained its share of its own corpus, and the vectors were averaged).
sed 's/a1 /a2 /' "$work/corpus.txt" > "$work/corpus-other.txt"
w2v_rank=("$asgd" w2v -output /dev/null -size 8 -iter 1 -min-count 1 -threads 1)
refused_at_start "w2v: ranks with other corpora" 'the corpus (rank 1 differs from rank 0' \
  -n 1 "${w2v_rank[@]}" -train "$work/corpus.txt" : -n 1 "${w2v_rank[@]}" -train "$work/corpus-other.txt"
refused_at_start "w2v: ranks with another -window" 'the ranks differ in -window (rank 1 differs from rank 0' \
  -n 1 "${w2v_rank[@]}" -train "$work/corpus.txt" : -n 1 "${w2v_rank[@]}" -train "$work/corpus.txt" -window 2
echo "w2v, ranks given other corpora or -window: refused at the start"
# Standard input reaches rank 0 alone: -train - is refused on every rank, with the reason.
refused_at_start "w2v: -train - under mpirun" 'under mpirun standard input reaches rank 0 only' \
  -n 2 "${w2v_rank[@]}" -train - < "$work/corpus.txt"
# -save-vocab is rank 0's, as -output: a rank that could not write it (another working folder) ended the job.
mkdir -p "$work/rank0/sub" "$work/rank1"
w2v_anywhere=("$(realpath "$asgd")" "${w2v_rank[@]:1}")  # -wdir: the command's path must not be relative
timeout 120 "$mpiexec" --oversubscribe -n 1 -wdir "$work/rank0" "${w2v_anywhere[@]}" -train "$work/corpus.txt" \
  -save-vocab sub/vocab.txt : -n 1 -wdir "$work/rank1" "${w2v_anywhere[@]}" -train "$work/corpus.txt" \
  -save-vocab sub/vocab.txt > "$work/log" 2>&1 || fail "w2v -save-vocab under mpirun: rank 1 wrote it too"
[[ -s "$work/rank0/sub/vocab.txt" ]] || fail "w2v -save-vocab under mpirun: rank 0 did not write it"
echo "w2v under mpirun: -train - refused, -save-vocab written by rank 0 alone"
# A checkpoint records the whole corpus's words per epoch, not rank 0's shard's: resumed on the same corpus, by the
# same ranks or by one process, nobody is warned of another corpus.
mpi 2 w2v -train "$work/corpus.txt" -output /dev/null -size 8 -iter 1 -min-count 1 -threads 1 \
  -checkpoint "$work/w2v.ck" > "$work/log" 2>&1 || fail "w2v -checkpoint under mpiexec"
mpi 2 w2v -train "$work/corpus.txt" -output /dev/null -threads 1 -iter 2 -resume "$work/w2v.ck" > "$work/log" 2>&1 ||
  fail "w2v -resume under mpiexec"
"$asgd" w2v -train "$work/corpus.txt" -output /dev/null -threads 1 -iter 2 -resume "$work/w2v.ck" >> "$work/log" 2>&1 ||
  fail "w2v -resume of a 2-rank checkpoint"
grep -q 'warning' "$work/log" && fail "w2v: a resume on the same corpus warns"
echo "w2v, 2 ranks: checkpointed and resumed (by 2 ranks and by one process) without a warning"
# A rank that finds its -resume finished while another has epochs to train: refused at the start (before: the first
# returned and the other waited forever).
refused_at_start "w2v: ranks resuming with other -iter" 'the ranks differ in -resume (1: given)/epochs done' \
  -n 1 "$asgd" w2v -train "$work/corpus.txt" -output /dev/null -threads 1 -iter 1 -resume "$work/w2v.ck" : \
  -n 1 "$asgd" w2v -train "$work/corpus.txt" -output /dev/null -threads 1 -iter 2 -resume "$work/w2v.ck"
echo "w2v, ranks resuming with other -iter: refused at the start"

# cnn: 600 training and 200 test digits, each class a bright bar at its own place
write_digits "$work" || fail "writing digits"
mpi 2 cnn train --data "$work" --epochs 2 --workers 1 --batch 32 --model "$work/lenet.asgd" > "$work/log" 2>&1 ||
  fail "cnn under mpiexec"
[[ -f "$work/lenet.asgd" ]] || fail "cnn: no model written"
trained=$(sed -n 's/^test accuracy \([0-9.]*\) % after.*/\1/p' "$work/log")
rounds=$(sed -n 's/^mpi: \([0-9]*\) averaging rounds.*/\1/p' "$work/log")
[[ "$rounds" == 3 ]] || fail "cnn: '$rounds' averaging rounds after 2 epochs (want the start and one per epoch)"
"$asgd" cnn eval --data "$work" --model "$work/lenet.asgd" > "$work/eval" 2>&1 || fail "cnn eval"
acc=$(sed -n 's/^test accuracy \([0-9.]*\) % .*/\1/p' "$work/eval")
[[ -n "$acc" && "$acc" == "$trained" ]] || { cat "$work/eval"; fail "cnn eval: '$acc' %, rank 0 printed '$trained' %"; }
awk -v a="$acc" 'BEGIN { exit !(a > 80) }' || fail "cnn: $acc % after 2 epochs (want > 80)"
echo "cnn, 2 ranks: test accuracy $acc %, read back by cnn eval"
# Low-rank rounds (PowerSGD factors of rank 2, every 4 updates): above 80 % too, with fewer floats sent.
mpi 2 cnn train --data "$work" --epochs 2 --workers 1 --batch 32 --average-every 4 --average-rank 2 \
  > "$work/log" 2>&1 || fail "cnn --average-rank 2"
grep -q "rank-2 factors of each matrix's update with error feedback" "$work/log" ||
  fail "cnn --average-rank 2: no description"
fewer=$(sed -n 's/.*(\([0-9.]*\)x fewer than whole rounds).*/\1/p' "$work/log")
acc=$(sed -n 's/^test accuracy \([0-9.]*\) % after.*/\1/p' "$work/log")
awk -v f="$fewer" -v a="$acc" 'BEGIN { exit !(f > 5 && a > 80) }' ||
  fail "cnn --average-rank 2: '$acc' %, '$fewer'x fewer floats (want > 80 %, > 5x)"
echo "cnn, 2 ranks, rank-2 rounds: test accuracy $acc %, ${fewer}x fewer floats into the allreduces"
# --average-flush: a whole round at the end sends the kept error; the model written is the same on every rank.
mpi 2 cnn train --data "$work" --epochs 2 --workers 1 --batch 32 --average-every 4 --average-rank 2 \
  --average-flush --model "$work/flushed.model" > "$work/log" 2>&1 || fail "cnn --average-flush"
grep -q "error feedback, the kept error sent whole at the end" "$work/log" || fail "cnn --average-flush: no description"
flushed=$("$asgd" cnn eval --data "$work" --model "$work/flushed.model" | sed -n 's/^test accuracy \([0-9.]*\) %.*/\1/p')
awk -v a="$flushed" 'BEGIN { exit !(a > 80) }' || fail "cnn --average-flush: the model written scores '$flushed' %"
echo "cnn, 2 ranks, rank-2 rounds flushed at the end: the model written scores $flushed %"
# Stopped after epoch 1 and resumed to 3: rank 0's checkpoint holds the averaged model and momentum, which every
# rank of the uninterrupted job holds at the end of an epoch too.
cnn_job() { mpi 2 cnn train --data "$work" --epochs 3 --workers 1 --batch 32 --momentum 0.9 --lr 0.02 "$@"; }
stopped_and_resumed cnn 1 cnn_job
# Averaging every 4 updates, a blocking round: 599 images leave 299 per rank (the ranks must make the same
# updates), 10 updates an epoch in batches of 32, so after updates 4, 8, ..., 20 of 2 epochs: 5 rounds, one per
# epoch and the start: 8.
every_job() { mpi 2 cnn train --data "$work" --limit 599 --batch 32 "$@"; }
every_job --epochs 2 --average-every 4 --workers 1 > "$work/log" 2>&1 || fail "cnn --average-every 4"
grep -q "each rank trains 299 images an epoch" "$work/log" || fail "cnn --average-every: the shards are not equal"
rounds=$(sed -n 's/^mpi: \([0-9]*\) averaging rounds.*/\1/p' "$work/log")
[[ "$rounds" == 8 ]] || fail "cnn --average-every 4: '$rounds' averaging rounds (want 8)"
every=$(sed -n 's/^test accuracy \([0-9.]*\) % after.*/\1/p' "$work/log")
awk -v a="$every" 'BEGIN { exit !(a > 80) }' || fail "cnn --average-every 4: $every % after 2 epochs (want > 80)"
echo "cnn, 2 ranks averaging every 4 updates: $rounds rounds, test accuracy $every %"
# Ranks that would make different numbers of updates (and so of rounds) are refused, not left waiting.
timeout 120 "$mpiexec" --oversubscribe -n 1 "$asgd" cnn train --data "$work" --batch 32 --average-every 4 \
  --workers 1 : -n 1 "$asgd" cnn train --data "$work" --batch 32 --average-every 4 --workers 2 > "$work/log" 2>&1 &&
  fail "cnn --average-every with different --workers per rank ran"
grep -q "the ranks differ in epochs done/last epoch/K .*: rank 0: 0/10/4/10, rank 1: 0/10/4/5" "$work/log" ||
  fail "cnn: no clear error for ranks that would make different updates"
# So are ranks that would train different epochs, averaging every epoch.
timeout 120 "$mpiexec" --oversubscribe -n 1 "$asgd" cnn train --data "$work" --epochs 1 : -n 1 "$asgd" cnn train \
  --data "$work" --epochs 2 > "$work/log" 2>&1 && fail "cnn with different --epochs per rank ran"
grep -q "the ranks differ in epochs done/last epoch.*: rank 0: 0/1/0/0, rank 1: 0/2/0/0" "$work/log" ||
  fail "cnn: no clear error for unequal epochs"
# And ranks averaging at different K.
timeout 120 "$mpiexec" --oversubscribe -n 1 "$asgd" cnn train --data "$work" --average-every 4 : -n 1 "$asgd" cnn \
  train --data "$work" --average-every 3 > "$work/log" 2>&1 && fail "cnn with different --average-every per rank ran"
grep -q "the ranks were given different --average-every: rank 0 4, rank 1 3" "$work/log" ||
  fail "cnn: no clear error for unequal --average-every"
# Resumed, the rounds keep their rhythm (they count the updates of the epochs before): 10 updates an epoch and a
# round every 3, so the first epoch after the checkpoint has its rounds after updates 12, 15 and 18.
every_resumed_job() { every_job --epochs 3 --average-every 3 --workers 1 --momentum 0.9 --lr 0.02 "$@"; }
stopped_and_resumed cnn-every-3 1 every_resumed_job
if [[ -n "$emulated" ]]; then
  # 2 streams under tau 2: the streams' own threads select the rank's device too
  ASGD_GPU_BACKEND="$emulated" mpi 2 cnn train --data "$work" --epochs 2 --workers 2 --tau 2 --batch 32 \
    --device gpu --model "$work/lenet-gpu.asgd" > "$work/log" 2>&1 || fail "cnn --device gpu under mpiexec"
  rounds=$(sed -n 's/^mpi: \([0-9]*\) averaging rounds.*/\1/p' "$work/log")
  [[ "$rounds" == 3 ]] || fail "cnn --device gpu: '$rounds' averaging rounds after 2 epochs"
  grep -q '^device: asgd host emulation' "$work/log" || fail "cnn --device gpu: not on the emulated backend"
  gpu=$(sed -n 's/^test accuracy \([0-9.]*\) % after.*/\1/p' "$work/log")
  "$asgd" cnn eval --data "$work" --model "$work/lenet-gpu.asgd" > "$work/eval" 2>&1 || fail "cnn eval (gpu model)"
  grep -q "^test accuracy $gpu %" "$work/eval" || { cat "$work/eval"; fail "cnn eval disagrees with rank 0's $gpu %"; }
  awk -v a="$acc" -v g="$gpu" 'BEGIN { d = a - g; exit !(d <= 1 && d >= -1) }' ||
    fail "cnn: $gpu % on the (emulated) GPU, $acc % on the CPU"
  echo "cnn --device gpu (emulated), 2 ranks: test accuracy $gpu %"
  ASGD_GPU_BACKEND="$emulated" every_job --epochs 2 --average-every 4 --workers 2 --tau 2 --device gpu > "$work/log" 2>&1 ||
    fail "cnn --device gpu --average-every 4"
  rounds=$(sed -n 's/^mpi: \([0-9]*\) averaging rounds.*/\1/p' "$work/log")
  [[ "$rounds" == 8 ]] || fail "cnn --device gpu --average-every 4: '$rounds' averaging rounds (want 8)"
  echo "cnn --device gpu (emulated), 2 ranks averaging every 4 updates: $rounds rounds"
fi
echo "all four apps trained under mpiexec"
