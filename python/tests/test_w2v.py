"""asgd.Word2Vec and KeyedVectors: the CLI's vectors byte for byte with one worker and a seed, zero-copy
vectors, sentences streamed from an iterable, the library's neighbours and evaluations, word2vec files that
gensim reads and that come from gensim."""

import random

import numpy as np
import pytest

import asgd

TOPICS, WORDS_PER_TOPIC = 4, 8


def planted_sentences(count=1500, seed=7):
    """Sentences of 8 words, each from one topic: topic t's words are "t<t>w<i>"."""
    rng = random.Random(seed)
    for _ in range(count):
        t = rng.randrange(TOPICS)
        yield [f"t{t}w{rng.randrange(WORDS_PER_TOPIC)}" for _ in range(8)]


SMALL = dict(vector_size=16, window=5, min_count=1, sample=0.0, negative=5, epochs=4, seed=3, sg=1, workers=1)
CLI_FLAGS = ["-size", 16, "-window", 5, "-min-count", 1, "-sample", 0, "-negative", 5, "-iter", 4, "-seed", 3,
             "-cbow", 0, "-threads", 1, "-alpha", 0.025, "-quiet", 1]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("w2v") / "corpus.txt"
    path.write_text("".join(" ".join(s) + "\n" for s in planted_sentences()))
    return path


@pytest.fixture(scope="module")
def model(corpus):
    return asgd.Word2Vec(corpus_file=str(corpus), **SMALL)


def topic_purity(wv):
    """The share of each word's 3 nearest words that are of its topic."""
    same = [w[1] == near[1] for w in wv.index_to_key for near, _ in wv.most_similar(w, topn=3)]
    return np.mean(same)


def test_learns_the_planted_topics(model):
    wv = model.wv
    assert len(wv) == TOPICS * WORDS_PER_TOPIC
    assert wv.vectors.shape == (32, 16) and wv.vectors.dtype == np.float32
    assert topic_purity(wv) > 0.9
    assert model.report["epochs"] == 4 and len(model.report["losses"]) == 4
    assert model.report["corpus_words"] == 1500 * 8
    assert model.report["words_per_second"] > 0


@pytest.mark.parametrize("binary", [False, True])
def test_one_worker_gives_the_cli_vectors_byte_for_byte(model, corpus, cli, tmp_path, binary):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    model.wv.save_word2vec_format(ours, binary=binary)
    cli("w2v", "-train", corpus, "-output", theirs, "-binary", int(binary), *CLI_FLAGS)
    assert ours.read_bytes() == theirs.read_bytes()


def test_another_seed_gives_other_vectors(model, corpus):
    other = asgd.Word2Vec(corpus_file=str(corpus), **{**SMALL, "seed": 4})
    assert other.wv.index_to_key == model.wv.index_to_key
    assert not np.array_equal(other.wv.vectors, model.wv.vectors)


def test_sentences_from_an_iterable_train_as_the_file(model):
    # A generator: it can be read once only, so the vectors being the file's shows it was streamed once.
    streamed = asgd.Word2Vec(sentences=planted_sentences(), **SMALL)
    assert streamed.wv.index_to_key == model.wv.index_to_key
    assert np.array_equal(streamed.wv.vectors, model.wv.vectors)


def test_vectors_are_a_view_of_the_library_vectors(model):
    wv = model.wv
    a, b = wv.vectors, wv.vectors
    assert np.shares_memory(a, b)
    assert np.shares_memory(wv["t0w1"], a)
    assert np.array_equal(wv["t0w1"], a[wv.key_to_index["t0w1"]])
    assert wv.index_to_key[wv.key_to_index["t2w3"]] == "t2w3"
    assert "t1w1" in wv and "nope" not in wv


