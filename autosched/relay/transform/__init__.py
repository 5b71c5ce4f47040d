"""Graph passes, as TVM's ``relay.transform``: ``Sequential`` under a ``PassContext`` (transform), the rewrite
into blocked layouts (alter_layout) and bring-your-own-codegen partitioning (partition). Above the ops and the
patterns, below the backend and the frontends."""

from autosched.relay.ir.type_infer import infer_type
from autosched.relay.transform import alter_layout, partition, transform
from autosched.relay.transform.alter_layout import AlterOpLayout
from autosched.relay.transform.partition import AnnotateTarget, MergeComposite, PartitionGraph, partition_for
from autosched.relay.transform.transform import (
    DeadCodeElimination,
    EliminateCommonSubexpr,
    FoldConstant,
    FuseOps,
    InferType,
    Pass,
    PassContext,
    Sequential,
    SimplifyInference,
    bind_params,
    function_pass,
)
from autosched.transform import register_pass_names

__all__ = [
    "AlterOpLayout", "AnnotateTarget", "DeadCodeElimination", "EliminateCommonSubexpr", "FoldConstant", "FuseOps",
    "InferType", "MergeComposite", "PartitionGraph", "Pass", "PassContext", "Sequential", "SimplifyInference",
    "alter_layout", "bind_params", "function_pass", "infer_type", "partition", "partition_for", "transform",
]

# the passes PassContext's required_pass / disabled_pass can name: the pass constructors above
register_pass_names(n for n in __all__ if n[0].isupper() and n not in ("Pass", "PassContext", "Sequential"))
