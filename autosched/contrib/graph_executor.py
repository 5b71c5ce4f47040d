"""TVM's ``tvm.contrib.graph_executor``: the graph executor of :mod:`autosched.runtime.graph_executor`."""

from autosched.runtime.graph_executor import (
    BenchmarkResult,
    GraphExecutorFactoryModule,
    GraphModule,
    create,
    load_params,
    save_params,
)

__all__ = ["BenchmarkResult", "GraphExecutorFactoryModule", "GraphModule", "create", "load_params", "save_params"]
