"""``te.extern``: a stage whose body is loop IR the user writes (a ``tir.call_packed`` to a registered
function, a ``tir.call_extern`` to a C function, or ``tir.ir_builder`` code) instead of a compute expression.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from autosched.te.expr import Expr
from autosched.te.tensor import IterVar, Operation, Tensor, _shape
from autosched.tir import stmt as S
from autosched.tir.extern import decl_buffer


class ExternOp(Operation):
    """Outputs written by ``body``, a loop-IR statement over ``input_placeholders`` (bound to ``inputs``)
    and ``output_placeholders`` (bound to the outputs)."""

    def __init__(self, name: str, inputs: Sequence[Tensor], input_placeholders: Sequence[S.Buffer],
                 output_placeholders: Sequence[S.Buffer], body: S.Stmt, tag: str = "", attrs: dict | None = None):
        self.name = name
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.inputs = list(inputs)
        self.input_placeholders = list(input_placeholders)
        self.output_placeholders = list(output_placeholders)
        self.body = body
        self.shapes = [tuple(b.shape) for b in self.output_placeholders]
        self.shape = self.shapes[0]
        self.dtypes = [b.dtype for b in self.output_placeholders]
        self.dtype = self.dtypes[0]
        self.axis: list[IterVar] = []
        self.reduce_axis: list[IterVar] = []

    @property
    def num_outputs(self) -> int:
        return len(self.output_placeholders)

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self.inputs)


def extern(shape: Any, inputs: Sequence[Tensor], fcompute: Callable[..., Any], name: str = "extern",
           dtype: str | Sequence[str] | None = None, in_buffers: Sequence[S.Buffer] | None = None,
           out_buffers: Sequence[S.Buffer] | None = None, tag: str = "",
           attrs: dict | None = None) -> Tensor | list[Tensor]:
    """Tensors of ``shape`` (a list of shapes: several outputs) computed by ``fcompute(ins, outs)``, which
    gets a buffer per input and per output and returns the statement (or call) that fills the outputs."""
    multi = isinstance(shape, (list, tuple)) and bool(shape) and isinstance(shape[0], (list, tuple))
    shapes = [_shape(s) for s in shape] if multi else [_shape(shape)]
    default = dtype or (inputs[0].dtype if inputs else "float32")
    dtypes = list(dtype) if isinstance(dtype, (list, tuple)) else [default] * len(shapes)
    if len(dtypes) != len(shapes):
        raise ValueError(f"extern {name}: {len(dtypes)} dtypes for {len(shapes)} outputs")
    ins = list(in_buffers) if in_buffers is not None else [
        decl_buffer(t.shape, t.dtype, t.name) for t in inputs]
    if len(ins) != len(inputs):
        raise ValueError(f"extern {name}: {len(ins)} input buffers for {len(inputs)} inputs")
    outs = list(out_buffers) if out_buffers is not None else [
        decl_buffer(s, d, name if k == 0 else f"{name}.v{k}") for k, (s, d) in enumerate(zip(shapes, dtypes))]
    body = fcompute(ins, outs)
    if isinstance(body, Expr):
        body = S.Evaluate(body)
    if not isinstance(body, S.Stmt):
        raise TypeError(f"extern {name}: fcompute must return a statement or a call (tir.call_packed, "
                        f"ir_builder.get()), got {body!r}")
    op = ExternOp(name, inputs, ins, outs, body, tag, attrs)
    res = [op.output(k) for k in range(op.num_outputs)]
    return res if multi else res[0]


__all__ = ["ExternOp", "extern"]
