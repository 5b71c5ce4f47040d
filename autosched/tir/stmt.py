"""The loop-nest IR: buffers, statements and PrimFunc.

Lowering turns a scheduled te computation into this IR; codegen turns it into
LLVM. Loops always start at 0; ``For.kind`` carries the schedule's annotation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched.te import expr as E
from autosched.te.expr import Call, Expr, IntImm, Var, convert, expr_str

FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread_binding")


class ForKind:
    """TVM's names of the loop kinds: ``loop.kind == tir.ForKind.PARALLEL``."""

    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    THREAD_BINDING = "thread_binding"


class Buffer:
    """An array: a function argument or an allocation. Row-major and dense unless ``strides`` (elements per
    step of each dimension: ``storage_align``'s padded rows, ``tir.decl_buffer(strides=...)``) say otherwise;
    ``elem_offset`` is where element 0 lies from the start of the memory."""

    __slots__ = ("name", "shape", "dtype", "scope", "strides", "elem_offset", "offset_factor", "data_alignment",
                 "base", "_data")

    def __init__(self, name: str, shape: Sequence[Expr], dtype: str, scope: str = "global",
                 strides: Sequence[Expr] | None = None, elem_offset: Expr | None = None, offset_factor: int = 0,
                 data_alignment: int = -1, base: Buffer | None = None):
        self.name = name
        self.shape = tuple(shape)
        self.dtype = dtype
        self.scope = scope
        self.strides = tuple(strides) if strides else None
        self.elem_offset = elem_offset
        self.offset_factor = offset_factor
        self.data_alignment = data_alignment
        self.base = base  # a view (``ir_builder.buffer_ptr``): the buffer whose memory it reads
        self._data: Var | None = None

    @property
    def data(self) -> Var:
        """The address of the buffer's memory, as a ``handle`` variable (TVM's ``Buffer.data``): pass it to
        ``tir.call_packed`` / ``tir.call_extern``."""
        if self._data is None:
            v = Var(self.name, "int64")
            v.dtype = "handle"  # an address: not a value type of te, so set past the dtype check
            self._data = v
        return self._data

    def access_ptr(self, access_mask: Any = "rw", ptr_type: str = "handle", content_lanes: int = 1,
                   offset: Any = 0) -> Expr:
        """The address of element ``elem_offset + offset`` (TVM's ``Buffer.access_ptr``; the mask is only
        informative here)."""
        off = convert(offset)
        if self.elem_offset is not None:
            off = self.elem_offset + off
        return Call("handle", "access_ptr", [self.data, off])

    def vload(self, begin: Sequence[Any], dtype: str | None = None) -> BufferLoad:
        """The element at ``begin`` (TVM's ``Buffer.vload`` of one lane)."""
        return BufferLoad(self, [convert(i) for i in (begin if isinstance(begin, (list, tuple)) else [begin])])

    def vstore(self, begin: Sequence[Any], value: Any) -> BufferStore:
        """Store ``value`` at ``begin`` (TVM's ``Buffer.vstore``)."""
        idx = [convert(i) for i in (begin if isinstance(begin, (list, tuple)) else [begin])]
        return BufferStore(self, convert(value, self.dtype), idx)

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.dtype}{list(self.shape)})"

    def const_size(self) -> int | None:
        """Elements the memory holds (the span of the strides and offset where there are any)."""
        n = 1
        for d in self.shape:
            if not isinstance(d, IntImm):
                return None
            n *= d.value
        if self.strides is None and self.elem_offset is None:
            return n
        if n == 0:
            return 0
        span = 1
        for d, st in zip(self.shape, self.strides or ()):
            if not isinstance(st, IntImm):
                return None
            span += (d.value - 1) * st.value
        if self.strides is None:
            span = n
        off = self.elem_offset
        if off is not None:
            if not isinstance(off, IntImm):
                return None
            span += off.value
        return span

    def alloc_elems(self) -> Expr:
        """Elements to allocate for this buffer, as an expression (what :meth:`const_size` gives when constant)."""
        n = self.const_size()
        if n is not None:
            return IntImm(n)
        size: Expr = IntImm(1)
        if self.strides is None:
            for d in self.shape:
                size = size * d
        else:
            for d, st in zip(self.shape, self.strides):
                size = size + (d - 1) * st
        return size if self.elem_offset is None else size + self.elem_offset


