"""Explicit SIMD code for ``vectorized`` loops of constant extent.

The loop body is emitted once with every value either *uniform* (the same in
all lanes: a plain scalar) or *varying* (an LLVM vector of ``lanes`` values).
Loads and stores whose index moves by 1 per lane become vector loads and
stores; loads a small constant stride apart (2 to 4: a strided convolution's
input) become a few whole vectors and a shuffle; other varying indices become
gathers and scatters. Conditions that
vary per lane (split tails, padding) become masks on loads and stores, so the
lanes that fall outside never touch memory. Bodies this cannot express (inner
loops, stores that do not move with the lane) fall back to a scalar loop.
"""

from __future__ import annotations

import llvmlite.ir as ir

from autosched.codegen import ops
from autosched.codegen.ops import I1, I32, I64, PTR, flat_index, ltype
from autosched.errors import CodegenError
from autosched.te import expr as E
from autosched.te.expr import DTYPE_BYTES, Expr, IntImm, Var
from autosched.tir import stmt as S
from autosched.tir.arith import linear, simplify
from autosched.tir.extern import EXTERN, PACKED

MAX_LANES = 64
#: the largest constant stride a vector load reads as whole vectors and a shuffle (beyond it: a gather)
MAX_DEINTERLEAVE = 4


def vector_blocker(body: S.Stmt, var: Var) -> str | None:
    """Why :class:`VectorEmitter` cannot emit ``body`` for all lanes of ``var`` at once, or None if it can."""
    for s in S.walk_stmts(body):
        if isinstance(s, S.For):
            return f"its body holds the loop '{s.var.name}'"
        if isinstance(s, S.Allocate):
            return f"its body allocates '{s.buffer.name}'"
        if isinstance(s, S.BufferStore):
            idx = _flat(s.buffer, s.indices)
            if var not in E.free_vars(idx):
                # every lane would write one location: keep the sequential order
                return f"its store to '{s.buffer.name}' does not move with the loop"
    return None


_COMBINERS = (E.Add, E.Max, E.Min)
#: vector accumulators a vectorized reduction rotates through (independent chains that hide the FMA latency)
REDUCTION_ACCUMULATORS = 4


