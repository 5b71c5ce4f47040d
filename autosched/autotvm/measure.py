"""AutoTVM's ``measure_option``, ``LocalBuilder`` and ``LocalRunner``: how candidates are built and timed, as
autosched's local backend (worker processes on this machine) and its :class:`RunConfig`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autosched.measure.runner import RunConfig


class LocalBuilder:
    """Candidates are compiled in local worker processes (``timeout`` seconds each)."""

    def __init__(self, timeout: float = 10, n_parallel: int | None = None, build_func: str = "default",
                 **unused: Any):
        if build_func != "default":
            raise ValueError(f"LocalBuilder: build_func {build_func!r} is not one autosched has ('default')")
        self.timeout = timeout
        self.n_parallel = n_parallel


class LocalRunner:
    """Each candidate runs ``repeat`` times ``number`` runs (``number`` raised until a repeat lasts
    ``min_repeat_ms``), the CPU caches flushed before each repeat when ``enable_cpu_cache_flush``."""

    def __init__(self, timeout: float = 10, number: int = 4, repeat: int = 3, min_repeat_ms: float = 0,
                 cooldown_interval: float = 0.1, enable_cpu_cache_flush: bool = False, **unused: Any):
        self.config = RunConfig(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms, timeout=timeout,
                                flush_cache=enable_cpu_cache_flush)


@dataclass
class MeasureOption:
    """What :func:`measure_option` returns: the run configuration the tuner's measurements use."""

    run_config: RunConfig | None


def measure_option(builder: Any = "local", runner: Any = "local", **unused: Any) -> MeasureOption:
    """``builder`` / ``runner``: ``"local"`` or a :class:`LocalBuilder` / :class:`LocalRunner` (autosched has no RPC
    runner: tune on the machine the kernels will run on)."""
    for what, x, kind in (("builder", builder, LocalBuilder), ("runner", runner, LocalRunner)):
        if x != "local" and not isinstance(x, kind):
            raise ValueError(f"measure_option: {what} must be 'local' or a {kind.__name__}, got {x!r} (autosched has "
                             f"no RPC {what}: tune on the machine the kernels will run on)")
    return MeasureOption(runner.config if isinstance(runner, LocalRunner) else None)


__all__ = ["LocalBuilder", "LocalRunner", "MeasureOption", "measure_option"]
