"""TOPI's ``topi.nn.pooling`` module name (TVM's tests import ``pool2d`` from it)."""

from autosched.topi.nn import global_pool, pool2d  # noqa: F401
