"""Tensor intrinsics (TVM's ``te.decl_tensor_intrin`` and ``Stage.tensorize``): a small computation, declared
as a te compute, whose implementation is user-written loop IR (a call to a micro-kernel through
``tir.call_extern`` / ``tir.call_packed``, or ``ir_builder`` code). ``s[C].tensorize(axis, intrin)`` replaces
the loops of ``C`` from ``axis`` inward by that implementation, applied to the regions of ``C``'s inputs and
output those loops cover.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from autosched.errors import ScheduleError
from autosched.te import expr as E
from autosched.te.expr import Expr
from autosched.te.tensor import ComputeOp, IterVar, Operation, Range, Tensor, TensorSlice
from autosched.tir import stmt as S
from autosched.tir.arith import simplify
from autosched.tir.extern import decl_buffer

#: the intrinsics declared in this process, by name: a trace names the intrinsic it tensorizes with
_INTRINSICS: dict[str, TensorIntrin] = {}
_counter = itertools.count(1)
#: functions that declare a known intrinsic from its name (None if it is not theirs): what a trace replayed in a
#: fresh process tensorizes with (autosched.te.tensor_core's)
PROVIDERS: list[Callable[[str], TensorIntrin | None]] = []


def _stmt(x: Any, what: str, name: str) -> S.Stmt | None:
    if x is None:
        return None
    if isinstance(x, Expr):
        return S.Evaluate(x)
    if isinstance(x, S.Stmt):
        return x
    raise TypeError(f"decl_tensor_intrin {name}: the {what} must be a statement or a call, got {x!r}")


class TensorIntrin:
    """A declared intrinsic: the compute it implements (``op``), its buffers (inputs then outputs) and its
    statements: ``body`` computes the whole output; for a reduction, ``reduce_init`` resets the output and
    ``reduce_update`` adds a part of the reduction to it (used when the tensorized loops cover only part of
    the reduction)."""

    def __init__(self, name: str, op: ComputeOp, inputs: Sequence[Tensor], buffers: Sequence[S.Buffer],
                 body: S.Stmt | None, reduce_init: S.Stmt | None, reduce_update: S.Stmt | None,
                 scalar_params: Sequence[E.Var] = ()):
        self.name = name
        self.op = op
        self.inputs = list(inputs)
        self.buffers = list(buffers)
        self.body = body
        self.reduce_init = reduce_init
        self.reduce_update = reduce_update
        self.scalar_params = list(scalar_params)

    def __repr__(self) -> str:
        return f"TensorIntrin({self.name}, op={self.op.name})"

    def __call__(self, *regions: Any, reduce_axis: Any = None, scalar_inputs: Any = None) -> TensorIntrinCall:
        """The intrinsic applied to regions of tensors (``A[i, 0:16]``), in a ``te.compute`` whose last
        dimensions are the intrinsic's output (TVM's tensor compute): ``reduce_axis`` are reduction loops
        around it, whose partial results the intrinsic's update adds up."""
        if scalar_inputs or self.scalar_params:
            raise ValueError(f"tensor intrinsic {self.name}: calling an intrinsic with scalar parameters in a "
                             f"compute is not supported; tensorize a compute with it instead")
        axes = [] if reduce_axis is None else list(reduce_axis) if isinstance(reduce_axis, (list, tuple)) \
            else [reduce_axis]
        return TensorIntrinCall(self, list(regions), axes)