def test_most_similar_and_similarity_match_numpy(model):
    wv = model.wv
    unit = wv.vectors / np.linalg.norm(wv.vectors, axis=1, keepdims=True)
    pos, neg = ["t0w1", "t1w2"], ["t2w3"]
    ids = [wv.key_to_index[w] for w in pos + neg]
    mean = unit[ids[0]] + unit[ids[1]] - unit[ids[2]]
    cos = unit @ (mean / np.linalg.norm(mean))
    cos[ids] = -np.inf
    order = np.argsort(-cos, kind="stable")[:5]
    got = wv.most_similar(positive=pos, negative=neg, topn=5)
    assert [w for w, _ in got] == [wv.index_to_key[i] for i in order]
    assert np.allclose([s for _, s in got], cos[order], atol=1e-5)
    assert wv.similarity("t0w1", "t0w2") == pytest.approx(float(unit[wv.key_to_index["t0w1"]] @
                                                                 unit[wv.key_to_index["t0w2"]]), abs=1e-5)
    assert wv.similarity("t0w1", "t0w1") == pytest.approx(1.0, abs=1e-6)


def test_a_changed_vector_is_seen_after_fill_norms(tmp_path, model):
    wv = asgd.KeyedVectors.load_word2vec_format(_saved(model, tmp_path, True), binary=True)
    before = wv.similarity("t0w1", "t1w1")
    wv.vectors[wv.key_to_index["t1w1"]] = wv["t0w1"]
    assert wv.similarity("t0w1", "t1w1") == before  # the unit vectors made before
    wv.fill_norms(force=True)
    assert wv.similarity("t0w1", "t1w1") == pytest.approx(1.0, abs=1e-6)


def _saved(model, tmp_path, binary):
    path = tmp_path / ("v.bin" if binary else "v.txt")
    model.wv.save_word2vec_format(str(path), binary=binary)
    return path


def test_evaluations_are_the_library_ones(model, tmp_path):
    questions = tmp_path / "questions.txt"
    questions.write_text(": topics\nt0w1 t0w2 t1w1 t1w2\nt0w1 t0w2 t1w1 nope\n: gram-x\nt2w1 t2w2 t3w1 t3w2\n")
    accuracy, sections = model.wv.evaluate_word_analogies(questions, restrict_vocab=30000)
    assert [s["section"] for s in sections] == ["topics", "gram-x", "Total accuracy"]
    assert [(s["seen"], s["total"]) for s in sections] == [(1, 2), (1, 1), (2, 3)]
    assert accuracy == sections[-1]["correct"] / 2
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("t0w1 t0w2 9\nt0w1 t1w1 1\nt2w2 t2w5 8\nt3w1 t0w4 2\nt0w1 nope 5\n")
    spearman, used, total = model.wv.evaluate_word_pairs(pairs)
    assert (used, total) == (4, 5)
    assert spearman > 0.5  # same-topic pairs are nearer than the others


@pytest.mark.parametrize("binary", [False, True])
def test_gensim_reads_our_file_and_we_read_gensims(model, tmp_path, binary):
    gensim_models = pytest.importorskip("gensim.models")
    path = _saved(model, tmp_path, binary)
    theirs = gensim_models.KeyedVectors.load_word2vec_format(str(path), binary=binary)
    assert theirs.index_to_key == model.wv.index_to_key
    tolerance = 0 if binary else 1e-6  # text: 6 decimals
    assert np.allclose(theirs.vectors, model.wv.vectors, atol=tolerance, rtol=0)
    back = tmp_path / ("g.bin" if binary else "g.txt")
    theirs.save_word2vec_format(str(back), binary=binary)
    ours = asgd.KeyedVectors.load_word2vec_format(back, binary=binary)
    assert ours.index_to_key == theirs.index_to_key
    assert np.array_equal(ours.vectors, theirs.vectors)
    near_ours, near_theirs = ours.most_similar("t0w1", topn=3), theirs.most_similar("t0w1", topn=3)
    assert [w for w, _ in near_ours] == [w for w, _ in near_theirs]
    assert np.allclose([s for _, s in near_ours], [s for _, s in near_theirs], atol=1e-5)
