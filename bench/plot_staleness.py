#!/usr/bin/env python3
"""Plot `asgd bench staleness` results: loss vs epoch and loss vs seconds.

usage: plot_staleness.py RESULTS.csv OUT.png [TITLE]

One panel pair per consistency policy (rows; policy and schedule when the
CSV has a schedule column), one line per (workers, tau) setting: colour =
workers, line style = tau. The y axis is the relative gap to the optimum on
a log scale when the CSV has one (relative_gap), else test RMSE (test_rmse),
else the test error (test_error, log scale: asgd cnn train --csv), else the
loss column.
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def tau_key(t):
    if t == "inf":
        return float("inf")
    try:
        return float(t)
    except ValueError:  # a label such as "blocks": after the numbers
        return 1e300


def group_key(g):
    policy = g.split(" ")[0]
    order = ["racy", "atomic", "locked"]
    return (order.index(policy) if policy in order else len(order), g)


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, out = sys.argv[1], sys.argv[2]
    title = sys.argv[3] if len(sys.argv) > 3 else "convergence vs staleness"
    rows = list(csv.DictReader(open(src)))
    if not rows:
        print(f"{src}: no rows", file=sys.stderr)
        return 1
    metric = next(m for m in ("relative_gap", "test_rmse", "test_error", "loss") if m in rows[0])
    series = defaultdict(list)
    for r in rows:
        group = r["policy"] + (f" {r['schedule']}" if "schedule" in r else "")
        series[(group, int(r["workers"]), r["tau"])].append(
            (int(r["epoch"]), float(r["seconds"]), float(r[metric])))
    policies = sorted({k[0] for k in series}, key=group_key)
    workers = sorted({k[1] for k in series})
    taus = sorted({k[2] for k in series}, key=tau_key)
    colours = plt.get_cmap("viridis")
    colour = {w: colours(i / max(1, len(workers) - 1) * 0.85) for i, w in enumerate(workers)}
    styles = ["-", "--", "-.", ":", (0, (5, 1)), (0, (1, 1))]
    style = {t: styles[i % len(styles)] for i, t in enumerate(taus)}

    fig, axes = plt.subplots(len(policies), 2, figsize=(13, 3.6 * len(policies) + 0.8),
                             squeeze=False, sharey=True)
    for row, policy in enumerate(policies):
        for col, xname in enumerate(["epoch", "seconds"]):
            ax = axes[row][col]
            for (p, w, t), pts in sorted(series.items(), key=lambda kv: (kv[0][1], tau_key(kv[0][2]))):
                if p != policy:
                    continue
                pts.sort()
                xs = [e if xname == "epoch" else s for e, s, _ in pts]
                ys = [max(v, 1e-7) for _, _, v in pts]
                ax.plot(xs, ys, color=colour[w], linestyle=style[t], linewidth=1.6,
                        label=f"{w} worker{'s' if w > 1 else ''}, tau {t}")
            if metric in ("relative_gap", "test_error"):
                ax.set_yscale("log")
            if metric == "relative_gap":
                ax.axhline(1e-3, color="red", linewidth=0.8, alpha=0.6)
            what = {"relative_gap": "gap to optimum", "test_rmse": "test RMSE",
                    "test_error": "test error"}.get(metric, "loss")
            ax.set_title(f"{policy}: {what} vs {xname}", fontsize=11)
            ax.set_xlabel("epoch" if xname == "epoch" else "training seconds (evaluation excluded)")
            if col == 0:
                ax.set_ylabel({"relative_gap": "(f - f*) / f*", "test_rmse": "test RMSE",
                               "test_error": "1 - test accuracy"}.get(metric, metric))
            ax.grid(True, which="both", alpha=0.3)
    handles, labels = [], []
    for ax in axes[:, 0]:  # every row's settings (rows may differ, e.g. schedules)
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=9, frameon=False)
    fig.suptitle(title + ("   (red line: 1e-3 target)" if metric == "relative_gap" else ""), fontsize=13)
    rows_of_legend = (len(labels) + 3) // 4
    fig.tight_layout(rect=(0, 0.022 * rows_of_legend + 0.015, 1, 0.97))
    fig.savefig(out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
