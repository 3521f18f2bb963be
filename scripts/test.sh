#!/usr/bin/env bash
# One command: install what is missing, build in Release with the tests, and
# run the whole test suite. `--tsan` instead builds the engine tests, the
# threaded net/ tests (ranks as threads, the averaging and parameter server threads), the GPU
# tests on the emulated backend (asynchronous streams: a missing event wait
# is a race) and the dense layer tests (without -march=native: the direct
# kernels' narrower vectors) with ThreadSanitizer in build-tsan and runs
# those (CI does both). `--asan` builds everything with AddressSanitizer
# and UndefinedBehaviorSanitizer in build-asan and runs the whole suite
# (not in CI: about 17 minutes of build and 4 of tests on 2 cores; run it before a release
# or after a change to memory handling). `--clang` builds everything with clang (-Werror) in build-clang
# and runs the engine, sparse and dense tests there (CI does that too).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/args.sh"
asgd_args own "${BASH_SOURCE[0]}" "$@"
cd "$(dirname "$0")/.."
case "${1:-}" in
  "" | --tsan | --asan | --clang) ;;
  *) echo "test.sh: unknown argument '$1' (see -h)" >&2; exit 2 ;;
esac
bash scripts/install-deps.sh --tests
if [ "${1:-}" = "--clang" ]; then bash scripts/install-deps.sh --clang; fi
jobs=$(nproc 2>/dev/null || echo 2)
if [ "${1:-}" = "--asan" ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DASGD_SANITIZE=address,undefined \
        -DASGD_DENSE_NATIVE=OFF -DASGD_BUILD_TESTS=ON -DASGD_BUILD_BENCH=OFF
  cmake --build build-asan -j "$jobs"
  # protect_shadow_gap=0: the CUDA runtime maps memory where ASan's shadow
  # gap would be (on a machine with a GPU; harmless elsewhere).
  export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:protect_shadow_gap=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp"
  ctest --test-dir build-asan --output-on-failure -j "$jobs"
elif [ "${1:-}" = "--clang" ]; then
  # Our conventions: clang 14 builds it warning-free too (-Werror); then the engine, sparse and dense tests run on
  # its code (its ifunc resolvers and kernels), the rest having run on GCC's.
  CC=clang CXX=clang++ cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=Release -DASGD_BUILD_TESTS=ON \
        -DASGD_BUILD_BENCH=ON -DASGD_WERROR=ON
  cmake --build build-clang -j "$jobs"
  ctest --test-dir build-clang -L 'engine|sparse|dense' -LE slow --output-on-failure -j "$jobs"
elif [ "${1:-}" = "--tsan" ]; then
  # dense/ without -march=native: GCC 12 warns falsely (-Werror) inside its
  # AVX-512 intrinsics at this optimisation level, and speed is not the point.
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DASGD_SANITIZE=thread -DASGD_DENSE_NATIVE=OFF \
        -DASGD_BUILD_APPS=OFF -DASGD_BUILD_BENCH=OFF -DASGD_WERROR=ON
  # test_gpu brings the emulated backend with it when CUDA's headers are found,
  # and then the emulator's own tests (its streams are threads) exist too.
  # test_layers runs dense/'s direct kernels at this build's narrower vectors.
  targets=(test_engine test_allreduce test_averaging test_multi_rank test_parameter_server test_gpu test_layers)
  # (The list is read whole: `grep -q` would stop early and fail make's pipe.)
  available=$(cmake --build build-tsan --target help)
  if grep -qw test_gpu_emulator <<< "$available"; then targets+=(test_gpu_emulator); fi
  cmake --build build-tsan -j "$jobs" --target "${targets[@]}"
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"
  # The CPU side of the GPU tests runs Eigen GEMMs, whose OpenMP threads
  # ThreadSanitizer cannot follow: one thread there.
  export OMP_NUM_THREADS=1
  ctest --test-dir build-tsan -L 'engine|threads|emulated|dense' --output-on-failure -j "$jobs"
else
  bash scripts/build.sh build -DASGD_BUILD_TESTS=ON -DASGD_BUILD_BENCH=ON -DASGD_WERROR=ON
  ctest --test-dir build --output-on-failure -j "$jobs"
fi
