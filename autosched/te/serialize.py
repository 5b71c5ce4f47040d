"""te computations and schedules as JSON text, names kept (TVM's ``tvm.ir.save_json`` / ``load_json``, and the
pickling of schedules).

A computation is its operations in producer-before-consumer order, each with its variables, axes and
expressions written out; a combiner (``te.comm_reducer``) is written as what it computes on two fresh
operands and its identity, so a loaded reduction needs none of the user's Python functions. A schedule is
its computation and its trace: loading builds the computation and replays the trace, as the database does
with a record. Placeholders, computes (several outputs, tuple reductions, tags, attributes) and scans are
written; an extern or hybrid operation, whose body is loop IR over buffers, is refused by name.
"""

from __future__ import annotations

import copyreg
import json
from collections.abc import Sequence
from typing import Any

from autosched.te import expr as E
from autosched.te.scan import ScanOp
from autosched.te.stage import Schedule, _post_order, create_schedule
from autosched.te.tensor import ComputeOp, IterVar, Operation, PlaceholderOp, Range, Tensor
from autosched.te.trace import Trace

FORMAT = "autosched.te/1"

_BINARY = {cls.__name__: cls for cls in (
    E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.FloorMod, E.Min, E.Max, E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And,
    E.Or, E.BitAnd, E.BitOr, E.BitXor, E.ShiftLeft, E.ShiftRight)}


class _Writer:
    """Numbers variables, axes and operations in the order first met, and writes expressions over them."""

    def __init__(self, ops: list[Operation]):
        self.op_index = {id(op): k for k, op in enumerate(ops)}
        self.vars: list[list] = []
        self.var_index: dict[int, int] = {}
        self.axes: list[list] = []
        self.axis_index: dict[int, int] = {}

    def var(self, v: E.Var) -> int:
        k = self.var_index.get(id(v))
        if k is None:
            k = self.var_index[id(v)] = len(self.vars)
            self.vars.append([v.name, v.dtype])
        return k

    def axis(self, iv: IterVar) -> int:
        k = self.axis_index.get(id(iv))
        if k is None:
            dom = [self.expr(iv.dom.min), self.expr(iv.dom.extent)] if iv.dom is not None else None
            k = self.axis_index[id(iv)] = len(self.axes)
            self.axes.append([self.var(iv.var), dom, iv.kind, iv.thread_tag])
        return k

    def tensor(self, t: Tensor) -> list:
        if id(t.op) not in self.op_index:
            raise ValueError(f"tensor {t.name} is read but its operation is not part of the computation")
        return [self.op_index[id(t.op)], t.value_index]

    def combiner(self, comb: E.CommReducer, dtypes: list[str]) -> list:
        xs = [E.Var(f"x{k}", d) for k, d in enumerate(dtypes)]
        ys = [E.Var(f"y{k}", d) for k, d in enumerate(dtypes)]
        if len(dtypes) == 1:
            combined, identity = [comb.combine(xs[0], ys[0])], [comb.identity(dtypes[0])]
        else:
            combined, identity = comb.combine_tuple(xs, ys), comb.identity_tuple(dtypes)
        return [comb.name, [self.var(v) for v in xs], [self.var(v) for v in ys],
                [self.expr(c) for c in combined], [self.expr(i) for i in identity]]

    def expr(self, e: Any) -> Any:
        e = E.convert(e)
        if isinstance(e, E.Var):
            return ["Var", self.var(e)]
        if isinstance(e, E.IntImm):
            return ["IntImm", e.value, e.dtype]
        if isinstance(e, E.FloatImm):
            return ["FloatImm", repr(e.value), e.dtype]  # repr keeps inf and nan, which JSON numbers cannot
        name = type(e).__name__
        if name in _BINARY and type(e) is _BINARY[name]:
            return [name, self.expr(e.a), self.expr(e.b), e.dtype]
        if isinstance(e, E.Not):
            return ["Not", self.expr(e.a)]
        if isinstance(e, E.Select):
            return ["Select", self.expr(e.cond), self.expr(e.t), self.expr(e.f)]
        if isinstance(e, E.Cast):
            return ["Cast", e.dtype, self.expr(e.value)]
        if isinstance(e, E.Call):
            return ["Call", e.dtype, e.name, [self.expr(a) for a in e.args]]
        if isinstance(e, E.Let):
            return ["Let", self.var(e.var), self.expr(e.value), self.expr(e.body)]
        if isinstance(e, E.TensorLoad):
            return ["TensorLoad", self.tensor(e.tensor), [self.expr(i) for i in e.indices]]
        if isinstance(e, E.Reduce):
            return ["Reduce", self.combiner(e.combiner, [s.dtype for s in e.sources]),
                    [self.expr(s) for s in e.sources], e.value_index, [self.axis(a) for a in e.axis],
                    self.expr(e.condition) if e.condition is not None else None]
        raise ValueError(f"cannot write {name} {e} as JSON: te expressions over tensors, variables and constants "
                         f"are written, not buffers or handles")

    def op(self, op: Operation) -> dict:
        attrs = dict(getattr(op, "attrs", {}) or {})
        try:
            json.dumps(attrs)
        except TypeError:
            raise ValueError(f"operation {op.name}: its attrs {attrs!r} are not JSON values") from None
        out: dict[str, Any] = {"name": op.name, "tag": getattr(op, "tag", ""), "attrs": attrs}
        if isinstance(op, PlaceholderOp):
            return {**out, "kind": "placeholder", "shape": [self.expr(d) for d in op.shape], "dtype": op.dtype}
        if isinstance(op, ComputeOp) and getattr(op, "tensor_intrin_call", None) is None:
            return {**out, "kind": "compute", "axis": [self.axis(a) for a in op.axis],
                    "body": [self.expr(b) for b in op.bodies]}
        if isinstance(op, ScanOp):
            return {**out, "kind": "scan", **{k: [self.tensor(t) for t in getattr(op, k)]
                                             for k in ("init", "update", "state_placeholder", "inputs")}}
        raise ValueError(f"cannot write operation {op.name} ({type(op).__name__}) as JSON: placeholders, computes "
                         f"and scans are written; an extern, hybrid or tensor-intrinsic operation holds loop IR")


