#!/bin/bash
# Every `train` command with --distributed ps under mpiexec, on small
# generated data:
#  linear  4 ranks, rounds every 5 steps, tau 0 and inf: within 1e-2 of the
#          L-BFGS optimum, the clock gap within tau at tau 0; stopped at a
#          checkpoint and resumed by 2 ranks, within 1e-2 too;
#  mf      2 ranks, a round per epoch at tau 0 (BSP): the same RMSE, to the
#          digit, as averaging's (what BSP is), under the mean rule and the
#          sum, over messages and one-sided, and with 1 or 2 dedicated
#          server ranks beside the 2 (a server given other options ends the
#          job, naming them); SSP(2) every 20 steps over
#          each (the clock gap within 2; auto is one-sided on one host),
#          and mf eval reads rank 0's model back; stopped at a checkpoint
#          and resumed by one process, the RMSE within 0.02 of 2 ranks';
#          under AdaGrad, servers' checkpoints written by a dedicated
#          server and resumed by 2 ranks;
#  w2v     2 ranks, SSP(2) every 20 steps: one vectors file of the whole
#          vocabulary;
#  cnn     2 ranks, a round per epoch: above 80 % on the digits;
#  and ranks given different --ps-tau are refused by name.
# Usage: mpi_ps.sh ASGD MPIEXEC
set -uo pipefail
asgd="$1"; mpiexec="$2"
source "$(dirname "$0")/mpi_common.sh"

# linear
"$asgd" linear generate --out "$work/train.svm" --examples 20000 --features 500 --nnz 10 --seed 5 > /dev/null ||
  fail "linear generate"
for tau in 0 inf; do
  mpi 4 linear train --data "$work/train.svm" --epochs 8 --workers 1 --distributed ps --ps-tau "$tau" \
    --average-every 5 --reference > "$work/log" 2>&1 || fail "linear, ps tau $tau"
  gap=$(sed -n 's/.*ours is \(.*\) relative above.*/\1/p' "$work/log")
  grep -q "^mpi: 4 ranks, parameter server (mean, tau $tau, one-sided), rounds every 5 local steps" "$work/log" ||
    fail "linear, ps tau $tau: no description"
  awk -v g="$gap" 'BEGIN { exit !(g != "" && g < 1e-2) }' || fail "linear, ps tau $tau: $gap above the optimum"
  [[ "$tau" != 0 ]] || grep -q "clock gap at most 0$" "$work/log" || fail "linear, ps tau 0: a clock gap above 0"
  echo "linear, 4 ranks, ps tau $tau: $gap above the optimum"
done
# Elastic resume: 4 ranks stopped after epoch 4 at a checkpoint (rank 0's copy), resumed by 2 ranks to epoch 8;
# the shards are cut again at the start, from the resumed parameters.
ps_job() { mpi "$1" linear train --data "$work/train.svm" --epochs 8 --workers 1 --distributed ps --average-every 5 \
  --ps-tau 4 "${@:2}"; }
ps_job 4 --checkpoint "$work/ps-ck" --until-epoch 4 > "$work/log" 2>&1 || fail "linear, ps: 4 ranks to epoch 4"
ps_job 2 --resume "$work/ps-ck" --reference > "$work/log" 2>&1 || fail "linear, ps: resumed by 2 ranks"
grep -q "resumed from $work/ps-ck at epoch 4" "$work/log" || fail "linear, ps: no resume line"
gap=$(sed -n 's/.*ours is \(.*\) relative above.*/\1/p' "$work/log")
awk -v g="$gap" 'BEGIN { exit !(g != "" && g < 1e-2) }' || fail "linear, ps, resumed by 2 ranks: $gap above the optimum"
echo "linear, ps: 4 ranks to epoch 4, resumed by 2 to 8: $gap above the optimum"

# mf
"$asgd" mf generate "$work/ratings.txt" --users 300 --items 200 --ratings 20000 --seed 3 > /dev/null ||
  fail "mf generate"
mf_job() { mpi 2 mf train "$work/ratings.txt" -k 8 -t 10 -s 1 -r 0.02 --test-fraction 0.1 "$@"; }
test_rmse() { sed -n 's/^test: .* RMSE \([0-9.]*\).*/\1/p' "$work/log"; }
# BSP per epoch: model averaging's parameters under the mean rule, and its --combine sum's under the sum, over
# either transport.
for rule in mean sum; do
  mf_job --combine "$rule" > "$work/log" 2>&1 || fail "mf, averaging with --combine $rule"
  avg_rmse=$(test_rmse)
  [[ "$rule" == mean ]] && mean_rmse="$avg_rmse"
  for transport in messages one-sided; do
    mf_job --distributed ps --server-rule "$rule" --ps-transport "$transport" > "$work/log" 2>&1 ||
      fail "mf, ps $rule $transport"
    ps_rmse=$(test_rmse)
    [[ -n "$ps_rmse" && "$ps_rmse" == "$avg_rmse" ]] ||
      fail "mf: BSP's RMSE under the $rule over $transport '$ps_rmse', averaging's $rule '$avg_rmse'"
  done
