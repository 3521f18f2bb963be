# Type stubs of asgd._mf: MatrixFactorization and BayesianPersonalizedRanking (implicit's call shapes), load, attach.
from os import PathLike
from typing import Any, Callable, Optional, Tuple, TypeVar, Union, overload

import numpy as np
import numpy.typing as npt

from ._report import RunReport

_Path = Union[str, PathLike[str]]
# A scipy.sparse user x item matrix (CSR or COO) or a (users, items, ratings) tuple of arrays.
_Interactions = Union[Any, Tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike]]
_EpochCallback = Callable[[int, float], Any]
_Lists = Tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]
_Self = TypeVar("_Self", bound="_FactorModel")

class _FactorModel:
    history_: list[dict[str, Any]]
    report_: Optional[RunReport]
    verbose: bool
    def get_params(self, deep: bool = ...) -> dict[str, Any]: ...
    def set_params(self: _Self, **params: Any) -> _Self: ...
    def fit(self: _Self, X: _Interactions, validation: Optional[_Interactions] = ...,
            callback: Optional[_EpochCallback] = ..., shm: Optional[str] = ...,
            model_file: Optional[_Path] = ...) -> _Self: ...
    def partial_fit(self: _Self, X: _Interactions, epochs: int = ...,
                    callback: Optional[_EpochCallback] = ...) -> _Self: ...
    def predict(self, users: npt.ArrayLike, items: npt.ArrayLike) -> npt.NDArray[np.float32]: ...
    def recommend(self, userid: Union[int, npt.ArrayLike], user_items: Optional[Any] = ..., N: int = ...,
                  filter_already_liked_items: bool = ..., filter_items: Optional[npt.ArrayLike] = ...,
                  recalculate_user: bool = ...) -> _Lists: ...
    def similar_items(self, itemid: Union[int, npt.ArrayLike], N: int = ...) -> _Lists: ...
    def similar_users(self, userid: Union[int, npt.ArrayLike], N: int = ...) -> _Lists: ...
    @property
    def user_factors(self) -> npt.NDArray[np.float32]: ...
    @property
    def item_factors(self) -> npt.NDArray[np.float32]: ...
    @property
    def user_biases(self) -> Optional[npt.NDArray[np.float32]]: ...
    @property
    def item_biases(self) -> npt.NDArray[np.float32]: ...
    @property
    def user_names(self) -> list[str]: ...
    @property
    def item_names(self) -> list[str]: ...
    def remove_segment(self) -> bool: ...
    def save(self, path: _Path) -> None: ...

class MatrixFactorization(_FactorModel):
    factors: int
    iterations: int
    learning_rate: float
    regularization: float
    bias_regularization: float
    random_state: Optional[int]
    threads: int
    policy: str
    tau: Optional[int]
    schedule: str
    adagrad: bool
    def __init__(self, factors: int = ..., iterations: int = ..., learning_rate: float = ...,
                 regularization: float = ..., bias_regularization: float = ..., random_state: Optional[int] = ...,
                 threads: int = ..., policy: str = ..., tau: Optional[int] = ..., schedule: str = ...,
                 adagrad: bool = ..., verbose: bool = ...) -> None: ...

class BayesianPersonalizedRanking(_FactorModel):
    factors: int
    iterations: int
    learning_rate: float
    regularization: float
    random_state: Optional[int]
    threads: int
    policy: str
    tau: Optional[int]
    positive: Optional[float]
    def __init__(self, factors: int = ..., iterations: int = ..., learning_rate: float = ...,
                 regularization: float = ..., random_state: Optional[int] = ..., threads: int = ...,
                 policy: str = ..., tau: Optional[int] = ..., positive: Optional[float] = ...,
                 verbose: bool = ...) -> None: ...

def load(path: _Path) -> Union[MatrixFactorization, BayesianPersonalizedRanking]: ...
def attach(shm: str, model_file: _Path) -> Union[MatrixFactorization, BayesianPersonalizedRanking]: ...
