"""Warp matrix operations: tiles multiplied on a GPU's tensor cores by the 32 threads of a warp together
(TVM's ``tvm_fill_fragment``, ``tvm_load_matrix_sync``, ``tvm_mma_sync``, ``tvm_store_matrix_sync``).

A tensorize intrinsic emits them (``tir.call_intrin("handle", "tir.tvm_mma_sync", ...)``) on buffers in the
scopes ``wmma.matrix_a`` (m x k), ``wmma.matrix_b`` (k x n) and ``wmma.accumulator`` (m x n). Such a buffer
is, in the loop IR, the warp's tiles laid out densely, fragment ``i`` being elements ``[i * rows * cols,
(i + 1) * rows * cols)``; on the GPU each thread holds its registers of each fragment (an opaque layout), on
the CPU (:func:`emulate`) each thread holds the whole tiles and does the warp's work itself, which gives the
warp's result. Shapes m16n16k16, m32n8k16 and m8n32k16 of float16, with float32 or float16 accumulators.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from autosched.errors import ScheduleError
from autosched.te import expr as E
from autosched.te.expr import INDEX_DTYPE, Expr, IntImm, Var
from autosched.tir import stmt as S

#: scope -> the fragment's role (A, B or the accumulator)
ROLES = {"wmma.matrix_a": "a", "wmma.matrix_b": "b", "wmma.accumulator": "c"}
SHAPES = ((16, 16, 16), (32, 8, 16), (8, 32, 16))
LAYOUTS = ("row_major", "col_major")  # a call holds the layout as its position here
OPS = ("tvm_fill_fragment", "tvm_load_matrix_sync", "tvm_mma_sync", "tvm_store_matrix_sync")
_ARITY = {"tvm_fill_fragment": 6, "tvm_load_matrix_sync": 8, "tvm_mma_sync": 8, "tvm_store_matrix_sync": 8}


def is_fragment_scope(scope: str) -> bool:
    return scope in ROLES


def tile_shape(role: str, shape: tuple[int, int, int]) -> tuple[int, int]:
    """(rows, columns) of a fragment of ``role`` for an m x n x k operation."""
    m, n, k = shape
    return {"a": (m, k), "b": (k, n), "c": (m, n)}[role]


@dataclass
class WarpOp:
    """One warp matrix operation, its arguments named. ``frags``: (data variable, fragment index) of each
    fragment it uses (the destination first); ``memory``: (data variable, element offset) it reads or writes;
    ``shape``: (m, n, k) where the call gives it."""
    name: str
    frags: list[tuple[Var, Expr]]
    shape: tuple[int, int, int] | None = None
    memory: tuple[Var, Expr] | None = None
    stride: Expr | None = None
    layout: str = "row_major"
    value: Expr | None = None

    @property
    def writes_memory(self) -> bool:
        return self.name == "tvm_store_matrix_sync"


def _int(e: Expr, what: str, op: str) -> int:
    if not isinstance(e, IntImm):
        raise ScheduleError(f"{op}: {what} must be a constant, got {e}")
    return e.value


def _data(e: Expr, op: str) -> Var:
    if not (isinstance(e, Var) and e.dtype == "handle"):
        raise ScheduleError(f"{op}: expected a fragment buffer's .data, got {e}")
    return e


def parse(call: E.Call) -> WarpOp:
    """The operation a ``tir.call_intrin`` of a warp matrix builtin describes, its arguments checked."""
    op = call.name
    a = list(call.args)
    if len(a) != _ARITY[op]:
        raise ScheduleError(f"{op} takes {_ARITY[op]} arguments, got {len(a)}")
    if op == "tvm_mma_sync":
        return WarpOp(op, [(_data(a[i], op), a[i + 1]) for i in (0, 2, 4, 6)])
    shape = tuple(_int(x, "m, n, k", op) for x in a[1:4])
    if shape not in SHAPES:
        raise ScheduleError(f"{op}: m, n, k = {shape}; tensor cores multiply {', '.join(map(str, SHAPES))} tiles")
    if op == "tvm_fill_fragment":
        return WarpOp(op, [(_data(a[0], op), a[4])], shape, value=a[5])  # type: ignore[arg-type]
    ptr = a[5]
    if not (isinstance(ptr, E.Call) and ptr.name == "access_ptr"):
        raise ScheduleError(f"{op}: the memory argument must be a buffer's access_ptr(...), got {ptr}")
    code = a[7].value if isinstance(a[7], IntImm) else -1
    if not 0 <= code < len(LAYOUTS):
        raise ScheduleError(f"{op}: the layout must be one of {LAYOUTS}, got {a[7]}")
    layout = LAYOUTS[code]
    return WarpOp(op, [(_data(a[0], op), a[4])], shape, (ptr.args[0], ptr.args[1]), a[6],  # type: ignore[arg-type]
                  layout)


def warp_ops(s: S.Stmt) -> Iterator[tuple[S.Evaluate, WarpOp]]:
    for x in S.walk_stmts(s):
        if isinstance(x, S.Evaluate) and isinstance(x.value, E.Call) and x.value.name in OPS:
            yield x, parse(x.value)


def has_warp_ops(s: S.Stmt) -> bool:
    return next(warp_ops(s), None) is not None


def memory_accesses(s: S.Stmt) -> tuple[set[int], set[int]]:
    """``id`` of the data variables of the memory that the warp operations in ``s`` read, and that they
    write (for the barriers around shared tiles)."""
    reads: set[int] = set()
    writes: set[int] = set()
    for _, w in warp_ops(s):
        if w.memory is not None:
            (writes if w.writes_memory else reads).add(id(w.memory[0]))
    return reads, writes


@dataclass
class Fragment:
    """What a fragment buffer holds: its role, the m x n x k of the operations on it, and (for A and B) the
    layout its tiles are loaded in, which the multiplication must name."""
    buffer: S.Buffer
    role: str
    shape: tuple[int, int, int]
    layout: str = "row_major"

    @property
    def tile(self) -> tuple[int, int]:
        return tile_shape(self.role, self.shape)

    @property
    def count(self) -> int:
        r, c = self.tile
        return -(-self.buffer.const_size() // (r * c))


def fragments(body: S.Stmt) -> dict[int, Fragment]:
    """The fragment buffers allocated in ``body`` (by ``id`` of their data variable), each one's shape and
    layout read from the operations on it; buffers used with two shapes or two layouts are refused."""
    bufs = {id(x.buffer.data): x.buffer for x in S.walk_stmts(body)
            if isinstance(x, S.Allocate) and is_fragment_scope(x.buffer.scope)}
    shapes: dict[int, tuple[int, int, int]] = {}
    layouts: dict[int, str] = {}
    mmas = []
    for _, w in warp_ops(body):
        for data, _ in w.frags:
            if id(data) not in bufs:
                raise ScheduleError(f"{w.name}: '{data.name}' is not a buffer in a wmma.* scope allocated in the "
                                    f"kernel (cache_read/cache_write it into wmma.matrix_a, wmma.matrix_b or "
                                    f"wmma.accumulator)")
        if w.name == "tvm_mma_sync":
            mmas.append(w)
            continue
        key = id(w.frags[0][0])
        if shapes.setdefault(key, w.shape) != w.shape:  # type: ignore[arg-type]
            raise ScheduleError(f"fragment '{bufs[key].name}' is used as m, n, k = {shapes[key]} and {w.shape}")
        if w.name == "tvm_load_matrix_sync" and ROLES[bufs[key].scope] != "c":
            if layouts.setdefault(key, w.layout) != w.layout:
                raise ScheduleError(f"fragment '{bufs[key].name}' is loaded both {layouts[key]} and {w.layout}")
    for w in mmas:  # a fragment only multiplied takes its shape from the others of the multiplication
        known = [shapes[id(d)] for d, _ in w.frags if id(d) in shapes]
        if not known:
            raise ScheduleError("tvm_mma_sync on fragments that no load, fill or store gives a shape")
        for d, _ in w.frags:
            if shapes.setdefault(id(d), known[0]) != known[0]:
                raise ScheduleError(f"tvm_mma_sync: fragment '{d.name}' is {shapes[id(d)]}, another {known[0]}")
        roles = [ROLES[bufs[id(d)].scope] for d, _ in w.frags]
        if roles != ["c", "a", "b", "c"]:
            raise ScheduleError(f"tvm_mma_sync(d, a, b, c) takes fragments in scopes wmma.accumulator, "
                                f"wmma.matrix_a, wmma.matrix_b, wmma.accumulator; got roles {roles}")
    out = {}
    for key, buf in bufs.items():
        if key not in shapes:
            continue
        role = ROLES[buf.scope]
        want = ("float16",) if role != "c" else ("float32", "float16")
        if buf.dtype not in want:
            raise ScheduleError(f"fragment '{buf.name}' ({buf.scope}) is {buf.dtype}; tensor cores take "
                                f"{' or '.join(want)} there")
        if buf.strides is not None:
            raise ScheduleError(f"fragment '{buf.name}' cannot have padded strides (storage_align)")
        out[key] = Fragment(buf, role, shapes[key], layouts.get(key, "row_major"))
    return out


# ---------------------------------------------------------------- the CPU's version
def _unravel(buf: S.Buffer, flat: Expr) -> list[Expr]:
    dims = [int(d.value) for d in buf.shape]  # type: ignore[attr-defined]
    out: list[Expr] = []
    inner = 1
    for d in reversed(dims):
        out.append(E.FloorMod(E.FloorDiv(flat, IntImm(inner, INDEX_DTYPE)), IntImm(d, INDEX_DTYPE))
                   if inner > 1 else E.FloorMod(flat, IntImm(d, INDEX_DTYPE)))
        inner *= d
    return out[::-1]


def _loops(extents: list[int], body) -> S.Stmt:
    vs = [Var(n, INDEX_DTYPE) for n in ("wr", "wc", "wk")[: len(extents)]]
    s = body(*vs)
    for v, n in reversed(list(zip(vs, extents))):
        s = S.For(v, IntImm(n, INDEX_DTYPE), "serial", s)
    return s


def emulate(func: S.PrimFunc) -> S.PrimFunc:
    """``func`` with each warp matrix operation done by plain loops over its tiles, as one thread would do
    the warp's work: the CPU's version of a tensor-core kernel (what :func:`~autosched.tir.gpu.serialize_bindings`
    and the CPU code generator run)."""
    if not has_warp_ops(func.body):
        return func
    frags = fragments(func.body)
    memory = {id(b.data): b for b in func.params}
    memory.update({id(x.buffer.data): x.buffer for x in S.walk_stmts(func.body) if isinstance(x, S.Allocate)})

    def element(f: Fragment, index: Expr, r: Expr, c: Expr) -> tuple[S.Buffer, list[Expr]]:
        rows, cols = f.tile
        return f.buffer, _unravel(f.buffer, E.Add(E.Mul(index, IntImm(rows * cols, INDEX_DTYPE)),
                                                  E.Add(E.Mul(r, IntImm(cols, INDEX_DTYPE)), c)))

    def rewrite(s: S.Stmt) -> S.Stmt:
        if not (isinstance(s, S.Evaluate) and isinstance(s.value, E.Call) and s.value.name in OPS):
            return S.map_children(s, rewrite)
        w = parse(s.value)
        f = frags[id(w.frags[0][0])]
        index = E.cast(INDEX_DTYPE, w.frags[0][1])
        if w.name == "tvm_fill_fragment":
            return _loops(list(f.tile), lambda r, c: S.BufferStore(
                *_store(element(f, index, r, c), E.cast(f.buffer.dtype, w.value))))
        if w.name == "tvm_mma_sync":
            d, a, b, c = (frags[id(x)] for x, _ in w.frags)
            di, ai, bi, ci = (E.cast(INDEX_DTYPE, i) for _, i in w.frags)
            acc = "float32"
            copy = _loops(list(d.tile), lambda r, col: S.BufferStore(
                *_store(element(d, di, r, col), S.BufferLoad(*element(c, ci, r, col)))))

            def update(r, col, kk):
                dst = element(d, di, r, col)
                prod = E.Mul(E.cast(acc, S.BufferLoad(*element(a, ai, r, kk))),
                             E.cast(acc, S.BufferLoad(*element(b, bi, kk, col))))
                return S.BufferStore(*_store(dst, E.cast(d.buffer.dtype, E.Add(E.cast(acc, S.BufferLoad(*dst)),
                                                                                prod))))

            return S.seq([copy, _loops([d.tile[0], d.tile[1], a.tile[1]], update)])
        mem_buf = memory.get(id(w.memory[0]))  # type: ignore[index]
        if mem_buf is None:
            raise ScheduleError(f"{w.name}: the memory '{w.memory[0].name}' is not a buffer of the kernel")  # type: ignore[index]
        flat = S.Buffer(mem_buf.name, [IntImm(1 << 40, INDEX_DTYPE)], mem_buf.dtype, mem_buf.scope, base=mem_buf)
        offset, stride = E.cast(INDEX_DTYPE, w.memory[1]), E.cast(INDEX_DTYPE, w.stride)  # type: ignore[index,arg-type]

        def at(r, c):
            lead, minor = (r, c) if w.layout == "row_major" else (c, r)
            return [E.Add(offset, E.Add(E.Mul(lead, stride), minor))]

        if w.name == "tvm_load_matrix_sync":
            return _loops(list(f.tile), lambda r, c: S.BufferStore(
                *_store(element(f, index, r, c), E.cast(f.buffer.dtype, S.BufferLoad(flat, at(r, c))))))
        return _loops(list(f.tile), lambda r, c: S.BufferStore(
            flat, E.cast(mem_buf.dtype, S.BufferLoad(*element(f, index, r, c))), at(r, c)))

    return S.PrimFunc(func.name, func.params, func.scalar_params, rewrite(func.body), dict(func.attrs))


def _store(dst: tuple[S.Buffer, list[Expr]], value: Expr) -> tuple[S.Buffer, Expr, list[Expr]]:
    return dst[0], value, dst[1]


__all__ = ["LAYOUTS", "OPS", "ROLES", "SHAPES", "Fragment", "WarpOp", "emulate", "fragments", "has_warp_ops",
           "is_fragment_scope", "memory_accesses", "parse", "tile_shape", "warp_ops"]
