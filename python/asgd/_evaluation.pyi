# Type stubs of asgd._evaluation: scores of a fitted model on held-out data.
from typing import Any, Tuple, Union

import numpy.typing as npt

from ._mf import _FactorModel

_Interactions = Union[Any, Tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike]]

def rmse(model: _FactorModel, X: _Interactions) -> float: ...
def mae(model: _FactorModel, X: _Interactions) -> float: ...
def ranking_metrics_at_k(model: _FactorModel, train_user_items: _Interactions, test_user_items: _Interactions,
                         K: int = ...) -> dict[str, float]: ...
