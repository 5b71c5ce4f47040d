"""Calls out of generated code, and buffers declared by hand (TVM's ``tir.call_packed``, ``tir.call_extern``,
``tir.decl_buffer``).

``call_packed("name", ...)`` calls the function registered with ``autosched.register_func("name")`` while
the kernel runs: a buffer argument arrives as an ``autosched.nd.NDArray`` viewing the kernel's memory
(writes to it are the kernel's writes), ``buffer.data`` as the address (an int), numbers as numbers.
``call_extern(dtype, "symbol", ...)`` calls a C function linked into the process (libc, libm, a library
loaded with ``llvmlite.binding.load_library_permanently``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched.te import expr as E
from autosched.te.expr import INDEX_DTYPE, Call, Expr, IntImm, Var, check_dtype, convert
from autosched.tir import stmt as S
from autosched.tir.arith import simplify
from autosched.tir.stmt import Buffer, BufferRef
from autosched.tir.wmma import LAYOUTS, OPS

PACKED = "packed:"  # Call names: PACKED + registered name, EXTERN + C symbol
EXTERN = "extern:"


def _arg(a: Any) -> Expr:
    if isinstance(a, Buffer):
        return BufferRef(a)
    if hasattr(a, "var") and hasattr(a, "dom"):  # an IterVar
        return a.var
    return convert(a)


def call_packed(*args: Any) -> Call:
    """Call the registered function ``args[0]`` with the other arguments (buffers, addresses, numbers)."""
    if not args or not isinstance(args[0], str):
        raise TypeError("call_packed(name, *args): the first argument is the registered function's name")
    return Call("int32", PACKED + args[0], [_arg(a) for a in args[1:]])


def call_extern(dtype: str, func_name: str, *args: Any) -> Call:
    """Call the C function ``func_name`` (returning ``dtype``) with these arguments."""
    return Call(check_dtype(dtype) if dtype != "handle" else dtype, EXTERN + str(func_name), [_arg(a) for a in args])


_MATH = ("exp", "log", "sqrt", "fabs", "floor", "ceil", "nearbyint", "pow", "sin", "cos", "tanh", "erf")


def call_intrin(dtype: str, op_name: str, *args: Any) -> Call:
    """A builtin by TVM's name (``tir.call_intrin("handle", "tir.tvm_mma_sync", ...)``): the warp matrix
    operations of tensor cores (:mod:`autosched.tir.wmma`; a layout given as ``"row_major"`` or
    ``"col_major"``) or a math function (``"tir.exp"``)."""
    name = op_name[4:] if op_name.startswith("tir.") else op_name
    if name in OPS:
        return Call("handle", name, [IntImm(LAYOUTS.index(a)) if isinstance(a, str) and a in LAYOUTS else _arg(a)
                                     for a in args])
    if name in _MATH:
        return Call(check_dtype(dtype), name, [_arg(a) for a in args])
    raise ValueError(f"call_intrin: unknown builtin {op_name!r}; known: {', '.join('tir.' + n for n in OPS + _MATH)}")


def decl_buffer(shape: Any, dtype: str | None = None, name: str = "buffer", data: Any = None,
                strides: Sequence[Any] | None = None, elem_offset: Any = None, scope: str = "",
                data_alignment: int = -1, offset_factor: int = 0, buffer_type: str = "",
                axis_separators: Any = None, span: Any = None) -> Buffer:
    """A buffer of ``shape`` (TVM's ``tir.decl_buffer``): strides in elements (``None``: dense row-major),
    ``elem_offset`` the position of element 0 in the memory (a variable when ``offset_factor`` is set, so a
    buffer bound to part of a tensor by ``tensorize`` finds its start there). Use it in ``binds=`` of
    ``lower``/``build``, as an input or output buffer of ``te.extern`` or of ``te.decl_tensor_intrin``."""
    if data is not None:
        raise ValueError("decl_buffer: data= (a buffer over another's memory) is not supported; declare the "
                         "buffer and bind it with binds= or through te.extern/decl_tensor_intrin")
    if axis_separators:
        raise ValueError("decl_buffer: axis_separators (non-flat memory) are not supported")
    if isinstance(shape, (int, Expr)):
        shape = (shape,)
    shp = [convert(d) if not isinstance(d, int) else IntImm(d, INDEX_DTYPE) for d in shape]
    shp = [d if d.dtype == INDEX_DTYPE or not isinstance(d, IntImm) else IntImm(d.value, INDEX_DTYPE) for d in shp]
    st = [convert(x) if not isinstance(x, int) else IntImm(x, INDEX_DTYPE) for x in strides] if strides else None
    if st is not None and len(st) != len(shp):
        raise ValueError(f"decl_buffer {name}: {len(st)} strides for {len(shp)} dimensions")
    if elem_offset is None and offset_factor:
        elem_offset = Var(name + "_elem_offset", INDEX_DTYPE)
    off = convert(elem_offset) if elem_offset is not None else None
    return Buffer(name, shp, check_dtype(dtype or "float32"), scope or "global", st, off, int(offset_factor),
                  int(data_alignment))


__all__ = ["EXTERN", "PACKED", "bind_placeholder", "call_extern", "call_intrin", "call_packed", "decl_buffer",
           "dense_strides", "rebind_buffers"]


def bind_placeholder(ph: Buffer, actual: Buffer, vmap: dict, offset: Expr | None = None,
                     strides: Sequence[Expr] | None = None) -> None:
    """Add to ``vmap`` the values that placeholder ``ph``'s symbolic strides and element offset take when it
    is bound to ``actual`` (dense unless it has strides; ``offset``/``strides``: a region of it)."""
    if strides is None:
        strides = actual.strides or dense_strides(actual.shape)
    if offset is None:
        offset = actual.elem_offset if actual.elem_offset is not None else IntImm(0, INDEX_DTYPE)
    if ph.strides is not None:
        for mine, real in zip(ph.strides, strides):
            if isinstance(mine, Var):
                vmap[mine] = real
    if isinstance(ph.elem_offset, Var):
        vmap[ph.elem_offset] = offset


def dense_strides(shape: Sequence[Expr]) -> list[Expr]:
    """Row-major strides of ``shape``, innermost 1."""
    out: list[Expr] = []
    stride: Expr = IntImm(1, INDEX_DTYPE)
    for d in reversed(list(shape)):
        out.append(stride)
        stride = simplify(stride * d)
    return out[::-1]


def rebind_buffers(stmt: S.Stmt, bmap: dict, vmap: dict | None = None) -> S.Stmt:
    """``stmt`` with the buffers of ``bmap`` (placeholder -> actual) replaced everywhere: loads, stores,
    whole-buffer arguments, ``.data`` addresses and flat views of them; and the variables of ``vmap``
    (a placeholder's symbolic strides and offset) by their values."""
    views: dict[int, Buffer] = {}
    datas = {b._data: (a.base or a).data for b, a in bmap.items() if b._data is not None}
    datas.update(vmap or {})

    def buf_of(b: Buffer) -> Buffer:
        if b in bmap:
            return bmap[b]
        if b.base is not None and b.base in bmap:
            v = views.get(id(b))
            if v is None:  # a flat view (ir_builder.buffer_ptr): flat from the bound buffer's element 0
                real = bmap[b.base]
                if real.base is None and real.strides is None and real.elem_offset is None:
                    v = Buffer(b.name, b.shape, b.dtype, b.scope, base=real)
                else:
                    one = IntImm(1, INDEX_DTYPE)
                    v = Buffer(b.name, b.shape, b.dtype, b.scope, [one], real.elem_offset, base=real.base or real)
                views[id(b)] = v
            return v
        return b

    def ex(e: Expr) -> Expr:
        if isinstance(e, BufferRef):
            return BufferRef(buf_of(e.buffer))
        if isinstance(e, Var):
            return datas.get(e, e)
        kids = E.children(e)
        new = [ex(c) for c in kids]
        if isinstance(e, S.BufferLoad):
            return S.BufferLoad(buf_of(e.buffer), new)
        return E.rebuild(e, new) if any(n is not o for n, o in zip(new, kids)) else e

    def st(s: S.Stmt) -> S.Stmt:
        if isinstance(s, S.BufferStore):
            return S.BufferStore(buf_of(s.buffer), ex(s.value), [ex(i) for i in s.indices])
        if isinstance(s, S.For):
            return S.For(s.var, ex(s.extent), s.kind, st(s.body), s.thread_tag)
        if isinstance(s, S.IfThenElse):
            return S.IfThenElse(ex(s.cond), st(s.then_case), st(s.else_case) if s.else_case is not None else None)
        if isinstance(s, S.LetStmt):
            return S.LetStmt(s.var, ex(s.value), st(s.body))
        if isinstance(s, S.Allocate):
            return S.Allocate(s.buffer, st(s.body))
        if isinstance(s, S.SeqStmt):
            return S.SeqStmt([st(x) for x in s.seq])
        if isinstance(s, S.Evaluate):
            return S.Evaluate(ex(s.value))
        return s

    return st(stmt)
