"""Tensors and the operations that produce them: placeholders and computes."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from autosched.te.expr import (
    INDEX_DTYPE,
    Expr,
    IntImm,
    IterVar,
    Reduce,
    TensorLoad,
    Var,
    check_dtype,
    const,
    convert,
    walk,
)
from autosched.tir.arith import simplify


class Range:
    """A half-open integer interval ``[min, min + extent)``."""

    __slots__ = ("min", "extent")

    def __init__(self, min: Any, extent: Any):  # noqa: A002
        self.min = convert(min)
        self.extent = convert(extent)

    @staticmethod
    def from_bounds(begin: Any, end: Any) -> Range:
        begin = convert(begin)
        return Range(begin, simplify(convert(end) - begin))

    def __repr__(self) -> str:
        return f"Range(min={self.min}, extent={self.extent})"


THREAD_TAGS = (
    "blockIdx.x",
    "blockIdx.y",
    "blockIdx.z",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "vthread",
)


def thread_axis(dom: Any = None, tag: str = "", name: str = "") -> IterVar:
    """A GPU thread or block index to ``bind`` a loop to: ``thread_axis("threadIdx.x")``, or TVM's
    ``thread_axis((0, 32), "threadIdx.x")`` with its range (kept as the axis's ``dom``; the bound loop's own
    extent is what the kernel launches)."""
    if isinstance(dom, str):  # thread_axis(tag, name)
        dom, tag, name = None, dom, tag or name
    if not tag:
        raise ValueError("thread_axis needs a tag such as 'threadIdx.x'")
    if tag not in THREAD_TAGS:
        raise ValueError(f"unknown thread tag {tag!r}; expected one of {', '.join(THREAD_TAGS)}")
    return IterVar(_as_range(dom) if dom is not None else None, Var(name or tag), "thread", tag)


def var(name: str = "v", dtype: str = INDEX_DTYPE) -> Var:
    """A symbolic scalar, typically a shape that is bound when the kernel is called."""
    return Var(name, dtype)


def size_var(name: str = "n", dtype: str = INDEX_DTYPE) -> Var:
    return Var(name, dtype)


def _as_range(dom: Any) -> Range:
    if isinstance(dom, Range):
        return dom
    if isinstance(dom, (tuple, list)) and len(dom) == 2:
        return Range.from_bounds(dom[0], dom[1])
    return Range(0, dom)


def reduce_axis(dom: Any, name: str = "rv") -> IterVar:
    """A reduction axis over ``dom``, a ``(begin, end)`` pair or a Range."""
    return IterVar(_as_range(dom), Var(name), "reduce")


class Operation:
    """Produces one tensor. Subclasses: PlaceholderOp, ComputeOp."""

    name: str
    shape: tuple
    dtype: str

    @property
    def num_outputs(self) -> int:
        return 1

    def output(self, index: int = 0) -> Tensor:
        """The ``index``-th tensor this operation produces (the same object on every call)."""
        if not 0 <= index < self.num_outputs:
            raise IndexError(f"operation {self.name} has {self.num_outputs} output(s), asked for output {index}")
        if index == 0:
            t = getattr(self, "_out", None)
            if t is None:
                t = Tensor(self)
                self._out = t
            return t
        outs = self.__dict__.setdefault("_outs", {})
        t = outs.get(index)
        if t is None:
            t = outs[index] = Tensor(self, index)
        return t

    @property
    def input_tensors(self) -> list[Tensor]:
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple, dtype: str):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.axis: list[IterVar] = []
        self.reduce_axis: list[IterVar] = []


class ComputeOp(Operation):
    """``out[axis] = body``; ``body`` may be a Reduce over ``reduce_axis``.

    An operation with several outputs (``te.compute`` of a lambda returning a tuple) is given a list of
    bodies, one per output, computed in one loop nest: ``bodies`` lists them (``body``, TVM's name, is the same
    list: ``op.body[0]``). The bodies of a tuple reduction (argmax) are Reduce nodes that share one combiner
    and one tuple of sources.
    """

    def __init__(self, name: str, axis: Sequence[IterVar], body: Expr | Sequence[Expr], tag: str = "",
                 attrs: dict | None = None):
        self.name = name
        self.axis = list(axis)
        self.bodies: list[Expr] = list(body) if isinstance(body, (list, tuple)) else [body]
        body = self.bodies[0]
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.reduce_axis = list(body.axis) if isinstance(body, Reduce) else []
        self.shape = tuple(ax.dom.extent for ax in self.axis)
        self.dtype = body.dtype
        self.dtypes = [b.dtype for b in self.bodies]

    @property
    def body(self) -> list[Expr]:
        """TVM's name: the list of bodies, one per output."""
        return self.bodies

    @property
    def num_outputs(self) -> int:
        return len(self.bodies)

    @property
    def input_tensors(self) -> list[Tensor]:
        """The tensors the bodies read, and those a reduction's bounds read (a window sized per output point)."""
        seen: dict[int, Tensor] = {}
        bounds = [e for ax in self.reduce_axis for e in (ax.dom.min, ax.dom.extent)]
        for b in [*self.bodies, *bounds]:
            for node in walk(b):
                if isinstance(node, TensorLoad) and id(node.tensor) not in seen:
                    seen[id(node.tensor)] = node.tensor
        return list(seen.values())


