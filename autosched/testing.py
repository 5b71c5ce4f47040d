"""TVM's ``tvm.testing``: ``assert_allclose``, which TVM's tutorials and tests check every result with, and the
helpers its tests choose targets with (``device_enabled``, ``enabled_targets``, ``uses_gpu``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from autosched.runtime.ndarray import NDArray, device
from autosched.target import Target, host_gpu_arch


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``numpy.testing.assert_allclose`` on numpy arrays or NDArrays, with TVM's defaults (rtol and atol
    1e-7); the shapes must match exactly (numpy would broadcast)."""
    actual = actual.numpy() if isinstance(actual, NDArray) else np.asanyarray(actual)
    desired = desired.numpy() if isinstance(desired, NDArray) else np.asanyarray(desired)
    np.testing.assert_equal(actual.shape, desired.shape, err_msg="shapes differ")
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=True)


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
    import pytest  # the test runner's, only when a test asks

    return pytest.mark.skipif(host_gpu_arch() is None, reason="no CUDA device")(fn)


requires_cuda = requires_gpu

__all__ = ["assert_allclose", "device_enabled", "enabled_targets", "requires_cuda", "requires_gpu", "uses_gpu"]
