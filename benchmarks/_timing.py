"""Timing shared by the benchmarks that compare autosched with a vendor library: each side's best median over
alternating rounds, each block after a pause, because a library's worker threads (or a GPU's clocks) stay
busy for a while after a call and the side timed right after another would pay for it."""

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
                        timer: Callable[[Callable, float], float] = median_time) -> dict:
    """Each side's best ``timer`` median over ``rounds`` rounds; in a round every side is timed in turn (the
    order reversed every other round), each block after ``pause`` seconds."""
    names = list(fns)
    best = {n: float("inf") for n in names}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            time.sleep(pause)
            best[n] = min(best[n], timer(fns[n], seconds))
    return best
