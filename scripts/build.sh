#!/usr/bin/env bash
# Configures and builds asgd in Release (or with a sanitizer).
# usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/args.sh"
asgd_args own "${BASH_SOURCE[0]}" "$@"
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$dir" -j "$jobs"
