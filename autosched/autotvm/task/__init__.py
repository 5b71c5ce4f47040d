"""AutoTVM templates and tasks: ``@template(name)`` turns a function returning ``(s, args)`` that reads its knobs
from ``get_config()`` into a workload (its computation) with a template space (its knobs) on every target
kind; ``create`` makes its task, ``extract_from_program`` a model's tasks; ``config_space`` is the task's space.
``FallbackContext`` hands out the configuration of a template called with no record (``space``: TVM's
``FallbackConfigEntity``).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from autosched.database.apply import best_record
from autosched.relay.backend.build_module import extract_tasks
from autosched.space import register_template
from autosched.space.base import SpaceError
from autosched.target import Target
from autosched.task import Task as _Task
from autosched.workloads import register_workload
from autosched.workloads.knobs import DefaultConfig, SplitEntity

_CONFIG: contextvars.ContextVar[Any] = contextvars.ContextVar("autosched_autotvm_config", default=None)
_FALLBACK: contextvars.ContextVar[Any] = contextvars.ContextVar("autosched_autotvm_fallback", default=None)
#: the target kinds a template's space is registered for
_KINDS = ("llvm", "cuda")


class FallbackConfig(DefaultConfig):
    """The configuration of a template called outside tuning with no record for it: AutoTVM's fallback (every
    split leaves the axis whole in its outer loop, every other knob at its first candidate). A knob defined again
    keeps its first value, so a caller may fix knobs before the template defines them (TVM's rule)."""

    is_fallback = True

    def _set(self, name: str, entity: Any, value: Any) -> None:
        if name not in self._entities:  # a value set first (``cfg[name] = entity``, an earlier call) is kept
            super()._set(name, entity, value)

    def __setitem__(self, name: str, entity: Any) -> None:
        """TVM's way to fix a fallback knob before the schedule reads it: ``cfg["tile_y"] = SplitEntity([-1, 8])``."""
        self._entities[name] = entity
        self.values[name] = next(getattr(entity, a) for a in ("size", "perm", "anns", "val") if hasattr(entity, a))

    def define_split(self, name: str, axis: Any, num_outputs: int = 2, policy: str = "factors",
                     max_factor: int | None = None, candidate: Any = None, filter: Any = None,  # noqa: A002
                     default: Sequence[int] | None = None) -> None:
        if default is None:
            default = [int(axis.dom.extent)] + [1] * (num_outputs - 1)
        self._set(name, SplitEntity(default), [int(x) for x in default])


class FallbackContext:
    """AutoTVM's root dispatch context: the configuration of a template called with no record, one per (target,
    workload) kept in ``memory``; ``with`` one (a subclass overriding ``_query_inside``, as TOPI's tests write),
    template calls take their configurations from it. A workload is ``(template name, *arguments)``."""

    def __init__(self) -> None:
        self.memory: dict[Any, Any] = {}
        self._tokens: list[Any] = []

    def _query_inside(self, target: Any, workload: tuple) -> Any:
        key = (str(target), workload)
        if key not in self.memory:
            self.memory[key] = FallbackConfig()
        return self.memory[key]

    def query(self, target: Any, workload: tuple) -> Any:
        """The configuration of ``workload`` on ``target``."""
        return self._query_inside(target, workload)

    def clear_cache(self, target: Any, workload: tuple) -> None:
        self.memory.pop((str(target), workload), None)

    def update(self, target: Any, workload: tuple, cfg: Any) -> None:
        self.memory[(str(target), workload)] = cfg

    def __enter__(self) -> FallbackContext:
        self._tokens.append(_FALLBACK.set(self))
        return self

    def __exit__(self, *exc: Any) -> None:
        _FALLBACK.reset(self._tokens.pop())


def _frozen(v: Any) -> Any:
    return tuple(_frozen(x) for x in v) if isinstance(v, (list, tuple)) else v


def _fallback(name: str, params: dict) -> Any:
    """The configuration of template ``name`` called on ``params`` with no record: the active FallbackContext's,
    else a fresh fallback."""
    ctx = _FALLBACK.get()
    if ctx is None:
        return FallbackConfig()
    return ctx.query(Target.current(allow_none=True), (name, *(_frozen(v) for v in params.values())))


def get_config() -> Any:
    """The configuration the template being run reads its knobs from (a fallback one outside tuning)."""
    cfg = _CONFIG.get()
    return cfg if cfg is not None else FallbackConfig()


def _run_with(cfg: Any, func: Callable, params: dict) -> tuple[Any, list]:
    token = _CONFIG.set(cfg)
    try:
        out = func(**params)
    finally:
        _CONFIG.reset(token)
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"AutoTVM template {func.__name__} must return (schedule, [tensors]), got {out!r}")
    return out[0], list(out[1])


def template(name: str) -> Callable[[Callable], Callable]:
    """Register a template function ``f(*args) -> (s, [tensors])``: its computation as workload ``name``, its knobs
    as that workload's template space. Calling ``f`` returns the best record's schedule of the active
    ``apply_history_best`` for the task ``(name, args, current target)``, else the fallback schedule."""

    def do(func: Callable) -> Callable:
        @functools.wraps(func)
        def computation(*args: Any, **kwargs: Any) -> list:
            params = _params(func, args, kwargs)
            return _run_with(_fallback(name, params), func, params)[1]

        register_workload(name, override=True)(computation)

        def knobs(cfg: Any, sch: Any, tensors: list, **params: Any) -> None:
            own, _ = _run_with(cfg, func, params)
            own.trace.replay(sch)  # the same computation: its stages line up with the task's schedule

        for kind in _KINDS:
            register_template(name, kind, override=True)(knobs)

        @functools.wraps(func)
        def dispatch(*args: Any, **kwargs: Any) -> tuple[Any, list]:
            task = Task(name, _params(func, args, kwargs), Target.current())
            rec = best_record(task)
            if rec is None:
                return _run_with(_fallback(name, task.args), func, task.args)
            return task.apply(rec.trace)

        dispatch.workload_name = name  # (Task(dispatch, ...) finds the workload)
        return dispatch

    return do


def _params(func: Callable, args: tuple, kwargs: dict) -> dict:
    return dict(inspect.signature(func).bind(*args, **kwargs).arguments)


def template_space(task: _Task) -> Any:
    """``task``'s template space, or None when its workload has no template for the target kind (a model's
    fused kernel)."""
    try:
        return task.space("template")
    except SpaceError:
        return None


class Task(_Task):
    """A task with AutoTVM's ``config_space``: the template space when the workload has a template for the
    target kind, else the generated (sketch) space."""

    @property
    def config_space(self) -> Any:
        space = template_space(self)
        return space if space is not None else self.space("generated")


def create(task_name: str, args: Sequence[Any] = (), target: Any = None, target_host: Any = None) -> Task:
    """The task of template ``task_name`` with ``args`` for ``target`` (default: the current target)."""
    return Task(task_name, tuple(args), target if target is not None else Target.current())


def extract_from_program(mod: Any, params: dict[str, Any] | None, target: Any, target_host: Any = None,
                         ops: Any = None, **unused: Any) -> list[Task]:
    """The tuning tasks of a model: one per distinct fused kernel worth tuning (``task.weight`` runs of it)."""
    out = []
    for t in extract_tasks(mod, params, target):
        task = Task(t.name, t.args, t.target)
        task.weight = t.weight
        out.append(task)
    return out


__all__ = ["FallbackConfig", "FallbackContext", "Task", "create", "extract_from_program", "get_config", "template",
           "template_space"]
