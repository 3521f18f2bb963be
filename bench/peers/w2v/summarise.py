#!/usr/bin/env python3
"""Summarise bench/peers/w2v/run.sh's per-run CSV: medians per (corpus, mode, epochs, tool) and
ratios of each asgd variant against fastText on the same configuration (standard library only)."""

import argparse
import csv
import statistics
import sys

REFERENCE = "fasttext"
TOOL_ORDER = {"asgd": 0, "asgd-hogbatch": 1, "fasttext": 2}
CORPUS_ORDER = {"text8": 0, "brown": 1}
MODE_ORDER = {"sg": 0, "cbow": 1}


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(rows):
    groups = {}
    for r in rows:
        groups.setdefault((r["corpus"], r["mode"], int(r["epochs"]), r["tool"]), []).append(r)
    out = {}
    for key, runs in groups.items():
        ok = [r for r in runs if r["rc"] == "0" and number(r["wall_s"])]
        epochs = key[2]
        wps, wall, cpu, rss = [], [], [], []
        for r in ok:
            w = number(r["wall_s"])
            wall.append(w)
            wps.append(number(r["train_words"]) * epochs / w)
            cpu.append(number(r["user_s"]) + number(r["sys_s"]))
            rss.append(number(r["rss_kb"]) / 1024.0)
        vocab = sorted({r["vocab"] for r in ok})
        out[key] = {
            "runs": len(runs),
            "ok": len(ok),
            "train_words": runs[0]["train_words"],
            "vocab": "/".join(vocab) if vocab else "NA",
            "words_per_s": median(wps),
            "wall_s": median(wall),
            "cpu_s": median(cpu),
            "cores": median([c / w for c, w in zip(cpu, wall)]),
            "rss_mb": median(rss),
            "analogy_pct": median([number(r["analogy_pct"]) for r in ok]),
            "analogy_seen": ok[0]["analogy_seen"] if ok else "NA",
            "ws_rho": median([number(r["ws_rho"]) for r in ok]),
        }
    return out


def fmt(value, spec, na="n/a"):
    return na if value is None else format(value, spec)


def ratio(a, b):
    return a / b if a is not None and b else None


def diff(a, b):
    return a - b if a is not None and b is not None else None


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("raw", help="w2v_peers_raw.csv written by run.sh")
    p.add_argument("--meta", help="text file with date, host and settings, copied above the table")
    p.add_argument("--md", help="write the markdown table here too")
    p.add_argument("--csv", help="write the medians and ratios as CSV here")
    a = p.parse_args()

    with open(a.raw, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"summarise.py: {a.raw} has no runs")
    s = summarise(rows)
    keys = sorted(s, key=lambda k: (CORPUS_ORDER.get(k[0], 9), k[0], MODE_ORDER.get(k[1], 9), k[2],
                                     TOOL_ORDER.get(k[3], 9), k[3]))

    header = ["corpus", "mode", "epochs", "tool", "words/s (median)", "wall s", "CPU s", "peak RSS MB",
              "analogy %", "WS-353 rho", "words/s ours/theirs", "RSS ours/theirs", "analogy Δ pts", "rho Δ"]
    csv_header = ["corpus", "mode", "epochs", "tool", "runs_ok", "runs", "train_words_per_epoch", "vocab",
                  "words_per_s", "wall_s", "cpu_s", "cores_used", "peak_rss_mb", "analogy_pct", "analogy_seen",
                  "ws353_rho", "wps_ratio_vs_fasttext", "rss_ratio_vs_fasttext", "analogy_diff_pts",
                  "rho_diff"]
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    csv_rows = []
    notes = []
    for k in keys:
        v = s[k]
        ref = s.get((k[0], k[1], k[2], REFERENCE))
        is_ref = k[3] == REFERENCE
        wps_r = rss_r = acc_d = rho_d = None
        if ref and not is_ref:
            wps_r = ratio(v["words_per_s"], ref["words_per_s"])
            rss_r = ratio(v["rss_mb"], ref["rss_mb"])
            acc_d = diff(v["analogy_pct"], ref["analogy_pct"])
            rho_d = diff(v["ws_rho"], ref["ws_rho"])
        if v["ok"] < v["runs"]:
            notes.append(f"{'/'.join(map(str, k))}: {v['runs'] - v['ok']} of {v['runs']} runs failed")
        tool = k[3] + (f" ({v['ok']}/{v['runs']} ok)" if v["ok"] < v["runs"] else "")
        md.append("| " + " | ".join([
            k[0], k[1], str(k[2]), tool,
            fmt(v["words_per_s"], ",.0f"), fmt(v["wall_s"], ".2f"), fmt(v["cpu_s"], ".2f"),
            fmt(v["rss_mb"], ".0f"), fmt(v["analogy_pct"], ".2f"), fmt(v["ws_rho"], ".3f"),
            "—" if is_ref else fmt(wps_r, ".2f") + "x",
            "—" if is_ref else fmt(rss_r, ".2f") + "x",
            "—" if is_ref else fmt(acc_d, "+.2f"),
            "—" if is_ref else fmt(rho_d, "+.3f"),
        ]) + " |")
        csv_rows.append([
            k[0], k[1], k[2], k[3], v["ok"], v["runs"], v["train_words"], v["vocab"],
            fmt(v["words_per_s"], ".0f", ""), fmt(v["wall_s"], ".3f", ""), fmt(v["cpu_s"], ".3f", ""),
            fmt(v["cores"], ".2f", ""), fmt(v["rss_mb"], ".1f", ""), fmt(v["analogy_pct"], ".2f", ""),
            v["analogy_seen"], fmt(v["ws_rho"], ".4f", ""), fmt(wps_r, ".3f", ""), fmt(rss_r, ".3f", ""),
            fmt(acc_d, ".2f", ""), fmt(rho_d, ".4f", ""),
        ])

    vocabs = {}
    for k in keys:
        vocabs.setdefault(k[0], {})[k[3]] = s[k]["vocab"]
    vocab_line = "; ".join(f"{c}: " + ", ".join(f"{t} {v}" for t, v in sorted(tv.items())) for c, tv in vocabs.items())

    text = []
    if a.meta:
        with open(a.meta) as f:
            text += ["```", f.read().rstrip("\n"), "```", ""]
    text += md
    text += ["", "words/s = in-vocabulary training tokens (count >= min-count, counted once per corpus with awk) "
             "x epochs / wall time of the whole training command (reading, training and writing vectors); "
             "medians over the repeats; ratios are ours/theirs against fastText on the same row group; "
             "analogy: asgd w2v-eval, 30k restriction; Δ = ours − theirs.",
             f"vocabulary sizes (fastText counts its </s> line marker as a word): {vocab_line}"]
    text += [f"note: {n}" for n in notes]
    report = "\n".join(text) + "\n"
    print(report, end="")
    if a.md:
        with open(a.md, "w") as f:
            f.write(report)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(csv_header)
            w.writerows(csv_rows)


if __name__ == "__main__":
    main()
