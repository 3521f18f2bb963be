#!/bin/bash
# word2vec across 2 ranks: averaging and the parameter server's modes and compressed pushes against one
# process, on text8-prefix cut into lines of 1,000 words (skip-gram, dim 100, window 5, negative 5, sample
# 1e-4, min-count 5, 5 epochs, 1 thread a rank, seed 1). Prints per run: whole seconds, analogy accuracy
# (asgd w2v-eval, restricted to the vocabulary) and, for the server, rank 0's megabytes and keys pushed.
# PART: modes (averaging and the server's modes, and compressed pushes: the default), slow (the modes again
# with rank 1 three times slower, -slow-rank 1:3) or all.
# Usage: bench/net/ps_w2v.sh [ASGD] [DATA_DIR] [PART]   (ASGD: build/apps/asgd; DATA_DIR: ../shared/data/text)
set -uo pipefail
asgd=$(realpath "${1:-build/apps/asgd}")
data="${2:-../shared/data/text}"
part="${3:-modes}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
zcat "$data/text8-prefix.gz" | tr -s ' ' '\n' | grep -v '^$' |
  awk '{ printf "%s%s", $0, (NR % 1000 == 0 ? "\n" : " ") } END { print "" }' > "$work/corpus.txt"
common=(-train "$work/corpus.txt" -cbow 0 -size 100 -window 5 -negative 5 -sample 1e-4 -min-count 5 -iter 5
        -threads 1 -binary 1 -seed 1 -output "$work/v.bin")
one() {  # LABEL RANKS (0: no mpiexec) FLAGS...
  local label="$1" n="$2"; shift 2
  local start end acc pushed
  start=$(date +%s.%N)
  if [[ "$n" == 0 ]]; then
    "$asgd" w2v "${common[@]}" "$@" > "$work/log" 2>&1
  else
    mpiexec --oversubscribe -n "$n" "$asgd" w2v "${common[@]}" "$@" > "$work/log" 2>&1
  fi || { echo "$label: failed"; tail -5 "$work/log"; return; }
  end=$(date +%s.%N)
  acc=$("$asgd" w2v-eval --vectors "$work/v.bin" --analogies "$data/questions-words.txt" |
        sed -n 's/^analogies: accuracy \([0-9.]*\) %.*/\1/p')
  pushed=$(grep -o "[0-9.]* MB pushed ([0-9]* keys)" "$work/log" | head -1)
  printf "%-48s %6.1f s  analogies %5s %%  %s\n" "$label" "$(echo "$end - $start" | bc)" "$acc" "$pushed"
}
ps=(-distributed ps -average-every 5)
one "one process, 1 thread" 0
if [[ "$part" == slow || "$part" == all ]]; then
  slow=(-slow-rank 1:3)
  one "rank 1 3x slower: averaging (sum), every epoch" 2 "${slow[@]}"
  one "rank 1 3x slower: averaging (sum), every 5 steps" 2 -average-every 5 "${slow[@]}"
  one "rank 1 3x slower: ps BSP" 2 "${ps[@]}" -ps-tau 0 "${slow[@]}"
  one "rank 1 3x slower: ps SSP(4)" 2 "${ps[@]}" -ps-tau 4 "${slow[@]}"
  one "rank 1 3x slower: ps ASP" 2 "${ps[@]}" -ps-tau inf "${slow[@]}"
fi
[[ "$part" == modes || "$part" == all ]] || exit 0
one "averaging (sum), every epoch" 2
one "averaging (sum), every 5 steps" 2 -average-every 5
one "ps BSP, every 5 steps" 2 "${ps[@]}" -ps-tau 0
one "ps SSP(4)" 2 "${ps[@]}" -ps-tau 4
one "ps ASP" 2 "${ps[@]}" -ps-tau inf
one "ps SSP(4), int8 top 0.25" 2 "${ps[@]}" -ps-tau 4 -ps-push int8 -ps-push-fraction 0.25
one "ps SSP(4), sign top 0.5" 2 "${ps[@]}" -ps-tau 4 -ps-push sign -ps-push-fraction 0.5
one "ps SSP(4), sign top 0.5, no error feedback" 2 "${ps[@]}" -ps-tau 4 -ps-push sign -ps-push-fraction 0.5 -ps-error-feedback 0
one "ps SSP(4), int8 top 0.1" 2 "${ps[@]}" -ps-tau 4 -ps-push int8 -ps-push-fraction 0.1
one "ps SSP(4), int8 top 0.1, no error feedback" 2 "${ps[@]}" -ps-tau 4 -ps-push int8 -ps-push-fraction 0.1 -ps-error-feedback 0
