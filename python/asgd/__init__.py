"""asgd: lock-free asynchronous SGD, from Python.

Recommenders with implicit's call shapes::

    import asgd
    model = asgd.MatrixFactorization(factors=32, iterations=20)
    model.fit(user_items)                 # scipy.sparse user x item ratings
    ids, scores = model.recommend(3, user_items[3], N=10)
    model.save("model.mf")                # the file `asgd mf train` writes
    same = asgd.load("model.mf")          # and any file it wrote

Word vectors with gensim's::

    model = asgd.Word2Vec(corpus_file="text8", vector_size=100, sg=1, workers=4)
    model.wv.most_similar(positive=["king", "woman"], negative=["man"])
    model.wv.save_word2vec_format("vectors.txt")   # the file `asgd w2v -output` writes

Linear classifiers as scikit-learn estimators::

    clf = asgd.SGDClassifier(loss="log_loss", alpha=1e-4, epochs=10, n_jobs=4)
    clf.fit(X, y)                         # scipy.sparse CSR (or dense) examples, two classes
    clf.predict_proba(X_test)             # also in a sklearn Pipeline, cross_val_score, clone

The training runs in the C++ library (asgd._core) with the GIL released; Ctrl-C stops it (an mf model is left
at its last finished epoch). verbose=True prints progress (rate, ETA); every fit keeps its report (RunReport:
losses per epoch, updates/s, the staleness histogram). Type stubs (.pyi) ship with the package.
"""

from ._evaluation import mae, ranking_metrics_at_k, rmse
from ._linear import SGDClassifier
from ._mf import BayesianPersonalizedRanking, MatrixFactorization, attach, load
from ._report import RunReport
from ._w2v import KeyedVectors, Word2Vec

__all__ = ["BayesianPersonalizedRanking", "KeyedVectors", "MatrixFactorization", "RunReport", "SGDClassifier",
           "Word2Vec", "attach", "load", "mae", "ranking_metrics_at_k", "rmse"]