class Tensor:
    """The output of an operation; ``T[i, j]`` reads it inside a compute."""

    #: an expression's ``+ - * /`` with a tensor operand leave it to the tensor's operators (TOPI's broadcast)
    defers_arithmetic = True

    def __init__(self, op: Operation, value_index: int = 0):
        self.op = op
        self.value_index = value_index

    @property
    def shape(self) -> tuple:
        shapes = getattr(self.op, "shapes", None)  # outputs of different shapes (a scan of several states)
        return shapes[self.value_index] if shapes is not None else self.op.shape

    @property
    def dtype(self) -> str:
        return self.op.dtypes[self.value_index] if self.value_index else self.op.dtype

    @property
    def name(self) -> str:
        return f"{self.op.name}.v{self.value_index}" if self.value_index else self.op.name

    @property
    def ndim(self) -> int:
        return len(self.op.shape)

    def __call__(self, *indices: Any) -> TensorLoad:
        """``T(i, j)``: the same read as ``T[i, j]`` (TVM's call syntax; ``T()`` reads a rank-0 tensor)."""
        return self[indices]

    def __iter__(self):
        # without this, Python would iterate by calling __getitem__(0), (1), ... without end (list(tensor))
        raise TypeError(f"a te.Tensor ({self.name}) is not iterable: index it inside a compute, or pass a list "
                        f"of tensors")

    def __getitem__(self, indices: Any) -> TensorLoad | TensorSlice:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if any(isinstance(x, slice) for x in indices):
            if len(indices) > len(self.shape):
                raise IndexError(f"tensor {self.name} has {len(self.shape)} dimensions, indexed with {len(indices)}")
            return TensorSlice(self, indices)  # A[i, 0:16]: a region, what a tensor intrinsic is called on
        if 0 < len(indices) < len(self.shape):
            return TensorSlice(self, indices)  # T[i][j]: the first indices, the rest to come
        if len(indices) != len(self.shape):
            raise IndexError(f"tensor {self.name} has {len(self.shape)} dimensions, indexed with {len(indices)}")
        idx = []
        for x in indices:
            e = convert(x)
            if e.dtype != INDEX_DTYPE:
                if e.dtype.startswith("int") or e.dtype.startswith("uint"):
                    e = e.astype(INDEX_DTYPE)
                else:
                    raise TypeError(f"index of tensor {self.name} must be an integer, got {e} ({e.dtype})")
            idx.append(e)
        return TensorLoad(self, idx)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={list(self.shape)}, {self.dtype})"

    __hash__ = object.__hash__


class TensorSlice:
    """``T[i]`` of a tensor with more dimensions: indexing it again (``T[i][j]``) reads an element. With
    Python slices (``A[i, 0:16]``) it is a region of the tensor, as TVM's tensor intrinsics take them
    (:meth:`region`)."""

    __slots__ = ("tensor", "indices")

    def __init__(self, tensor: Tensor, indices: tuple):
        self.tensor = tensor
        self.indices = tuple(indices)

    def __getitem__(self, more: Any) -> TensorLoad | TensorSlice:
        if any(isinstance(x, slice) for x in self.indices):
            raise TypeError(f"{self!r} is a region of {self.tensor.name}; index the tensor itself")
        if not isinstance(more, tuple):
            more = (more,)
        return self.tensor[self.indices + more]

    def region(self) -> list[Range]:
        """One Range per dimension: an index ``i`` is ``[i, i + 1)``, a slice ``a:b`` is ``[a, b)`` (``:`` the
        whole dimension), and dimensions left out are whole."""
        out = []
        for d, dim in enumerate(self.tensor.shape):
            x = self.indices[d] if d < len(self.indices) else slice(None)
            if isinstance(x, slice):
                if x.step not in (None, 1):
                    raise IndexError(f"region of {self.tensor.name}: step {x.step} is not supported")
                lo = convert(x.start if x.start is not None else 0)
                hi = convert(x.stop) if x.stop is not None else dim
                out.append(Range.from_bounds(lo, hi))
            else:
                out.append(Range(x, 1))
        return out

    @property
    def dtype(self) -> str:
        return self.tensor.dtype

    def __repr__(self) -> str:
        def one(x: Any) -> str:
            if isinstance(x, slice):
                return f"{'' if x.start is None else x.start}:{'' if x.stop is None else x.stop}"
            return str(x)

        return f"{self.tensor.name}[{', '.join(one(x) for x in self.indices)}]"


