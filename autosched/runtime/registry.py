"""A process-wide registry of named functions, in the spirit of TVM's PackedFunc registry."""

from __future__ import annotations

from collections.abc import Callable

_REGISTRY: dict[str, Callable] = {}


def register_func(name: str, f: Callable | None = None, override: bool = False):
    """Register ``f`` under ``name``; without ``f`` it is a decorator."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_func needs a non-empty name, got {name!r}")

    def do(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"register_func({name!r}): {fn!r} is not callable")
        if name in _REGISTRY and not override:
            raise ValueError(f"global function {name!r} is already registered (pass override=True to replace it)")
        _REGISTRY[name] = fn
        return fn

    return do(f) if f is not None else do


def get_global_func(name: str, allow_missing: bool = False) -> Callable | None:
    """The function registered as ``name``; ``None`` if missing and ``allow_missing``."""
    fn = _REGISTRY.get(name)
    if fn is None and not allow_missing:
        raise ValueError(f"no global function named {name!r} (registered: {', '.join(sorted(_REGISTRY)) or 'none'})")
    return fn


def list_global_func_names() -> list[str]:
    return sorted(_REGISTRY)


def remove_global_func(name: str) -> None:
    _REGISTRY.pop(name, None)
