"""TOPI's ``topi.nn.pooling`` module name (TVM's tests import ``pool2d`` from it)."""

from autosched.topi.nn import (  # noqa: F401
    adaptive_pool,
    adaptive_pool3d,
    global_pool,
    pool1d,
    pool2d,
    pool3d,
    pool_grad,
)