class TensorIntrinCall:
    """``intrin(regions..., reduce_axis=k)``: what ``te.compute`` turns into a tensorized operation."""

    def __init__(self, intrin: TensorIntrin, regions: list, reduce_axis: list):
        self.intrin = intrin
        self.regions = regions
        self.reduce_axis = reduce_axis

    def build_compute(self, shape: Sequence[Expr], outer: list, name: str, tag: str,
                      attrs: dict | None) -> Tensor:
        """The compute: outer loops, then the intrinsic's own axes on the regions; its stage is tensorized at
        the intrinsic's first axis (with the outer reductions outside it)."""
        intrin, iop = self.intrin, self.intrin.op
        where = f"compute {name} with tensor intrinsic {intrin.name}"
        inner_shape = list(shape[len(outer):])
        if len(inner_shape) != len(iop.axis) or not iop.axis or any(
                str(simplify(a - b)) != "0" for a, b in zip(inner_shape, iop.shape)):
            raise ValueError(f"{where}: the dimensions after the {len(outer)} loop variables "
                             f"[{', '.join(map(str, inner_shape))}] must be the intrinsic's output shape "
                             f"[{', '.join(map(str, iop.shape))}]")
        if iop.num_outputs != 1:
            raise ValueError(f"{where}: an intrinsic with several outputs cannot be called in a compute")
        if len(self.regions) != len(intrin.inputs):
            raise ValueError(f"{where}: called on {len(self.regions)} regions, the intrinsic takes "
                             f"{len(intrin.inputs)}")
        inner = [IterVar(Range(0, d), E.Var(a.name), "spatial") for a, d in zip(iop.axis, inner_shape)]
        vmap: dict = {a.var: b.var for a, b in zip(iop.axis, inner)}
        ired = [IterVar(a.dom, E.Var(a.name), "reduce") for a in iop.reduce_axis]
        vmap.update({a.var: b.var for a, b in zip(iop.reduce_axis, ired)})
        maps = []
        for k, (inp, reg) in enumerate(zip(intrin.inputs, self.regions)):
            if isinstance(reg, Tensor):
                reg = TensorSlice(reg, tuple(slice(None) for _ in reg.shape))
            if not isinstance(reg, TensorSlice):
                raise ValueError(f"{where}: argument {k} must be a region of a tensor (A[i, 0:16]), got {reg!r}")
            ranges = reg.region()
            sliced = [d for d in range(len(ranges)) if d >= len(reg.indices) or isinstance(reg.indices[d], slice)]
            if len(sliced) != len(inp.shape):
                raise ValueError(f"{where}: region {k} of '{reg.tensor.name}' has {len(sliced)} sliced dimensions, "
                                 f"the intrinsic's input '{inp.name}' {len(inp.shape)}")
            maps.append((reg.tensor, ranges, sliced))

        def fn(e: Expr) -> Expr | None:
            if isinstance(e, E.TensorLoad):
                for k, inp in enumerate(intrin.inputs):
                    if e.tensor.op is inp.op and getattr(e.tensor, "value_index", 0) == getattr(inp, "value_index", 0):
                        t, ranges, sliced = maps[k]
                        idx = [r.min for r in ranges]
                        for j, d in enumerate(sliced):
                            idx[d] = ranges[d].min + E.substitute(e.indices[j], vmap)
                        return t[tuple(idx)]
            return None

        body = iop.bodies[0]
        if isinstance(body, E.Reduce):
            sources = [E.substitute(E.transform(x, fn), vmap) for x in body.sources]
            cond = E.substitute(E.transform(body.condition, fn), vmap) if body.condition is not None else None
            new_body: Expr = E.Reduce(body.combiner, sources[body.value_index], list(self.reduce_axis) + ired, cond,
                                      sources if len(sources) > 1 else None, body.value_index)
        else:
            if self.reduce_axis:
                raise ValueError(f"{where}: reduce_axis given, but the intrinsic is not a reduction")
            new_body = E.substitute(E.transform(body, fn), vmap)
        op = ComputeOp(name, list(outer) + inner, new_body, tag, attrs)
        op.tensor_intrin_call = (intrin, len(outer), len(self.reduce_axis))
        return op.output(0)


def decl_tensor_intrin(op: Operation, fcompute: Callable[..., Any], name: str = "tensor_intrin",
                       binds: dict | None = None, scalar_params: Sequence[E.Var] | None = None,
                       default_buffer_params: dict | None = None) -> TensorIntrin:
    """Declare an intrinsic implementing compute ``op``: ``fcompute(ins, outs)`` gets a buffer per input and per
    output (``tir.decl_buffer`` with ``default_buffer_params``, or the buffer ``binds`` gives a tensor) and
    returns the statement that computes the output, or for a reduction ``(body, reset, update)``."""
    if not isinstance(op, ComputeOp):
        raise TypeError(f"decl_tensor_intrin {name}: expected the operation of a te.compute, got {op!r}")
    binds = dict(binds or {})
    params = dict(default_buffer_params or {})
    inputs = list(op.input_tensors)
    ins, outs = [], []
    for t in inputs:
        ins.append(binds.get(t) or decl_buffer(t.shape, t.dtype, t.name, **params))
    for k in range(op.num_outputs):
        t = op.output(k)
        outs.append(binds.get(t) or decl_buffer(t.shape, t.dtype, t.name, **params))
    if scalar_params:
        res = fcompute(ins, outs, list(scalar_params))
    else:
        res = fcompute(ins, outs)
    if isinstance(res, (list, tuple)):
        if len(res) != 3:
            raise ValueError(f"decl_tensor_intrin {name}: fcompute returns one statement or three (body, reset, "
                             f"update), got {len(res)}")
        body, init, update = (_stmt(x, w, name) for x, w in zip(res, ("body", "reset", "update")))
    else:
        body, init, update = _stmt(res, "body", name), None, None
    key = name
    while key in _INTRINSICS:
        key = f"{name}.{next(_counter)}"
    intrin = TensorIntrin(key, op, inputs, ins + outs, body, init, update, scalar_params or ())
    _INTRINSICS[key] = intrin
    return intrin


def get_intrin(name: str) -> TensorIntrin:
    intrin = _INTRINSICS.get(name)
    for provide in PROVIDERS if intrin is None else ():
        intrin = provide(name)
        if intrin is not None:
            break
    if intrin is None:
        raise ScheduleError(f"tensorize: no tensor intrinsic named {name!r} was declared in this process "
                            f"(te.decl_tensor_intrin); declare it before replaying the trace")
    return intrin


def shape_of_expr(e: Expr, tensors: list) -> list:
    """A structural form of a compute body that ignores indices (the regions differ between a stage and the
    intrinsic) and names tensors by their position: what tensorize compares."""
    if isinstance(e, E.TensorLoad):
        return ["load", next((k for k, t in enumerate(tensors) if t.op is e.tensor.op and
                              getattr(t, "value_index", 0) == getattr(e.tensor, "value_index", 0)), -1)]
    if isinstance(e, E.Reduce):
        return ["reduce", e.combiner.name, [shape_of_expr(x, tensors) for x in e.sources]]
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return [type(e).__name__, e.value, e.dtype]
    if isinstance(e, E.Var):
        return ["var"]
    return [type(e).__name__, getattr(e, "name", ""), e.dtype] + [shape_of_expr(c, tensors) for c in E.children(e)]


__all__ = ["TensorIntrin", "decl_tensor_intrin", "get_intrin"]
