"""TVM's ``tvm.testing``: ``assert_allclose``, which TVM's tutorials and tests check every result with, the
helpers its tests choose targets with (``device_enabled``, ``enabled_targets``, ``uses_gpu``), and its pytest
parametrization (``parameter``, ``parameters``, ``fixture``, ``parametrize_targets``, with the ``target`` and
``dev`` fixtures of the plugin ``autosched.testing.plugin``, which a conftest names in ``pytest_plugins``).

pytest is imported by the functions that make pytest objects only: deployed code imports this module for
``assert_allclose`` without it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched.runtime.ndarray import NDArray, device
from autosched.target import Target, host_gpu_arch
from autosched.te.expr import IntImm, convert
from autosched.tir.arith import simplify


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``numpy.testing.assert_allclose`` on numpy arrays or NDArrays, with TVM's defaults (rtol and atol
    1e-7); the shapes must match exactly (numpy would broadcast)."""
    actual = actual.numpy() if isinstance(actual, NDArray) else np.asanyarray(actual)
    desired = desired.numpy() if isinstance(desired, NDArray) else np.asanyarray(desired)
    np.testing.assert_equal(actual.shape, desired.shape, err_msg="shapes differ")
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=True)


def assert_prim_expr_equal(lhs: Any, rhs: Any) -> None:
    """TVM's check that two integer expressions are equal for every value of their variables: their
    difference simplifies to 0."""
    diff = simplify(convert(lhs) - convert(rhs))
    if not (isinstance(diff, IntImm) and diff.value == 0):
        raise AssertionError(f"{lhs} and {rhs} differ: their difference simplifies to {diff}, not 0")


def device_enabled(target: str | Target) -> bool:
    """Whether code for ``target`` can run here: ``llvm`` always, ``cuda`` where a CUDA GPU is; other kinds
    (opencl, rocm, ...) never."""
    kind = target.kind if isinstance(target, Target) else str(target).split()[0]
    return kind == "llvm" or (kind == "cuda" and host_gpu_arch() is not None)


def enabled_targets() -> list[tuple[str, Any]]:
    """``(target, device)`` of every target that can run here (``llvm``, and ``cuda`` with a GPU)."""
    return [(t, device(t, 0)) for t in ("llvm", "cuda") if device_enabled(t)]


def uses_gpu(fn: Any) -> Any:
    """TVM's marker of a test that runs on the GPU where there is one (and on the CPU anyway): the test itself
    asks ``device_enabled`` for each target, so it is returned as it is."""
    return fn


def requires_gpu(fn: Any) -> Any:
    """Skip a test (pytest) where no GPU is."""
    import pytest  # the test runner's: only test code asks (see the module's docstring)

    return pytest.mark.skipif(host_gpu_arch() is None, reason="no CUDA device")(fn)


requires_cuda = requires_gpu


def requires_tensorcore(fn: Any) -> Any:
    """Skip a test (pytest) where no GPU with tensor cores (sm_70 or newer) is."""
    import pytest  # the test runner's: only test code asks (see the module's docstring)

    arch = host_gpu_arch()
    has = arch is not None and int("".join(ch for ch in arch if ch.isdigit()) or 0) >= 70
    return pytest.mark.skipif(not has, reason="no CUDA device with tensor cores")(fn)


def check_numerical_grads(function: Any, input_values: Any, grad_values: Any, function_value: Any = None,
                          delta: float = 1e-3, atol: float = 1e-2, rtol: float = 0.1) -> None:
    """Check ``grad_values`` against central differences of the scalar ``function`` (TVM's helper for
    gradients). Inputs and gradients are lists (positional) or dicts (keyword); each input's gradient passes
    when ``|numeric - given| <= atol * sqrt(size) + rtol * |numeric|`` (Euclidean norms), else an
    AssertionError names the input and the worst element."""
    if isinstance(input_values, dict):
        names = list(input_values)
        values = {k: np.array(v, dtype=np.asarray(v).dtype) for k, v in input_values.items()}

        def call(vals: dict) -> float:
            return float(function(**vals))
        grads = grad_values
    else:
        names = list(range(len(input_values)))
        values = {i: np.array(v, dtype=np.asarray(v).dtype) for i, v in enumerate(input_values)}

        def call(vals: dict) -> float:
            return float(function(*[vals[i] for i in names]))
        grads = dict(enumerate(grad_values))
    for name in names:
        if name not in grads:
            continue
        x = values[name]
        given = np.asarray(grads[name].numpy() if isinstance(grads[name], NDArray) else grads[name],
                           dtype=np.float64)
        if given.shape != x.shape:
            raise ValueError(f"gradient of input {name!r} has shape {given.shape}, the input {x.shape}")
        numeric = np.zeros(x.shape, dtype=np.float64)
        flat = x.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + delta
            up = call(values)
            flat[i] = old - delta
            down = call(values)
            flat[i] = old
            numeric.reshape(-1)[i] = (up - down) / (2 * delta)
        err = float(np.linalg.norm(numeric - given))
        bound = atol * np.sqrt(max(x.size, 1)) + rtol * float(np.linalg.norm(numeric))
        if not np.isfinite(err) or err > bound:
            worst = np.unravel_index(int(np.argmax(np.abs(numeric - given))), x.shape) if x.size else ()
            raise AssertionError(
                f"gradient of input {name!r} differs from central differences (delta {delta}): error norm "
                f"{err:.4g} > {bound:.4g}; worst at {worst}: numeric {numeric[worst]:.6g}, given {given[worst]:.6g}")


