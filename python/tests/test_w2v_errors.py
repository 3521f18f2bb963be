"""Word2Vec and KeyedVectors: bad input gets TypeError, ValueError, KeyError (an unknown word, as gensim) or
OSError with the library's message; Ctrl-C stops training with KeyboardInterrupt; the GIL is released while
training."""

import pytest

import asgd
from conftest import assert_other_thread_runs, interrupted_after_half_a_second
from test_w2v import planted_sentences


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("w2v_errors") / "corpus.txt"
    path.write_text("".join(" ".join(s) + "\n" for s in planted_sentences(1500)))
    return str(path)


@pytest.fixture(scope="module")
def wv(corpus):
    return asgd.Word2Vec(corpus_file=corpus, vector_size=8, min_count=1, epochs=1, workers=1).wv


def train(**settings):
    return lambda corpus, wv, tmp: asgd.Word2Vec(**{"corpus_file": corpus, "min_count": 1, **settings})


def sentences(value):
    return lambda corpus, wv, tmp: asgd.Word2Vec(sentences=value, min_count=1)


CASES = [
    # (what, call, exception, words of the message)
    ("a missing corpus file", train(corpus_file="/nonexistent/c.txt"), FileNotFoundError, "cannot open"),
    ("a directory as corpus", lambda c, w, tmp: asgd.Word2Vec(corpus_file=str(tmp)), IsADirectoryError,
     "is a directory"),
    ("zero vector_size", train(vector_size=0), ValueError, "vector_size 0"),
    ("float vector_size", train(vector_size=2.5), TypeError, "vector_size: expected an integer"),
    ("sg 2", train(sg=2), ValueError, "sg 2"),
    ("no objective", train(negative=0, hs=0), ValueError, "nothing to train"),
    ("a zero alpha", train(alpha=0), ValueError, "alpha 0"),
    ("a string alpha", train(alpha="fast"), TypeError, "alpha: expected a number"),
    ("a negative sample", train(sample=-1), ValueError, "sample -1"),
    ("zero epochs", train(epochs=0), ValueError, "epochs 0"),
    ("too many workers", train(workers=100000), ValueError, "workers 100000"),
    ("an unknown policy", train(policy="wild"), ValueError, "wild"),
    ("a min_count nothing reaches", train(min_count=10**9), ValueError, "lower min_count"),
    ("both sentences and a file", lambda c, w, tmp: asgd.Word2Vec(sentences=[["a"]], corpus_file=c), TypeError,
     "not both"),
    ("a string as sentences", sentences("a b c"), TypeError, "got a string"),
    ("a string as a sentence", sentences(["a b c"]), TypeError, "sentences[0]: expected a list"),
    ("a token with a space", sentences([["a", "b c"]]), ValueError, "'b c'"),
    ("a token with a NUL", sentences([["a"], ["b\0"]]), ValueError, "sentences[1]"),
    ("a number as a token", sentences([["a", 3]]), TypeError, "expected str tokens"),
    ("an unknown word", lambda c, wv, tmp: wv.most_similar("nope"), KeyError, "nope"),
    ("no word", lambda c, wv, tmp: wv.most_similar(), ValueError, "at least one word"),
    ("topn 0", lambda c, wv, tmp: wv.most_similar("t0w1", topn=0), ValueError, "topn 0"),
    ("an unknown similarity word", lambda c, wv, tmp: wv.similarity("t0w1", "nope"), KeyError, "nope"),
    ("saving into a missing folder", lambda c, wv, tmp: wv.save_word2vec_format(tmp / "no" / "v.txt"),
     FileNotFoundError, "v.txt"),
    ("a missing vectors file", lambda c, w, tmp: asgd.KeyedVectors.load_word2vec_format(tmp / "none.txt"),
     FileNotFoundError, "none.txt"),
    ("a file without vectors", lambda c, w, tmp: asgd.KeyedVectors.load_word2vec_format(c), ValueError,
     "expected a header"),
    ("text read as binary", lambda c, wv, tmp: (wv.save_word2vec_format(tmp / "t.txt"),
                                                asgd.KeyedVectors.load_word2vec_format(tmp / "t.txt", binary=True)),
     ValueError, "holds word2vec text vectors"),
    ("a missing questions file", lambda c, wv, tmp: wv.evaluate_word_analogies(tmp / "q.txt"), FileNotFoundError,
     "q.txt"),
    ("a missing pairs file", lambda c, wv, tmp: wv.evaluate_word_pairs(tmp / "p.txt"), FileNotFoundError, "p.txt"),
]


@pytest.mark.parametrize("what, call, error, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_the_right_error(corpus, wv, tmp_path, what, call, error, words):
    with pytest.raises(error) as raised:
        call(corpus, wv, tmp_path)
    assert words in str(raised.value)


def test_the_temporary_corpus_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    asgd.Word2Vec(sentences=planted_sentences(50), vector_size=4, min_count=1, epochs=1, workers=1)
    with pytest.raises(ValueError):
        asgd.Word2Vec(sentences=[["a"], ["b c"]], min_count=1)
    assert list(tmp_path.iterdir()) == []


def long_run(corpus):
    # About 10 ms an epoch: a million epochs would take hours unless stopped.
    return asgd.Word2Vec(corpus_file=corpus, vector_size=16, min_count=1, epochs=1_000_000, workers=2)


def test_ctrl_c_stops_training_with_keyboard_interrupt(corpus):
    interrupted_after_half_a_second(lambda: long_run(corpus))


def test_another_thread_runs_during_training(corpus):
    assert_other_thread_runs(
        lambda epochs: asgd.Word2Vec(corpus_file=corpus, vector_size=16, min_count=1, epochs=epochs, workers=2), 300)
