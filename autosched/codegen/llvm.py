"""Loop IR -> LLVM IR (llvmlite.ir), then optimised, JIT-compiled or emitted as an object file.

Every PrimFunc becomes ``i32 name(ptr buf0, ..., i64 var0, ...)`` returning 0 on
success. Buffers are ``noalias`` (the runtime refuses overlapping outputs).
Parallel loops are outlined into ``void body(ptr ctx)`` functions run by
libgomp's ``GOMP_parallel``; each thread takes one contiguous chunk.

A loop annotation the build cannot honour (``parallel`` without libgomp, a
``vectorized`` body the vector emitter cannot express, ``unrolled`` past
``UNROLL_LIMIT``) compiles as a plain loop, is logged once per process at
WARNING with what to do, and is named in ``CodeGenLLVM.unhonoured`` so a
measurement can flag its result (``serial``, ``scalar``, ``not_unrolled``).
"""

from __future__ import annotations

import ctypes.util
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import llvmlite.binding as llvm
import llvmlite.ir as ir

from autosched.codegen import ops
from autosched.codegen.ops import I1, I8, I32, I64, PTR, VOID, flat_index, ltype
from autosched.codegen.vectorize import VectorEmitter, once_per_node, reusable, vector_blocker, vector_reduction
from autosched.errors import CodegenError, ScheduleError
from autosched.runtime import packed
from autosched.te import expr as E
from autosched.te.expr import DTYPE_BYTES, Expr, IntImm, Var
from autosched.tir import stmt as S
from autosched.tir import wmma
from autosched.tir.arith import Lin, ceildiv, linear, simplify
from autosched.tir.extern import EXTERN, PACKED
from autosched.tir.transform import free_vars_stmt, substitute_stmt

STACK_LIMIT_BYTES = 64 * 1024
#: the most elements a transposed store (_transposed_stores) moves through registers at once: LLVM lowers a
#: 16 x 8 float tile well and a 16 x 16 one 3x slower than scatters
MAX_TRANSPOSE = 128
#: the largest heap buffer a module keeps from one call to the next (_cached_allocate); bigger ones are
#: allocated and freed on each call (a module in build's cache of 64 keeps its buffers while it is there)
WORKSPACE_LIMIT_BYTES = 16 * 1024 * 1024
UNROLL_LIMIT = 256  # copies of its body one nest of unrolled loops may expand into
#: stores and loops (tir.stmt.emitted_size) the unrolled nests of one function may expand into, in all: LLVM's
#: loop passes grow faster than linearly in it (a conv2d sample of 8,000 took 130 s to compile; the fastest
#: conv2d kernels found emit under 200, the largest default schedule ~1,300)
EMIT_BUDGET = 2048
MAX_VECTOR_CHUNKS = 4  # a vectorized loop of up to this many native vectors is emitted chunk by chunk

log = logging.getLogger("autosched.codegen")

#: what a build did other than its schedule asked; the same strings as autosched's ResultFlag values
SERIAL = "serial"  # a parallel loop compiled serial (no libgomp)
SCALAR = "scalar"  # a vectorized loop compiled as a scalar loop
NOT_UNROLLED = "not_unrolled"  # an unrolled loop stayed a loop
UNHONOURED = (SERIAL, SCALAR, NOT_UNROLLED)
_warned: set[str] = set()


def _warn_once(flag: str, message: str) -> None:
    """Log ``message`` at WARNING the first time a build in this process falls back in the way ``flag`` names."""
    if flag not in _warned:
        _warned.add(flag)
        log.warning("%s (said once per process; results measured from such builds are flagged %r)",
                    message, flag)

def warn_unhonoured(flags: dict[str, str]) -> None:
    """Say each fallback of ``flags`` (flag -> what happened, a unit's ``unhonoured``), once per process, as a
    build in this process would have (a kernel compiled in a build worker said it there)."""
    for flag, message in flags.items():
        _warn_once(flag, message)


class _Fn:
    """Per-LLVM-function state: builder, entry block for allocas, variable and buffer bindings."""

    def __init__(self, fn: ir.Function):
        self.fn = fn
        self.entry = fn.append_basic_block("entry")
        self.builder = ir.IRBuilder(self.entry)
        self.vars: dict[Var, ir.Value] = {}
        # the values the loop variables being emitted take (loops of constant bounds): conditions decidable
        # over them (a guard that only the edge chunks of a vector need) emit no code (CodeGenLLVM._known)
        self.ranges: dict[Var, tuple[IntImm, IntImm]] = {}
        self.bufs: dict[S.Buffer, ir.Value] = {}
        self.in_parallel = False
        # values emitted once and reused while they dominate the code being emitted (CodeGenLLVM.scoped)
        self.reuse: dict[tuple, ir.Value] = {}
        self.scopes: list[list[tuple]] = [[]]


