"""A recommender pipeline with asgd, end to end: MovieLens u.data ratings -> scipy.sparse -> fit -> RMSE and
NDCG@10 on held-out ratings -> recommend -> save -> reload -> serve the factors live from another process while
it trains.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/recommender.py                # generated ratings
    PYTHONPATH=build/python /usr/bin/python3 examples/python/recommender.py --ratings u.data  # MovieLens 100K

Without --ratings, `asgd mf generate` (the CLI, --asgd) draws ratings from a planted low-rank model with known
noise (the best RMSE any model can reach) into a temporary folder, written there as u.data.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse

import asgd

HERE = os.path.dirname(os.path.abspath(__file__))


def asgd_command(given):
    """The asgd command: --asgd, else $ASGD_CLI, else asgd on PATH, else this checkout's build."""
    for path in (given, os.environ.get("ASGD_CLI"), shutil.which("asgd"),
                 os.path.join(HERE, "..", "..", "build", "apps", "asgd")):
        if path and os.path.exists(path):
            return path
    sys.exit("recommender.py: no asgd command: give --asgd PATH or --ratings FILE")


def generate_udata(args, folder):
    """Ratings of `asgd mf generate` (LIBMF text: u<k> i<k> rating) rewritten as MovieLens u.data (user, item,
    rating, timestamp, tab-separated, integer ids), as a download would give them. Returns the path."""
    libmf = os.path.join(folder, "generated.txt")
    subprocess.run([asgd_command(args.asgd), "mf", "generate", libmf, "--users", str(args.users), "--items",
                    str(args.items), "--ratings", str(args.count), "--noise", str(args.noise), "--seed",
                    str(args.seed)], check=True, stdout=subprocess.DEVNULL)
    udata = os.path.join(folder, "u.data")
    with open(libmf) as src, open(udata, "w") as out:
        for t, line in enumerate(src):
            user, item, rating = line.split()
            out.write(f"{user[1:]}\t{item[1:]}\t{rating}\t{881250949 + t}\n")
    return udata


def read_udata(path):
    """(users, items, ratings, user_ids, item_ids) of a u.data file: rows 0..n-1 for the ids in sorted order."""
    data = np.loadtxt(path, delimiter="\t", dtype=np.float64, ndmin=2)
    user_ids, users = np.unique(data[:, 0].astype(np.int64), return_inverse=True)
    item_ids, items = np.unique(data[:, 1].astype(np.int64), return_inverse=True)
    return users, items, data[:, 2].astype(np.float32), user_ids, item_ids


def split(users, items, ratings, shape, test_fraction, seed):
    """(train, test) as user x item CSR matrices, test_fraction of the ratings held out at random."""
    test = np.random.default_rng(seed).random(ratings.size) < test_fraction
    part = lambda keep: scipy.sparse.csr_matrix((ratings[keep], (users[keep], items[keep])), shape=shape)
    return part(~test), part(test)


def serve_while_training(args, X, folder):
    """Trains in a child process into a shared segment (fit(X, shm=...)) and serves recommend from the live
    factors here (asgd.attach) until it ends."""
    name = f"asgd-example-{os.getpid()}"
    model_file = os.path.join(folder, "live.model")
    matrix = os.path.join(folder, "train.npz")
    scipy.sparse.save_npz(matrix, X)
    trainer = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--train-live", name, model_file, matrix,
                                "--factors", str(args.factors), "--iterations", str(args.live_iterations),
                                "--threads", str(args.threads), "--seed", str(args.seed)])
    try:
        while not os.path.exists(model_file):  # written as training begins: ids and scale for the server
            if trainer.poll() is not None:
                sys.exit(f"the trainer ended ({trainer.returncode}) before it began training")
            time.sleep(0.01)
        live = asgd.attach(name, model_file)
        reads = []
        while True:  # once more after the trainer ended: the segment stays until removed
            ended = trainer.poll() is not None
            ids, _ = live.recommend(0, N=5)
            reads.append((ids.tolist(), float(np.abs(live.item_factors).sum())))
            if ended:
                break
            time.sleep(0.05)
        if trainer.wait() != 0:
            sys.exit(f"the trainer failed ({trainer.returncode})")
        changed = len({factors for _, factors in reads})
        print(f"live: {len(reads)} reads of user 0's top 5 while another process trained; the item factors "
              f"were seen in {changed} different states; last list {reads[-1][0]}")
        live.remove_segment()
    finally:
        if trainer.poll() is None:
            trainer.kill()
            trainer.wait()