def computation_to_json(outputs: Sequence[Tensor | Operation]) -> dict:
    """The operations producing ``outputs`` (and ``outputs`` themselves, by position) as JSON-able data."""
    roots = [t.op if isinstance(t, Tensor) else t for t in outputs]
    ops = _post_order(roots)
    w = _Writer(ops)
    written = [w.op(op) for op in ops]
    return {"vars": w.vars, "axes": w.axes, "ops": written}


class _Reader:
    def __init__(self, data: dict):
        self.vars = [E.Var(name, dtype) for name, dtype in data["vars"]]
        self.raw_axes = data["axes"]
        self.axes: dict[int, IterVar] = {}
        self.ops: list[Operation] = []

    def axis(self, k: int) -> IterVar:
        if k not in self.axes:
            var, dom, kind, tag = self.raw_axes[k]
            rng = Range(self.expr(dom[0]), self.expr(dom[1])) if dom is not None else None
            self.axes[k] = IterVar(rng, self.vars[var], kind, tag)
        return self.axes[k]

    def tensor(self, ref: list) -> Tensor:
        return self.ops[ref[0]].output(ref[1])

    def combiner(self, data: list) -> E.CommReducer:
        name, xs, ys, combined, identity = data
        xs, ys = [self.vars[k] for k in xs], [self.vars[k] for k in ys]
        combined, identity = [self.expr(c) for c in combined], [self.expr(i) for i in identity]

        def fcombine(x: Any, y: Any) -> Any:
            pairs = zip(xs, ys, x, y) if isinstance(x, (list, tuple)) else [(xs[0], ys[0], x, y)]
            vmap = {}
            for vx, vy, a, b in pairs:
                vmap[vx], vmap[vy] = E.convert(a), E.convert(b)
            out = [E.substitute(c, vmap) for c in combined]
            return tuple(out) if isinstance(x, (list, tuple)) else out[0]

        def fidentity(*dtypes: str) -> Any:
            return tuple(identity) if len(identity) > 1 else identity[0]

        return E.CommReducer(fcombine, fidentity, name)

    def expr(self, d: Any) -> Any:
        head = d[0]
        if head == "Var":
            return self.vars[d[1]]
        if head == "IntImm":
            return E.IntImm(d[1], d[2])
        if head == "FloatImm":
            return E.FloatImm(float(d[1]), d[2])
        if head in _BINARY:
            return _BINARY[head](self.expr(d[1]), self.expr(d[2]), d[3])
        if head == "Not":
            return E.Not(self.expr(d[1]))
        if head == "Select":
            return E.Select(self.expr(d[1]), self.expr(d[2]), self.expr(d[3]))
        if head == "Cast":
            return E.Cast(d[1], self.expr(d[2]))
        if head == "Call":
            return E.Call(d[1], d[2], [self.expr(a) for a in d[3]])
        if head == "Let":
            return E.Let(self.vars[d[1]], self.expr(d[2]), self.expr(d[3]))
        if head == "TensorLoad":
            return E.TensorLoad(self.tensor(d[1]), [self.expr(i) for i in d[2]])
        if head == "Reduce":
            sources = [self.expr(s) for s in d[2]]
            return E.Reduce(self.combiner(d[1]), sources[d[3]], [self.axis(a) for a in d[4]],
                            self.expr(d[5]) if d[5] is not None else None,
                            sources if len(sources) > 1 else None, d[3])
        raise ValueError(f"not a written te expression: {d!r}")

    def op(self, d: dict) -> Operation:
        kind = d["kind"]
        if kind == "placeholder":
            op: Operation = PlaceholderOp(d["name"], tuple(self.expr(x) for x in d["shape"]), d["dtype"])
            op.tag, op.attrs = d["tag"], d["attrs"]
            return op
        if kind == "compute":
            axis = [self.axis(a) for a in d["axis"]]
            bodies = [self.expr(b) for b in d["body"]]
            return ComputeOp(d["name"], axis, bodies if len(bodies) > 1 else bodies[0], d["tag"], d["attrs"])
        if kind == "scan":
            parts = {k: [self.tensor(r) for r in d[k]] for k in ("init", "update", "state_placeholder", "inputs")}
            return ScanOp(d["name"], parts["init"], parts["update"], parts["state_placeholder"], parts["inputs"],
                          d["tag"], d["attrs"])
        raise ValueError(f"not a written te operation kind: {kind!r}")


