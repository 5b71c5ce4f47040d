"""TVM's ``tvm.testing.assert_allclose``, which TVM's tutorials and tests check every result with."""

from __future__ import annotations

from typing import Any

import numpy as np

from autosched.runtime.ndarray import NDArray


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``numpy.testing.assert_allclose`` on numpy arrays or NDArrays, with TVM's defaults (rtol and atol
    1e-7); the shapes must match exactly (numpy would broadcast)."""
    actual = actual.numpy() if isinstance(actual, NDArray) else np.asanyarray(actual)
    desired = desired.numpy() if isinstance(desired, NDArray) else np.asanyarray(desired)
    np.testing.assert_equal(actual.shape, desired.shape, err_msg="shapes differ")
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=True)


__all__ = ["assert_allclose"]