done
# Dedicated server ranks: 2 workers and 1 or 2 servers train BSP's parameters as server threads on 2 ranks do.
for servers in 1 2; do
  timeout 120 "$mpiexec" --oversubscribe -n $((2 + servers)) "$asgd" mf train "$work/ratings.txt" -k 8 -t 10 -s 1 \
    -r 0.02 --test-fraction 0.1 --distributed ps --servers "$servers" > "$work/log" 2>&1 ||
    fail "mf, ps with $servers server ranks"
  grep -q "^mpi: 2 ranks and $servers server ranks\?, parameter server (mean, tau 0, messages)" "$work/log" ||
    fail "mf, ps with $servers server ranks: no description"
  [[ "$(test_rmse)" == "$mean_rmse" ]] ||
    fail "mf: RMSE with $servers server ranks '$(test_rmse)', averaging's mean '$mean_rmse'"
done
echo "mf, 2 workers and 1 or 2 server ranks: BSP RMSE $mean_rmse, as averaging's"
# A server rank given other options than the workers' ends the job, naming them.
timeout 60 "$mpiexec" --oversubscribe -n 2 "$asgd" mf train "$work/ratings.txt" -k 8 -t 2 -s 1 --distributed ps \
  --servers 1 : -n 1 "$asgd" mf train "$work/ratings.txt" -k 8 -t 2 -s 1 --distributed ps --servers 1 --ps-tau 4 \
  > "$work/log" 2>&1 && fail "a server rank with --ps-tau 4 for workers with 0 ran"
grep -q "rank 2: error: parameter server: rank 0 trains under other options than this server.s" "$work/log" ||
  fail "a server rank given another --ps-tau: not refused by name"
echo "a server rank given other options than the workers': refused"
# One worker beside a server would train alone and leave the server waiting: refused on every rank.
timeout 60 "$mpiexec" --oversubscribe -n 2 "$asgd" mf train "$work/ratings.txt" -k 8 -t 2 -s 1 --distributed ps \
  --servers 1 > "$work/log" 2>&1 && fail "one worker and a server rank ran"
grep -q -- "--servers 1: a job of 2 ranks keeps 1 worker rank beside them" "$work/log" ||
  fail "one worker and a server rank: not refused by name"
echo "one worker beside a server rank: refused"
# Ranks given different --servers are refused on every rank before they take their roles (before, they waited
# for each other in different roles for ever).
timeout 60 "$mpiexec" --oversubscribe -n 2 "$asgd" mf train "$work/ratings.txt" -k 8 -t 2 -s 1 --distributed ps \
  : -n 1 "$asgd" mf train "$work/ratings.txt" -k 8 -t 2 -s 1 --distributed ps --servers 1 > "$work/log" 2>&1 &&
  fail "ranks given different --servers ran"
grep -q -- "the ranks were given different --servers: rank 0 0, rank 1 0, rank 2 1" "$work/log" ||
  fail "ranks given different --servers: not refused by name"
echo "ranks given different --servers: refused"
# SSP(2) every 20 steps over each transport (auto is one-sided on one host): the clock gap within the bound.
for transport in messages auto; do
  mf_job --distributed ps --ps-tau 2 --average-every 20 --ps-transport "$transport" > "$work/log" 2>&1 ||
    fail "mf, ps $transport tau 2"
  [[ "$transport" == messages ]] && want=messages || want=one-sided
  grep -q "parameter server (mean, tau 2, $want)" "$work/log" || fail "mf, ps $transport: no description"
  gap=$(sed -n 's/.*clock gap at most \([0-9]*\)$/\1/p' "$work/log")
  [[ -n "$gap" && "$gap" -le 2 ]] || fail "mf, ps $transport tau 2: clock gap '$gap'"
done
mf_job --distributed ps --ps-tau 2 --average-every 20 "$work/mf.model" > "$work/log" 2>&1 || fail "mf, ps tau 2"
rmse=$(test_rmse)
awk -v a="$rmse" 'BEGIN { exit !(a != "" && a < 1.2) }' || fail "mf, ps tau 2: RMSE '$rmse'"
"$asgd" mf eval "$work/ratings.txt" "$work/mf.model" > "$work/eval" 2>&1 || fail "mf eval of the ps model"
echo "mf, 2 ranks: BSP RMSE as averaging's under mean and sum (last $ps_rmse); SSP(2) every 20 steps RMSE $rmse"
# Elastic resume: 2 ranks under SSP(2) to epoch 5 at a checkpoint, gone on with by one process to epoch 10; the
# RMSE within 0.02 of the uninterrupted 2-rank run's.
mpi 2 mf train "$work/ratings.txt" -k 8 -t 5 -s 1 -r 0.02 --test-fraction 0.1 --distributed ps --ps-tau 2 \
  --average-every 20 --checkpoint "$work/mf.ckpt" > "$work/log" 2>&1 || fail "mf, ps to epoch 5"
