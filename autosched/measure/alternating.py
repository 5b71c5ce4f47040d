"""Timing autosched against a vendor library (or libraries against each other) fairly: each side's best median
over alternating rounds, each block after a pause.

Every library's worker threads (onnxruntime's, a BLAS's, PyTorch's; a GPU's clocks) stay busy for a while after
a call, so whichever side is timed right after another pays for it: timed one after the other, the order
decides the comparison. Here every side is timed in turn in each round (the order reversed every other
round), each block after ``pause`` seconds, and each keeps the best of its block medians.

The one implementation: ``autosched.search.vendor`` (the comparison ``autosched tune`` ends with) and the
benchmarks (``benchmarks/_timing.py``, which loads this file by its path where autosched is not importable,
as in the peers' virtualenv) use it. So it imports the standard library only.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], seconds: float = 2.0) -> float:
    """Median seconds of ``fn()`` over as many calls as fit in ``seconds`` (10 to 1000), after two warm-ups."""
    fn()
    fn()
    t = time.perf_counter()
    fn()
    one = time.perf_counter() - t
    n = max(10, min(1000, int(seconds / max(one, 1e-6))))
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def alternating_medians(fns: dict, rounds: int = 5, seconds: float = 1.0, pause: float = 0.5,
                        timer: Callable[[Callable, float], float] = median_time,
                        sleep: Callable[[float], object] = time.sleep) -> dict:
    """Each side's best ``timer`` median over ``rounds`` rounds (``fns``: name -> what to time; the result has
    the same names in the same order); in a round every side is timed in turn (the order reversed every
    other round), each block of about ``seconds`` after ``pause`` seconds of ``sleep``."""
    names = list(fns)
    best = {n: float("inf") for n in names}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            sleep(pause)
            best[n] = min(best[n], timer(fns[n], seconds))
    return best


__all__ = ["alternating_medians", "median_time"]