def requires_llvm(fn: Any) -> Any:
    """TVM's marker of a test that needs the llvm target: autosched always has it."""
    return fn


def known_failing_targets(*targets: str) -> Any:
    """Mark a test taking ``target`` as expected to fail on ``targets`` (the plugin marks those runs xfail)."""
    def mark(fn: Any) -> Any:
        fn.tvm_known_failing_targets = tuple(targets)
        return fn

    return mark


#: the targets ``target`` fixtures run over (the plugin skips those not enabled here)
TARGETS = ("llvm", "cuda")


def parametrize_targets(*args: Any) -> Any:
    """Run a test taking ``target`` (and ``dev``) on each of the given targets, or on every target when used bare
    (``@tvm.testing.parametrize_targets``); those not enabled here are skipped."""
    import pytest  # the test runner's

    def mark(fn: Any, targets: tuple) -> Any:
        params = [pytest.param(t, marks=pytest.mark.skipif(not device_enabled(t), reason=f"{t} is not enabled "
                                                                                        f"here"))
                  for t in targets]
        return pytest.mark.parametrize("target", params)(fn)

    if len(args) == 1 and callable(args[0]):
        return mark(args[0], TARGETS)
    return lambda fn: mark(fn, tuple(args) or TARGETS)


def parameter(*values: Any, ids: Any = None) -> Any:
    """A fixture taking each of ``values`` in turn: ``m = tvm.testing.parameter(1, 64)`` makes every test with
    an argument ``m`` run once per value (pytest names the fixture after the variable)."""
    import pytest  # the test runner's

    @pytest.fixture(params=list(values), ids=ids)
    def as_fixture(*_cls: Any, request: Any) -> Any:  # (*_cls: a fixture in a test class)
        return request.param

    return as_fixture


_GROUPS = [0]


def parameters(*value_sets: Sequence[Any]) -> list[Any]:
    """Fixtures that take their values together: ``m, n = tvm.testing.parameters((1, 2), (3, 4))`` runs a test
    with (m, n) = (1, 2), then (3, 4) (the plugin parametrizes the group at once)."""
    import pytest  # the test runner's

    _GROUPS[0] += 1
    group = _GROUPS[0]
    count = len(value_sets[0]) if value_sets else 0
    if any(len(v) != count for v in value_sets):
        raise ValueError("tvm.testing.parameters: every value set needs one value per parameter")
    out = []
    for k in range(count):
        def as_fixture(*_cls: Any, request: Any) -> Any:  # (*_cls: a fixture in a test class)
            return request.param

        as_fixture.autosched_group = (group, k, [tuple(v) for v in value_sets])  # read by the plugin
        out.append(pytest.fixture(as_fixture))
    return out


def fixture(func: Any = None, *, cache_return_value: bool = False) -> Any:
    """TVM's ``tvm.testing.fixture`` (a pytest fixture; its result is recomputed per test either way)."""
    import pytest  # the test runner's

    if func is None:
        return lambda f: pytest.fixture(f)
    return pytest.fixture(func)


__all__ = ["TARGETS", "assert_allclose", "assert_prim_expr_equal", "check_numerical_grads", "device_enabled",
           "enabled_targets", "fixture", "parameter", "parameters", "parametrize_targets", "requires_cuda",
           "known_failing_targets", "requires_gpu", "requires_llvm", "requires_tensorcore", "uses_gpu"]
