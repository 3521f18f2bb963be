#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with -DASGD_FUZZ=ON) in build-fuzz and fuzzes each in turn, one
# process at a time (--parallel N: N at once), then prints a table: target, executions, seconds, crashes
# (docs/fuzzing.md).
#   scripts/fuzz.sh                        every target, 30 s each (what CI runs)
#   scripts/fuzz.sh --seconds 600 libsvm   one target (or several) for 10 minutes each
#   scripts/fuzz.sh --parallel 2           two targets at a time (one fuzzing process each: a core each)
#   scripts/fuzz.sh --replay               no fuzzing: every target runs its seeds and fuzz/regressions once
#   scripts/fuzz.sh --list                 the targets
# Each run starts from the target's seeds (fuzz/corpus/TARGET) and what earlier runs found
# (build-fuzz/runs/TARGET/corpus), with its dictionary (fuzz/dict), -rss_limit_mb=2048 -malloc_limit_mb=1024
# (an allocation past 1 GiB is a finding) and -timeout=10 (seconds per input). A finding stops that target's run
# and lands in build-fuzz/runs/TARGET/ (crash-*, leak-*, oom-*, timeout-*); reproduce it with
# build-fuzz/fuzz/fuzz_TARGET FILE. Exit status 1 when any run found something.
# Variables: ASGD_FUZZ_JOBS (build jobs, default nproc), ASGD_FUZZ_BUILD (build folder, default build-fuzz).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/args.sh"
asgd_args own "${BASH_SOURCE[0]}" "$@"
cd "$(dirname "$0")/.."

targets_all=(corpus vocabulary vectors ratings_udata ratings_dat ratings_csv ratings_libmf libsvm idx checkpoint
             mf_model linear_model lenet_model w2v_checkpoint segment_header)
seconds=30
replay=0
parallel=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds)
      [[ "${2:-}" =~ ^[0-9]+$ && "$2" -gt 0 ]] || { echo "fuzz.sh: --seconds needs a whole number above 0" >&2; exit 2; }
      seconds=$2; shift 2 ;;
    --parallel)
      [[ "${2:-}" =~ ^[0-9]+$ && "$2" -gt 0 ]] || { echo "fuzz.sh: --parallel needs a whole number above 0" >&2; exit 2; }
      parallel=$2; shift 2 ;;
    --replay) replay=1; shift ;;
    --list) printf '%s\n' "${targets_all[@]}"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1' (see -h)" >&2; exit 2 ;;
    *)
      if [[ " ${targets_all[*]} " != *" $1 "* ]]; then
        echo "fuzz.sh: no target '$1'; the targets: ${targets_all[*]}" >&2; exit 2
      fi
      targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${targets_all[@]}")

bash scripts/install-deps.sh --clang  # the build's packages, clang and its libFuzzer runtime
build=${ASGD_FUZZ_BUILD:-build-fuzz}
jobs=${ASGD_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# Only the libraries the readers are in: no apps, tests, MPI or CUDA.
CC=clang CXX=clang++ cmake -S . -B "$build" -DASGD_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DASGD_BUILD_TESTS=OFF -DASGD_BUILD_BENCH=OFF -DASGD_BUILD_APPS=OFF -DASGD_WITH_MPI=OFF -DASGD_WITH_CUDA=OFF \
  -DASGD_DENSE_NATIVE=OFF -DASGD_WERROR=ON "${launcher[@]}" >/dev/null
build_start=$SECONDS
cmake --build "$build" -j "$jobs" --target "${targets[@]/#/fuzz_}"
echo "fuzz.sh: built ${#targets[@]} targets in $((SECONDS - build_start)) s"

# A leak is a finding too; the reader's own threads (TBB) are not.
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"

dict_of() {
  case "$1" in
    ratings_*) echo fuzz/dict/ratings.dict ;;
    checkpoint | mf_model | linear_model | lenet_model | w2v_checkpoint) echo fuzz/dict/model.dict ;;
    *) echo "fuzz/dict/$1.dict" ;;
  esac
}

# Fuzzes (or replays) target $1 and writes its table row to $build/runs/$1/row; returns 1 when it found something.
fuzz_one() {
  local t=$1 run log dict before start status execs took after crashes note inputs dir f
  local -a args
  run="$build/runs/$t"
  mkdir -p "$run/corpus"
  log="$run/last.log"
  args=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 -print_final_stats=1 -artifact_prefix="$run/")
  dict=$(dict_of "$t")
  [ -f "$dict" ] && args+=(-dict="$dict")
  before=$(find "$run" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' -o -name 'timeout-*' \) | wc -l)
  start=$SECONDS
  if [ "$replay" = 1 ]; then
    inputs=()
    for dir in "fuzz/corpus/$t" "fuzz/regressions/$t"; do
      [ -d "$dir" ] && while IFS= read -r f; do inputs+=("$f"); done < <(find "$dir" -type f | sort)
    done
    status=0
    "$build/fuzz/fuzz_$t" "${args[@]}" "${inputs[@]}" >"$log" 2>&1 || status=$?
    execs=${#inputs[@]}
  else
    status=0
    "$build/fuzz/fuzz_$t" "${args[@]}" -max_total_time="$seconds" "$run/corpus" "fuzz/corpus/$t" >"$log" 2>&1 ||
      status=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  fi
  took=$((SECONDS - start))
  after=$(find "$run" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' -o -name 'timeout-*' \) | wc -l)
  crashes=$((after - before))
  # A failure that left no file (a replayed input that crashes, a leak at exit): still a finding.
  if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi
  note=""
  if [ "$crashes" -gt 0 ]; then
    note=$(grep -m1 -E '^(==[0-9]+==ERROR|SUMMARY|asgd fuzz:|.*runtime error:)' "$log" | cut -c1-100 || true)
    note="${note:-see $log}"
  fi
  printf '%-16s %12s %8s %8s  %s\n' "$t" "${execs:-?}" "$took" "$crashes" "$note" >"$run/row"
  [ "$crashes" -eq 0 ]
}

found=0
running=0
for t in "${targets[@]}"; do
  rm -f "$build/runs/$t/row"
  if [ "$parallel" = 1 ]; then
    fuzz_one "$t" || found=1
    continue
  fi
  if [ "$running" -ge "$parallel" ]; then
    wait -n || found=1
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || found=1
  running=$((running - 1))
done
rows=()
for t in "${targets[@]}"; do
  if [ -f "$build/runs/$t/row" ]; then
    rows+=("$(cat "$build/runs/$t/row")")
  else
    rows+=("$(printf '%-16s %12s %8s %8s  %s' "$t" '?' '?' '?' "no result (see $build/runs/$t/last.log)")")
    found=1
  fi
done

printf '%-16s %12s %8s %8s  %s\n' target executions seconds crashes finding
printf '%s\n' "${rows[@]}"
if [ "$found" = 1 ]; then
  echo "fuzz.sh: findings above; logs and inputs in $build/runs/TARGET/ (docs/fuzzing.md: reproduce, minimise)" >&2
  exit 1
fi
