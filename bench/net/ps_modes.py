#!/usr/bin/env python3
"""Time to quality of the multi-rank modes: averaging and the parameter
server (its default rule, the mean) under BSP, SSP(1, 4, 16) and ASP, each
with and without a slow rank.

usage: ps_modes.py ASGD RATINGS OUT_PREFIX [--ranks 2] [--slow 1:3]
                   [--epochs 20] [--every 100] [--repeats 1] [--mpiexec mpiexec]
                   [--only BSP,SSP(4),...] [--slow-only] [--extra "FLAGS"]

Runs `mpiexec -n RANKS ASGD mf train RATINGS -k 32 -t EPOCHS -s 1
--test-fraction 0.1` once per mode (and once in one process for the
target), stamps each of rank 0's "epoch N: ... test RMSE X" lines with the
seconds since the command started and since training started (the "mpi:"
line, printed once the ratings are loaded: loading takes the same time in
every mode), and writes OUT_PREFIX.csv (mode, slow, repeat, epoch, seconds,
training_seconds, test_rmse), OUT_PREFIX.png (test RMSE against seconds,
one panel without and one with the slow rank) and a table on stdout: per
mode and repeat the seconds to reach the one-process RMSE + 0.005, from the
start and from training's start (also interpolated between the epochs
around the crossing: time_to_target.py), and per mode the medians over repeats.
--only keeps the modes whose names contain one of the given parts;
--slow-only skips the runs without a slow rank; --extra adds flags to every
multi-rank run.
"""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from time_to_target import crossing  # noqa: E402  (beside this script)

EPOCH = re.compile(r"^epoch\s+(\d+): .*test RMSE ([0-9.]+)")
TRAINING = re.compile(r"^(mpi: |mf: .* loaded in )")


def modes(every):
    k = ["--average-every", str(every)]
    return [
        ("averaging (every epoch)", []),
        (f"averaging (every {every} steps)", k),
        ("ps BSP", ["--distributed", "ps", "--ps-tau", "0"] + k),
        ("ps SSP(1)", ["--distributed", "ps", "--ps-tau", "1"] + k),
        ("ps SSP(4)", ["--distributed", "ps", "--ps-tau", "4"] + k),
        ("ps SSP(16)", ["--distributed", "ps", "--ps-tau", "16"] + k),
        ("ps ASP", ["--distributed", "ps", "--ps-tau", "inf"] + k),
    ]


def run(cmd):
    """Rank 0's epoch lines as (epoch, seconds since start, seconds since training started, RMSE), and the
    whole command's seconds."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    rows, lines, training = [], [], None
    for line in proc.stdout:
        lines.append(line)
        now = time.monotonic() - start
        if training is None and TRAINING.match(line):
            training = now
        m = EPOCH.match(line)
        if m:
            rows.append((int(m.group(1)), now, now - (training or 0), float(m.group(2))))
    if proc.wait() != 0:
        sys.exit("failed: " + " ".join(cmd) + "\n" + "".join(lines[-20:]))
    return rows, time.monotonic() - start


def slow_title(slow):
    """--slow-rank's R:F or R:F:N in words."""
    p = slow.split(":")
    if len(p) == 3:
        return f"ranks {p[1]}x slower in turn, {p[2]} steps each from rank {p[0]}"
    return f"rank {p[0]} {p[1]}x slower"


def to_target(rows, target):
    """The first epoch at or under the target: (seconds, training seconds, training seconds interpolated between
    it and the epoch before: time_to_target.crossing), or None."""
    hit = crossing([(t, r) for _, _, t, r in rows], target, lower_is_better=True)
    return None if hit is None else (rows[hit[0]][1], rows[hit[0]][2], hit[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("asgd")
    ap.add_argument("ratings")
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--slow", default="1:3")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--only", default="")
    ap.add_argument("--slow-only", action="store_true")
    ap.add_argument("--extra", default="")
    a = ap.parse_args()
    only = [p for p in a.only.split(",") if p]
    train = [a.asgd, "mf", "train", a.ratings, "-k", "32", "-t", str(a.epochs), "-s", "1", "--test-fraction", "0.1"]
    alone, alone_s = run(train)
    target = alone[-1][3] + 0.005
    print(f"one process: RMSE {alone[-1][3]:.4f} in {alone_s:.1f} s; target RMSE {target:.4f}", flush=True)
    results = []
    for slow in ([["--slow-rank", a.slow]] if a.slow_only else [[], ["--slow-rank", a.slow]]):
        for rep in range(a.repeats):  # a repeat runs every mode, so that repeats alternate
            for name, flags in modes(a.every):
                if only and not any(p in name for p in only):
                    continue
                rows, total = run([a.mpiexec, "--oversubscribe", "-n", str(a.ranks)] + train + flags + slow +
                                  a.extra.split())
                results.append((name, bool(slow), rep, rows, total))
    with open(a.out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "slow_rank", "repeat", "epoch", "seconds", "training_seconds", "test_rmse"])
        for name, slow, rep, rows, _ in results:
            for e, s, t, r in rows:
                w.writerow([name, a.slow if slow else "", rep, e, f"{s:.3f}", f"{t:.3f}", f"{r:.4f}"])
    print(f"{'mode':34} {'slow rank':>9} {'rep':>3} {'s to target':>11} {'training s':>10} {'interpolated':>12} {'final RMSE':>10} "
          f"{'whole s':>8}")
    hits = {}
    for name, slow, rep, rows, total in results:
        hit = to_target(rows, target)
        hits.setdefault((name, slow), []).append(hit)
        print(f"{name:34} {(a.slow if slow else '-'):>9} {rep:>3} {('%.1f' % hit[0]) if hit else 'never':>11} "
              f"{('%.2f' % hit[1]) if hit else 'never':>10} {('%.2f' % hit[2]) if hit else 'never':>12} "
              f"{rows[-1][3]:>10.4f} {total:>8.1f}")
    print("medians over repeats (runs that never reached the target count as never):")
    for (name, slow), hs in hits.items():
        if all(hs):
            print(f"{name:34} {(a.slow if slow else '-'):>9} to target {statistics.median(h[0] for h in hs):6.1f} s, "
                  f"training {statistics.median(h[1] for h in hs):6.2f} s, "
                  f"interpolated {statistics.median(h[2] for h in hs):6.2f} s")
        else:
            print(f"{name:34} {(a.slow if slow else '-'):>9} {sum(not h for h in hs)} of {len(hs)} never")
    panels = (True,) if a.slow_only else (False, True)
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), sharey=True, squeeze=False)
    axes = axes[0]
    for ax, slow in zip(axes, panels):
        for name, s, rep, rows, _ in results:
            if s == slow and rep == 0:
                ax.plot([x[1] for x in rows], [x[3] for x in rows], marker=".", label=name)
        ax.axhline(target, color="grey", linestyle=":", label=f"target {target:.4f}")
        ax.set_title(f"{a.ranks} ranks" + (", " + slow_title(a.slow) if slow else ""))
        ax.set_xlabel("seconds since the command started")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test RMSE (rank 0)")
    axes[0].set_ylim(top=min(max(r for res in results for _, _, _, r in res[3]), target + 0.1))
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out + ".png", dpi=110)


if __name__ == "__main__":
    main()
