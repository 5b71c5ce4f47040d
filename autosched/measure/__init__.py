"""Building and timing candidates: Builders compile them, Runners time and check them, a Measurer drives both.

>>> from autosched.measure import MeasureInput, Measurer          # doctest: +SKIP
>>> with Measurer() as m:                                 # Ray by default; backend="local": processes
...     results = m.measure([MeasureInput(task, trace) for trace in traces])
...     best_input, best_result = m.remeasure_top()[0]

See docs/measure.md for the interfaces, the backends, the error kinds and the timeouts.
The Ray classes (``RayBuilder``, ``RayRunner``, ``init_ray``, ``shutdown_ray``) are
imported on first use, so ``import autosched.measure`` does not import Ray.
"""

from autosched.measure.builder import Builder
from autosched.measure.data import (
    NoReferenceError,
    TaskData,
    make_inputs,
    prepare_task_data,
    reference_outputs,
    tolerance,
)
from autosched.measure.local import LocalBuilder, LocalRunner
from autosched.measure.measurer import Measurer, MeasureStats, TooManyFailures, make_builder_runner, measure
from autosched.measure.result import BuildResult, ErrorKind, MeasureInput, MeasureResult, summarize_errors
from autosched.measure.runner import RunConfig, Runner
from autosched.workloads.reference import register_reference

_RAY_NAMES = ("RayBuilder", "RayRunner", "init_ray", "shutdown_ray", "ray_address")


def __getattr__(name: str):
    if name in _RAY_NAMES:
        from autosched.measure import ray_backend

        return getattr(ray_backend, name)
    raise AttributeError(f"module 'autosched.measure' has no attribute {name!r}")


__all__ = [
    "BuildResult",
    "Builder",
    "ErrorKind",
    "LocalBuilder",
    "LocalRunner",
    "MeasureInput",
    "MeasureResult",
    "MeasureStats",
    "Measurer",
    "NoReferenceError",
    "RayBuilder",
    "RayRunner",
    "RunConfig",
    "Runner",
    "TaskData",
    "TooManyFailures",
    "init_ray",
    "make_builder_runner",
    "make_inputs",
    "measure",
    "prepare_task_data",
    "ray_address",
    "reference_outputs",
    "register_reference",
    "shutdown_ray",
    "summarize_errors",
    "tolerance",
]
