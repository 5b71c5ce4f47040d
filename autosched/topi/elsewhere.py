"""TOPI's namespaces for targets autosched does not build for (``topi.arm_cpu``, ``hls``, ``mali``, ``bifrost``,
``intel_graphics``, ``rocm``): every name exists, so that TVM's tables of implementations by target build, and
calling one says that the target is not there. (Tables pick by target keys: an llvm target takes ``cpu``, a
cuda one ``gpu``, so these are never picked.)"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from autosched.errors import AutoschedError

KINDS = ("arm_cpu", "hls", "mali", "bifrost", "intel_graphics", "rocm")


def _namespace(kind: str) -> types.ModuleType:
    mod = types.ModuleType(f"autosched.topi.{kind}", f"TOPI's {kind} operators: not available (no {kind} target).")

    def __getattr__(name: str) -> Callable[..., Any]:  # noqa: N807 - a module's PEP 562 hook
        if name.startswith("__"):
            raise AttributeError(name)

        def refused(*args: Any, **kwargs: Any) -> Any:
            raise AutoschedError(f"topi.{kind}.{name}: autosched has no {kind} target (it builds for llvm and "
                                 f"cuda: use topi.x86 / topi.generic or topi.cuda)")

        refused.__name__ = name
        return refused

    mod.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[mod.__name__] = mod
    return mod


NAMESPACES = {kind: _namespace(kind) for kind in KINDS}
