#!/bin/bash
# LeNet-5 across 2 ranks, model averaging every 20 updates: whole rounds against PowerSGD rounds of rank R
# (--average-rank R: factors of each matrix's update, with error feedback), seeds 1-3. Prints per run the test
# accuracy after 2 epochs and what rank 0 put into allreduces.
# With RESUME=1 each run is also stopped after epoch 1 (a checkpoint) and resumed to epoch 2: a checkpoint holds
# neither the factors nor the kept error, so the resumed job starts them again; its accuracy is printed beside.
# Usage: bench/net/low_rank_cnn.sh [ASGD] [MNIST_DIR] [RANKS...]   (ASGD: build/apps/asgd; MNIST_DIR:
# ../shared/data/mnist; RANKS: 0 1 2 4, 0 meaning whole rounds)
set -uo pipefail
asgd="${1:-build/apps/asgd}"
data="${2:-../shared/data/mnist}"
shift 2 2>/dev/null
ranks=("$@")
[[ ${#ranks[@]} -gt 0 ]] || ranks=(0 1 2 4)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
log=$(mktemp)
ck=$(mktemp -u)
trap 'rm -f "$log" "$ck"*' EXIT
for seed in 1 2 3; do  # seeds outside, so that the settings alternate
  for r in "${ranks[@]}"; do
    mpiexec --oversubscribe -n 2 "$asgd" cnn train --data "$data" --epochs 2 --workers 1 --average-every 20 \
      --average-rank "$r" --seed "$seed" > "$log" 2>&1 || { echo "rank $r seed $seed: failed"; tail -3 "$log"; continue; }
    acc=$(sed -n 's/^test accuracy \([0-9.]*\) % after.*/\1/p' "$log")
    sent=$(grep -o "[0-9.]* MB into allreduces[^,]*" "$log" | head -1)
    printf "average-rank %s  seed %s  test accuracy %s %%  %s\n" "$r" "$seed" "$acc" "$sent"
    [[ "${RESUME:-0}" == 1 ]] || continue
    job=(cnn train --data "$data" --epochs 2 --workers 1 --average-every 20 --average-rank "$r" --seed "$seed")
    rm -f "$ck"*
    mpiexec --oversubscribe -n 2 "$asgd" "${job[@]}" --checkpoint "$ck" --until-epoch 1 > "$log" 2>&1 &&
      mpiexec --oversubscribe -n 2 "$asgd" "${job[@]}" --resume "$ck" > "$log" 2>&1 ||
      { echo "rank $r seed $seed, resumed: failed"; tail -3 "$log"; continue; }
    printf "  stopped after epoch 1 and resumed: test accuracy %s %%\n" \
      "$(sed -n 's/^test accuracy \([0-9.]*\) % after.*/\1/p' "$log")"
  done
done