def vector_reduction(loop: S.For, lanes: int) -> S.Stmt | None:
    """A vectorized loop over a reduction axis, ``acc[i] = acc[i] (+, max, min) f(k)`` with ``i`` free of
    ``k`` (under guards, if any), as loops that vectorize: partial results in the lanes of a few vector
    accumulators on the stack, combined lane-wise, the lanes then halved onto each other (log2(lanes)
    dependent steps, not ``lanes``) and the last into ``acc[i]``. Reassociates a sum (as numpy's pairwise sum
    does); None when the loop is not such a reduction."""
    body, guards = loop.body, []
    while isinstance(body, S.IfThenElse) and body.else_case is None:
        guards.append(body.cond)
        body = body.then_case
    if not isinstance(body, S.BufferStore) or not isinstance(body.value, _COMBINERS):
        return None
    st, k = body, loop.var
    idx = _flat(st.buffer, st.indices)
    if k in E.free_vars(idx):
        return None
    old, rhs = st.value.a, st.value.b
    if not (isinstance(old, S.BufferLoad) and old.buffer is st.buffer):
        old, rhs = rhs, old
    if not (isinstance(old, S.BufferLoad) and old.buffer is st.buffer) or \
            E.free_vars(_flat(old.buffer, old.indices)) != E.free_vars(idx) or \
            any(isinstance(x, S.BufferLoad) and x.buffer is st.buffer for x in E.walk(rhs)):
        return None
    dtype = st.buffer.dtype
    ident = {E.Add: E.const(0, dtype), E.Max: E.min_value(dtype), E.Min: E.max_value(dtype)}[type(st.value)]
    combine = type(st.value)
    n = loop.extent.value
    nacc = max(1, min(REDUCTION_ACCUMULATORS, -(-n // lanes)))
    part = S.Buffer(f"{st.buffer.name}.part", [IntImm(nacc * lanes)], dtype, "local")
    a, vi, vo, lane = Var("acc"), Var(k.name + ".lane"), Var(k.name + ".step"), Var("lane")
    kk = (vo * nacc + a) * lanes + vi
    slot = [a * lanes + vi]
    step = S.BufferStore(part, combine(S.BufferLoad(part, slot), E.substitute(rhs, {k: kk})), slot)
    for g in reversed(guards):
        step = S.IfThenElse(E.substitute(g, {k: kk}), step)
    if n % (nacc * lanes):
        step = S.IfThenElse(E.LT(kk, IntImm(n)), step)
    init = S.For(lane, IntImm(nacc * lanes), "vectorized", S.BufferStore(part, ident, [lane]))
    main = S.For(vo, IntImm(-(-n // (nacc * lanes))), "serial",
                 S.For(a, IntImm(nacc), "unrolled", S.For(vi, IntImm(lanes), "vectorized", step)))
    fold = S.For(a, IntImm(nacc - 1), "unrolled", S.For(vi, IntImm(lanes), "vectorized", S.BufferStore(
        part, combine(S.BufferLoad(part, [vi]), S.BufferLoad(part, [(a + 1) * lanes + vi])), [vi])))
    halves, live = [], lanes
    while live > 1:  # the upper lanes onto the lower ones: log2(lanes) steps, not a chain of `lanes`
        h = live // 2
        halves.append(S.For(vi, IntImm(h), "vectorized" if h > 1 else "serial", S.BufferStore(
            part, combine(S.BufferLoad(part, [vi]), S.BufferLoad(part, [vi + (live - h)])), [vi])))
        live -= h
    total = S.BufferStore(st.buffer, combine(S.BufferLoad(st.buffer, st.indices), S.BufferLoad(part, [IntImm(0)])),
                          st.indices)
    return S.Allocate(part, S.seq([init, main, fold if nacc > 1 else None, *halves, total]))


def reusable(e: Expr) -> bool:
    """Whether emitting ``e`` twice in one block gives the same value and nothing else: not a leaf (nothing to
    save) and not a call that does something (a packed or extern function, a prefetch)."""
    if isinstance(e, (Var, IntImm, E.FloatImm)):
        return False
    return not isinstance(e, E.Call) or not (e.name.startswith((PACKED, EXTERN)) or e.name == "prefetch")


def once_per_node(owner, e: Expr, emit):
    """``emit(e, shared)`` with ``owner``'s table of the nodes emitted so far in this expression, made by the
    outermost call and dropped when it returns (values are reused within one expression only)."""
    if owner._shared is not None:
        return emit(e, owner._shared)
    owner._shared = {}
    try:
        return emit(e, owner._shared)
    finally:
        owner._shared = None


def _flat(buf: S.Buffer, indices) -> Expr:

    return flat_index(buf, indices)


class VectorEmitter:
    """Emits one vectorized loop through the scalar code generator ``cg``."""

    def __init__(self, cg, var: Var, lanes: int):
        self.cg = cg
        self.var = var
        self.lanes = lanes
        self.env: dict[Var, tuple[ir.Value, bool]] = {}
        self.mask: ir.Value | None = None
        self._dep: dict[int, tuple] = {}
        self._loads: dict[int, tuple] = {}
        # id(node) -> (node, block, mask, value) while one expression is emitted (None between): see expr
        self._shared: dict[int, tuple] | None = None

    @property
    def b(self) -> ir.IRBuilder:
        return self.cg.b

    # ------------------------------------------------------------ utilities
    def varying(self, e: Expr) -> bool:
        """Whether ``e`` differs between lanes (it uses the lane variable or a varying Let value)."""
        hit = self._dep.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if isinstance(e, Var):
            r = e is self.var or (e in self.env and self.env[e][1])
        else:  # through the children's answers, so a node shared by several parents is looked at once
            r = any([self.varying(c) for c in E.children(e)])
        self._dep[id(e)] = (e, r)  # keep e alive so its id cannot be reused by another expression
        return r

    def has_load(self, e: Expr) -> bool:
        """Whether ``e`` reads memory (under a mask it is then emitted per lane, not as a uniform scalar)."""
        hit = self._loads.get(id(e))
        if hit is None or hit[0] is not e:
            r = isinstance(e, S.BufferLoad) or any([self.has_load(c) for c in E.children(e)])
            hit = self._loads[id(e)] = (e, r)
        return hit[1]

    def vtype(self, t: ir.Type) -> ir.VectorType:
        return ir.VectorType(t, self.lanes)

    def splat(self, v: ir.Value) -> ir.Value:
        vt = self.vtype(v.type)
        if isinstance(v, ir.Constant):
            return ir.Constant(vt, [v] * self.lanes) if not isinstance(v.type, ir.IntType) or v.type.width > 1 \
                else ir.Constant(vt, [v.constant] * self.lanes)
        undef = ir.Constant(vt, ir.Undefined)
        ins = self.b.insert_element(undef, v, ir.Constant(I32, 0))
        return self.b.shuffle_vector(ins, undef, ir.Constant(ir.VectorType(I32, self.lanes), [0] * self.lanes))

    def const_vec(self, t: ir.Type, v) -> ir.Value:
        return ir.Constant(self.vtype(t), [v] * self.lanes)

    def lane_ids(self) -> ir.Value:
        return ir.Constant(self.vtype(I64), list(range(self.lanes)))

    def and_mask(self, cond: ir.Value) -> ir.Value:
        return cond if self.mask is None else self.b.and_(self.mask, cond)

    # ------------------------------------------------------------ expressions
    def expr(self, e: Expr) -> tuple[ir.Value, bool]:
        """(value, is_vector) of ``e`` for all lanes; within one expression a node shared by several parents is
        emitted once per block and mask (as in the scalar generator's ``expr``)."""
        return once_per_node(self, e, self._expr)

    def _expr(self, e: Expr, shared: dict[int, tuple]) -> tuple[ir.Value, bool]:
        hit = shared.get(id(e))
        if hit is not None and hit[0] is e and hit[1] is self.b.block and hit[2] is self.mask:
            return hit[3]
        out = self._emit(e)
        if reusable(e):
            shared[id(e)] = (e, self.b.block, self.mask, out)
        return out

    def _emit(self, e: Expr) -> tuple[ir.Value, bool]:
        if not self.varying(e) and (self.mask is None or not self.has_load(e)):
            return self.scalar(e), False
        dot = ops.accumulated_dot(e)
        if dot is not None:  # acc + dot(0, a, w): one dot(acc, a, w) (vpdpbusd accumulates)
            return self._e_Call(dot)
        if isinstance(e, E.BinaryOp):
            if type(e) in (E.FloorDiv, E.FloorMod) and self._narrow_division(e):
                return self._in_i32(e), True
            x, y = self.vec(e.a), self.vec(e.b)
            if self.mask is not None and type(e) in (E.FloorDiv, E.FloorMod) and isinstance(y.type.element, ir.IntType):
                # a masked-off lane's divisor is whatever its (skipped) load gave, zero included, and an integer
                # division by zero traps (SIGFPE) even in a lane whose result is thrown away: divide it by 1
                y = self.b.select(self.mask, y, ir.Constant(y.type, [1] * self.lanes))
            return ops.binary(self.b, e, x, y), True
        m = getattr(self, "_e_" + type(e).__name__, None)
        if m is None:
            raise CodegenError(f"cannot vectorize expression {type(e).__name__}: {e}")
        return m(e)

    def _narrow_division(self, e: E.BinaryOp) -> bool:
        """Whether ``e`` (``//`` or ``%`` of signed lanes by a constant that is no power of two) has a dividend
        known to fit int32 here. Indices are int64 lanes, and x86 has no 64-bit multiply-high, so LLVM divides
        them one lane at a time (an index ``(i * 16 + lane) % 36`` of a transposing copy), while int32 lanes
        divide by multiplies."""
        d = e.b
        if (e.dtype not in ("int32", "int64") or not isinstance(d, IntImm) or not 1 < d.value < 2 ** 31
                or d.value & (d.value - 1) == 0):
            return False
        x, lane = e.a, (IntImm(0), IntImm(self.lanes - 1))
        inside = E.And(E.GE(x, IntImm(-2 ** 31, x.dtype)), E.LT(x, IntImm(2 ** 31, x.dtype)))
        return not (self.env and any(v in self.env for v in E.free_vars(x))) and \
            self.cg._known(inside, {self.var: lane}) is True

    def _in_i32(self, e: E.BinaryOp) -> ir.Value:
        """``e`` computed in int32 lanes (its dividend fits: :meth:`_narrow_division`), widened back to int64."""
        x = self.vec(e.a)
        if x.type.element != I64:
            return ops.binary(self.b, e, x, ir.Constant(x.type, [e.b.value] * self.lanes))
        v32 = self.vtype(I32)
        q = ops.binary(self.b, e, self.b.trunc(x, v32), ir.Constant(v32, [e.b.value] * self.lanes))
        return self.b.sext(q, x.type)

    def scalar(self, e: Expr, index: bool = False) -> ir.Value:
        """``e``, the same in every lane, by the scalar generator (``index``: as an index, ``cg.index``)."""
        if not self.env:
            return self.cg.index(e) if index else self.cg.expr(e)
        saved = dict(self.cg.cur.vars)
        for v, (val, vec) in self.env.items():
            if not vec:
                self.cg.cur.vars[v] = val
        try:
            return self.cg.index(e) if index else self.cg.expr(e)
        finally:
            self.cg.cur.vars = saved

    def vec(self, e: Expr) -> ir.Value:
        v, is_vec = self.expr(e)
        return v if is_vec else self.splat(v)

    def _e_Var(self, e: Var):
        if e is self.var:
            return self.lane_ids(), True
        if e in self.env:
            return self.env[e]
        return self.cg.expr(e), False

    def _e_Not(self, e):
        return ops.logical_not(self.b, self.vec(e.a)), True

    def _e_Select(self, e: E.Select):
        if not self.varying(e.cond):
            known = self.cg._known(e.cond)
            if known is not None:  # decided by unrolled loops: only that branch
                return self.expr(e.t if known else e.f)
            if self.mask is None:  # the same choice in every lane: one branch, not both under masks
                c = self.scalar(e.cond)
                return ops.branch(self.cg, c, lambda: self.vec(e.t), lambda: self.vec(e.f), "vsel"), True
        cond = self.vec(e.cond)
        saved = self.mask
        self.mask = self.and_mask(cond)
        t = self.vec(e.t)
        self.mask = saved  # the false branch runs under the enclosing mask and not cond (not under cond too)
        self.mask = self.and_mask(self.b.xor(cond, self.const_vec(I1, 1)))
        f = self.vec(e.f)
        self.mask = saved
        return self.b.select(cond, t, f), True

    def _e_Cast(self, e: E.Cast):

        return ops.cast(self.b, self.vec(e.value), e.value.dtype, e.dtype, ltype(e.dtype)), True

    def _e_Call(self, e: E.Call):
        if e.name in ops.DOTS:
            words = [self._words(e.name, ld) for ld in e.args[1:]]
            return ops.packed_dot(self.b, e.name, self.vec(e.args[0]), *words, vnni=self.cg.dot_u8s8), True
        return ops.call(self.b, e.name, e.dtype, [self.vec(a) for a in e.args], self.cg.avx512), True

    def _words(self, name: str, e: Expr) -> ir.Value:
        """A packed dot product's operand lanes: the 4 bytes (2 int16) from each lane's element on as int32, the
        lanes' elements that far apart (one contiguous load) or one for all (one word, broadcast)."""
        dtypes, per_word = ops.DOTS[name]
        if not isinstance(e, S.BufferLoad) or e.buffer.dtype not in dtypes:
            raise CodegenError(f"{name}: its operands must be loads of {'/'.join(dtypes)} buffers, got {e}")
        flat = self.cg.flat(e.buffer, e.indices)
        stride, base = self._stride(flat)
        if stride == 0 or not self.varying(e):
            return self.splat(self.scalar(E.Call("int32", name + ".word", [e])))
        if stride == per_word and self.mask is None:
            elem = ltype(e.buffer.dtype)
            ptr = self.cg.b.gep(self.cg.cur.bufs[e.buffer], [self.scalar(base, index=True)], inbounds=True,
                                source_etype=elem)
            v = self.b.load(ptr, typ=ir.VectorType(elem, per_word * self.lanes), align=1)
            return self.b.bitcast(v, self.vtype(I32))
        vt = self.vtype(I32)  # any other layout (a searched schedule's): a gather of each lane's word
        fn = self.cg._decl(f"llvm.masked.gather.v{self.lanes}i32.v{self.lanes}p0", vt,
                           [self.vtype(PTR), I32, self.vtype(ops.I1), vt])
        return self.b.call(fn, [self._pointers(e.buffer, flat), ir.Constant(I32, 1), self._mask_or_true(),
                                ir.Constant(vt, None)])

    def _e_BufferLoad(self, e: S.BufferLoad):
        return self.load(e), True

    def _e_Let(self, e: E.Let):
        self.env[e.var] = self.expr(e.value)
        self._dep.clear()
        return self.expr(e.body)

    # -------------------------------------------------------------- memory
    def _stride(self, flat: Expr) -> tuple[int | None, Expr | None]:
        """(stride, base) when ``flat`` = base + stride * var with base uniform; else (None, None)."""
        if self.env and any(x in self.env for x in E.free_vars(flat)):
            return None, None
        return self.cg.cached("stride", lambda: self._stride_of(flat), flat, self.var)

    def _stride_of(self, flat: Expr) -> tuple[int | None, Expr | None]:
        lin = linear(simplify(flat))
        stride = 0
        rest_terms = {}
        for k, (c, atom) in lin.terms.items():
            if atom is self.var:
                stride = c
            else:
                if self.var in E.free_vars(atom):
                    return None, None
                rest_terms[k] = [c, atom]
        base = type(lin)(rest_terms, lin.const, lin.dtype).to_expr()
        return stride, base

    def _pointers(self, buf: S.Buffer, flat: Expr) -> ir.Value:
        idx = self.vec(flat)
        base = self.b.ptrtoint(self.cg.cur.bufs[buf], I64)
        off = self.b.mul(idx, self.const_vec(I64, DTYPE_BYTES[buf.dtype]))
        addr = self.b.add(self.splat(base), off)
        return self.b.inttoptr(addr, self.vtype(PTR))

    def _mask_or_true(self) -> ir.Value:
        return self.mask if self.mask is not None else self.const_vec(I1, 1)

    def _on_stack_or_masked(self, buf: S.Buffer, base_e: Expr, base: ir.Value, plain, masked):
        """Whole-vector access (``plain``) when the vector lies inside a stack buffer, else ``masked``.

        Masked intrinsics on a stack buffer stop LLVM from keeping it in registers; when the index is known to
        stay inside (constant, or within its loops' bounds) there is no check, only ``plain``. Only a buffer of
        this function's own frame: a parallel loop's threads share their caller's buffers, and a whole-vector
        store there rewrites lanes that another thread may be writing (a row's last partial vector covers the
        start of the next row: garbage in a parallel matmul's result, now and then).
        """
        size = self.cg.stack_bufs.get(buf)
        if size is None or not isinstance(self.cg.cur.bufs.get(buf), ir.AllocaInstr):
            return masked()
        known = self.cg._known(E.And(E.GE(base_e, IntImm(0, base_e.dtype)),
                                     E.LE(base_e, IntImm(size - self.lanes, base_e.dtype))))
        if known is not None:
            return plain() if known else masked()
        b = self.b
        inside = b.and_(b.icmp_signed(">=", base, ir.Constant(I64, 0)),
                        b.icmp_signed("<=", base, ir.Constant(I64, size - self.lanes)))
        return ops.branch(self.cg, inside, plain, masked, "vstack")

    def load(self, e: S.BufferLoad) -> ir.Value:

        buf = e.buffer
        mt = ltype(buf.dtype, True)
        vt = self.vtype(mt)
        align = ir.Constant(I32, DTYPE_BYTES[buf.dtype])
        flat = self.cg.flat(buf, e.indices)
        stride, base = self._stride(flat)
        if stride == 1:
            base_v = self.scalar(base, index=True)
            ptr = self.cg.b.gep(self.cg.cur.bufs[buf], [base_v], inbounds=True, source_etype=mt)
            if self.mask is None:
                v = self.b.load(ptr, typ=vt, align=self.cg.vector_align(buf, base, self.lanes))
            else:
                fn = self.cg._decl(f"llvm.masked.load.{ops.type_suffix(vt)}.p0", vt,
                                   [PTR, I32, self.vtype(I1), vt])
                masked = lambda: self.b.call(fn, [ptr, align, self.mask, ir.Constant(vt, None)])  # noqa: E731
                plain = lambda: self.b.load(ptr, typ=vt, align=DTYPE_BYTES[buf.dtype])  # noqa: E731
                v = self._on_stack_or_masked(buf, base, base_v, plain, masked)
        elif (stride is not None and 2 <= stride <= MAX_DEINTERLEAVE and self.mask is None
              and buf not in self.cg.stack_bufs):
            v = self._strided_load(buf, base, stride, mt)
        elif stride == 0 and self.mask is None:
            return self.splat(self.scalar(e))
        elif stride == 0:  # one address for every lane: load it once if any lane is on (no gather)
            any_on = self.b.call(self.cg._decl(f"llvm.vector.reduce.or.v{self.lanes}i1", I1, [self.vtype(I1)]),
                                 [self.mask])
            v = ops.branch(self.cg, any_on, lambda: self.scalar(e),
                           lambda: ir.Constant(ltype(e.dtype, False), None), "vuniform")
            return self.splat(v)
        else:
            ptrs = self._pointers(buf, flat)
            fn = self.cg._decl(f"llvm.masked.gather.{ops.type_suffix(vt)}.v{self.lanes}p0", vt,
                               [self.vtype(PTR), I32, self.vtype(I1), vt])
            v = self.b.call(fn, [ptrs, align, self._mask_or_true(), ir.Constant(vt, None)])
        if buf.dtype == "bool":
            v = self.b.trunc(v, self.vtype(I1))
        return v

    def _strided_load(self, buf: S.Buffer, base: Expr, stride: int, mt: ir.Type) -> ir.Value:
        """Lanes ``stride`` elements apart (a stride-2 convolution's input row) as ``stride`` contiguous vector
        loads and one shuffle instead of a gather; the last load is masked past the last element read, so
        nothing beyond it is touched."""
        b, n = self.b, self.lanes
        vt = self.vtype(mt)
        size = DTYPE_BYTES[buf.dtype]
        start = b.gep(self.cg.cur.bufs[buf], [self.scalar(base, index=True)], inbounds=True, source_etype=mt)
        chunks = []
        for k in range(stride):
            ptr = b.gep(start, [ir.Constant(I64, k * n)], inbounds=True, source_etype=mt)
            if k < stride - 1:
                chunks.append(b.load(ptr, typ=vt, align=size))
                continue
            on = [k * n + j <= stride * (n - 1) for j in range(n)]
            fn = self.cg._decl(f"llvm.masked.load.{ops.type_suffix(vt)}.p0", vt, [PTR, I32, self.vtype(I1), vt])
            mask = ir.Constant(self.vtype(I1), [int(x) for x in on])
            chunks.append(b.call(fn, [ptr, ir.Constant(I32, size), mask, ir.Constant(vt, None)]))
        whole = ops.concat(b, chunks)
        return b.shuffle_vector(whole, ir.Constant(whole.type, ir.Undefined),
                                ir.Constant(ir.VectorType(I32, n), [stride * j for j in range(n)]))

    def store(self, s: S.BufferStore) -> None:

        buf = s.buffer
        mt = ltype(buf.dtype, True)
        vt = self.vtype(mt)
        val = self.vec(s.value)
        if buf.dtype == "bool":
            val = self.b.zext(val, vt)
        align = ir.Constant(I32, DTYPE_BYTES[buf.dtype])
        flat = self.cg.flat(buf, s.indices)
        stride, base = self._stride(flat)
        if stride == 1:
            base_v = self.scalar(base, index=True)
            ptr = self.cg.b.gep(self.cg.cur.bufs[buf], [base_v], inbounds=True, source_etype=mt)
            if self.mask is None:
                self.b.store(val, ptr, align=self.cg.vector_align(buf, base, self.lanes))
                return
            fn = self.cg._decl(f"llvm.masked.store.{ops.type_suffix(vt)}.p0", ir.VoidType(),
                               [vt, PTR, I32, self.vtype(I1)])

            def blend():
                old = self.b.load(ptr, typ=vt, align=DTYPE_BYTES[buf.dtype])
                self.b.store(self.b.select(self.mask, val, old), ptr, align=DTYPE_BYTES[buf.dtype])

            self._on_stack_or_masked(buf, base, base_v, blend, lambda: self.b.call(fn, [val, ptr, align, self.mask]))
            return
        ptrs = self._pointers(buf, flat)
        fn = self.cg._decl(f"llvm.masked.scatter.{ops.type_suffix(vt)}.v{self.lanes}p0", ir.VoidType(),
                           [vt, self.vtype(PTR), I32, self.vtype(I1)])
        self.b.call(fn, [val, ptrs, align, self._mask_or_true()])

    # ----------------------------------------------------------- statements
    def stmt(self, s: S.Stmt) -> None:
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, S.BufferStore):
            self.store(s)
        elif isinstance(s, S.LetStmt):
            self.env[s.var] = self.expr(s.value)
            self._dep.clear()
            self.stmt(s.body)
        elif isinstance(s, S.IfThenElse):
            if not self.varying(s.cond) and self.mask is None:
                self._uniform_if(s)
                return
            if self.mask is None and s.else_case is None and self._monotone(s.cond):
                self._split_on_endpoints(s)
                return
            cond = self.vec(s.cond)
            saved = self.mask
            self.mask = self.and_mask(cond)
            self.stmt(s.then_case)
            if s.else_case is not None:
                notc = self.b.xor(cond, self.const_vec(I1, 1))
                self.mask = notc if saved is None else self.b.and_(saved, notc)
                self.stmt(s.else_case)
            self.mask = saved
        else:
            raise CodegenError(f"cannot vectorize statement {type(s).__name__}")

    def _monotone(self, cond: Expr) -> bool:
        """A conjunction of comparisons linear in the lane variable: true in all lanes iff true at both ends."""
        if isinstance(cond, E.And):
            return self._monotone(cond.a) and self._monotone(cond.b)
        if not self.varying(cond):
            return True
        if isinstance(cond, (E.LT, E.LE, E.GT, E.GE)) and not (self.env and any(x in self.env for x in
                                                                              E.free_vars(cond))):
            for side in (cond.a, cond.b):
                lin = linear(simplify(side))
                for _, atom in lin.terms.values():
                    if atom is not self.var and self.var in E.free_vars(atom):
                        return False
            return True
        return False

    def _split_on_endpoints(self, s: S.IfThenElse) -> None:
        """Full vectors without masks when the guard holds in the first and the last lane (split tails)."""
        first = E.substitute(s.cond, {self.var: IntImm(0)})
        last = E.substitute(s.cond, {self.var: IntImm(self.lanes - 1)})
        both = simplify(E.And(first, last))
        known = self.cg._known(both)
        if known:  # every lane, wherever this is emitted
            self.stmt(s.then_case)
            return
        all_in = ir.Constant(I1, 0) if known is False else self.scalar(both)

        def partial():
            saved = self.mask
            self.mask = self.vec(s.cond)
            self.stmt(s.then_case)
            self.mask = saved

        ops.branch(self.cg, all_in, lambda: self.stmt(s.then_case), partial, "vfull")

    def _uniform_if(self, s: S.IfThenElse) -> None:
        known = self.cg._known(s.cond)
        if known is not None:
            if known or s.else_case is not None:
                self.stmt(s.then_case if known else s.else_case)
            return
        else_fn = (lambda: self.stmt(s.else_case)) if s.else_case is not None else None
        ops.branch(self.cg, self.scalar(s.cond), lambda: self.stmt(s.then_case), else_fn, "vif")
