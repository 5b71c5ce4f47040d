"""Fused kernels as tuning tasks: the workload ``relay.fused`` rebuilds a primitive function's te computation
from a JSON description (ops, attributes, input shapes), so a kernel's Task pickles and hashes like any other.

The description: ``{"inputs": [[shape, dtype], ...], "nodes": [[op, attrs, [ref, ...]], ...]}``, the last
node being the output; a ref is ``["i", k]`` (input k), ``["n", k]`` (node k), ``["s", value, dtype]`` (a
scalar constant, embedded in the code) or ``["t", [ref, ...]]`` (a tuple, e.g. concatenate's input).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from autosched import te
from autosched.relay import op as _op
from autosched.relay.ir.expr import Call, Constant, Expr, Function, RelayError, TensorType, Tuple, TupleType, post_order
from autosched.relay.op import cuda_schedules, schedules
from autosched.workloads import get_workload, register_schedule, register_workload

_DEFAULT = json.dumps({"inputs": [[[1, 64], "float32"]], "nodes": [["nn.relu", {}, [["i", 0]]]]})


def _jsonable(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return v


def describe(fn: Function) -> str:
    """The canonical JSON description of a primitive function (the ``graph`` argument of its task)."""
    refs: dict[int, list] = {}
    inputs = []
    for k, p in enumerate(fn.params):
        t = p.type_annotation
        if not isinstance(t, TensorType):
            raise RelayError(f"fused kernel input {p.name_hint} has type {t!r}; kernels take tensors")
        inputs.append([list(t.shape), t.dtype])
        refs[id(p)] = ["i", k]
    nodes = []

    def ref(e: Expr) -> list:
        if id(e) in refs:
            return refs[id(e)]
        if isinstance(e, Constant) and e.data.ndim == 0:
            return ["s", e.data.item(), str(e.data.dtype)]
        if isinstance(e, Tuple):
            return ["t", [ref(f) for f in e.fields]]
        raise RelayError(f"fused kernel reads {e!r}, which is neither an input nor a node of the kernel")

    for node in post_order(fn.body):
        if isinstance(node, Call):
            attrs = node.op.canonical_attrs(dict(node.attrs)) if node.op.canonical_attrs else node.attrs
            attrs = {k: _jsonable(v) for k, v in sorted(attrs.items())}
            nodes.append([node.op.name, attrs, [ref(a) for a in node.args]])
            refs[id(node)] = ["n", len(nodes) - 1]
    if not nodes or refs.get(id(fn.body)) != ["n", len(nodes) - 1]:
        raise RelayError("a fused kernel's output must be its last op call")
    return json.dumps({"inputs": inputs, "nodes": nodes}, sort_keys=True, separators=(",", ":"))


def _type_of(x: Any) -> TensorType:
    if isinstance(x, te.Tensor):
        return TensorType(tuple(int(d) for d in x.shape), x.dtype)
    return TensorType((), x.dtype)


def build_tensors(graph: str) -> tuple[list[te.Tensor], te.Tensor, dict]:
    """The te tensors of a description: ``(inputs + [output], anchor tensor or None, anchor attrs)``."""
    desc = json.loads(graph)
    ins = [te.placeholder(tuple(s), dt, name=f"p{k}") for k, (s, dt) in enumerate(desc["inputs"])]
    vals: list[Any] = []
    anchor, anchor_attrs, anchor_pattern = None, {}, -1

    def get(r: list) -> Any:
        kind = r[0]
        if kind == "i":
            return [ins[r[1]]]
        if kind == "n":
            return [vals[r[1]]]
        if kind == "s":
            return [te.const(r[1], r[2])]
        if kind == "t":
            return [x for sub in r[1] for x in get(sub)]
        raise RelayError(f"bad reference {r!r} in a fused kernel description")

    for name, attrs, args in desc["nodes"]:
        opdef = _op.get(name)
        inputs = [x for r in args for x in get(r)]
        arg_types: list = []
        for r in args:
            if r[0] == "t":
                arg_types.append(TupleType([_type_of(x) for x in get(r)]))
            else:
                arg_types.append(_type_of(get(r)[0]))
        full = dict(opdef.attrs)
        full.update(attrs)
        out_type = opdef.type_rel(arg_types, full)
        t = opdef.compute(inputs, full, out_type)
        vals.append(t)
        if opdef.pattern > _op.INJECTIVE and opdef.pattern >= anchor_pattern:
            anchor, anchor_attrs, anchor_pattern = t, {"op": name, **full}, opdef.pattern
    return ins + [vals[-1]], anchor, anchor_attrs


@register_workload("relay.fused")
def relay_fused(graph: str = _DEFAULT):
    """A fused kernel of a relay graph (ops, attributes and input shapes as JSON): inputs first, output last."""
    return build_tensors(graph)[0]


_BLOCKED = {"conv2d_nchwc": "conv2d", "depthwise_conv2d_nchwc": "depthwise_conv2d", "dense_pack": "dense",
            "conv2d_winograd_nchwc": "conv2d"}


def _logical(shape: list[int]) -> list[int]:
    """NCHW of NCHW[x]c data, OIHW of OIHW[x]i[y]o (or depthwise [C/x, 1, KH, KW, 1, x]) weights, [units, in] of
    packed dense weights: the shapes people know a layer by."""
    if len(shape) == 5:
        return [shape[0], shape[1] * shape[4], shape[2], shape[3]]
    if len(shape) == 6:
        return [shape[0] * shape[5], shape[1] * shape[4], shape[2], shape[3]]
    if len(shape) == 3:
        return [shape[0] * shape[2], shape[1]]
    return shape


def _label(graph: str = _DEFAULT) -> str:
    """``conv2d+add+relu 1x64x56x56 * 64x64x3x3 s1``: the fused ops, the anchor's input shapes (in NCHW and OIHW
    for blocked layouts, whose block is given last: ``[NCHW16c]``), stride and dilation (``d2``, when not 1)."""
    desc = json.loads(graph)
    ops = [n[0].split(".")[-1] for n in desc["nodes"]]
    blocked = next((n[1].get("out_layout") or n[1].get("data_layout") or n[1].get("layout") for n in desc["nodes"]
                    if n[0].split(".")[-1] in _BLOCKED or str(n[1].get("layout", "NCHW")) != "NCHW"), None)
    winograd = next((n[1]["tile"] for n in desc["nodes"] if n[0] == "nn.conv2d_winograd_nchwc"), None)
    packed = any(o in _BLOCKED for o in ops)
    ops = [_BLOCKED.get(o, o) for o in ops]
    # data in NCHW[x]c reads as NCHW, packed weights as OIHW / [units, in]; other shapes (a transformer's
    # [batch, tokens, features] activations, batch_matmul's operands) as they are
    shapes = [_logical(shape) if len(shape) == 5 or (k == 1 and packed) else shape
              for k, (shape, _) in enumerate(desc["inputs"][:2])]
    if winograd is not None:  # the filters are transformed: [alpha, alpha, O/y, I, y]
        u = desc["inputs"][1][0]
        shapes[1] = [u[2] * u[4], u[3], 3, 3]
        blocked = f"{blocked}, Winograd F({winograd},3)"
    shapes = ["x".join(map(str, s)) for s in shapes]
    strides = next((n[1].get("strides") for n in desc["nodes"] if "strides" in n[1]), None)
    extra = f" s{strides[0]}" if strides and len(set(strides)) == 1 else (f" s{strides}" if strides else "")
    dilation = next((n[1]["dilation"] for n in desc["nodes"] if n[1].get("dilation", [1, 1]) != [1, 1]), None)
    extra += "" if dilation is None else f" d{dilation[0]}" if len(set(dilation)) == 1 else f" d{dilation}"
    return f"{'+'.join(ops)} {' * '.join(shapes)}{extra}" + (f" [{blocked}]" if blocked else "")


get_workload("relay.fused").label = _label


def _valid_inputs(arrays: list, rng: Any, graph: str = _DEFAULT) -> None:
    """Measurement inputs of a kernel made valid for the ops whose loops read them (``nn.sparse_dense``'s
    structure): each such op's ``valid_inputs`` attribute, ``fn(args, rng)`` over its arguments' arrays (None
    for an argument that is not a kernel input), fills them in place."""
    desc = json.loads(graph)
    for name, _attrs, args in desc["nodes"]:
        fn = _op.get_op_attr(name, "valid_inputs")
        if fn is not None:
            fn([arrays[r[1]] if r[0] == "i" else None for r in args], rng)


get_workload("relay.fused").valid_inputs = _valid_inputs


@register_schedule("relay.fused")
def relay_fused_cpu(sch: Any, tensors: list, graph: str, **_: Any) -> None:
    """The anchor op's default schedule with the epilogue in its loops, or a parallel vectorized nest."""
    out = tensors[-1]
    _, anchor_fresh, attrs = build_tensors(graph)
    if anchor_fresh is None:
        axis = _concat_axis(graph, out)
        if axis is not None:
            return schedules.concatenate(sch, out, axis)
        return schedules.injective(sch, out)
    # the schedule's tensors are another build of the same description: find the anchor stage in them
    anchor = _match_anchor(out, anchor_fresh)
    opdef = _op.get(attrs["op"])
    fn = opdef.schedule or schedules.reduction
    fn(sch, out, anchor, attrs)


