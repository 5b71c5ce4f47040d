"""From a graph to a library, as TVM's relay backend: ``relay.build`` and ``extract_tasks`` (build_module), fused
kernels as tuning tasks with their default schedules (fused), and the external compilers of bring-your-own-codegen
(contrib, which registers their pattern tables and codegens on import). The top of relay, beside the frontends."""

from autosched.relay.backend import build_module, contrib, fused
from autosched.relay.backend.build_module import (
    BuildResult,
    TaskList,
    build,
    build_summary,
    create_executor,
    extract_tasks,
    optimize,
)

__all__ = ["BuildResult", "TaskList", "build", "build_module", "build_summary", "contrib", "create_executor",
           "extract_tasks", "fused", "optimize"]
