"""XGBoost, the cost model's third-party library, imported in this one place.

XGBoost's import loads scikit-learn (and through it scipy.stats) when it is installed, for its
``XGBRegressor``-style wrappers: 1.7 of the 2.6 s the import takes on a 2-core Zen 3. The ``autosched``
command uses the Booster alone, so it asks for :func:`lean_import`; a library user's process, which may use
those wrappers, gets the whole package.
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType

_lean = False
_lock = threading.Lock()


def lean_import() -> None:
    """Import XGBoost (on first use) without its scikit-learn wrappers, which then subclass plain ``object``:
    for a process, such as the ``autosched`` command's, where nothing but the Booster is used."""
    global _lean
    _lean = True


def xgboost() -> ModuleType:
    """The ``xgboost`` module, imported on first use (see :func:`lean_import`)."""
    module = sys.modules.get("xgboost")
    if module is not None:
        return module
    with _lock:
        block = _lean and "sklearn" not in sys.modules
        if block:
            sys.modules["sklearn"] = None  # type: ignore[assignment]  # makes `import sklearn` fail at once
        try:
            import xgboost
        finally:
            if block and sys.modules.get("sklearn", 0) is None:
                del sys.modules["sklearn"]  # a later `import sklearn` loads it as usual
    return xgboost


__all__ = ["lean_import", "xgboost"]