@register_schedule("relay.fused", "cuda")
def relay_fused_cuda(sch: Any, tensors: list, graph: str, **_: Any) -> None:
    """The anchor op's GPU default (conv2d, dense) with the epilogue in its loops, else one thread per output
    element (:mod:`autosched.relay.op.cuda_schedules`)."""
    out = tensors[-1]
    _, anchor_fresh, attrs = build_tensors(graph)
    if anchor_fresh is None:
        return cuda_schedules.generic(sch, out)
    fn = cuda_schedules.BY_OP.get(attrs["op"], cuda_schedules.generic)
    fn(sch, out, _match_anchor(out, anchor_fresh), attrs)


def _concat_axis(graph: str, out: te.Tensor) -> int | None:
    """The axis of a concatenation whose result the kernel's output keeps, index for index (the concatenation
    itself, or it followed by elementwise ops), else None."""
    desc = json.loads(graph)
    for name, attrs, args in desc["nodes"]:
        if name == "concatenate":
            nd = len(out.shape)
            later = desc["nodes"][desc["nodes"].index([name, attrs, args]) + 1:]
            if all(_op.get(n[0]).pattern <= _op.BROADCAST for n in later):
                return attrs.get("axis", 0) % nd
    return None


def _match_anchor(out: te.Tensor, anchor_fresh: te.Tensor) -> te.Tensor:
    """The stage of ``out``'s computation that corresponds to ``anchor_fresh`` (same name, tag and shape)."""
    cands = [t for t in schedules.compute_stages(out) if t.op.name == anchor_fresh.op.name
             and t.op.tag == anchor_fresh.op.tag and tuple(map(int, t.shape)) == tuple(map(int, anchor_fresh.shape))]
    if not cands:
        raise RelayError(f"fused kernel: anchor stage {anchor_fresh.op.name} not found")
    return cands[0]


def kernel_name(fn: Function) -> str:
    return str(fn.attrs.get("name", "fused"))


__all__ = ["build_tensors", "describe", "kernel_name", "relay_fused"]
