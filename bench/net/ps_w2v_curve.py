#!/usr/bin/env python3
"""word2vec's analogy accuracy against seconds, per mode across ranks (2 by default), with and without rank 1
three times slower: the time-to-quality curve of ps_modes.py for w2v.

Each run checkpoints after every epoch (-checkpoint); a watcher copies the checkpoint as soon as it holds a new
epoch, with the seconds since the command started. Afterwards each copy is written out as vectors (a resume of
a finished run: `asgd w2v -resume COPY -iter E -output ...`) and scored on the analogies (asgd w2v-eval). Same
settings as ps_w2v.sh: text8-prefix in lines of 1,000 words, skip-gram, dim 100, window 5, negative 5, sample
1e-4, min-count 5, 5 epochs, 1 thread a rank, rounds every 5 steps. Writes OUT.csv (mode, slow_rank, epoch,
seconds, analogies, ranks, repeat) and OUT.png.

--slow R:F[:N] is the straggler (default 1:3; 0:3:5 slows the ranks in turn, 5 steps each: asgd's
--slow-rank); --slow-only runs one process and the slow runs alone.

--ranks N runs the multi-rank modes on N ranks (default 2); --every S puts S steps of about 10,000 words each
between rounds (default 5); --repeats K runs the multi-rank modes K times, alternating. At the
end it prints per mode the seconds to within 1 point of one process: at the first epoch there, and interpolated
between it and the epoch before.

Usage: /usr/bin/python3 bench/net/ps_w2v_curve.py ASGD DATA_DIR OUT [--only A,B] [--slow 1:3] [--slow-only]
                                                   [--ranks 2] [--every 5] [--repeats 1]
"""
import argparse, csv, gzip, os, re, shutil, statistics, struct, subprocess, sys, tempfile, time

from time_to_target import crossing  # beside this script

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
def modes(every, ranks):
    """(name, ranks: 0 for one process, flags)."""
    k = ["-average-every", str(every)]
    return [
        ("one process", 0, []),
        ("averaging (every epoch)", ranks, []),
        (f"averaging (every {every} steps)", ranks, k),
        ("ps BSP", ranks, ["-distributed", "ps", "-ps-tau", "0"] + k),
        ("ps SSP(4)", ranks, ["-distributed", "ps", "-ps-tau", "4"] + k),
        ("ps ASP", ranks, ["-distributed", "ps", "-ps-tau", "inf"] + k),
    ]


def epoch_of(path):
    """The epoch a checkpoint's header holds (u64 at byte 40, engine/checkpoint.hpp); 0 if unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(40)
            return struct.unpack("<Q", f.read(8))[0]
    except (OSError, struct.error):
        return 0


def corpus(data, path):
    with gzip.open(os.path.join(data, "text8-prefix.gz"), "rt") as f:
        words = f.read().split()
    with open(path, "w") as out:
        for i in range(0, len(words), 1000):
            out.write(" ".join(words[i:i + 1000]) + "\n")


def run(a, work, n, flags):
    """Runs one job; returns [(epoch, seconds, copy path)] of the checkpoints it wrote."""
    ck = os.path.join(work, "run.ckpt")
    for f in os.listdir(work):
        if f.startswith("run.ckpt") or f.startswith("copy."):
            os.remove(os.path.join(work, f))
    cmd = [a.asgd, "w2v", "-train", os.path.join(work, "corpus.txt"), "-cbow", "0", "-size", "100", "-window", "5",
           "-negative", "5", "-sample", "1e-4", "-min-count", "5", "-iter", "5", "-threads", "1", "-binary", "1",
           "-seed", "1", "-checkpoint", ck] + flags
    if n:
        cmd = [a.mpiexec, "--oversubscribe", "-n", str(n)] + cmd
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    seen, copies = 0, []
    while True:
        done = proc.poll() is not None
        e = epoch_of(ck)
        if e > seen:
            t = time.monotonic() - start
            copy = os.path.join(work, f"copy.{e}")
            shutil.copyfile(ck, copy)
            if epoch_of(copy) == e:
                copies.append((e, t, copy))
                seen = e
        if done:
            break
        time.sleep(0.02)
    if proc.returncode != 0:
        sys.exit("failed: " + " ".join(cmd) + "\n" + proc.stderr.read()[-2000:])
    return copies


def accuracy(a, work, copy, epoch):
    vectors = os.path.join(work, "v.bin")
    subprocess.run([a.asgd, "w2v", "-resume", copy, "-iter", str(epoch), "-output", vectors, "-binary", "1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = subprocess.run([a.asgd, "w2v-eval", "--vectors", vectors, "--analogies",
                          os.path.join(a.data, "questions-words.txt")], check=True, capture_output=True, text=True)
    m = re.search(r"^analogies: accuracy ([0-9.]+) %", out.stdout, re.M)
    return float(m.group(1))


def summary(rows, slow_label):
    """Per mode, slow or not: each repeat's seconds to within 1 point of one process, and the medians."""
    alone = [r for r in rows if r[0] == "one process"]
    if not alone:
        return
    target = alone[-1][5] - 1
    print(f"target: analogies {target:.2f} % (one process {alone[-1][5]:.2f} % - 1 point)")
    for mode in dict.fromkeys(r[0] for r in rows):
        for slow in (False, True):
            hits = []
            for rep in sorted({r[2] for r in rows if r[0] == mode and r[1] == slow}):
                pts = [(r[4], r[5]) for r in rows if r[0] == mode and r[1] == slow and r[2] == rep]
                hit = crossing(pts, target, lower_is_better=False)
                hits.append(None if hit is None else (pts[hit[0]][0], hit[1]))
            if not hits:
                continue
            shown = ", ".join("never" if h is None else f"{h[0]:.1f} ({h[1]:.1f})" for h in hits)
            med = ""
            if all(hits):
                med = (f"; median {statistics.median(h[0] for h in hits):.1f} s, "
                       f"interpolated {statistics.median(h[1] for h in hits):.1f} s")
            print(f"{mode:28} {slow_label if slow else '-':8} s to target (interpolated): {shown}{med}")


