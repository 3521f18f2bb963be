#!/usr/bin/python3
"""asgd.SGDClassifier against sklearn.linear_model.SGDClassifier, both fitted from Python on the same sparse set
(issue 41's linear figure): the same loss, alpha, epochs (sklearn: max_iter with tol=None, so it runs them all)
and intercept; each with its own default rate (ours: `asgd linear train`'s, eta0 0.5 for log_loss and 0.1 for the
hinges decaying linearly; sklearn's: "optimal"). Data: `asgd linear generate` (a planted logistic model, labels
drawn from it), read once with sklearn's load_svmlight_file and kept as .npz for the runs.

Runs alternate (asgd 1 thread, asgd 2 threads, sklearn, ...), each in a fresh interpreter. Time: the fit() call's
wall seconds (ours includes the CSR copy into the library and its scoring of the training set). Quality: accuracy
on the test set and the training objective mean loss + alpha/2 ||coef||^2 (the intercept left out: sklearn
leaves it unregularised, we regularise it as one more weight), both computed here alike.

    PYTHONPATH=build/python bench/peers/linear_python.py --cli build/apps/asgd [--repeats 3] [--loss log_loss]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def loss_of(name, margins):
    if name == "log_loss":
        return np.logaddexp(0.0, -margins)
    gap = np.maximum(0.0, 1.0 - margins)
    return gap if name == "hinge" else gap * gap


def one(tool, work, loss, alpha, epochs):
    """One fit in this interpreter: prints its figures as JSON."""
    import scipy.sparse
    X = scipy.sparse.load_npz(os.path.join(work, "train.npz"))
    Xt = scipy.sparse.load_npz(os.path.join(work, "test.npz"))
    y, yt = np.load(os.path.join(work, "train_y.npy")), np.load(os.path.join(work, "test_y.npy"))
    if tool.startswith("asgd"):
        import asgd
        clf = asgd.SGDClassifier(loss=loss, alpha=alpha, epochs=epochs, n_jobs=int(tool[-1]), random_state=1)
    else:
        from sklearn.linear_model import SGDClassifier
        clf = SGDClassifier(loss=loss, alpha=alpha, max_iter=epochs, tol=None, random_state=1)
    start = time.monotonic()
    clf.fit(X, y)
    seconds = time.monotonic() - start
    w = np.asarray(clf.coef_[0], dtype=np.float64)
    margins = y * (X @ w + float(clf.intercept_[0]))
    objective = float(loss_of(loss, margins).mean() + 0.5 * alpha * w @ w)
    print(json.dumps({"seconds": seconds, "test_accuracy": float(clf.score(Xt, yt)), "objective": objective,
                      "load_before": os.getloadavg()[0]}))


def prepare(cli, work, examples, features, nnz):
    from sklearn.datasets import load_svmlight_file
    import scipy.sparse
    train, test = os.path.join(work, "train.svm"), os.path.join(work, "test.svm")
    subprocess.run([cli, "linear", "generate", "--out", train, "--examples", str(examples), "--features",
                    str(features), "--nnz", str(nnz), "--seed", "3", "--test-examples", str(examples // 10),
                    "--test-out", test], check=True, capture_output=True)
    for name, path in (("train", train), ("test", test)):
        X, y = load_svmlight_file(path, n_features=features, zero_based=True, dtype=np.float32)
        scipy.sparse.save_npz(os.path.join(work, f"{name}.npz"), X.tocsr())
        np.save(os.path.join(work, f"{name}_y.npy"), y)
        os.unlink(path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cli", required=True, help="the asgd command (generates the data)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--loss", default="log_loss", choices=["log_loss", "hinge", "squared_hinge"])
    p.add_argument("--alpha", type=float, default=1e-5)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--examples", type=int, default=1000000)
    p.add_argument("--features", type=int, default=100000)
    p.add_argument("--nnz", type=int, default=20)
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        return one(args.one, args.work, args.loss, args.alpha, args.epochs)
    work = tempfile.mkdtemp(prefix="asgd-linear-python-")
    try:
        prepare(args.cli, work, args.examples, args.features, args.nnz)
        tools = ("asgd-1", "asgd-2", "sklearn")
        runs = {t: [] for t in tools}
        for rep in range(args.repeats):
            for tool in tools:
                out = subprocess.run([sys.executable, __file__, "--cli", args.cli, "--one", tool, "--work", work,
                                      "--loss", args.loss, "--alpha", str(args.alpha), "--epochs", str(args.epochs)],
                                     check=True, capture_output=True, text=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                runs[tool].append(r)
                print(f"run {rep + 1} {tool}: fit {r['seconds']:.2f} s, test accuracy {r['test_accuracy']:.4f}, "
                      f"objective {r['objective']:.5f}, load {r['load_before']:.2f}", flush=True)
        med = {t: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "test_accuracy", "objective")}
               for t, rs in runs.items()}
        for t, m in med.items():
            print(f"median {t}: fit {m['seconds']:.2f} s, test accuracy {m['test_accuracy']:.4f}, objective "
                  f"{m['objective']:.5f}, fit time / sklearn's {m['seconds'] / med['sklearn']['seconds']:.3f}")
        print(f"load average at end: {os.getloadavg()}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