class BufferRef(Expr):
    """A whole buffer as an argument of ``tir.call_packed`` (the callee gets an array of its shape)."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: Buffer):
        self.buffer = buffer
        self.dtype = "handle"

    def _text(self) -> str:
        return self.buffer.name


class BufferLoad(Expr):
    __slots__ = ("buffer", "indices")

    def __init__(self, buffer: Buffer, indices: Sequence[Expr]):
        self.buffer = buffer
        self.indices = tuple(indices)
        self.dtype = buffer.dtype

    def with_indices(self, indices: Sequence[Expr]) -> BufferLoad:
        return BufferLoad(self.buffer, indices)

    def _text(self) -> str:
        return f"{self.buffer.name}[{', '.join(expr_str(i) for i in self.indices)}]"


class Stmt:
    __slots__ = ()

    def __repr__(self) -> str:
        return stmt_str(self)


class For(Stmt):
    __slots__ = ("var", "extent", "kind", "body", "thread_tag")

    def __init__(self, var: Var, extent: Expr, kind: str, body: Stmt, thread_tag: Any = "", *tvm_rest: Any):
        if body.__class__ is str:  # TVM's order (loop_var, min, extent, kind, body, ...): loops start at 0 here
            start, extent, kind, body = extent, kind, body, thread_tag
            thread_tag = ""
            if not (isinstance(start, int) and start == 0) and not (isinstance(start, IntImm) and start.value == 0):
                raise ValueError(f"tir.For({var}, min={start}, ...): loops start at 0 in autosched's loop IR; "
                                 f"give min 0 and read {var} + {start} in the body")
            extent = extent if isinstance(extent, Expr) else IntImm(int(extent), var.dtype)
        assert kind in FOR_KINDS, kind
        self.var = var
        self.extent = extent
        self.kind = kind
        self.body = body
        self.thread_tag = thread_tag

    @property
    def loop_var(self) -> Var:
        """TVM's name for the loop variable."""
        return self.var

    @property
    def min(self) -> Expr:  # noqa: A003 - TVM's name
        """Where the loop starts: always 0 in this loop IR (TVM's ``For.min``)."""
        return IntImm(0, self.var.dtype)


class BufferStore(Stmt):
    __slots__ = ("buffer", "value", "indices")

    def __init__(self, buffer: Buffer, value: Expr, indices: Sequence[Expr]):
        self.buffer = buffer
        self.value = value
        self.indices = tuple(indices)


class Allocate(Stmt):
    """``buffer`` exists (uninitialised) while ``body`` runs."""

    __slots__ = ("buffer", "body")

    def __init__(self, buffer: Buffer, body: Stmt):
        self.buffer = buffer
        self.body = body

    @property
    def extents(self) -> list[Expr]:
        """The elements allocated (TVM's ``Allocate.extents``: one flat extent)."""
        return [self.buffer.alloc_elems()]

    @property
    def dtype(self) -> str:
        return self.buffer.dtype


class IfThenElse(Stmt):
    __slots__ = ("cond", "then_case", "else_case")

    def __init__(self, cond: Expr, then_case: Stmt, else_case: Stmt | None = None):
        self.cond = cond
        self.then_case = then_case
        self.else_case = else_case


class LetStmt(Stmt):
    __slots__ = ("var", "value", "body")

    def __init__(self, var: Var, value: Expr, body: Stmt):
        self.var = var
        self.value = value
        self.body = body


class Evaluate(Stmt):
    """Evaluate ``value`` for its effect (a ``tir.call_packed`` / ``tir.call_extern`` call)."""

    __slots__ = ("value",)

    def __init__(self, value: Expr):
        self.value = value


class SeqStmt(Stmt):
    __slots__ = ("seq",)

    def __init__(self, seq: Sequence[Stmt]):
        self.seq = list(seq)

    def __getitem__(self, i: int) -> Stmt:
        """The ``i``-th statement (TVM's ``SeqStmt[i]``)."""
        return self.seq[i]


class Barrier(Stmt):
    """Every thread of a GPU block waits here; shared-memory writes before it are visible after it
    (``__syncthreads()``). Inserted by :func:`autosched.tir.gpu.prepare_kernel`, never written by hand."""

    __slots__ = ()


def seq(stmts: Sequence[Stmt | None]) -> Stmt:
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(flat)


class PrimFunc:
    """A lowered kernel: buffer parameters, scalar parameters (symbolic shapes) and a body."""

    def __init__(self, name: str, params: Sequence[Buffer], scalar_params: Sequence[Var], body: Stmt,
                 attrs: dict | None = None):
        self.name = name
        self.params = list(params)
        self.scalar_params = list(scalar_params)
        self.body = body
        self.attrs = dict(attrs or {})

    def __str__(self) -> str:
        return func_str(self)

    __repr__ = __str__

    def script(self) -> str:
        return str(self)

    def with_body(self, body: Stmt) -> PrimFunc:
        """The same function with another body (TVM's ``PrimFunc.with_body``, what a pass returns)."""
        return PrimFunc(self.name, self.params, self.scalar_params, body, dict(self.attrs))

    def __getitem__(self, name: str) -> PrimFunc:
        """``lower(...)["main"]``: TVM's lower returns a module of one function called "main"; here it
        returns the function itself, which answers to "main" and to its own name."""
        if name in ("main", self.name):
            return self
        raise KeyError(f"no function {name!r}: lower gave the function {self.name!r} (also reachable as 'main')")


def stmt_children(s: Stmt) -> list[Stmt]:
    if isinstance(s, (For, Allocate, LetStmt)):
        return [s.body]
    if isinstance(s, IfThenElse):
        return [s.then_case] + ([s.else_case] if s.else_case is not None else [])
    if isinstance(s, SeqStmt):
        return list(s.seq)
    return []


