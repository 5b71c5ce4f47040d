"""The tags TOPI's computations carry (``C.op.tag``), by which schedules recognise stages, as TVM names them."""

from __future__ import annotations

ELEMWISE = "elemwise"
BROADCAST = "broadcast"
INJECTIVE = "injective"
COMM_REDUCE = "comm_reduce"
COMM_REDUCE_IDX = "comm_reduce_idx"


def is_broadcast(tag: str) -> bool:
    """Whether ``tag`` marks an elementwise or broadcast stage."""
    return tag in (ELEMWISE, BROADCAST) or tag.startswith(("elemwise", "broadcast"))


def is_injective(tag: str) -> bool:
    """Whether ``tag`` marks a stage whose every output element reads a fixed set of input elements."""
    return is_broadcast(tag) or tag == INJECTIVE or tag.startswith("injective")