def _shape(shape: Any) -> tuple:
    if isinstance(shape, (int, Expr)):
        shape = (shape,)
    out = []
    for d in shape:
        if isinstance(d, float) and d.is_integer():  # (N / bn, ...) in Python 3 gives a float
            d = int(d)
        e = convert(d)
        if isinstance(e, IntImm) and e.value < 0:
            raise ValueError(f"negative dimension {e.value} in shape {shape}")
        if e.dtype != INDEX_DTYPE:
            e = IntImm(e.value, INDEX_DTYPE) if isinstance(e, IntImm) else e.astype(INDEX_DTYPE)
        out.append(e)
    return tuple(out)


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given shape (ints or symbolic vars)."""
    return PlaceholderOp(name, _shape(shape), check_dtype(dtype)).output(0)


class TagScope:
    """``with te.tag_scope("conv"):`` or ``@te.tag_scope(tag="conv")``: computes made inside without a tag of
    their own get this one (TVM's; how TOPI marks its operators). Scopes do not nest."""

    _current: TagScope | None = None

    def __init__(self, tag: str):
        self.tag = tag

    def __enter__(self) -> TagScope:
        if TagScope._current is not None:
            raise ValueError(f"tag_scope {self.tag!r} inside tag_scope {TagScope._current.tag!r}: scopes do not nest")
        TagScope._current = self
        return self

    def __exit__(self, *exc: Any) -> None:
        TagScope._current = None

    def __call__(self, fdecl: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fdecl)
        def tagged(*args: Any, **kwargs: Any) -> Any:
            with TagScope(self.tag):
                return fdecl(*args, **kwargs)
        return tagged


def tag_scope(tag: str) -> TagScope:
    """The tag scope ``tag``: a context manager and a decorator."""
    return TagScope(tag)


def compute(
    shape: Any, fcompute: Callable[..., Any], name: str = "compute", tag: str = "", attrs: dict | None = None
) -> Tensor | list[Tensor]:
    """``out[i, j, ...] = fcompute(i, j, ...)``; a reduction must be the whole body. A ``fcompute`` that
    returns a tuple makes one operation with that many outputs, returned as a list of tensors."""
    if not tag and TagScope._current is not None:
        tag = TagScope._current.tag
    shape = _shape(shape)
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if params and params[0].kind == inspect.Parameter.VAR_POSITIONAL:
        names = [f"i{d}" for d in range(len(shape))]
    else:
        # parameters with defaults are the closure-capture idiom (lambda i, t=t: ...), not axes
        names = [p.name for p in params if p.default is inspect.Parameter.empty
                 and p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params) and len(names) < len(shape):
            names += [f"i{d}" for d in range(len(names), len(shape))]  # (n, c, *rest): the rest are numbered
        if len(names) < len(shape):  # a tensor intrinsic called on regions computes the last dimensions
            outer = [IterVar(Range(0, d), Var(nm), "spatial") for nm, d in zip(names, shape)]
            call = fcompute(*[ax.var for ax in outer])
            if hasattr(call, "build_compute"):  # te.decl_tensor_intrin(...)(A[i, 0:16], ...)
                return call.build_compute(shape, outer, name, tag, attrs)
        if len(names) != len(shape):
            raise ValueError(
                f"compute {name}: fcompute takes {len(names)} arguments but the shape has {len(shape)} dimensions"
            )
    axis = [IterVar(Range(0, d), Var(nm), "spatial") for nm, d in zip(names, shape)]
    body = fcompute(*[ax.var for ax in axis])
    multi = isinstance(body, (list, tuple))
    bodies = [convert(b) for b in body] if multi else [convert(body)]
    if not bodies:
        raise ValueError(f"compute {name}: fcompute returned an empty tuple")
    for b in bodies:
        for node in walk(b):
            if isinstance(node, Reduce) and node is not b:
                raise ValueError(
                    f"compute {name}: a reduction must be the whole body of a compute "
                    "(split the expression into two computes)"
                )
    reds = [b for b in bodies if isinstance(b, Reduce)]
    if reds and (len(reds) != len(bodies) or any(
            r.combiner is not reds[0].combiner or r.sources is not reds[0].sources for r in reds)):
        raise ValueError(
            f"compute {name}: the outputs of one compute are either all the values of one tuple reduction "
            "(argmax: reducer((idx, val), axis=k)) or none of them a reduction"
        )
    if reds and len(reds) != len(reds[0].sources):
        raise ValueError(f"compute {name}: a tuple reduction of {len(reds[0].sources)} values is returned "
                         f"as {len(reds)} outputs; return all of them")
    op = ComputeOp(name, axis, bodies if multi else bodies[0], tag, attrs)
    if multi:
        return [op.output(i) for i in range(len(bodies))]
    return op.output(0)


__all__ = [
    "Range",
    "IterVar",
    "Tensor",
    "TensorSlice",
    "Operation",
    "PlaceholderOp",
    "ComputeOp",
    "placeholder",
    "compute",
    "tag_scope",
    "TagScope",
    "reduce_axis",
    "thread_axis",
    "var",
    "size_var",
    "const",
]