"$asgd" mf train "$work/ratings.txt" -k 8 -t 10 -s 1 -r 0.02 --test-fraction 0.1 --resume "$work/mf.ckpt" \
  > "$work/log" 2>&1 || fail "mf, resumed by one process"
grep -q "resumed from $work/mf.ckpt at epoch 5" "$work/log" || fail "mf, resumed: no resume line"
resumed=$(test_rmse)
awk -v a="$resumed" -v b="$rmse" 'BEGIN { d = a - b; exit !(a != "" && d < 0.02 && d > -0.02) }' ||
  fail "mf, resumed by one process: RMSE '$resumed', the 2-rank run's $rmse"
echo "mf: 2 ranks to epoch 5, resumed by one process to 10: RMSE $resumed"
# The servers' checkpoints under AdaGrad: 2 workers and a server write generations and a final one; 2 ranks
# with server threads go on from the model checkpoint and the servers' final generation, sums included.
ag=(mf train "$work/ratings.txt" -k 8 -s 1 -r 0.02 --test-fraction 0.1 --distributed ps --server-rule adagrad)
timeout 120 "$mpiexec" --oversubscribe -n 3 "$asgd" "${ag[@]}" -t 5 --servers 1 --checkpoint "$work/ag.ckpt" \
  --ps-checkpoint "$work/ag" --ps-checkpoint-seconds 0.05 > "$work/log" 2>&1 || fail "mf, ps checkpoints"
ls "$work"/ag.ps-*-gfinal-0of1 > /dev/null 2>&1 || fail "mf, ps checkpoints: no final generation"
mpi 2 "${ag[@]}" -t 10 --resume "$work/ag.ckpt" --ps-resume "$work/ag" > "$work/log" 2>&1 ||
  fail "mf, resumed from the servers' checkpoints"
grep -q "servers start from the final generation of $work/ag (1 shard, every worker past epoch 5): its parameters, with its AdaGrad sums" "$work/log" ||
  fail "mf, resumed from the servers' checkpoints: no line saying so"
ag_rmse=$(test_rmse)
awk -v a="$ag_rmse" 'BEGIN { exit !(a != "" && a < 1.2) }' || fail "mf, resumed with AdaGrad's sums: RMSE '$ag_rmse'"
echo "mf: 2 workers and a server to epoch 5 with server checkpoints, resumed by 2 ranks to 10: RMSE $ag_rmse"

# w2v: sentences over two topics of 20 words each
write_corpus "$work/corpus.txt"
mpi 2 w2v -train "$work/corpus.txt" -output "$work/vec.txt" -size 16 -window 3 -negative 3 -iter 2 \
  -min-count 1 -sample 0 -threads 1 -distributed ps -ps-tau 2 -average-every 20 > "$work/log" 2>&1 ||
  fail "w2v, ps"
read -r words dims < "$work/vec.txt"
[[ "$words" == 40 && "$dims" == 16 ]] || fail "w2v, ps: header '$words $dims', expected '40 16'"
grep -q 'mpi: 2 ranks, parameter server (sum, tau 2, one-sided), rounds every 20 local steps' "$work/log" ||
  fail "w2v, ps: no description"
echo "w2v, 2 ranks, ps tau 2: $words words x $dims"

# cnn: 600 training and 200 test digits, each class a bright bar at its own place
write_digits "$work" || fail "writing digits"
mpi 2 cnn train --data "$work" --epochs 2 --workers 1 --batch 32 --distributed ps > "$work/log" 2>&1 ||
  fail "cnn, ps"
acc=$(sed -n 's/^test accuracy \([0-9.]*\) % after.*/\1/p' "$work/log")
awk -v a="$acc" 'BEGIN { exit !(a != "" && a > 80) }' || fail "cnn, ps: '$acc' % after 2 epochs (want > 80)"
echo "cnn, 2 ranks, ps: test accuracy $acc %"

# Ranks given different bounds are refused, naming the flag and each rank's value.
timeout 60 "$mpiexec" --oversubscribe -n 1 "$asgd" linear train --data "$work/train.svm" --epochs 1 --workers 1 \
  --distributed ps --ps-tau 0 : -n 1 "$asgd" linear train --data "$work/train.svm" --epochs 1 --workers 1 \
  --distributed ps --ps-tau 4 > "$work/log" 2>&1 && fail "ranks with --ps-tau 0 and 4 ran"
grep -q -- "--ps-tau: rank 0 0, rank 1 4" "$work/log" || fail "ranks with --ps-tau 0 and 4: not refused by name"
echo "ranks given --ps-tau 0 and 4: refused"
echo "all four apps trained with a parameter server under mpiexec"
