#!/usr/bin/python3
"""asgd.Word2Vec against gensim.models.Word2Vec, both driven from Python with corpus_file (issue 41's speed
figure): skip-gram (asgd's default for it: HogBatch; --per-pair adds asgd's per-pair update, gensim's),
vector_size 100, window 5, negative 5, sample 1e-4, min_count 5, alpha 0.025, 2 workers, 5 epochs, on
text8-prefix (gunzipped to a plain file first: gensim's corpus_file reads plain text only), its one line cut
into lines of 1,000 words: the sentences asgd's reader cuts it into (kMaxSentence), and gensim's corpus_file
trains only about 40,000 of the 2.1M words per epoch of a file that is one long line.

Runs alternate (ours, gensim, ours, gensim, ...), each in a fresh interpreter so that neither inherits the
other's memory or threads. words/s is the same measure for both: the corpus's tokens (all of them, gensim's
raw word count) x epochs over the training seconds (gensim's train() call, after build_vocab; asgd's report's
train_seconds, after the corpus is read). Quality: gensim's evaluate_word_analogies (restrict_vocab 30000) on
both models' vectors, ours loaded into gensim's KeyedVectors from the file our save_word2vec_format writes.

    PYTHONPATH=build/python bench/peers/w2v_python.py [--repeats 3] [--data ../shared/data/text]
"""

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SETTINGS = dict(vector_size=100, window=5, negative=5, sample=1e-4, min_count=5, alpha=0.025, workers=2,
                epochs=5, sg=1, hs=0, seed=1)


def run_ours(corpus, vectors, batch=None):
    import asgd
    began = time.monotonic()
    model = asgd.Word2Vec(corpus_file=corpus, batch=batch, **SETTINGS)
    wall = time.monotonic() - began
    model.wv.save_word2vec_format(vectors, binary=True)
    r = model.report
    return {"words": r["corpus_words"] * r["epochs"], "train_seconds": r["train_seconds"], "wall_seconds": wall,
            "vocabulary": r["vocabulary"]}


def run_gensim(corpus, vectors):
    from gensim.models import Word2Vec
    began = time.monotonic()
    model = Word2Vec(**SETTINGS)
    model.build_vocab(corpus_file=corpus)
    start = time.monotonic()
    _, raw = model.train(corpus_file=corpus, total_words=model.corpus_total_words, epochs=SETTINGS["epochs"])
    end = time.monotonic()
    model.wv.save_word2vec_format(vectors, binary=True)
    return {"words": raw, "train_seconds": end - start, "wall_seconds": end - began,
            "vocabulary": len(model.wv)}


def analogies(vectors, questions):
    from gensim.models import KeyedVectors
    kv = KeyedVectors.load_word2vec_format(vectors, binary=True)
    score, _ = kv.evaluate_word_analogies(questions, restrict_vocab=30000)
    return score


def one(tool, corpus, vectors, questions):
    """One run in this interpreter: prints its figures as JSON."""
    if tool == "gensim":
        result = run_gensim(corpus, vectors)
    else:  # asgd's default (HogBatch for these settings), or its per-pair update as gensim's
        result = run_ours(corpus, vectors, batch=0 if tool == "asgd-per-pair" else None)
    result["words_per_second"] = result["words"] / result["train_seconds"]
    result["analogy"] = analogies(vectors, questions)
    result["load_before"] = LOAD_BEFORE
    print(json.dumps(result))


LOAD_BEFORE = os.getloadavg()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "../../../shared/data/text"))
    p.add_argument("--per-pair", action="store_true",
                   help="also run asgd with batch=0 (word2vec.c's and gensim's per-pair update, not HogBatch)")
    p.add_argument("--one", choices=["asgd", "asgd-per-pair", "gensim"], help=argparse.SUPPRESS)
    p.add_argument("--corpus", help=argparse.SUPPRESS)
    p.add_argument("--vectors", help=argparse.SUPPRESS)
    args = p.parse_args()
    questions = os.path.join(args.data, "questions-words.txt")
    if args.one:
        return one(args.one, args.corpus, args.vectors, questions)
    work = tempfile.mkdtemp(prefix="asgd-w2v-python-")
    try:
        corpus = os.path.join(work, "text8-prefix.txt")
        with gzip.open(os.path.join(args.data, "text8-prefix.gz"), "rt") as src, open(corpus, "w") as dst:
            words = src.read().split()
            for at in range(0, len(words), 1000):
                dst.write(" ".join(words[at:at + 1000]) + "\n")
        tools = ("asgd", "asgd-per-pair", "gensim") if args.per_pair else ("asgd", "gensim")
        runs = {tool: [] for tool in tools}
        for rep in range(args.repeats):
            for tool in tools:
                out = subprocess.run([sys.executable, __file__, "--one", tool, "--corpus", corpus, "--vectors",
                                      os.path.join(work, f"{tool}.bin"), "--data", args.data],
                                     check=True, capture_output=True, text=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                runs[tool].append(r)
                print(f"run {rep + 1} {tool}: {r['words_per_second']:,.0f} words/s, train {r['train_seconds']:.2f} s, "
                      f"wall {r['wall_seconds']:.2f} s, analogy {100 * r['analogy']:.2f} %, vocabulary "
                      f"{r['vocabulary']}, words {r['words']}, load {r['load_before'][0]:.2f}", flush=True)
        med = {t: {k: statistics.median(r[k] for r in rs) for k in ("words_per_second", "train_seconds", "analogy")}
               for t, rs in runs.items()}
        for t, m in med.items():
            print(f"median {t}: {m['words_per_second']:,.0f} words/s, train {m['train_seconds']:.2f} s, analogy "
                  f"{100 * m['analogy']:.2f} %")
        for t in tools[:-1]:
            print(f"ratio {t}/gensim words/s: {med[t]['words_per_second'] / med['gensim']['words_per_second']:.2f}"
                  f"; analogy difference: {100 * (med[t]['analogy'] - med['gensim']['analogy']):+.2f} points")
        print(f"load average at end: {os.getloadavg()}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
