"""Type inference on the graph IR: each call's type comes from its op's own type relation (``op.type_rel``), so
this needs no op registry and sits in ir, below the ops and the passes (``transform.InferType`` runs it)."""

from __future__ import annotations

from autosched.relay.ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
    FuncType,
    RelayError,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Type,
    Var,
    post_order,
)


def infer_type(expr: Expr) -> Type:
    """Type every node of ``expr`` (stored in ``checked_type``); errors name the op and the shapes."""
    for node in post_order(expr):
        if node._checked_type is not None and not isinstance(node, Function):  # nodes are immutable
            continue
        if isinstance(node, Var):
            t = node.type_annotation
        elif isinstance(node, Constant):
            t = TensorType(node.data.shape, str(node.data.dtype))
        elif isinstance(node, Tuple):
            t = TupleType([f.checked_type for f in node.fields])
        elif isinstance(node, TupleGetItem):
            tt = node.tuple_value.checked_type
            if not isinstance(tt, TupleType) or not 0 <= node.index < len(tt.fields):
                raise RelayError(f"TupleGetItem: index {node.index} of a value of type {tt!r}")
            t = tt.fields[node.index]
        elif isinstance(node, Function):
            t = FuncType([p.type_annotation for p in node.params], node.body.checked_type)
        elif isinstance(node, Call):
            arg_types = [a.checked_type for a in node.args]
            if isinstance(node.op, Function):
                ft = infer_type(node.op)
                want = [p.type_annotation for p in node.op.params]
                if want != arg_types:
                    raise RelayError(f"call of a function taking {want} with arguments of types {arg_types}")
                t = ft.ret_type
            else:
                try:
                    t = node.op.type_rel(arg_types, node.attrs)
                except RelayError:
                    raise
                except Exception as e:  # a relation's own bug or a malformed attribute
                    raise RelayError(f"{node.op.name}: cannot infer the type for arguments "
                                     f"{', '.join(map(repr, arg_types))} and attributes {node.attrs}: {e}") from e
        else:
            raise RelayError(f"unknown relay node {node!r}")
        node._checked_type = t
    return expr.checked_type


__all__ = ["infer_type"]