def computation_from_json(data: dict) -> list[Operation]:
    """The operations :func:`computation_to_json` wrote, in its order, built anew."""
    r = _Reader(data)
    for d in data["ops"]:
        r.ops.append(r.op(d))
    return r.ops


def save_json(obj: Tensor | Operation | Schedule) -> str:
    """``obj`` (a te tensor, operation or schedule) as JSON text, loaded back by :func:`load_json`."""
    if isinstance(obj, Schedule):
        roots, what = obj.outputs, "Schedule"
    elif isinstance(obj, (Tensor, Operation)):
        roots, what = [obj.op if isinstance(obj, Tensor) else obj], type(obj).__name__
    else:
        raise TypeError(f"save_json: expected a te Tensor, Operation or Schedule, got {type(obj).__name__}")
    comp = computation_to_json(roots)
    data: dict[str, Any] = {"format": FORMAT, "type": "Tensor" if what == "Tensor" else what, "computation": comp}
    index = {id(op): k for k, op in enumerate(_post_order(roots))}
    data["outputs"] = [index[id(op)] for op in roots]
    if isinstance(obj, Tensor):
        data["value_index"] = obj.value_index
    if isinstance(obj, Schedule):
        data["trace"] = obj.trace.to_json()
    return json.dumps(data, separators=(",", ":"))


def load_json(text: str) -> Tensor | Operation | Schedule:
    """The object :func:`save_json` wrote: a new computation (and schedule, its trace replayed)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"load_json: not JSON text ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"load_json: not autosched's te JSON (format {FORMAT!r}); TVM's save_json output does not "
                         f"load here")
    ops = computation_from_json(data["computation"])
    roots = [ops[k] for k in data["outputs"]]
    if data["type"] == "Schedule":
        return Trace.from_json(data["trace"]).replay(create_schedule(roots))
    if data["type"] == "Tensor":
        return roots[0].output(data["value_index"])
    return roots[0]


def _pickle_schedule(sch: Schedule) -> Any:
    """Pickling a schedule writes its JSON text, as TVM pickles its objects (the combiners of reductions are
    Python functions, which pickle cannot write; their JSON form is data)."""
    return load_json, (save_json(sch),)


copyreg.pickle(Schedule, _pickle_schedule)


__all__ = ["computation_from_json", "computation_to_json", "load_json", "save_json"]
