"""TOPI operators computed as relay computes them: the relay call is built on variables standing for the te
tensors and then lowered to te by each op's registered compute, so ``topi.nn.conv2d_nchw`` and relay's
``nn.conv2d`` are one computation with one default schedule. Each non-injective op's output stage is marked
(``op.topi_anchor``: the relay op and its attributes) for the schedules of :mod:`autosched.topi.schedule`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from autosched import relay, te
from autosched.errors import AutoschedError
from autosched.relay.ir.expr import Call, Constant, Tuple, TupleGetItem, Var, post_order
from autosched.relay.ir.type_infer import infer_type
from autosched.relay.op.op import INJECTIVE
from autosched.topi.utils import get_const_tuple


def static_shape(t: te.Tensor, what: str) -> tuple[int, ...]:
    """``t``'s shape as ints, or an error naming the operator: these operators need constant shapes."""
    shape = get_const_tuple(t.shape)
    if not all(isinstance(d, int) for d in shape):
        raise AutoschedError(f"topi.{what}: the shape of {t.op.name} is {tuple(shape)}; this operator needs "
                             f"constant shapes (only TOPI's elementwise, broadcast and reduction operators take "
                             f"te.var dimensions)")
    return shape


def lower_call(what: str, tensors: Sequence[te.Tensor], build: Callable[..., Any]) -> Any:
    """``build(*vars)``, a relay expression over one variable per tensor, computed in te on ``tensors``: a
    tensor, or a list of them for a tuple (``split``)."""
    for t in tensors:
        if not isinstance(t, te.Tensor):
            raise AutoschedError(f"topi.{what}: expected te.Tensor operands, got {type(t).__name__}")
    params = [relay.var(f"topi_arg{k}", shape=static_shape(t, what), dtype=t.dtype) for k, t in enumerate(tensors)]
    expr = build(*params)
    infer_type(expr)
    vals: dict[int, Any] = {id(p): t for p, t in zip(params, tensors)}
    best = -1
    for node in post_order(expr):
        if isinstance(node, Var):
            if id(node) not in vals:
                raise AutoschedError(f"topi.{what}: reads an input it was not given ({node.name_hint})")
        elif isinstance(node, Constant):
            if node.data.ndim:
                raise AutoschedError(f"topi.{what}: the computation needs a constant array, which a te "
                                     f"computation cannot hold; give it as a tensor")
            vals[id(node)] = te.const(node.data.item(), str(node.data.dtype))
        elif isinstance(node, Tuple):
            vals[id(node)] = [vals[id(f)] for f in node.fields]
        elif isinstance(node, TupleGetItem):
            vals[id(node)] = vals[id(node.tuple_value)][node.index]
        elif isinstance(node, Call):
            opdef = node.op
            inputs = []
            for a in node.args:
                v = vals[id(a)]
                inputs.extend(v if isinstance(v, list) else [v])
            # in one spelling (padding as four ints, ...), as a relay kernel's description gives them
            attrs = opdef.canonical_attrs(dict(node.attrs)) if opdef.canonical_attrs else dict(node.attrs)
            out = opdef.compute(inputs, attrs, node.checked_type)
            if isinstance(out, te.Tensor) and opdef.pattern > INJECTIVE and opdef.pattern >= best:
                best = opdef.pattern
                out.op.topi_anchor = {"op": opdef.name, **attrs}
            vals[id(node)] = out
        else:
            raise AutoschedError(f"topi.{what}: cannot compute a {type(node).__name__} in te")
    return vals[id(expr)]