def map_children(s: Stmt, fn) -> Stmt:
    """``s`` rebuilt with ``fn`` applied to each child statement (loops, allocations, conditions and lets keep
    their own fields); a leaf is returned as it is."""
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, fn(s.body), s.thread_tag)
    if isinstance(s, SeqStmt):
        return SeqStmt([fn(x) for x in s.seq])
    if isinstance(s, Allocate):
        return Allocate(s.buffer, fn(s.body))
    if isinstance(s, LetStmt):
        return LetStmt(s.var, s.value, fn(s.body))
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, fn(s.then_case), fn(s.else_case) if s.else_case is not None else None)
    return s


def emitted_size(s: Stmt) -> int:
    """Stores and loops code generation emits for ``s``: unrolled loops of constant extent copy their body
    that many times. A measure of the compiler's work (LLVM's loop passes grow faster than linearly in it)."""
    if isinstance(s, BufferStore):
        return 1
    if isinstance(s, For):
        inner = emitted_size(s.body)
        if s.kind == "unrolled" and isinstance(s.extent, IntImm):
            return inner * s.extent.value
        return inner + 1
    return sum(emitted_size(c) for c in stmt_children(s))


def walk_stmts(s: Stmt):
    stack = [s]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(stmt_children(x)))


def stmt_exprs(s: Stmt) -> list[Expr]:
    """The expressions a statement holds directly (not those of nested statements)."""
    if isinstance(s, For):
        return [s.extent]
    if isinstance(s, BufferStore):
        return [s.value, *s.indices]
    if isinstance(s, IfThenElse):
        return [s.cond]
    if isinstance(s, (LetStmt, Evaluate)):
        return [s.value]
    if isinstance(s, Allocate):
        return list(s.buffer.shape)
    return []


def dim_to_json(d: Expr, scalars: list[Var]) -> int | list:
    """A shape dimension (or launch extent) as the runtime's evaluator reads it: an int, ``["var", k]`` for
    the k-th shape variable, or ``[op, a, b]`` of integer arithmetic on those."""
    if isinstance(d, IntImm):
        return d.value
    if isinstance(d, Var):
        for k, v in enumerate(scalars):
            if v is d:
                return ["var", k]
        raise ValueError(f"shape variable {d.name} is not a parameter")
    ops = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%", E.Min: "min", E.Max: "max"}
    op = ops.get(type(d))
    if op is None:
        raise ValueError(f"shape dimension {d} is not integer arithmetic on shape variables")
    return [op, dim_to_json(d.a, scalars), dim_to_json(d.b, scalars)]


# ----------------------------------------------------------------------------------------------
# text form (expressions print through te.expr.expr_str)


def stmt_str(s, indent: int = 0) -> str:
    """The readable text form of a loop nest, one loop per line, like ``tvm.lower``."""
    lines: list[str] = []
    _stmt(s, indent, lines)
    return "\n".join(lines)


def _stmt(s, ind: int, out: list[str]) -> None:
    pad = "  " * ind
    if isinstance(s, SeqStmt):
        for x in s.seq:
            _stmt(x, ind, out)
    elif isinstance(s, For):
        kind = {"serial": "for", "parallel": "parallel", "vectorized": "vectorized", "unrolled": "unrolled"}.get(
            s.kind, f"bind[{s.thread_tag}]"
        )
        out.append(f"{pad}{kind} ({s.var.name}, 0, {expr_str(s.extent)}) {{")
        _stmt(s.body, ind + 1, out)
        out.append(pad + "}")
    elif isinstance(s, BufferStore):
        idx = ", ".join(expr_str(i) for i in s.indices)
        out.append(f"{pad}{s.buffer.name}[{idx}] = {expr_str(s.value)}")
    elif isinstance(s, Allocate):
        shape = ", ".join(expr_str(d) for d in s.buffer.shape)
        out.append(f"{pad}allocate {s.buffer.name}: {s.buffer.dtype}[{shape}], {s.buffer.scope}")
        _stmt(s.body, ind, out)
    elif isinstance(s, IfThenElse):
        out.append(f"{pad}if ({expr_str(s.cond)}) {{")
        _stmt(s.then_case, ind + 1, out)
        if s.else_case is not None:
            out.append(pad + "} else {")
            _stmt(s.else_case, ind + 1, out)
        out.append(pad + "}")
    elif isinstance(s, LetStmt):
        out.append(f"{pad}let {s.var.name} = {expr_str(s.value)}")
        _stmt(s.body, ind, out)
    elif isinstance(s, Barrier):
        out.append(f"{pad}__syncthreads()")
    elif isinstance(s, Evaluate):
        out.append(f"{pad}{expr_str(s.value)}")
    else:
        out.append(f"{pad}<{type(s).__name__}>")


def func_str(f) -> str:
    """The readable text form of a PrimFunc: its parameters, then its body."""
    params = [f"{b.name}: {b.dtype}[{', '.join(expr_str(d) for d in b.shape)}]" for b in f.params]
    for pos, k in f.attrs.get("scalar_args", []):  # te.var arguments, where the call passes them
        v = f.scalar_params[k]
        params.insert(pos, f"{v.name}: {v.dtype}")
    head = f"primfn {f.name}({', '.join(params)}) {{"
    return head + "\n" + stmt_str(f.body, 1) + "\n}"
