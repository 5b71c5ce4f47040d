"""The graph IR: types, expressions (Var, Constant, Call, Tuple, TupleGetItem, Function) and IRModule.

Expressions are immutable dataflow nodes compared by identity; type inference stores each node's
type in ``checked_type``. The printer (ir/printer.py) gives them a TVM-like text form (``print(mod)``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from autosched.errors import AutoschedError


class RelayError(AutoschedError):
    """A malformed graph or an op applied to arguments of the wrong type or shape."""


# ------------------------------------------------------------------ types
class Type:
    """Base of relay types."""


class TensorType(Type):
    """A tensor of a static shape and dtype."""

    def __init__(self, shape: Sequence[int], dtype: str = "float32"):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = str(np.dtype(dtype)) if dtype != "bool" else "bool"

    @property
    def concrete_shape(self) -> tuple[int, ...]:
        return self.shape

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorType) and self.shape == other.shape and self.dtype == other.dtype

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))

    def __repr__(self) -> str:
        return f"Tensor[({', '.join(map(str, self.shape))}), {self.dtype}]"


class TupleType(Type):
    """A tuple of types (the type of a Tuple and of multi-output ops such as batch_norm)."""

    def __init__(self, fields: Sequence[Type]):
        self.fields = tuple(fields)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TupleType) and self.fields == other.fields

    def __hash__(self) -> int:
        return hash(self.fields)

    def __repr__(self) -> str:
        return f"({', '.join(map(repr, self.fields))})"


class FuncType(Type):
    """The type of a Function: argument types and the return type."""

    def __init__(self, arg_types: Sequence[Type], ret_type: Type):
        self.arg_types = tuple(arg_types)
        self.ret_type = ret_type

    def __repr__(self) -> str:
        return f"fn ({', '.join(map(repr, self.arg_types))}) -> {self.ret_type!r}"


# ------------------------------------------------------------ expressions
class Expr:
    """Base of graph expressions; ``checked_type`` is set by InferType."""

    _checked_type: Type | None = None

    @property
    def checked_type(self) -> Type:
        if self._checked_type is None:
            raise RelayError(f"the type of {self.__class__.__name__} is not inferred yet; "
                             "run relay.transform.InferType()")
        return self._checked_type

    # ``astext``/``__str__`` are attached by ir/printer.py and ``+ - * /`` by the op package (relay/op), both
    # when imported, so that this module imports neither

    def __getitem__(self, index: int) -> TupleGetItem:
        return TupleGetItem(self, index)

    def __iter__(self) -> Iterator[Expr]:
        """The fields of a tuple of known length (``a, b = relay.split(x, 2)``); any other expression refuses, as
        ``[k]`` never runs out on it and ``list(expr)`` would never end."""
        if not hasattr(self, "__len__"):
            raise TypeError(f"a relay {type(self).__name__} is not iterable (index a tuple-valued expression with "
                            f"[k]; pass a list of expressions where several are expected)")
        return (self[k] for k in range(len(self)))  # type: ignore[arg-type]

    __hash__ = object.__hash__


class Var(Expr):
    """A named input of a function, with its tensor type."""

    def __init__(self, name_hint: str, type_annotation: Type):
        self.name_hint = name_hint
        self.type_annotation = type_annotation

    def __repr__(self) -> str:
        return f"Var({self.name_hint}, {self.type_annotation!r})"


class Constant(Expr):
    """A constant tensor (weights, scalars)."""

    def __init__(self, data: np.ndarray):
        self.data = np.asarray(data)

    def __repr__(self) -> str:
        return f"Constant({self.data.shape}, {self.data.dtype})"


class Call(Expr):
    """An operator (or a Function: a fused kernel, a composite, an external function) applied to arguments,
    with attributes. ``compiler`` names the external target AnnotateTarget assigned the call to (or None)."""

    def __init__(self, op: Any, args: Sequence[Expr], attrs: dict | None = None, compiler: str | None = None):
        for k, a in enumerate(args):
            if not isinstance(a, Expr):
                raise RelayError(f"argument {k} of {getattr(op, 'name', 'call')} is not a relay expression: {a!r}")
        self.op = op
        self.args = tuple(args)
        self.attrs = dict(attrs or {})
        self.compiler = compiler

    def __repr__(self) -> str:
        return f"Call({getattr(self.op, 'name', 'fn')}, {len(self.args)} args)"


class Tuple(Expr):
    """A tuple of expressions (the input of concatenate, or several function outputs)."""

    def __init__(self, fields: Sequence[Expr]):
        for k, a in enumerate(fields):
            if not isinstance(a, Expr):
                raise RelayError(f"field {k} of a Tuple is not a relay expression: {a!r}")
        self.fields = tuple(fields)

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, index: int) -> Expr:  # indexing a literal tuple gives the field itself
        return self.fields[index]

    def astuple(self) -> Tuple:
        """The tuple itself (what TVM's TupleWrapper, which functions like ``split`` return, gives)."""
        return self


class TupleGetItem(Expr):
    """Field ``index`` of a tuple-valued expression."""

    def __init__(self, tuple_value: Expr, index: int):
        self.tuple_value = tuple_value
        self.index = int(index)


class Function(Expr):
    """``fn (params) { body }``; ``attrs["Primitive"] = 1`` marks a fused kernel made by FuseOps."""

    def __init__(self, params: Sequence[Var], body: Expr, ret_type: Type | None = None, attrs: dict | None = None):
        for p in params:
            if not isinstance(p, Var):
                raise RelayError(f"Function parameters must be relay.var, got {p!r}")
        self.params = tuple(params)
        self.body = body
        self.ret_type = ret_type
        self.attrs = dict(attrs or {})


class IRModule:
    """Named global functions; ``mod["main"]`` is the model. A function partitioned out for an external
    compiler is also a global (``attrs["Compiler"]``), called from ``main`` directly."""

    def __init__(self, functions: dict[str, Function] | None = None):
        self.functions: dict[str, Function] = dict(functions or {})

    @staticmethod
    def from_expr(expr: Expr) -> IRModule:
        """A module whose ``main`` is ``expr`` (wrapped in a Function of its free variables if needed)."""
        if not isinstance(expr, Function):
            expr = Function(free_vars(expr), expr)
        return IRModule({"main": expr})

    def __getitem__(self, name: str) -> Function:
        if name not in self.functions:
            raise KeyError(f"module has no function {name!r} (it has: {', '.join(self.functions)})")
        return self.functions[name]

    def __setitem__(self, name: str, func: Function) -> None:
        self.functions[name] = func

    def __contains__(self, name: str) -> bool:
        return name in self.functions


# ------------------------------------------------------------- constructors
def var(name_hint: str, shape: Sequence[int] | Type | None = None, dtype: str = "float32",
        type_annotation: Type | None = None) -> Var:
    """``relay.var("data", shape=(1, 3, 224, 224), dtype="float32")``: a model input."""
    if isinstance(shape, Type):
        type_annotation = shape
    if type_annotation is None:
        if shape is None:
            raise RelayError(f"relay.var({name_hint!r}) needs a shape (static shapes only)")
        shape = tuple(shape)
        for d in shape:
            if not isinstance(d, (int, np.integer)) or int(d) < 0:
                raise RelayError(f"relay.var({name_hint!r}): shape {shape} must be non-negative integers")
        type_annotation = TensorType(shape, dtype)
    return Var(name_hint, type_annotation)


def const(value: Any, dtype: str | None = None) -> Constant:
    """A constant from a numpy array, a scalar or a list: Python floats are float32, ints int32 (as TVM does); a
    numpy scalar keeps its type but for int64 -> int32 and float64 -> float32 (TVM's rule); an array its type."""
    if isinstance(value, np.ndarray):
        arr = value.astype(dtype) if dtype else value
    else:
        if dtype is None:
            if isinstance(value, (bool, np.bool_)):
                dtype = "bool"
            elif isinstance(value, np.generic):
                dtype = {"int64": "int32", "float64": "float32"}.get(str(value.dtype), str(value.dtype))
            elif isinstance(value, int):
                dtype = "int32"
            elif isinstance(value, float):
                dtype = "float32"
        arr = np.array(value, dtype=dtype)
        if dtype is None and isinstance(value, (list, tuple)) and arr.dtype == np.int64:
            arr = arr.astype("int32")
    if arr.dtype == np.float64 and dtype is None and not isinstance(value, np.ndarray):
        arr = arr.astype("float32")
    return Constant(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr))  # (which makes a scalar 1-d)


