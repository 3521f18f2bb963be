#!/bin/bash
# On the lent GPU machine (the `device` tool), after bench/gpu/pack.sh here:
#   run  command "bash bench/gpu/device.sh [STAGE...]"  carry [".device"]  timeout_s 600
# Unpacks the carried Debian packages under /opt/asgd-deps (once per
# machine), builds against them and runs bench/gpu/run.sh on the carried
# MNIST with the given stages (default: all of them; see run.sh). The tool
# brings back at most 8 files from $OUT, so the results come back as
# $OUT/gpu-results.tgz (run.sh's OUT, tarred even when a stage fails) and the
# table as $OUT/summary.txt. A command has at most 10 minutes and the machine
# stays warm 30 s after it, keeping the build: split a long session, e.g.
#   bash bench/gpu/device.sh tests speed table
#   bash bench/gpu/device.sh accuracy tau table
#   bash bench/gpu/device.sh sanitize table
# and unpack each tarball into one folder here for STAGES=table OUT=... run.sh.
# Variables: as run.sh's (EPOCHS, ACC_EPOCHS, ..., EMULATE); DEPS [/opt/asgd-deps],
#            RESULTS [<repo>/bench/results/gpu: run.sh's OUT], TIME_LIMIT [540 s: then run.sh and all it
#            started are stopped, and what they wrote is tarred].
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/args.sh"
asgd_args own "${BASH_SOURCE[0]}" "$@"
root="$(cd "$(dirname "$0")/../.." && pwd)"
pack="$root/.device"; DEPS="${DEPS:-/opt/asgd-deps}"
dest="${OUT:?device.sh: OUT (the folder the device tool brings back) is not set}"
[[ -d "$pack/debs" && -d "$pack/mnist" ]] ||
  { echo "device.sh: no $pack/debs or $pack/mnist: run bench/gpu/pack.sh first and carry .device" >&2; exit 2; }

unpack() {  # a .deb into $DEPS; without dpkg-deb: an ar archive holding data.tar.{xz,zst,gz}
  if command -v dpkg-deb > /dev/null; then
    dpkg-deb -x "$1" "$DEPS"
  else
    local member
    member=$(ar t "$1" | grep '^data\.tar') && ar p "$1" "$member" > "/tmp/$member" &&
      tar -xf "/tmp/$member" -C "$DEPS" && rm -f "/tmp/$member"
  fi
}
if [[ ! -f "$DEPS/.unpacked" ]]; then
  rm -rf "$DEPS"; mkdir -p "$DEPS"
  for deb in "$pack"/debs/*.deb; do
    unpack "$deb" || { echo "device.sh: could not unpack $deb" >&2; rm -rf "$DEPS"; exit 1; }
  done
  # zlib1g-dev's libz.so points at Debian 12's libz.so.1.2.13: point it at this machine's libz.so.1, or leave
  # the static libz.a to the linker.
  lib="$DEPS/usr/lib/x86_64-linux-gnu"
  rm -f "$lib/libz.so"
  for z in /lib/x86_64-linux-gnu/libz.so.1 /usr/lib/x86_64-linux-gnu/libz.so.1; do
    [[ -e "$z" ]] && { ln -s "$z" "$lib/libz.so"; break; }
  done
  touch "$DEPS/.unpacked"
fi
export CMAKE_PREFIX_PATH="$DEPS/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# A CMake 4 refuses the old policy versions some packages' config files name.
export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_POLICY_VERSION_MINIMUM=3.5"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
# What this machine brings (the build needs CMake >= 3.25; the carried Debian 12 libraries need glibc >= 2.34):
# said first, so that a machine that cannot build is seen at once.
{
  echo "cmake: $(cmake --version 2> /dev/null | head -n 1 || echo missing)"
  echo "c++: $(c++ --version 2> /dev/null | head -n 1 || echo missing)"
  echo "nvcc: $( (nvcc --version 2> /dev/null || /usr/local/cuda/bin/nvcc --version 2> /dev/null) | tail -n 1)"
  echo "glibc: $(ldd --version 2> /dev/null | head -n 1)"
  echo "compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null || echo missing)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__, "cuda", torch.cuda.is_available())' 2> /dev/null || echo missing)"
} | tee "$dest/machine.txt"

# run.sh in its own process group (job control), stopped with all it started once TIME_LIMIT seconds have
# passed, so that the results are tarred before the tool's own limit (600 s a command) cuts the call off.
results="${RESULTS:-$root/bench/results/gpu}"
stages="${*:-tests speed accuracy tau sanitize table}"
set -m
STAGES="$stages" DATA="$pack/mnist" OUT="$results" bash "$root/bench/gpu/run.sh" > "$dest/summary.txt" &
job=$!
( sleep "${TIME_LIMIT:-540}"; echo "device.sh: stopped at TIME_LIMIT ${TIME_LIMIT:-540} s" >&2
  kill -TERM -- "-$job" 2> /dev/null ) &
watchdog=$!
wait "$job"; status=$?
kill -TERM -- "-$watchdog" 2> /dev/null
# A stopped asgd finishes its step and writes its CSV row before it exits: wait for the whole group (at most
# 20 s more), so that nothing runs on after the results are tarred.
for _ in $(seq 20); do kill -0 -- "-$job" 2> /dev/null || break; sleep 1; done
kill -KILL -- "-$job" 2> /dev/null
set +m
mkdir -p "$results"
# Stopped before its table: the table of what the stages left.
if [[ $status != 0 && " $stages " == *" table "* ]]; then
  STAGES=table OUT="$results" bash "$root/bench/gpu/run.sh" >> "$dest/summary.txt"
fi
tar -czf "$dest/gpu-results.tgz" -C "$results" .
cat "$dest/summary.txt"
echo "device.sh: stages '$stages' exit $status; results in gpu-results.tgz ($(du -h "$dest/gpu-results.tgz" | cut -f1))"
exit "$status"