def train_live(args):
    """The child of serve_while_training: fits the saved matrix into the shared segment."""
    name, model_file, matrix = args.train_live
    model = asgd.MatrixFactorization(factors=args.factors, iterations=args.iterations, threads=args.threads,
                                     random_state=args.seed)
    model.fit(scipy.sparse.load_npz(matrix), shm=name, model_file=model_file)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ratings", help="a MovieLens u.data file (default: generated)")
    p.add_argument("--asgd", help="the asgd command, to generate ratings")
    p.add_argument("--users", type=int, default=2000)
    p.add_argument("--items", type=int, default=1000)
    p.add_argument("--count", type=int, default=100000, help="generated ratings")
    p.add_argument("--noise", type=float, default=0.5, help="of the generated ratings (the best RMSE)")
    p.add_argument("--factors", type=int, default=32)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--live-iterations", type=int, default=200, help="epochs of the live-served fit")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--verbose", action="store_true", help="progress lines while fitting")
    p.add_argument("--train-live", nargs=3, metavar=("SHM", "MODEL_FILE", "MATRIX"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.train_live:
        return train_live(args)

    with tempfile.TemporaryDirectory(prefix="asgd-recommender-") as folder:
        path = args.ratings or generate_udata(args, folder)
        users, items, ratings, user_ids, item_ids = read_udata(path)
        shape = (user_ids.size, item_ids.size)
        train, test = split(users, items, ratings, shape, 0.1, args.seed)
        print(f"{os.path.basename(path)}: {ratings.size} ratings, {shape[0]} users, {shape[1]} items; "
              f"{train.nnz} to train, {test.nnz} held out")

        model = asgd.MatrixFactorization(factors=args.factors, iterations=args.iterations, regularization=0.05,
                                         threads=args.threads, random_state=args.seed, verbose=args.verbose)
        model.fit(train, validation=test)
        r = model.report_
        print(f"fit: {len(r.losses)} epochs, {r.examples_per_second:.3g} updates/s, staleness mean "
              f"{r.mean_staleness:.2f} max {r.max_staleness}")
        # What the model is worth against predicting the training mean for every rating.
        mean_rmse = float(np.sqrt(np.mean((test.data - train.data.mean()) ** 2)))
        print(f"RMSE on held-out ratings: {asgd.rmse(model, test):.4f} (train {asgd.rmse(model, train):.4f}, "
              f"predicting the mean {mean_rmse:.4f}" + (f", noise floor {args.noise})" if not args.ratings else ")"))
        # Ranking: the held-out ratings of 4 and up are what each user should find in their top 10.
        liked = test.multiply(test >= 4).tocsr()
        liked.eliminate_zeros()
        m = asgd.ranking_metrics_at_k(model, train, liked, K=10)
        print(f"NDCG@10 {m['ndcg']:.4f}, precision@10 {m['precision']:.4f}, MAP@10 {m['map']:.4f} over "
              f"{m['users']} users")

        ids, scores = model.recommend(0, train[0], N=5)
        print(f"user {user_ids[0]}: top 5 items " + ", ".join(f"{item_ids[i]} ({s:.2f})" for i, s in zip(ids, scores)))

        saved = os.path.join(folder, "model.mf")
        model.save(saved)  # the file `asgd mf train` writes: `asgd mf recommend` reads it too
        again = asgd.load(saved)
        same = np.array_equal(again.recommend(0, train[0], N=5)[0], ids)
        print(f"saved and reloaded ({os.path.getsize(saved)} bytes): same top 5: {same}")
        if not same:
            sys.exit("the reloaded model recommends otherwise")

        serve_while_training(args, train, folder)


if __name__ == "__main__":
    main()