def free_vars(expr: Expr) -> list[Var]:
    """Variables used by ``expr`` and not bound by a Function inside it, in first-use order."""
    seen: dict[int, Var] = {}
    bound: set[int] = set()
    for node in post_order(expr):
        if isinstance(node, Function):
            bound.update(id(p) for p in node.params)
            continue
        if isinstance(node, Var) and id(node) not in bound:
            seen.setdefault(id(node), node)
    return list(seen.values())


def children(node: Expr) -> tuple[Expr, ...]:
    """The expressions a node reads (a primitive Function callee is not a child: it is a separate graph)."""
    if isinstance(node, Call):
        return node.args
    if isinstance(node, Tuple):
        return node.fields
    if isinstance(node, TupleGetItem):
        return (node.tuple_value,)
    if isinstance(node, Function):
        return (node.body,)
    return ()


def post_order(expr: Expr, within: set[int] | None = None) -> list[Expr]:
    """Every node reachable from ``expr``, producers before consumers, each once (no recursion limit); with
    ``within`` (node ids), only the nodes reachable through those (a matched subgraph, stopping at its inputs)."""
    out: list[Expr] = []
    done: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in done:
            continue
        if expanded:
            done.add(id(node))
            out.append(node)
            continue
        stack.append((node, True))
        for c in reversed(children(node)):
            if id(c) not in done and (within is None or id(c) in within):
                stack.append((c, False))
    return out


def rebuild(node: Expr, new_children: Sequence[Expr]) -> Expr:
    """A copy of ``node`` with new children (the same node when nothing changed)."""
    old = children(node)
    if len(old) == len(new_children) and all(a is b for a, b in zip(old, new_children)):
        return node
    if isinstance(node, Call):
        return Call(node.op, new_children, node.attrs, node.compiler)
    if isinstance(node, Tuple):
        return Tuple(new_children)
    if isinstance(node, TupleGetItem):
        return TupleGetItem(new_children[0], node.index)
    if isinstance(node, Function):
        return Function(node.params, new_children[0], node.ret_type, node.attrs)
    return node


def rewrite(expr: Expr, fn: Any) -> Expr:
    """Rebuild ``expr`` bottom-up; ``fn(new_node)`` may return a replacement (or None to keep it)."""
    memo: dict[int, Expr] = {}
    for node in post_order(expr):
        new = rebuild(node, [memo[id(c)] for c in children(node)])
        rep = fn(new)
        memo[id(node)] = new if rep is None else rep
    return memo[id(expr)]


__all__ = [
    "Call", "Constant", "Expr", "FuncType", "Function", "IRModule", "RelayError", "TensorType", "Tuple",
    "TupleGetItem", "TupleType", "Type", "Var", "children", "const", "free_vars", "post_order", "rebuild",
    "rewrite", "var",
]
