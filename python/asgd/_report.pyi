# Type stubs of asgd._report (what a fit keeps besides its model): the run's report.
from typing import Any, Optional, TextIO

import numpy as np
import numpy.typing as npt

class RunReport(dict[str, Any]):
    losses: npt.NDArray[np.float64]
    seconds: float
    examples: int
    examples_per_second: float
    staleness: npt.NDArray[np.uint64]
    mean_staleness: float
    max_staleness: int
    max_lead: int
    stopped: bool
    stop_reason: str
    summary: str
    def __getattr__(self, name: str) -> Any: ...

def duration(seconds: float) -> str: ...

class ProgressLine:
    label: str
    rate_key: str
    unit: str
    stream: Optional[TextIO]
    start: float
    open: bool
    def __init__(self, label: str, rate_key: str = ..., unit: str = ..., stream: Optional[TextIO] = ...) -> None: ...
    def __call__(self, p: dict[str, Any]) -> None: ...
    def end(self, summary: Optional[str] = ...) -> None: ...
