"""TVM's pytest plugin (``pytest_plugins = ["tvm.testing.plugin"]`` in a conftest): a test taking ``target``
runs once per target (those not enabled here skipped), ``dev`` is that target's device, and the fixtures of one
``tvm.testing.parameters`` call are parametrized together."""

from __future__ import annotations

from typing import Any

import pytest

from autosched.runtime.ndarray import device
from autosched.testing import TARGETS, device_enabled


def pytest_generate_tests(metafunc: Any) -> None:
    _parametrize_groups(metafunc)
    if "target" in metafunc.fixturenames and not _parametrized(metafunc, "target"):
        failing = getattr(metafunc.function, "tvm_known_failing_targets", ())
        metafunc.parametrize("target", [
            pytest.param(t, marks=[pytest.mark.skipif(not device_enabled(t), reason=f"{t} is not enabled here"),
                                   *([pytest.mark.xfail(reason=f"known to fail on {t}")] if t in failing else [])])
            for t in TARGETS])


def _parametrized(metafunc: Any, name: str) -> bool:
    return any(name in mark.args[0] if isinstance(mark.args[0], (list, tuple)) else
               name in [n.strip() for n in str(mark.args[0]).split(",")]
               for mark in metafunc.definition.iter_markers("parametrize"))


def _parametrize_groups(metafunc: Any) -> None:
    """The fixtures of one ``parameters(...)`` call, parametrized at once with their value sets."""
    groups: dict[int, dict] = {}
    for name in metafunc.fixturenames:
        defs = metafunc._arg2fixturedefs.get(name)
        tag = getattr(defs[-1].func, "autosched_group", None) if defs else None
        if tag is not None:
            group, index, value_sets = tag
            groups.setdefault(group, {"names": {}, "values": value_sets})["names"][index] = name
    for g in groups.values():
        order = sorted(g["names"])
        names = [g["names"][k] for k in order]
        values = [tuple(v[k] for k in order) for v in g["values"]]
        metafunc.parametrize(names, values, indirect=True)


@pytest.fixture
def dev(target: str) -> Any:
    """The device of the test's ``target``."""
    return device(str(target).split()[0], 0)