def plot(rows, path, slow_label, ranks):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    alone = [r for r in rows if r[0] == "one process"]
    for ax, slow in zip(axes, (False, True)):
        if alone:  # the bound: within 1 point of one process
            ax.axhline(alone[-1][5] - 1, color="gray", linestyle="--", linewidth=1, label="one process - 1 point")
        for mode in dict.fromkeys(r[0] for r in rows):
            pts = [(r[4], r[5]) for r in rows
                   if r[0] == mode and r[2] == 0 and (r[1] == slow or mode == "one process")]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=mode)
        ax.set_title(f"--slow-rank {slow_label}" if slow else "no slow rank")
        ax.set_xlabel("seconds since the command started")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("analogy accuracy (%) after each epoch")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"word2vec, text8-prefix, {ranks} ranks: analogies against time by mode")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("asgd")
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--only", default="")
    ap.add_argument("--slow", default="1:3")
    ap.add_argument("--slow-only", action="store_true")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--every", type=int, default=5)
    a = ap.parse_args()
    a.asgd = os.path.realpath(a.asgd)
    only = [p for p in a.only.split(",") if p]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        corpus(a.data, os.path.join(work, "corpus.txt"))
        for slow in (False, True):
            for rep in range(a.repeats):  # a repeat runs every mode, so that repeats alternate
                for name, n, flags in modes(a.every, a.ranks):
                    if (only and not any(p in name for p in only)) or (slow and n == 0):
                        continue
                    if (a.slow_only and not slow and n > 0) or (n == 0 and rep > 0):
                        continue
                    extra = ["-slow-rank", a.slow] if slow else []
                    for epoch, seconds, copy in run(a, work, n, flags + extra):
                        acc = accuracy(a, work, copy, epoch)
                        rows.append((name, slow, rep, epoch, round(seconds, 2), acc))
                        print(f"{name:28} {a.slow if slow else '-':8} {rep} epoch {epoch}  {seconds:6.1f} s  "
                              f"{acc:5.2f} %", flush=True)
    with open(a.out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "slow_rank", "epoch", "seconds", "analogies", "ranks", "repeat"])
        w.writerows((name, a.slow if slow else "", e, s, acc, a.ranks if name != "one process" else 1, rep)
                    for name, slow, rep, e, s, acc in rows)
    summary(rows, a.slow)
    plot(rows, a.out + ".png", a.slow, a.ranks)


if __name__ == "__main__":
    main()
