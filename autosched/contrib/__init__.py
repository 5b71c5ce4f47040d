"""TVM's ``tvm.contrib`` helpers that its tutorials use: ``cc.create_shared``, ``utils.tempdir``,
``nvcc.have_tensorcore``, ``graph_executor`` and ``cblas`` (matrix products by numpy's BLAS in te.extern)."""

from autosched.contrib import cblas, cc, graph_executor, nvcc, utils

__all__ = ["cblas", "cc", "graph_executor", "nvcc", "utils"]
