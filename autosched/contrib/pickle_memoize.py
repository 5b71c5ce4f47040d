"""TVM's ``tvm.contrib.pickle_memoize.memoize``: a test's expensive reference data computed once per key.

TVM keeps the results in a pickle file between runs; here they are kept for the life of the process (the
references are numpy computations of seconds at most, and a stale file could outlive the code that made it)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def memoize(key: str, save_at_exit: bool = False) -> Callable[[Callable], Callable]:
    """Cache a function's results by its arguments (which must be hashable), one cache per decorated function:
    a test that decorates a new closure per case (per dtype, say) gets that case's data."""

    def decorate(fn: Callable) -> Callable:
        cache: dict[tuple, Any] = {}

        @functools.wraps(fn)
        def cached(*args: Any, **kwargs: Any) -> Any:
            k = (args, tuple(sorted(kwargs.items())))
            if k not in cache:
                cache[k] = fn(*args, **kwargs)
            return cache[k]

        return cached

    return decorate


__all__ = ["memoize"]
