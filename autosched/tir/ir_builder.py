"""Loop IR written by hand (TVM's ``tir.ir_builder``), e.g. the body of a ``te.extern``::

    ib = tir.ir_builder.create()
    a, b = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
    with ib.for_range(0, n, name="i") as i:
        b[i] = a[i] + 1
    return ib.get()

``buffer_ptr`` indexes a buffer as flat memory (element ``i`` of the row-major layout, or of its strides).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from autosched.te.expr import INDEX_DTYPE, Expr, IntImm, Var, convert
from autosched.tir import stmt as S
from autosched.tir.transform import substitute_stmt


class BufferPtr:
    """A buffer seen as flat memory: ``p[i]`` reads element ``i``, ``p[i] = v`` writes it."""

    def __init__(self, builder: IRBuilder, buf: S.Buffer):
        self._ib = builder
        self._buf = buf
        size = buf.alloc_elems() if (buf.strides is not None or buf.elem_offset is not None) else None
        if size is None:
            size = IntImm(1)
            for d in buf.shape:
                size = size * d
        self._flat = S.Buffer(buf.name, [size], buf.dtype, buf.scope, base=buf)

    @property
    def dtype(self) -> str:
        return self._buf.dtype

    def __getitem__(self, index: Any) -> S.BufferLoad:
        return S.BufferLoad(self._flat, [_index(index)])

    def __setitem__(self, index: Any, value: Any) -> None:
        self._ib.emit(S.BufferStore(self._flat, convert(value, self._buf.dtype), [_index(index)]))


def _index(i: Any) -> Expr:
    e = convert(i)
    return e if e.dtype == INDEX_DTYPE else e.astype(INDEX_DTYPE)


class IRBuilder:
    """Collects statements; ``for_range``/``if_scope``/``else_scope``/``new_scope`` nest them."""

    def __init__(self) -> None:
        self._seq: list[list[Any]] = [[]]

    def emit(self, stmt: Any) -> None:
        """Add a statement (an expression, such as a ``call_packed``, is evaluated for its effect)."""
        if isinstance(stmt, Expr):
            stmt = S.Evaluate(stmt)
        if not isinstance(stmt, S.Stmt):
            raise TypeError(f"ir_builder.emit: expected a statement or an expression, got {stmt!r}")
        self._seq[-1].append(stmt)

    def _pop(self) -> S.Stmt:
        body = self._seq.pop()
        return _finish(body)

    @contextmanager
    def for_range(self, begin: Any, end: Any, name: str = "i", dtype: str = INDEX_DTYPE,
                  kind: str = "serial") -> Iterator[Var]:
        """A loop ``for name in range(begin, end)``; ``kind`` 'serial', 'unroll', 'vectorize' or 'parallel'."""
        kinds = {"serial": "serial", "unroll": "unrolled", "vectorize": "vectorized", "parallel": "parallel"}
        if kind not in kinds:
            raise ValueError(f"for_range: kind must be one of {', '.join(kinds)}, got {kind!r}")
        v = Var(name, INDEX_DTYPE)
        b, e = convert(begin), convert(end)
        self._seq.append([])
        b_is_zero = isinstance(b, IntImm) and b.value == 0
        yield v
        body = self._pop()
        extent = e - b
        if not b_is_zero:  # loops start at 0 in the loop IR: the variable is shifted
            w = Var(name, INDEX_DTYPE)
            body = substitute_stmt(body, {v: w + b})
            v = w
        self.emit(S.For(v, extent, kinds[kind], body))

    @contextmanager
    def if_scope(self, cond: Any) -> Iterator[None]:
        self._seq.append([])
        yield
        self.emit(S.IfThenElse(convert(cond), self._pop()))

    @contextmanager
    def else_scope(self) -> Iterator[None]:
        prev = self._seq[-1][-1] if self._seq[-1] else None
        if not isinstance(prev, S.IfThenElse) or prev.else_case is not None:
            raise RuntimeError("ir_builder: else_scope must follow an if_scope")
        self._seq.append([])
        yield
        else_case = self._pop()
        self._seq[-1][-1] = S.IfThenElse(prev.cond, prev.then_case, else_case)

    @contextmanager
    def new_scope(self) -> Iterator[None]:
        self._seq.append([])
        yield
        self.emit(self._pop())

    def let(self, name: str, value: Any) -> Var:
        """A variable bound to ``value`` for the statements that follow."""
        v = Var(name, convert(value).dtype)
        self._seq[-1].append(("let", v, convert(value)))
        return v

    def allocate(self, dtype: str, shape: Any, name: str = "buf", scope: str = "global") -> BufferPtr:
        """Memory for the statements that follow, indexed flat."""
        shp = [convert(d) for d in (shape if isinstance(shape, (list, tuple)) else [shape])]
        buf = S.Buffer(name, shp, dtype, scope)
        self._seq[-1].append(("alloc", buf))
        return BufferPtr(self, buf)

    def buffer_ptr(self, buf: S.Buffer) -> BufferPtr:
        """``buf`` as flat memory."""
        if not isinstance(buf, S.Buffer):
            raise TypeError(f"buffer_ptr: expected a buffer (te.extern's ins/outs, tir.decl_buffer), got {buf!r}")
        return BufferPtr(self, buf)

    def get(self) -> S.Stmt:
        """The statements built so far."""
        if len(self._seq) != 1:
            raise RuntimeError("ir_builder.get() inside an open scope")
        return _finish(self._seq[0])


def _finish(items: list[Any]) -> S.Stmt:
    """Statements, with ``let``/``allocate`` markers scoping what follows them."""
    out: list[S.Stmt] = []
    for k, x in enumerate(items):
        if isinstance(x, tuple):
            rest = _finish(items[k + 1:])
            if x[0] == "let":
                out.append(S.LetStmt(x[1], x[2], rest))
            else:
                out.append(S.Allocate(x[1], rest))
            return S.seq(out) if out else S.SeqStmt([])
        out.append(x)
    return S.seq(out) if out else S.SeqStmt([])


def create() -> IRBuilder:
    """A new IR builder."""
    return IRBuilder()


__all__ = ["BufferPtr", "IRBuilder", "create"]
