"""Shared data for the asgd Python tests: low-rank ratings with known noise, and the asgd command (ASGD_CLI,
set by ctest) for the tests that compare with it."""

import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest


class Ratings:
    """Ratings r = 3.5 + p_u . q_i + noise of a planted rank-`rank` model, every user and item rated, distinct
    (user, item) pairs, ids in order of first appearance (so a file of them gives the CLI the ids 0..n-1 as rows 0..n-1)."""

    def __init__(self, users=400, items=250, count=40000, rank=4, noise=0.3, seed=0):
        rng = np.random.default_rng(seed)
        p = rng.normal(scale=0.7, size=(users, rank))
        q = rng.normal(scale=0.7, size=(items, rank))
        # Every id once first (in a shuffled order), then pairs at random.
        u = np.concatenate([rng.permutation(users), rng.integers(0, users, count - users)])
        i = np.concatenate([rng.permutation(items), rng.integers(0, items, count - items)])
        # Distinct pairs (a scipy matrix sums repeated ones), the first of each kept.
        _, first = np.unique(u * items + i, return_index=True)
        keep = np.sort(first)
        u, i = first_appearance(u[keep]), first_appearance(i[keep])
        count = keep.size
        self.users, self.items, self.noise = u, i, noise
        self.values = (3.5 + np.sum(p[u] * q[i], axis=1) + rng.normal(scale=noise, size=count)).astype(np.float32)
        self.user_count, self.item_count = users, items

    def split(self, test_fraction=0.1, seed=1):
        """(train, test) as (users, items, ratings) tuples; every id keeps a training rating (the first ones)."""
        rng = np.random.default_rng(seed)
        n = self.values.size
        first = max(self.user_count, self.item_count)
        test = np.zeros(n, dtype=bool)
        test[first + rng.permutation(n - first)[: int(test_fraction * n)]] = True
        part = lambda keep: (self.users[keep], self.items[keep], self.values[keep])
        return part(~test), part(test)

    def write(self, path, triples=None):
        """LIBMF text: `user item rating` per line; ratings written exactly (float32 to 9 digits)."""
        u, i, r = triples if triples is not None else (self.users, self.items, self.values)
        with open(path, "w") as f:
            for a, b, c in zip(u, i, r):
                f.write(f"{a} {b} {float(c):.9g}\n")


def first_appearance(ids):
    """`ids` relabelled 0, 1, 2, ... in order of first appearance."""
    _, first = np.unique(ids, return_index=True)
    order = np.argsort(first)
    relabel = np.empty(order.size, dtype=np.int64)
    relabel[np.unique(ids)[order]] = np.arange(order.size)
    return relabel[ids]


@pytest.fixture(scope="session")
def ratings():
    return Ratings()


@pytest.fixture(scope="session")
def cli():
    """Runs the asgd command: cli("mf", "train", ...) -> its stdout; skips without one."""
    path = os.environ.get("ASGD_CLI")
    if not path or not os.path.exists(path):
        pytest.skip("no asgd command (ASGD_CLI; ctest sets it)")

    def run(*args):
        done = subprocess.run([path, *map(str, args)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"asgd {' '.join(map(str, args))}: {done.stderr}"
        return done.stdout

    return run


def assert_other_thread_runs(train, size):
    """Calls train(size) with size times 4 until a call takes over half a second (however fast the machine), a
    Python thread counting meanwhile; asserts the count moved during that call, as it would not if the call held
    the GIL."""
    counts, stop = [], threading.Event()

    def count():
        n = 0
        while not stop.is_set():
            n += 1
            if n % 1000 == 0:
                counts.append(time.monotonic())

    counter = threading.Thread(target=count)
    counter.start()
    time.sleep(0.05)
    try:
        for _ in range(8):
            start = time.monotonic()
            train(size)
            end = time.monotonic()
            if end - start > 0.5:
                break
            size *= 4
    finally:
        stop.set()
        counter.join()
    assert end - start > 0.5, "training too short to tell"
    assert len([t for t in counts if start < t < end]) > 20


def interrupted_after_half_a_second(train):
    """Runs train() with a SIGINT sent 0.5 s in; asserts it ended in KeyboardInterrupt within 5 s."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        train()
        raise AssertionError("training ran to its end: the interrupt was not seen")
    except KeyboardInterrupt:
        pass
    finally:
        timer.cancel()
    elapsed = time.monotonic() - start
    assert 0.5 <= elapsed < 5, elapsed
