#!/usr/bin/env bash
# One command: install what is missing, build in Release, run the main job on
# built-in data (Hogwild! logistic regression on a generated sparse set,
# checked against the L-BFGS optimum).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh build -DASGD_BUILD_TESTS=OFF -DASGD_BUILD_BENCH=OFF
exec build/apps/asgd demo "$@"
