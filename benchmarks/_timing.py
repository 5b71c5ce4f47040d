"""Timing shared by the benchmarks that compare autosched with a vendor library: each side's best median over
alternating rounds, each block after a pause, because a library's worker threads (or a GPU's clocks) stay
busy for a while after a call and the side timed right after another would pay for it.

The rule is the package's, ``autosched/measure/alternating.py`` (the comparison ``autosched tune`` ends with
uses it too), so there is one implementation. The peer scripts run in the peers' virtualenv, which has no
autosched: there the same file is loaded by its path (it imports the standard library only).
"""

from __future__ import annotations

try:
    from autosched.measure.alternating import alternating_medians, median_time
except ImportError:  # the peers' virtualenv: the package's file itself, without the package
    import importlib.util
    from pathlib import Path

    _path = Path(__file__).resolve().parent.parent / "autosched" / "measure" / "alternating.py"
    _spec = importlib.util.spec_from_file_location("_autosched_alternating", _path)
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    alternating_medians, median_time = _module.alternating_medians, _module.median_time

__all__ = ["alternating_medians", "median_time"]
