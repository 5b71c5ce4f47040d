"""The workload registry itself: :class:`Workload`, :func:`register_workload`, :func:`register_schedule`,
:func:`get_workload`. The built-in workload modules register into it at their import; the package
(:mod:`autosched.workloads`) imports this registry and then the built-ins, so that looking a name up through the
package finds them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Workload:
    """A registered workload: its function, parameters with defaults, and optional expert schedules."""

    name: str
    func: Callable[..., list]
    params: list[tuple[str, Any]]  # (name, default or inspect.Parameter.empty)
    doc: str = ""
    schedules: dict[str, Callable] = field(default_factory=dict)  # target kind -> fn(sch, tensors, **args)
    label: Callable[..., str] | None = None  # fn(**args) -> a short name for people (progress, reports)
    # fn(arrays, rng, **args): make in place the measurement inputs whose values the kernel's loops depend on
    # valid (a sparse weight's structure: random integers would index out of bounds); None: any values do
    valid_inputs: Callable[..., None] | None = None
    # fn(args) -> args with target-dependent defaults filled in (a layout's block size, say), run under the
    # task's target: a task's args are then explicit, and the record says what was built
    fill: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # parameter -> (lowest, highest) value, None for no bound; see check()
    ranges: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def canonical_args(self, args: Any = None) -> dict[str, Any]:
        """All parameters by name, defaults filled in, values normalised to JSON-able types."""
        names = [p for p, _ in self.params]
        if args is None:
            args = {}
        if isinstance(args, (list, tuple)):
            if len(args) > len(names):
                raise TypeError(f"workload {self.name} takes {len(names)} parameters ({', '.join(names)}), "
                                f"got {len(args)}")
            args = dict(zip(names, args))
        elif not isinstance(args, dict):
            raise TypeError(f"workload {self.name}: args must be a tuple or a dict, got {type(args).__name__}")
        unknown = [k for k in args if k not in names]
        if unknown:
            raise TypeError(
                f"workload {self.name} has no parameter {', '.join(map(repr, unknown))}; "
                f"its parameters: {self.signature()}"
            )
        out = {}
        for p, default in self.params:
            if p in args:
                try:
                    out[p] = _normalise(args[p], default)
                except TypeError as e:
                    raise TypeError(f"workload {self.name}, parameter {p}: {e}") from None
            elif default is inspect.Parameter.empty:
                raise TypeError(f"workload {self.name} needs a value for parameter {p!r}")
            else:
                out[p] = _normalise(default, default)
        return out

    def check(self, args: dict[str, Any]) -> list[tuple[str, str]]:
        """What is wrong with ``args`` (canonical, see :meth:`canonical_args`) before anything is built: a list
        of (parameter, why) pairs, empty when they are fine. The ranges are the declared ones (``ranges=`` of
        :func:`register_workload`), else read from the defaults: a parameter whose default is a positive
        integer is an extent or a count (at least 1), one whose default is 0 (or ``padding``) at least 0. For
        a convolution-like workload (``H``/``W`` with ``KH``/``KW``, ``padding``, ``CI``/``CO`` with
        ``groups``): the kernel must fit in the padded input and the groups divide the channels."""
        bad: list[tuple[str, str]] = []
        for p, default in self.params:
            v = args.get(p)
            lo, hi = self.ranges.get(p, (None, None))
            if lo is None and isinstance(default, int) and not isinstance(default, bool):
                lo = 0 if default == 0 or p in ("padding", "pad") else (1 if default > 0 else None)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            if lo is not None and v < lo:
                bad.append((p, f"must be at least {lo}" + (" (an extent or a count)" if lo == 1 else "")))
            elif hi is not None and v > hi:
                bad.append((p, f"must be at most {hi}"))
        if bad:
            return bad
        pad = args.get("padding", 0)
        if isinstance(pad, int) and not isinstance(pad, bool):
            for size, kernel in (("H", "KH"), ("W", "KW")):
                n, k = args.get(size), args.get(kernel)
                if isinstance(n, int) and isinstance(k, int) and k > n + 2 * pad:
                    bad.append((kernel, f"the kernel ({kernel}={k}) is larger than the padded input "
                                        f"({size} + 2*padding = {n + 2 * pad})"))
        groups = args.get("groups")
        if isinstance(groups, int) and groups >= 1:
            for ch in ("CI", "CO"):
                if isinstance(args.get(ch), int) and args[ch] % groups:
                    bad.append((ch, f"the channels ({ch}={args[ch]}) are not divisible by groups={groups}"))
        return bad

    def signature(self) -> str:
        parts = []
        for p, d in self.params:
            parts.append(p if d is inspect.Parameter.empty else f"{p}={d!r}")
        return ", ".join(parts)


def _normalise(v: Any, default: Any) -> Any:
    if isinstance(v, tuple):
        v = list(v)
    if isinstance(v, list):
        return [_normalise(x, None) for x in v]
    try:
        import numpy as np

        if isinstance(v, np.generic):
            v = v.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(default, bool) and isinstance(v, (int, str)) and not isinstance(v, bool):
        if isinstance(v, str):
            low = v.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise TypeError(f"expected a boolean, got {v!r}")
        return bool(v)
    if isinstance(default, int) and not isinstance(default, bool) and isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            raise TypeError(f"expected an integer, got {v!r}") from None
    if isinstance(default, float) and isinstance(v, (int, str)) and not isinstance(v, bool):
        return float(v)
    if not isinstance(v, (int, float, str, bool, list, type(None))):
        raise TypeError(f"workload parameter values must be numbers, strings, booleans or lists; got {v!r}")
    return v


_WORKLOADS: dict[str, Workload] = {}


def register_workload(name: str | Callable | None = None, override: bool = False,
                      fill: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                      ranges: dict[str, tuple[Any, Any]] | None = None):
    """Register a workload function under ``name`` (default: the function's name). ``fill(args)`` returns the
    args with target-dependent defaults resolved; a Task calls it under its target (``Target.current()``).
    ``ranges``: parameter -> (lowest, highest) allowed value (None: unbounded), checked before a command
    builds anything (:meth:`Workload.check`; without one, the range is read from the default)."""

    def do(func: Callable, wname: str | None) -> Callable:
        wname = wname or func.__name__
        if wname in _WORKLOADS and not override and _WORKLOADS[wname].func is not func:
            existing = _WORKLOADS[wname].func
            same_src = getattr(existing, "__qualname__", None) == func.__qualname__ and getattr(
                existing, "__module__", None) == func.__module__
            if not same_src:
                raise ValueError(f"workload {wname!r} is already registered (pass override=True to replace it)")
        sig = inspect.signature(func)
        params = [(p.name, p.default) for p in sig.parameters.values()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        old = _WORKLOADS.get(wname)
        wl = Workload(wname, func, params, inspect.getdoc(func) or "", fill=fill, ranges=dict(ranges or {}))
        if old is not None:
            wl.schedules, wl.label, wl.valid_inputs = old.schedules, old.label, old.valid_inputs
        _WORKLOADS[wname] = wl
        func.workload_name = wname  # type: ignore[attr-defined]
        return func

    if callable(name):
        return do(name, None)
    return lambda func: do(func, name)


def register_schedule(name: str, target: str = "llvm"):
    """Register an expert schedule ``fn(sch, tensors, **args)`` for workload ``name`` on a target kind."""

    def do(fn: Callable) -> Callable:
        get_workload(name).schedules[target] = fn
        return fn

    return do


#: loaders of workloads registered on first use of their name, by name prefix (``relay.``: the fused kernels
#: of relay graphs, registered by importing the relay package); the package facade adds them, so that this
#: registry imports nothing above its layer
_SOURCES: dict[str, Callable[[], None]] = {}


def register_workload_source(prefix: str, load: Callable[[], None]) -> None:
    """Workloads whose names start with ``prefix`` are registered by ``load()``, called the first time such a
    name is looked up and not found (a task made from a record, or ``autosched tune --workload``)."""
    _SOURCES[prefix] = load


def get_workload(name: str) -> Workload:
    wl = _WORKLOADS.get(name)
    if wl is None:
        for prefix, load in list(_SOURCES.items()):
            if name.startswith(prefix):
                load()
        wl = _WORKLOADS.get(name)
    if wl is None:
        raise KeyError(f"unknown workload {name!r}; registered workloads: {', '.join(sorted(_WORKLOADS))}")
    return wl


def list_workloads() -> list[Workload]:
    return [_WORKLOADS[k] for k in sorted(_WORKLOADS)]


__all__ = ["Workload", "register_workload", "register_schedule", "register_workload_source", "get_workload",
           "list_workloads"]