class CodeGenLLVM:
    """Builds one LLVM module from PrimFuncs."""

    def __init__(self, module_name: str = "autosched", num_threads: int = 0, vector_bytes: int = 16,
                 unit: bool = False, dot_u8s8: bool = False):
        self.module = ir.Module(name=module_name)
        # one compile unit of several (build_many): the thread count is declared here and defined once, by the
        # module that gathers the units, and the workspaces' destructor is a named function the JIT can call
        self.unit = unit
        # the target's native vector (Target.cpu.vector_bytes): vectorized loops are emitted in chunks of at
        # most this width, since LLVM legalises wider vectors into pieces (slowly, and on AVX2 it miscompiled
        # masked loads split that way: an all-false half read memory its mask excluded)
        self.vector_bytes = vector_bytes
        self.module.triple = llvm.get_process_triple()
        # x86 with 512-bit vectors: AVX-512's instructions may be called by name (ops.exp_f32's vscalefps)
        self.avx512 = vector_bytes >= 64 and self.module.triple.startswith(("x86_64", "i686", "i386"))
        # AVX-512 VNNI (Target.cpu.dot_u8s8): int8 products summed in int32 by vpdpbusd (ops.dot4_u8s8)
        self.dot_u8s8 = dot_u8s8 and self.avx512
        self._decls: dict[str, ir.Function] = {}
        self._counter = 0
        self._unrolled = 1  # product of the unrolled loops being expanded
        self.num_threads = num_threads  # 0: libgomp's default (OMP_NUM_THREADS or every core)
        self.uses_parallel = False
        # buffers on the stack: every loop index of their region lies inside them, so vector code may
        # read and write whole vectors there even in masked-off lanes (which keeps them promotable to registers)
        self.stack_bufs: dict = {}  # buffer -> allocated elements
        self.unhonoured: dict[str, str] = {}  # flag (SERIAL, SCALAR, NOT_UNROLLED) -> what happened, first seen
        self._analysis: dict[tuple, tuple] = {}  # (what, id(node), ...) -> (node kept alive, result)
        self._workspaces: list[ir.GlobalVariable] = []  # heap buffers kept between calls (_cached_allocate)
        # id(node) -> (node, block, value) while one expression is emitted (None between expressions): see expr
        self._shared: dict[int, tuple] | None = None

    def _fallback(self, flag: str, message: str) -> None:
        self.unhonoured.setdefault(flag, message)
        _warn_once(flag, message)

    # --------------------------------------------------------------- entry
    def add_function(self, func: S.PrimFunc) -> None:
        for s in S.walk_stmts(func.body):
            if isinstance(s, S.For) and s.kind == "thread_binding":
                raise ScheduleError(
                    f"loop '{s.var.name}' is bound to {s.thread_tag} with bind(), which needs a GPU target "
                    f"(cuda); the llvm target has no thread indices: drop the bind or build for cuda"
                )
        func = wmma.emulate(func)  # tensor-core builtins: plain loops over the warp's tiles
        self._emit_function(func, I32, lambda b: b.ret(ir.Constant(I32, 0)))

    def _emit_function(self, func: S.PrimFunc, ret_type: ir.Type, ret: Any, calling_convention: str = "") -> None:
        """``func`` as an LLVM function taking its buffers (noalias pointers), then its shape variables;
        ``ret(builder)`` ends it."""
        argtys = [PTR] * len(func.params) + [ltype(v.dtype) for v in func.scalar_params]
        fn = ir.Function(self.module, ir.FunctionType(ret_type, argtys), name=func.name)
        if calling_convention:
            fn.calling_convention = calling_convention
        for k, b in enumerate(func.params):
            fn.args[k].name = "arg_" + _ident(b.name)
            fn.args[k].add_attribute("noalias")
        self.cur = _Fn(fn)
        self._emit_left = EMIT_BUDGET
        for b, a in zip(func.params, fn.args):
            self.cur.bufs[b] = a
        for v, a in zip(func.scalar_params, fn.args[len(func.params):]):
            a.name = _ident(v.name)
            self.cur.vars[v] = a
        body_bb = fn.append_basic_block("body")
        self.cur.builder.position_at_end(body_bb)
        self.stmt(func.body)
        b = self.cur.builder
        ret(b)
        b.position_at_end(self.cur.entry)
        b.branch(body_bb)

    # --------------------------------------------------------------- helpers
    def _decl(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        f = self._decls.get(name)
        if f is None:
            f = self.module.globals.get(name)
            if f is None:
                f = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
            self._decls[name] = f
        return f

    def _name(self, base: str) -> str:
        self._counter += 1
        return f"{_ident(base)}.{self._counter}"

    @property
    def b(self) -> ir.IRBuilder:
        return self.cur.builder

    @contextmanager
    def scoped(self) -> Iterator[None]:
        """Code emitted inside (a loop body, a branch arm) may reuse values from outside; values it adds are
        forgotten when it ends, since they do not dominate the code after it."""
        self.cur.scopes.append([])
        try:
            yield
        finally:
            for key in self.cur.scopes.pop():
                self.cur.reuse.pop(key, None)

    def _remember(self, key: tuple, value: ir.Value) -> ir.Value:
        self.cur.reuse[key] = value
        self.cur.scopes[-1].append(key)
        return value

    def cached(self, what: str, compute: Any, *nodes: Any) -> Any:
        """``compute()`` once per ``nodes`` (by identity, kept alive so their ids stay their own): the analyses
        every unrolled copy of a body would otherwise repeat (flat indices, their linear forms)."""
        key = (what, *map(id, nodes))
        hit = self._analysis.get(key)
        if hit is None:
            hit = self._analysis[key] = (nodes, compute())
        return hit[1]

    def _binding(self, v: Var) -> Any:
        val = self.cur.vars.get(v)
        return ("c", val.constant) if isinstance(val, ir.Constant) else id(val)

    def index(self, e: Expr) -> ir.Value:
        """An integer index as ``sum(coef * atom) + offset``: terms whose variables are constants here (unrolled
        loops) fold into the offset, and the sum of the others is emitted once and reused by every unrolled
        copy (one ``add`` of the offset each, instead of the whole expression again)."""
        lin: Lin = self.cached("lin", lambda: linear(e), e)
        ty = ltype(lin.dtype)
        offset, parts = lin.const, []
        for c, atom in lin.terms.values():
            v = self._atom(atom)
            if isinstance(v, ir.Constant) and isinstance(v.constant, int):
                offset += c * v.constant
            else:
                parts.append((c, v))
        if not parts:
            return ir.Constant(ty, offset)
        key = ("sum", *((c, id(v)) for c, v in parts))  # parts are instructions or arguments: alive
        base = self.cur.reuse.get(key)
        if base is None:
            for c, v in parts:
                term = v if c == 1 else self.b.mul(v, ir.Constant(ty, c), flags=["nsw"])
                base = term if base is None else self.b.add(base, term, flags=["nsw"])
            self._remember(key, base)
        return base if offset == 0 else self.b.add(base, ir.Constant(ty, offset), flags=["nsw"])

    def _atom(self, atom: Expr) -> ir.Value:
        """The value of a term of an index (a variable, a division or a product of variables), emitted once per
        binding of its variables."""
        if isinstance(atom, Var):
            return self._e_Var(atom)
        # atoms live as long as the linear forms cached in self._analysis, so their ids stay their own
        key = ("atom", id(atom), *(self._binding(v) for v in E.free_var_set(atom)))
        hit = self.cur.reuse.get(key)
        return hit if hit is not None else self._remember(key, self.expr(atom))

    # ------------------------------------------------------------ expressions
    def expr(self, e: Expr) -> ir.Value:
        """The value of ``e``. Within one expression a node that several parents share (te lambdas and inlining
        make DAGs: ``x * x + x``) is emitted once and reused while the code stays in the block that computed it;
        walked as a tree, each level of such sharing multiplied the code."""
        return once_per_node(self, e, self._expr)

    def _expr(self, e: Expr, shared: dict[int, tuple]) -> ir.Value:
        hit = shared.get(id(e))
        if hit is not None and hit[0] is e and hit[1] is self.b.block:
            return hit[2]
        dot = ops.accumulated_dot(e)
        if dot is not None:  # acc + dot(0, a, w): one dot(acc, a, w) (vpdpbusd accumulates)
            v = self._e_Call(dot)
        elif isinstance(e, E.BinaryOp):
            v = ops.binary(self.b, e, self.expr(e.a), self.expr(e.b))
        else:
            m = getattr(self, "_e_" + type(e).__name__, None)
            if m is None:
                raise CodegenError(f"cannot generate code for expression {type(e).__name__}: {e}")
            v = m(e)
        if reusable(e):
            shared[id(e)] = (e, self.b.block, v)  # the block the value ends in: it dominates what follows there
        return v

    def _e_Var(self, e: Var):
        v = self.cur.vars.get(e)
        if v is None and e.dtype == "handle":  # a buffer's address (Buffer.data)
            for buf, ptr in self.cur.bufs.items():
                if buf._data is e:
                    return ptr
        if v is None:
            raise CodegenError(f"variable '{e.name}' is used outside the loop or argument that defines it")
        return v

    def _e_IntImm(self, e: IntImm):
        return ir.Constant(ltype(e.dtype), e.value)

    def _e_FloatImm(self, e: E.FloatImm):
        return ir.Constant(ltype(e.dtype), e.value)

    def _e_Not(self, e):
        return ops.logical_not(self.b, self.expr(e.a))

    def _e_Select(self, e: E.Select):
        known = self._known(e.cond)
        if known is not None:  # decided by unrolled loops (a transform's coefficients): emit one branch only
            return self.expr(e.t if known else e.f)
        cond = self.expr(e.cond)
        if not _has_load(e.t) and not _has_load(e.f):
            return self.b.select(cond, self.expr(e.t), self.expr(e.f))
        # the branch not taken may read out of bounds (padding): evaluate only the chosen one
        return ops.branch(self, cond, lambda: self.expr(e.t), lambda: self.expr(e.f), "sel")

    def _known(self, cond: Expr, ranges: dict | None = None) -> bool | None:
        """The value of an integer condition if the code being emitted decides it: its variables constants
        (unrolled loops) or within the bounds of their loops (or of ``ranges``, given for others); else None."""
        vmap, ranges = {}, dict(ranges or {})
        for v in E.free_vars(cond):
            val = self.cur.vars.get(v)
            if isinstance(val, ir.Constant) and isinstance(val.constant, int):
                vmap[v] = IntImm(val.constant, v.dtype)
            elif v in self.cur.ranges:
                ranges[v] = self.cur.ranges[v]
        c = E.substitute(cond, vmap) if vmap else cond
        c = simplify(c, ranges) if ranges else simplify(c)
        return bool(c.value) if isinstance(c, IntImm) else None

    def _e_Cast(self, e: E.Cast):
        return ops.cast(self.b, self.expr(e.value), e.value.dtype, e.dtype, ltype(e.dtype))

    def _e_Call(self, e: E.Call):
        if e.name.startswith(PACKED):
            return self._packed_call(e)
        if e.name.startswith(EXTERN):
            args = [self.expr(a) for a in e.args]
            ret = PTR if e.dtype == "handle" else ltype(e.dtype)
            fn = self._decl(e.name[len(EXTERN):], ret, [a.type for a in args])
            return self.b.call(fn, args)
        if e.name == "prefetch":  # a hint: read for use soon, keep in all cache levels
            fn = self._decl("llvm.prefetch.p0", VOID, [PTR, I32, I32, I32])
            self.b.call(fn, [self.expr(e.args[0]), ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])
            return ir.Constant(I32, 0)
        if e.name == "access_ptr":  # the address of an element of a buffer
            base = self.expr(e.args[0])
            ety = next((ltype(b.dtype, True) for b in self.cur.bufs if b._data is e.args[0]), I8)
            return self.b.gep(base, [self.expr(e.args[1])], source_etype=ety)
        if e.name in ops.DOTS:
            return ops.packed_dot(self.b, e.name, self.expr(e.args[0]), *(self._word(e.name, ld) for ld in e.args[1:]))
        if e.name.endswith(".word") and e.name[:-5] in ops.DOTS:  # (the vector generator's uniform operand)
            return self._word(e.name[:-5], e.args[0])
        return ops.call(self.b, e.name, e.dtype, [self.expr(a) for a in e.args])

    def _word(self, name: str, e: Expr) -> ir.Value:
        """The 4 bytes (2 int16) from the buffer element ``e`` on, as one int32 (an operand of the packed dot
        product ``name``)."""
        dtypes, _ = ops.DOTS[name]
        if not isinstance(e, S.BufferLoad) or e.buffer.dtype not in dtypes:
            raise CodegenError(f"{name}: its operands must be loads of {'/'.join(dtypes)} buffers, got {e}")
        ptr = self.b.gep(self.cur.bufs[e.buffer], [self.index(self.flat(e.buffer, e.indices))], inbounds=True,
                         source_etype=ltype(e.buffer.dtype))
        return self.b.load(ptr, typ=I32, align=1)

    def _e_BufferRef(self, e: S.BufferRef):
        return self._buffer_base(e.buffer)

    def _buffer_base(self, buf: S.Buffer) -> ir.Value:
        base = self.cur.bufs.get(buf)
        if base is None and buf.base is not None:  # a flat view of another buffer (ir_builder.buffer_ptr)
            base = self.cur.bufs.get(buf.base)
        if base is None:
            raise CodegenError(f"buffer '{buf.name}' is used outside its allocation")
        return base

    def _packed_call(self, e: E.Call) -> ir.Value:
        """``tir.call_packed``: the arguments in slots of six words (runtime.packed), then the bridge; a failure
        ends the kernel with its status."""
        llvm.add_symbol(packed.SYMBOL, packed.address())
        b = self.b
        n = len(e.args)
        eb = ir.IRBuilder(self.cur.entry)
        eb.position_at_start(self.cur.entry)
        W = packed.WORDS
        slots = eb.alloca(ir.ArrayType(I64, max(1, W * n)), name="packed_args")
        slots.type = PTR
        words: list[list[ir.Value]] = []
        for a in e.args:
            zero = ir.Constant(I64, 0)
            if isinstance(a, S.BufferRef):  # its shape and, for a view of a region, strides and start
                buf = a.buffer
                nd = max(1, len(buf.shape))
                shape = eb.alloca(ir.ArrayType(I64, 2 * nd), name="packed_shape")
                shape.type = PTR
                for d, ext in enumerate(buf.shape):
                    b.store(self.expr(ext), b.gep(shape, [ir.Constant(I64, d)], source_etype=I64))
                strides = zero
                if buf.strides is not None:
                    for d, st in enumerate(buf.strides):
                        b.store(self.expr(st), b.gep(shape, [ir.Constant(I64, nd + d)], source_etype=I64))
                    strides = b.ptrtoint(b.gep(shape, [ir.Constant(I64, nd)], source_etype=I64), I64)
                ptr = self._buffer_base(buf)
                if buf.elem_offset is not None:
                    ptr = b.gep(ptr, [self.expr(buf.elem_offset)], source_etype=ltype(buf.dtype, True))
                code = packed.DTYPES.index(buf.dtype) if buf.dtype in packed.DTYPES else 0
                words.append([ir.Constant(I64, 3), b.ptrtoint(ptr, I64), ir.Constant(I64, len(buf.shape)),
                              b.ptrtoint(shape, I64), ir.Constant(I64, code), strides])
            elif a.dtype == "handle":
                words.append([ir.Constant(I64, 2), b.ptrtoint(self.expr(a), I64), zero, zero, zero, zero])
            elif a.dtype.startswith("float"):
                v = self.expr(a)
                if a.dtype != "float64":
                    v = b.fpext(v, ir.DoubleType())
                words.append([ir.Constant(I64, 1), b.bitcast(v, I64), zero, zero, zero, zero])
            else:
                v = self.expr(a)
                if v.type.width < 64:
                    v = b.zext(v, I64) if a.dtype.startswith("uint") or a.dtype == "bool" else b.sext(v, I64)
                words.append([ir.Constant(I64, 0), v, zero, zero, zero, zero])
        for k, ws in enumerate(words):
            for j, w in enumerate(ws):
                b.store(w, b.gep(slots, [ir.Constant(I64, W * k + j)], source_etype=I64))
        name = e.name[len(PACKED):].encode() + b"\0"
        gname = "packed_name." + _ident(e.name[len(PACKED):])
        g = self.module.globals.get(gname)
        if g is None:
            ty = ir.ArrayType(I8, len(name))
            g = ir.GlobalVariable(self.module, ty, gname)
            g.initializer = ir.Constant(ty, bytearray(name))
            g.global_constant = True
            g.linkage = "internal"
        fn = self._decl(packed.SYMBOL, I32, [PTR, PTR, I32])
        rc = b.call(fn, [g, slots, ir.Constant(I32, n)])
        if self.cur.fn.function_type.return_type == I32:  # the kernel itself: stop with the status
            fail = self.cur.fn.append_basic_block(self._name("packed_fail"))
            ok = self.cur.fn.append_basic_block(self._name("packed_ok"))
            b.cbranch(b.icmp_signed("!=", rc, ir.Constant(I32, 0)), fail, ok)
            b.position_at_end(fail)
            b.ret(rc)
            b.position_at_end(ok)
        return rc

    def _e_Let(self, e: E.Let):
        self.cur.vars[e.var] = self.expr(e.value)
        return self.expr(e.body)

    def _e_BufferLoad(self, e: S.BufferLoad):
        ptr = self._addr(e.buffer, e.indices)
        v = self.b.load(ptr, typ=ltype(e.dtype, True), align=DTYPE_BYTES[e.dtype])
        if e.dtype == "bool":
            v = self.b.trunc(v, I1)
        return v

    def _e_TensorLoad(self, e):
        raise CodegenError(f"tensor load {e} survived lowering")

    def vector_align(self, buf: S.Buffer, base: Expr, lanes: int) -> int:
        """The alignment a vector access of ``lanes`` elements of ``buf`` from element ``base`` may claim: one
        element's on a CPU, where unaligned vector loads cost (almost) nothing."""
        return DTYPE_BYTES[buf.dtype]

    def flat(self, buf: S.Buffer, indices) -> Expr:
        """``flat_index(buf, indices)``, worked out once per access of the loop IR."""
        return self.cached("flat", lambda: flat_index(buf, indices), indices, buf)

    def _addr(self, buf: S.Buffer, indices) -> ir.Value:
        base = self._buffer_base(buf)
        return self.b.gep(base, [self.index(self.flat(buf, indices))], inbounds=True,
                          source_etype=ltype(buf.dtype, True))

    # ------------------------------------------------------------- statements
    def stmt(self, s: S.Stmt) -> None:
        m = getattr(self, "_s_" + type(s).__name__)
        m(s)

    def _s_SeqStmt(self, s: S.SeqStmt):
        for x in s.seq:
            self.stmt(x)

    def _s_BufferStore(self, s: S.BufferStore):
        v = self.expr(s.value)
        if s.buffer.dtype == "bool":
            v = self.b.zext(v, I8)
        self.b.store(v, self._addr(s.buffer, s.indices), align=DTYPE_BYTES[s.buffer.dtype])

    def _s_IfThenElse(self, s: S.IfThenElse):
        known = self._known(s.cond)
        if known is not None:  # decided where it is emitted: only that arm
            if known or s.else_case is not None:
                self.stmt(s.then_case if known else s.else_case)
            return
        else_fn = (lambda: self.stmt(s.else_case)) if s.else_case is not None else None
        ops.branch(self, self.expr(s.cond), lambda: self.stmt(s.then_case), else_fn, "if")

    def _s_Evaluate(self, s: S.Evaluate):
        self.expr(s.value)

    def _s_LetStmt(self, s: S.LetStmt):
        self.cur.vars[s.var] = self.expr(s.value)
        self.stmt(s.body)

    def _s_Allocate(self, s: S.Allocate):
        buf = s.buffer
        ety = ltype(buf.dtype, True)
        n = buf.const_size()
        if n is not None and n * DTYPE_BYTES[buf.dtype] <= STACK_LIMIT_BYTES:
            eb = ir.IRBuilder(self.cur.entry)
            eb.position_at_start(self.cur.entry)
            # slack of one native vector so a partial vector that starts inside the buffer stays inside it
            slack = max(1, self.vector_bytes // DTYPE_BYTES[buf.dtype])
            ptr = eb.alloca(ir.ArrayType(ety, n + slack), name=_ident(buf.name))
            ptr.align = 64
            ptr.type = PTR  # llvmlite types allocas as typed pointers; LLVM 22 IR is opaque
            self.cur.bufs[buf] = ptr
            self.stack_bufs[buf] = n + slack
            self.stmt(s.body)
            return
        size: Expr = IntImm(DTYPE_BYTES[buf.dtype]) * buf.alloc_elems()
        nbytes = self.expr(simplify(size))
        rounded = self.b.and_(self.b.add(nbytes, ir.Constant(I64, 63)), ir.Constant(I64, ~63))
        alloc = lambda: self.b.call(self._decl("aligned_alloc", PTR, [I64, I64]),  # noqa: E731
                                    [ir.Constant(I64, 64), rounded])
        if n is None or self.cur.in_parallel or n * DTYPE_BYTES[buf.dtype] > WORKSPACE_LIMIT_BYTES:
            ptr = alloc()
            self.cur.bufs[buf] = ptr
            self.stmt(s.body)
            self.b.call(self._decl("free", VOID, [PTR]), [ptr])
            return
        self._cached_allocate(s, alloc)

    def _cached_allocate(self, s: S.Allocate, alloc: Any) -> None:
        """A heap buffer of constant size kept by the module from one call to the next (freed when the module
        is unloaded: ``llvm.global_dtors``), as TVM's workspace pool keeps them: a fresh allocation of a few
        hundred KiB or more is mapped anew by malloc on each call, and the page faults cost up to a fifth of a
        convolution's time, varying from process to process. A second caller while it is in use (another
        thread) gets a buffer of its own."""
        b = self.b
        k = len(self._workspaces)
        slot = ir.GlobalVariable(self.module, PTR, f"__autosched_ws{k}")
        slot.initializer, slot.linkage = ir.Constant(PTR, None), "internal"
        busy = ir.GlobalVariable(self.module, I8, f"__autosched_ws{k}_busy")
        busy.initializer, busy.linkage = ir.Constant(I8, 0), "internal"
        self._workspaces.append(slot)
        taken = b.icmp_unsigned("!=", b.atomic_rmw("xchg", busy, ir.Constant(I8, 1), "acquire"), ir.Constant(I8, 0))
        cached = b.load(slot, typ=PTR)

        def first() -> ir.Value:  # the first call allocates the buffer the module keeps
            p = alloc()
            b.store(p, slot)
            return p

        def own() -> ir.Value:  # not in use: the kept buffer
            return ops.branch(self, b.icmp_unsigned("==", cached, ir.Constant(PTR, None)), first, lambda: cached,
                              "ws_first")

        def give_back() -> None:
            b.call(self._decl("free", VOID, [PTR]), [ptr])

        def release() -> None:
            b.store_atomic(ir.Constant(I8, 0), busy, "release", 1)

        ptr = ops.branch(self, taken, alloc, own, "ws")
        self.cur.bufs[s.buffer] = ptr
        self.stmt(s.body)
        ops.branch(self, taken, give_back, release, "ws_done")

    @property
    def workspace_destructor(self) -> str | None:
        """The function that frees the workspaces this module keeps (None when it keeps none)."""
        if not self._workspaces:
            return None
        return f"__autosched_free_workspaces.{self.module.name}" if self.unit else "__autosched_free_workspaces"

    def finish(self) -> ir.Module:
        """The module, with the destructor that frees its kept workspaces (when it has any)."""
        if self._workspaces and "llvm.global_dtors" not in self.module.globals:
            fn = ir.Function(self.module, ir.FunctionType(VOID, []), self.workspace_destructor)
            if not self.unit:
                fn.linkage = "internal"
            b = ir.IRBuilder(fn.append_basic_block("entry"))
            free = self._decl("free", VOID, [PTR])
            for slot in self._workspaces:
                b.call(free, [b.load(slot, typ=PTR)])
            b.ret_void()
            entry = ir.LiteralStructType([I32, PTR, PTR])
            dtors = ir.GlobalVariable(self.module, ir.ArrayType(entry, 1), "llvm.global_dtors")
            dtors.linkage = "appending"
            dtors.initializer = ir.Constant(ir.ArrayType(entry, 1),
                                            [ir.Constant(entry, [ir.Constant(I32, 65535), fn, ir.Constant(PTR, None)])])
        return self.module

    def _s_For(self, s: S.For):
        if s.kind == "parallel":
            if self.cur.in_parallel:
                raise ScheduleError(
                    f"loop '{s.var.name}' is parallel inside another parallel loop; nested parallel loops are "
                    "not supported: fuse them into one parallel loop or keep one"
                )
            if gomp_available():
                self._parallel_for(s)
                return
            self._fallback(SERIAL, f"parallel loop '{s.var.name}' compiles serial: {_gomp_state['why']}; install "
                                   "it (e.g. apt install libgomp1) to run parallel loops in parallel")
        if s.kind == "unrolled":
            if not isinstance(s.extent, IntImm):
                self._fallback(NOT_UNROLLED, f"unrolled loop '{s.var.name}' stays a loop: its extent {s.extent} "
                                             "is not a constant; split it by a constant factor and unroll the "
                                             "inner loop")
            elif self._unrolled * s.extent.value > UNROLL_LIMIT:
                # nested unrolled loops multiply: past the budget the loop stays a loop (LLVM may still unroll
                # it), which keeps IR size, and so compile time, bounded
                self._fallback(NOT_UNROLLED, f"unrolled loop '{s.var.name}' stays a loop: with the unrolled "
                                             f"loops around it, it would make {self._unrolled * s.extent.value} "
                                             f"copies of its body, over the limit of {UNROLL_LIMIT}; unroll "
                                             "fewer or shorter loops")
            elif self._unrolled == 1 and S.emitted_size(s) > self._emit_left:
                self._fallback(NOT_UNROLLED, f"unrolled loop '{s.var.name}' stays a loop: unrolled, it would emit "
                                             f"{S.emitted_size(s)} stores and loops, over what is left of the "
                                             f"function's budget of {EMIT_BUDGET} (compile time grows faster "
                                             "than the code); unroll fewer or shorter loops")
            elif self._transposed_stores(s):
                return
            else:
                if self._unrolled == 1:
                    self._emit_left -= S.emitted_size(s)
                self._unrolled *= s.extent.value
                for i in range(s.extent.value):
                    self.cur.vars[s.var] = ir.Constant(I64, i)
                    self.stmt(s.body)
                self._unrolled //= s.extent.value
                return
        if s.kind == "vectorized":
            blocker = vector_blocker(s.body, s.var)
            if blocker is None:
                self._vector_for(s)
                return
            if isinstance(s.extent, IntImm):
                lanes = max(1, self.vector_bytes // DTYPE_BYTES.get(_widest_dtype(s.body), 4))
                split = vector_reduction(s, lanes)
                if split is not None:
                    self.stmt(split)
                    return
            self._fallback(SCALAR, f"vectorized loop '{s.var.name}' compiles as a scalar loop: {blocker}; "
                                   "vectorize an innermost loop whose stores move with it, or a reduction "
                                   "loop of constant extent")
        self._serial_for(s.var, ir.Constant(I64, 0), self.expr(s.extent), s.body)

    def _transposed_stores(self, s: S.For) -> bool:
        """An unrolled loop of U around a vectorized one of V lanes whose one store moves by 1 with the unrolled
        index and by S >= U with the lane (a copy into a blocked layout, ``P[.., x, c]`` from rows of ``c``, or
        back): the U vectors are computed, transposed in registers and stored as V runs of U contiguous
        elements, instead of U scatters. False (nothing emitted) when the loops are not of that form."""
        inner = s.body
        if not (isinstance(inner, S.For) and inner.kind == "vectorized" and isinstance(inner.extent, IntImm)
                and isinstance(inner.body, S.BufferStore) and isinstance(s.extent, IntImm)):
            return False
        st = inner.body
        buf = st.buffer
        U, V = s.extent.value, inner.extent.value
        native = max(1, self.vector_bytes // DTYPE_BYTES.get(buf.dtype, 4))
        if (not 2 <= U <= native or not 2 <= V <= native or U * V > MAX_TRANSPOSE or buf.dtype == "bool"
                or st.value.dtype != buf.dtype
                or vector_blocker(st, inner.var) is not None
                or any(isinstance(x, S.BufferLoad) and x.buffer is buf for x in E.walk(st.value))):
            return False
        lin = linear(simplify(self.flat(buf, st.indices)))
        along_u = along_lane = 0
        rest = {}
        for k, (c, atom) in lin.terms.items():
            if atom is s.var:
                along_u = c
            elif atom is inner.var:
                along_lane = c
            elif s.var in E.free_vars(atom) or inner.var in E.free_vars(atom):
                return False
            else:
                rest[k] = [c, atom]
        if along_u != 1 or along_lane < U:
            return False
        base = type(lin)(rest, lin.const, lin.dtype).to_expr()
        b = self.b
        vecs = []
        for u in range(U):
            self.cur.vars[s.var] = ir.Constant(I64, u)
            vecs.append(VectorEmitter(self, inner.var, V).vec(st.value))
        del self.cur.vars[s.var]
        tile = ops.concat(b, vecs)  # element u * V + r: lane r of the u-th vector
        undef = ir.Constant(tile.type, ir.Undefined)
        mt = ltype(buf.dtype, True)
        start = self.index(base)
        for r in range(V):
            row = b.shuffle_vector(tile, undef, ir.Constant(ir.VectorType(I32, U), [u * V + r for u in range(U)]))
            ptr = b.gep(self._buffer_base(buf), [b.add(start, ir.Constant(start.type, r * along_lane))],
                        inbounds=True, source_etype=mt)
            b.store(row, ptr, align=DTYPE_BYTES[buf.dtype])
        return True

    def lane_dtype(self, body: S.Stmt) -> str:
        """The element type that sets how many lanes a native vector has for a vectorized loop: its widest
        store, at least float32 (a CPU computes halves as floats)."""
        return _widest_dtype(body)

    def _vector_for(self, s: S.For) -> None:
        """All lanes at once when the extent is a small constant; else chunks of the native width."""
        native = max(1, self.vector_bytes // DTYPE_BYTES.get(self.lane_dtype(s.body), 4))
        if isinstance(s.extent, IntImm) and s.extent.value <= native:
            VectorEmitter(self, s.var, s.extent.value).stmt(s.body)
            return
        width = native
        if isinstance(s.extent, IntImm):
            n = s.extent.value
            half = native // 2
            if n % native and half >= 4 and n % half == 0:  # whole half vectors (40 -> 5 x 8 on AVX-512): no masks
                width = half
            else:  # equal chunks of at most the native width: 56 lanes -> 4 x 14
                width = -(-n // -(-n // native))
        vo, vi = Var(s.var.name + ".vo"), Var(s.var.name + ".vi")
        idx = vo * width + vi
        body = substitute_stmt(s.body, {s.var: idx})
        exact = isinstance(s.extent, IntImm) and s.extent.value % width == 0
        inner = body if exact else S.IfThenElse(E.LT(idx, s.extent), body)
        chunk = S.For(vi, IntImm(width), "vectorized", inner)
        if isinstance(s.extent, IntImm) and s.extent.value <= MAX_VECTOR_CHUNKS * width:
            # a few chunks are emitted one by one: guards that only an edge chunk needs (padding, tails) are
            # then decided where each is emitted (LLVM would unroll the loop anyway, but after the masks exist)
            for i in range(-(-s.extent.value // width)):
                self.cur.vars[vo] = ir.Constant(I64, i)
                self.stmt(chunk)
            return
        self.stmt(S.For(vo, ceildiv(s.extent, width), "serial", chunk))

    def _serial_for(self, var: Var, begin: ir.Value, end: ir.Value, body: S.Stmt):
        bld = self.b
        fn = self.cur.fn
        pre = bld.block
        head = fn.append_basic_block(self._name(f"for_{var.name}"))
        loop = fn.append_basic_block(self._name(f"body_{var.name}"))
        done = fn.append_basic_block(self._name(f"end_{var.name}"))
        bld.branch(head)
        bld.position_at_end(head)
        phi = bld.phi(I64, name=_ident(var.name))
        phi.add_incoming(begin, pre)
        bld.cbranch(bld.icmp_signed("<", phi, end), loop, done)
        bld.position_at_end(loop)
        self.cur.vars[var] = phi
        outer = self.cur.ranges.pop(var, None)
        if isinstance(begin, ir.Constant) and isinstance(end, ir.Constant):
            self.cur.ranges[var] = (IntImm(begin.constant, var.dtype), IntImm(end.constant - 1, var.dtype))
        with self.scoped():
            self.stmt(body)
        self.cur.ranges.pop(var, None)
        if outer is not None:
            self.cur.ranges[var] = outer
        nxt = bld.add(phi, ir.Constant(I64, 1), flags=["nsw"])
        bld.branch(head)
        phi.add_incoming(nxt, bld.block)
        bld.position_at_end(done)

    # -------------------------------------------------------------- parallel
    def _parallel_for(self, s: S.For):
        self.uses_parallel = True

        free = sorted(free_vars_stmt(S.For(s.var, s.extent, "serial", s.body)) - {s.var}, key=lambda v: v.name)
        free = [v for v in free if v in self.cur.vars]
        bufs = _buffers_used(s.body, self.cur.bufs)
        fields = [ltype(v.dtype) for v in free] + [PTR] * len(bufs) + [I64]
        sty = ir.LiteralStructType(fields)
        # the context lives in the caller's frame
        eb = ir.IRBuilder(self.cur.entry)
        eb.position_at_start(self.cur.entry)
        ctx = eb.alloca(sty, name="par_ctx")
        ctx.type = PTR
        bld = self.b
        vals = [self.cur.vars[v] for v in free] + [self.cur.bufs[b] for b in bufs] + [self.expr(s.extent)]
        for k, v in enumerate(vals):
            bld.store(v, bld.gep(ctx, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=sty))
        outer = self.cur
        pfn = ir.Function(self.module, ir.FunctionType(VOID, [PTR]), name=self._name(f"{outer.fn.name}_par"))
        pfn.linkage = "internal"
        inner = _Fn(pfn)
        inner.in_parallel = True
        self.cur = inner
        b2 = inner.builder
        body_bb = pfn.append_basic_block("body")
        b2.position_at_end(body_bb)
        loaded = []
        for k, t in enumerate(fields):
            p = b2.gep(pfn.args[0], [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=sty)
            loaded.append(b2.load(p, typ=t))
        for v, x in zip(free, loaded):
            inner.vars[v] = x
        for b, x in zip(bufs, loaded[len(free):]):
            inner.bufs[b] = x
        extent = loaded[-1]
        nt = b2.sext(b2.call(self._decl("omp_get_num_threads", I32, []), []), I64)
        tid = b2.sext(b2.call(self._decl("omp_get_thread_num", I32, []), []), I64)
        chunk = b2.sdiv(b2.add(extent, b2.sub(nt, ir.Constant(I64, 1))), nt)
        begin = b2.mul(tid, chunk)
        end = b2.add(begin, chunk)
        end = b2.select(b2.icmp_signed("<", end, extent), end, extent)
        self._serial_for(s.var, begin, end, s.body)
        b2.ret_void()
        b2.position_at_end(inner.entry)
        b2.branch(body_bb)
        self.cur = outer
        gomp = self._decl("GOMP_parallel", VOID, [PTR, PTR, I32, I32])
        nthreads = self._num_threads_global()
        bld.call(gomp, [pfn, ctx, bld.load(nthreads, typ=I32), ir.Constant(I32, 0)])

    def _num_threads_global(self) -> ir.GlobalVariable:
        g = self.module.globals.get("__autosched_num_threads")
        if g is None:
            g = ir.GlobalVariable(self.module, I32, "__autosched_num_threads")
            if not self.unit:  # (a unit's is defined by the module that gathers the units)
                g.initializer = ir.Constant(I32, self.num_threads)
                g.linkage = "weak"
        return g


def _widest_dtype(s: S.Stmt) -> str:
    best = "float32"
    for x in S.walk_stmts(s):
        if isinstance(x, S.BufferStore) and DTYPE_BYTES[x.buffer.dtype] > DTYPE_BYTES[best]:
            best = x.buffer.dtype
    return best


def _has_load(e: Expr) -> bool:
    return any(isinstance(x, S.BufferLoad) for x in E.walk(e))


def _buffers_used(s: S.Stmt, known: dict) -> list[S.Buffer]:
    seen: dict[int, S.Buffer] = {}
    datas = {b._data: b for b in known if b._data is not None}

    def use(b: S.Buffer) -> None:
        if b not in known and b.base is not None:  # a view: its memory is the base's
            b = b.base
        if b in known:
            seen.setdefault(id(b), b)

    for x in S.walk_stmts(s):
        if isinstance(x, S.BufferStore):
            use(x.buffer)
        for e in S.stmt_exprs(x):
            for y in E.walk(e):
                if isinstance(y, (S.BufferLoad, S.BufferRef)):
                    use(y.buffer)
                elif isinstance(y, Var) and y in datas:  # an address (Buffer.data)
                    use(datas[y])
    return list(seen.values())


def _ident(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_." else "_" for ch in name)


_gomp_state: dict[str, Any] = {}


def gomp_available() -> bool:
    """Whether libgomp is found and loads into this process (checked once); ``_gomp_state['why']`` says why not."""
    if "ok" not in _gomp_state:
        path = ctypes.util.find_library("gomp")
        ok, why = False, "libgomp (GNU OpenMP) was not found (ctypes.util.find_library('gomp'))"
        if path:
            try:
                llvm.load_library_permanently(path)
                ok, why = True, ""
            except RuntimeError as e:  # llvmlite's loader error
                why = f"libgomp ({path}) does not load: {e}"
        _gomp_state.update(ok=ok, path=path, why=why)
    return bool(_gomp_state["ok"])
