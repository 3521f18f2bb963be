#!/usr/bin/python3
"""The Python binding's overhead on matrix factorization (issue 41's speed figures).

1. asgd.MatrixFactorization.fit against `asgd mf train` on one ratings file (the generated 10M set by default):
   k 32, 20 epochs, 2 threads, the CLI's defaults otherwise (lr 0.02, L2 0.05, racy hogwild), the whole file
   trained (--test-fraction 0). The CLI's figure is its own "s of SGD"; Python's are its last epoch's seconds
   (the same clock in the library) and the wall time of the fit call, from arrays in memory to the model back,
   which is what a Python user waits for; the CLI's counterpart of the latter is its wall time less the
   "loaded in" seconds it prints (the library's preparation, a shuffle of every rating, the SGD, the model
   written). The file is parsed into arrays before the clock starts: reading a
   text file is not the binding's work. Runs alternate (cli, python, cli, ...), each in a fresh process.
2. recommend for every user of MovieLens 100k at once (N 10, already-rated items filtered), the batched call,
   after a fit on ml-100k: the seconds of the call, median of the repeats.

    PYTHONPATH=build/python bench/peers/mf_python.py [--repeats 3] [--ratings /tmp/asgd-mf-g10m.txt]
        [--asgd build/apps/asgd] [--ml100k ../shared/data/movielens/ml-100k-u.data]
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import time

SETTINGS = dict(factors=32, iterations=20, threads=2, learning_rate=0.02, regularization=0.05, random_state=1)


def read_triples(path):
    """A whitespace-separated ratings file (user item rating ...) as three arrays, ids numbered in order of first
    appearance."""
    import numpy as np
    users, items, values, user_ids, item_ids = [], [], [], {}, {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            users.append(user_ids.setdefault(fields[0], len(user_ids)))
            items.append(item_ids.setdefault(fields[1], len(item_ids)))
            values.append(float(fields[2]))
    return (np.array(users, dtype=np.int64), np.array(items, dtype=np.int64), np.array(values, dtype=np.float32))


def run_cli(asgd, ratings):
    cmd = [asgd, "mf", "train", ratings, "-k", "32", "-t", "20", "-s", "2", "-r", "0.02", "--l2", "0.05",
           "--seed", "1", "--test-fraction", "0", "-q"]
    began = time.monotonic()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall = time.monotonic() - began
    sgd = float(re.search(r"in ([0-9.]+) s of SGD", out).group(1))
    loaded = float(re.search(r"loaded in ([0-9.]+) s", out).group(1))
    return {"sgd_seconds": sgd, "wall_seconds": wall, "after_load_seconds": wall - loaded}


def run_python(ratings):
    import asgd
    triples = read_triples(ratings)
    began = time.monotonic()
    model = asgd.MatrixFactorization(**SETTINGS).fit(triples)
    wall = time.monotonic() - began
    return {"sgd_seconds": model.history_[-1]["seconds"], "wall_seconds": wall,
            "loss": model.history_[-1]["loss"]}


def run_recommend(ml100k, repeats):
    import asgd
    import numpy as np
    import scipy.sparse as sp
    u, i, r = read_triples(ml100k)
    X = sp.csr_matrix((r, (u, i)))
    model = asgd.MatrixFactorization(**SETTINGS).fit(X)
    users = np.arange(X.shape[0])
    seconds = []
    for _ in range(repeats):
        began = time.monotonic()
        ids, _ = model.recommend(users, X[users], N=10)
        seconds.append(time.monotonic() - began)
    assert ids.shape == (X.shape[0], 10)
    return {"users": int(X.shape[0]), "items": int(X.shape[1]), "seconds": seconds}


def in_child(what, *args):
    """Runs this script's `what` in a fresh interpreter; returns its JSON result."""
    out = subprocess.run([sys.executable, __file__, "--child", what, *args], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--ratings", default="/tmp/asgd-mf-g10m.txt")
    p.add_argument("--asgd", default="build/apps/asgd")
    p.add_argument("--ml100k", default="../shared/data/movielens/ml-100k-u.data")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        what, *args = a.child
        result = {"python": lambda: run_python(*args), "recommend": lambda: run_recommend(args[0], int(args[1]))}
        print(json.dumps(result[what]()))
        return
    cli, py = [], []
    for _ in range(a.repeats):
        cli.append(run_cli(a.asgd, a.ratings))
        py.append(in_child("python", a.ratings))
        print(f"cli {cli[-1]}  python {py[-1]}", flush=True)
    med = lambda runs, key: statistics.median(r[key] for r in runs)
    print(f"SGD seconds, median of {a.repeats}: cli {med(cli, 'sgd_seconds'):.2f}  python "
          f"{med(py, 'sgd_seconds'):.2f}  python fit() wall {med(py, 'wall_seconds'):.2f}  "
          f"(fit wall / cli SGD {med(py, 'wall_seconds') / med(cli, 'sgd_seconds'):.3f}x); cli whole command "
          f"{med(cli, 'wall_seconds'):.2f} s, after its file is loaded {med(cli, 'after_load_seconds'):.2f} s "
          f"(fit wall / that {med(py, 'wall_seconds') / med(cli, 'after_load_seconds'):.3f}x)")
    rec = in_child("recommend", a.ml100k, str(a.repeats))
    print(f"recommend N=10 for all {rec['users']} users of ml-100k ({rec['items']} items), filtered: median "
          f"{statistics.median(rec['seconds']):.3f} s of {['%.3f' % s for s in rec['seconds']]}")


if __name__ == "__main__":
    main()
