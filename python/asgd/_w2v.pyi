# Type stubs of asgd._w2v: Word2Vec and KeyedVectors (gensim's call shapes).
from os import PathLike
from typing import Any, Iterable, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

from ._report import RunReport

_Path = Union[str, PathLike[str]]
_Words = Union[str, Sequence[str], None]

class KeyedVectors:
    index_to_key: list[str]
    key_to_index: dict[str, int]
    def __init__(self, core_vectors: Any) -> None: ...
    @property
    def vectors(self) -> npt.NDArray[np.float32]: ...
    @property
    def vector_size(self) -> int: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: object) -> bool: ...
    def get_index(self, key: str) -> int: ...
    @overload
    def __getitem__(self, key: str) -> npt.NDArray[np.float32]: ...
    @overload
    def __getitem__(self, key: Sequence[str]) -> npt.NDArray[np.float32]: ...
    def fill_norms(self, force: bool = ...) -> None: ...
    def most_similar(self, positive: _Words = ..., negative: _Words = ..., topn: int = ...) -> list[Tuple[str, float]]: ...
    def similarity(self, w1: str, w2: str) -> float: ...
    def save_word2vec_format(self, fname: _Path, binary: bool = ...) -> None: ...
    def evaluate_word_analogies(self, analogies: _Path,
                                restrict_vocab: int = ...) -> Tuple[float, list[dict[str, Any]]]: ...
    def evaluate_word_pairs(self, pairs: _Path) -> Tuple[float, int, int]: ...
    @classmethod
    def load_word2vec_format(cls, fname: _Path, binary: bool = ...) -> KeyedVectors: ...

class Word2Vec:
    wv: Optional[KeyedVectors]
    report: Optional[RunReport]
    vector_size: int
    alpha: float
    window: int
    min_count: int
    max_final_vocab: Optional[int]
    sample: float
    seed: int
    workers: int
    sg: int
    hs: int
    negative: int
    epochs: int
    policy: str
    tau: Optional[int]
    batch: bool
    verbose: bool
    def __init__(self, sentences: Optional[Iterable[Sequence[str]]] = ..., corpus_file: Optional[_Path] = ...,
                 vector_size: int = ..., alpha: float = ..., window: int = ..., min_count: int = ...,
                 max_final_vocab: Optional[int] = ..., sample: float = ..., seed: int = ..., workers: int = ...,
                 sg: int = ..., hs: int = ..., negative: int = ..., epochs: int = ..., policy: str = ...,
                 tau: Optional[int] = ..., batch: bool = ..., verbose: bool = ...) -> None: ...
