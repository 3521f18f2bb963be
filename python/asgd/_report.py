"""What a fit shows and keeps besides its model: verbose=True's progress line, printed from the engine's progress
events, and the run's report (RunReport), the engine's TrainReport as numbers and numpy arrays."""

import math
import sys
import time


class RunReport(dict):
    """The report of a training run, as a dict whose keys are also attributes:

      losses: float64 array, the mean example loss of each epoch trained.
      seconds, examples, examples_per_second: of the whole run (examples: updates of MF ratings or pairs,
        word2vec sentences; Word2Vec adds words_per_second, corpus_words, vocabulary, ...).
      staleness: uint64 array, the steps by how many other workers' updates landed while they ran (index s: s
        updates; the last index: that many or more), what the engine measures (Trainer's staleness histogram).
      mean_staleness, max_staleness, max_lead (most steps a worker ran ahead of the slowest: what tau bounds).
      stopped, stop_reason: whether and why the run ended before its last epoch (Ctrl-C).
      summary: the library's one-line summary (TrainReport::summary), as the CLI prints it.
    """

    def __getattr__(self, name):
        """report.losses is report["losses"]; AttributeError for a key it does not hold."""
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"RunReport has no {name!r}") from None


def duration(seconds):
    """A time as the CLI's progress line writes it: 42s, 12m05s, 3.2h."""
    if not math.isfinite(seconds):
        return "?"
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        t = round(seconds)
        return f"{t // 60}m{t % 60:02d}s"
    return f"{seconds / 3600:.1f}h"


class ProgressLine:
    """Prints the engine's progress events (a dict: fraction, epoch, loss, examples_per_second, learning_rate,
    ..., words_per_second for word2vec) as one line on stderr, rewritten in place as the CLI's: done, epoch,
    rate, loss, rate and ETA. The ETA is the whole fit's, from the fraction done and the time since the fit
    began: the engine's eta_seconds runs to the end of its current run() call, which is one epoch where the
    library trains epoch by epoch (mf)."""

    def __init__(self, label, rate_key="examples_per_second", unit="updates/s", stream=None):
        self.label, self.rate_key, self.unit = label, rate_key, unit
        self.stream = stream
        self.start = time.monotonic()
        self.open = False  # a line printed and not yet ended

    def __call__(self, p):
        stream = self.stream or sys.stderr
        fraction = p["fraction"]
        elapsed = time.monotonic() - self.start
        eta = elapsed * (1 - fraction) / fraction if fraction > 0 else math.inf
        epoch = p["epoch"] + (1 if fraction < 1 and not p["last"] else 0)
        stream.write(f"\r{self.label}: {100 * fraction:5.1f}%  epoch {epoch}  {p[self.rate_key]:.3g} {self.unit}  "
                     f"loss {p['loss']:.5f}  lr {p['learning_rate']:.4g}  ETA {duration(eta)}   ")
        self.open = True
        if p["last"] and fraction >= 1:
            self.end()
        stream.flush()

    def end(self, summary=None):
        """Ends the line (the run is over or stopped), then prints `summary` on a line of its own."""
        stream = self.stream or sys.stderr
        if self.open:
            stream.write("\n")
            self.open = False
        if summary:
            stream.write(f"{self.label}: {summary}\n")
        stream.flush()
