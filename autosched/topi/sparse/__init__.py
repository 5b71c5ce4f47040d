"""TOPI's sparse helpers (``topi.sparse.utils``): random BSR weights for sparse kernels' tests and benchmarks."""

from autosched.topi.sparse import utils

__all__ = ["utils"]
