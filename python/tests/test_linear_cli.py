"""asgd.SGDClassifier binds the call `asgd linear train` makes (sparse::fit_linear): with one worker and a seed its
weights are the command's byte for byte, for each loss, and the command's model file reads back."""

import numpy as np
import pytest
import scipy.sparse

import asgd
from asgd._linear import read_linear_model


def write_libsvm(path, X, y):
    """X's rows as libsvm lines, labels 0/1 (the command reads 0 as -1), values to 9 digits (float32 exactly)."""
    with open(path, "w") as f:
        for r in range(X.shape[0]):
            row = X.getrow(r)
            pairs = " ".join(f"{i}:{float(v):.9g}" for i, v in zip(row.indices, row.data))
            f.write(f"{y[r]} {pairs}\n")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(11)
    X = scipy.sparse.random(1500, 60, density=0.1, format="csr", random_state=11, dtype=np.float32)
    X.sort_indices()
    y = (X @ rng.normal(size=60) > 0.1).astype(int)
    path = tmp_path_factory.mktemp("linear") / "train.svm"
    write_libsvm(path, X, y)
    return X, y, path


@pytest.mark.parametrize("loss,cli_loss", [("log_loss", "logistic"), ("hinge", "hinge"),
                                           ("squared_hinge", "squared-hinge")])
def test_one_worker_and_a_seed_give_the_commands_weights_byte_for_byte(cli, data, tmp_path, loss, cli_loss):
    X, y, path = data
    model = tmp_path / "m.asgd"
    cli("linear", "train", "--data", path, "--features", X.shape[1], "--loss", cli_loss, "--l2", "0.001",
        "--epochs", 7, "--workers", 1, "--seed", 5, "--model", model, "--quiet")
    ours = asgd.SGDClassifier(loss=loss, alpha=0.001, epochs=7, n_jobs=1, random_state=5, fit_intercept=False)
    ours.fit(X, y)
    weights, read_loss, l2 = read_linear_model(model)
    assert (read_loss, l2) == (cli_loss, 0.001)
    assert weights.shape == (X.shape[1],)
    assert weights.tobytes() == ours.coef_.tobytes()
    # Another seed gives other weights: the comparison can fail.
    other = asgd.SGDClassifier(loss=loss, alpha=0.001, epochs=7, n_jobs=1, random_state=6, fit_intercept=False)
    assert other.fit(X, y).coef_.tobytes() != weights.tobytes()


def test_a_missing_model_file_is_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_linear_model(tmp_path / "none.asgd")
