"""TVM's ``tvm.contrib`` helpers that its tutorials use: ``cc.create_shared``, ``utils.tempdir``,
``nvcc.have_tensorcore`` and ``graph_executor``."""

from autosched.contrib import cc, graph_executor, nvcc, utils

__all__ = ["cc", "graph_executor", "nvcc", "utils"]
