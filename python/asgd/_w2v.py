"""Word2Vec and KeyedVectors with gensim's call shapes, on the library's w2v::train_word2vec (training), its
EmbeddingIndex (neighbours, similarity), evaluation (analogies, similarity pairs) and word2vec-format files."""

import os
import tempfile

import numpy as np

from . import _core
from ._report import ProgressLine, RunReport


def _count(name, value, low=0):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an integer, got {value!r}")
    if value < low:
        raise ValueError(f"{name} {value}: expected an integer >= {low}")
    return int(value)


def _flag(name, value):
    if value not in (0, 1) or isinstance(value, float):
        raise ValueError(f"{name} {value!r}: expected 0 or 1")
    return bool(value)


def _number(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a number, got {value!r}")
    return float(value)


_BLANKS = frozenset(" \t\n\r\v\f\0")


def _write_corpus(sentences, f):
    """Streams `sentences` (an iterable of token lists) to `f` in the corpus format, one sentence a line, tokens
    separated by one space; ValueError for a token holding whitespace or NUL (it would be split or cut)."""
    if isinstance(sentences, (str, bytes)):
        raise TypeError("sentences: expected an iterable of token lists, got a string")
    for n, sentence in enumerate(sentences):
        if isinstance(sentence, (str, bytes)):
            raise TypeError(f"sentences[{n}]: expected a list of tokens, got a string")
        tokens = list(sentence)
        for token in tokens:
            if not isinstance(token, str):
                raise TypeError(f"sentences[{n}]: expected str tokens, got {type(token).__name__}")
            if not token or not _BLANKS.isdisjoint(token):
                raise ValueError(f"sentences[{n}]: token {token!r} is empty or holds whitespace or NUL")
        f.write(" ".join(tokens))
        f.write("\n")


class KeyedVectors:
    """Word vectors with gensim's KeyedVectors calls: wv[word], word in wv, most_similar, similarity,
    save_word2vec_format, evaluate_word_analogies, evaluate_word_pairs, load_word2vec_format.

    `vectors` is a (words x vector_size) float32 view of the library's vectors (no copy). The neighbour calls
    and evaluations use unit vectors made on their first use; after changing `vectors` in place call
    fill_norms(force=True) (as gensim)."""

    def __init__(self, core_vectors):
        self._v = core_vectors
        self.index_to_key = core_vectors.words
        self.key_to_index = {word: i for i, word in enumerate(self.index_to_key)}

    @property
    def vectors(self):
        """(words x vector_size) float32, a view of the library's vectors (no copy), rows in index_to_key's
        order."""
        return self._v.vectors

    @property
    def vector_size(self):
        """The dimension of the vectors."""
        return self.vectors.shape[1]

    def __len__(self):
        """The number of words."""
        return len(self.index_to_key)

    def __contains__(self, key):
        """Whether `key` is a word of the vocabulary."""
        return key in self.key_to_index

    def get_index(self, key):
        """The row of word `key`; KeyError when it is not in the vocabulary."""
        try:
            return self.key_to_index[key]
        except KeyError:
            raise KeyError(f"Key '{key}' not present") from None

    def __getitem__(self, key):
        """A word's vector (a view), or for a list of words their rows (a copy)."""
        if isinstance(key, str):
            return self.vectors[self.get_index(key)]
        return self.vectors[[self.get_index(k) for k in key]]

    def fill_norms(self, force=False):
        """With force, forgets the unit vectors the neighbour calls use, so that they see `vectors` changed in
        place (gensim's call; without force, nothing: they are made on first use)."""
        if force:
            self._v.forget_index()

    def _ids(self, words, what):
        if words is None:
            return []
        if isinstance(words, str):
            words = [words]
        return [self.get_index(w) for w in words]

    def most_similar(self, positive=None, negative=None, topn=10):
        """[(word, cosine)] of the topn words nearest the mean of the positive words' unit vectors minus the
        negative ones', those words left out (gensim's most_similar), computed in the library."""
        topn = _count("topn", topn, 1)
        ids, scores = self._v.most_similar(self._ids(positive, "positive"), self._ids(negative, "negative"), topn)
        return [(self.index_to_key[i], float(s)) for i, s in zip(ids, scores)]

    def similarity(self, w1, w2):
        """The cosine of the two words' vectors."""
        return float(self._v.similarity(self.get_index(w1), self.get_index(w2)))

    def save_word2vec_format(self, fname, binary=False):
        """Writes word2vec's text (or binary) format: the file `asgd w2v -output` writes, read by gensim."""
        self._v.save(os.fspath(fname), bool(binary))

    def evaluate_word_analogies(self, analogies, restrict_vocab=30000):
        """(accuracy, sections) on a questions-words file by the library's evaluation (`asgd w2v-eval
        --analogies`): only the first restrict_vocab words count; matching ignores case. Each section is a dict
        of section, correct, seen and total counts (gensim lists the questions instead), the last one "Total
        accuracy"."""
        restrict_vocab = _count("restrict_vocab", restrict_vocab)
        r = self._v.evaluate_analogies(os.fspath(analogies), restrict_vocab)
        total = {"section": "Total accuracy", "correct": r["correct"], "seen": r["seen"], "total": r["total"]}
        return r["accuracy"], r["sections"] + [total]

    def evaluate_word_pairs(self, pairs):
        """(spearman, pairs_used, pairs_total) on a WordSim-353-style file by the library's evaluation (`asgd
        w2v-eval --similarity`); gensim returns Pearson and Spearman with p-values and the OOV ratio."""
        return self._v.evaluate_similarity(os.fspath(pairs))

    @classmethod
    def load_word2vec_format(cls, fname, binary=False):
        """Vectors from a word2vec text or binary file (gzipped or not), as gensim and `asgd w2v` write them;
        ValueError when `binary` does not say the format the file holds."""
        v = _core.load_w2v(os.fspath(fname))
        if v.binary != bool(binary) and len(v.words):
            kind = "binary" if v.binary else "text"
            raise ValueError(f"{os.fspath(fname)}: holds word2vec {kind} vectors, binary={binary!r} says otherwise")
        return cls(v)


class Word2Vec:
    """word2vec (skip-gram or CBOW, negative sampling and/or hierarchical softmax) trained by the library's
    lock-free asynchronous SGD, with gensim's argument names and defaults (workers: 0 = all cores).

    corpus_file: a text file, one sentence a line, whitespace-separated tokens (gzipped or not), read by the
    library. sentences: any iterable of token lists, streamed once to a temporary file in that format (removed
    after training). One worker and a seed give the vectors of `asgd w2v -threads 1 -seed N` byte for byte.
    max_final_vocab keeps the most frequent words (gensim's name; asgd w2v -max-vocab). policy, tau and batch are
    the engine's: how updates land (racy, atomic, locked), bounded delay in steps, and HogBatch (negatives shared
    across a window): None uses it wherever it applies (skip-gram, negative sampling, hs=0), as asgd w2v does;
    batch=0 trains per pair, as gensim and word2vec.c do.
    The GIL is released while training; Ctrl-C stops it (KeyboardInterrupt). verbose=True prints a progress line
    (words/s, loss, rate, ETA) and the run's summary on stderr. `report` holds the run's figures (a RunReport:
    words_per_second, train_seconds, losses per epoch, the staleness histogram, ...)."""

    def __init__(self, sentences=None, corpus_file=None, vector_size=100, alpha=0.025, window=5, min_count=5,
                 max_final_vocab=None, sample=1e-3, seed=1, workers=0, sg=0, hs=0, negative=5, epochs=5,
                 policy="racy", tau=None, batch=None, verbose=False):
        self.vector_size, self.alpha, self.window, self.min_count = vector_size, alpha, window, min_count
        self.max_final_vocab, self.sample, self.seed, self.workers = max_final_vocab, sample, seed, workers
        self.sg, self.hs, self.negative, self.epochs = sg, hs, negative, epochs
        self.policy, self.tau, self.batch, self.verbose = policy, tau, batch, verbose
        self.wv = None
        self.report = None
        if sentences is not None and corpus_file is not None:
            raise TypeError("give sentences or corpus_file, not both")
        if corpus_file is not None:
            self._train(os.fspath(corpus_file))
        elif sentences is not None:
            self._settings("-")  # bad arguments before the sentences are streamed
            self._train_sentences(sentences)

    def _settings(self, corpus):
        s = _core.W2vSettings()
        s.corpus = corpus
        s.vector_size = _count("vector_size", self.vector_size, 1)
        s.window = _count("window", self.window, 1)
        s.min_count = _count("min_count", self.min_count)
        s.max_vocab = 0 if self.max_final_vocab is None else _count("max_final_vocab", self.max_final_vocab, 1)
        s.workers = _count("workers", self.workers)
        s.negative = _count("negative", self.negative)
        s.epochs = _count("epochs", self.epochs, 1)
        s.seed = _count("seed", self.seed)
        s.sg, s.hs = _flag("sg", self.sg), _flag("hs", self.hs)
        s.batch = None if self.batch is None else _flag("batch", self.batch)
        s.sample = _number("sample", self.sample)
        if s.sample < 0:
            raise ValueError(f"sample {self.sample}: expected a threshold >= 0 (0: no subsampling)")
        s.alpha = _number("alpha", self.alpha)
        s.policy = str(self.policy)
        s.tau = "inf" if self.tau is None else str(_count("tau", self.tau))
        return s

    def _train(self, corpus_file):
        settings = self._settings(corpus_file)
        progress = ProgressLine("w2v", "words_per_second", "words/s") if self.verbose else None
        try:
            vectors, report = _core.train_w2v(settings, progress=progress)
        finally:
            if progress is not None:
                progress.end()
        self.report = RunReport(report)
        if progress is not None:
            progress.end(self.report.summary)
        self.wv = KeyedVectors(vectors)

    def _train_sentences(self, sentences):
        fd, path = tempfile.mkstemp(prefix="asgd-w2v-", suffix=".txt")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                _write_corpus(sentences, f)
            self._train(path)
        finally:
            os.unlink(path)
