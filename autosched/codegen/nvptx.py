"""Loop IR -> PTX through llvmlite's NVPTX backend, for the ``cuda`` target.

The CPU code generator does the expressions and serial loops; this one changes
what differs on a GPU:

- a kernel is ``void name(ptr buf0, ..., i64 var0, ...)`` with the ``ptx_kernel``
  calling convention; the launch (grid and block) comes from the bound loops;
- a loop bound to ``blockIdx.x`` / ``threadIdx.y`` / ... is no loop: its variable
  is the index (``llvm.nvvm.read.ptx.sreg.*``), guarded when the loop is shorter
  than the launch dimension;
- ``shared`` buffers are static arrays in address space 3, ``local`` ones
  stack arrays (registers after optimisation); ``__syncthreads()`` is
  ``llvm.nvvm.barrier0``;
- ``vectorize`` unrolls short loops (each thread is scalar); ``exp``, ``log``,
  ``pow``, ``sin``, ``cos`` and ``tanh`` use the PTX approximate instructions
  (``ex2.approx``, ``lg2.approx``, ...), float32 only.

:func:`compile_ptx` optimises at -O3 and prints PTX; :func:`ptxas_check`
assembles it with CUDA's ``ptxas`` when that is installed, which catches what
LLVM does not (registers, shared memory, PTX version).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence

import llvmlite.binding as llvm
import llvmlite.ir as ir

from autosched.codegen import ops
from autosched.codegen.llvm import I32, I64, VOID, CodeGenLLVM, flat_index, ltype
from autosched.codegen.objcompile import optimize
from autosched.codegen.vectorize import vector_blocker
from autosched.errors import CodegenError, ScheduleError
from autosched.target import GPUDescription
from autosched.te import expr as E
from autosched.te.expr import DTYPE_BYTES, IntImm
from autosched.tir import stmt as S
from autosched.tir import wmma
from autosched.tir.arith import linear, simplify, skey
from autosched.tir.gpu import Launch

TRIPLE = "nvptx64-nvidia-cuda"
DATA_LAYOUT = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
DEFAULT_ARCH = "sm_80"
VECTOR_UNROLL_LIMIT = 16  # a vectorized loop up to this extent is unrolled in each thread

_SREG = {"threadIdx": "tid", "blockIdx": "ctaid"}
F32 = ir.FloatType()
_LOG2E = 1.0 / math.log(2.0)
_LN2 = math.log(2.0)

F16X2 = ir.VectorType(ir.HalfType(), 2)
#: (fragment role, element type) -> (register type, registers per thread per fragment), the same for the
#: three shapes: A and B are 8 pairs of halves, a float32 accumulator 8 floats, a float16 one 4 pairs
_REGS = {("a", "float16"): (F16X2, 8), ("b", "float16"): (F16X2, 8), ("c", "float32"): (F32, 8),
         ("c", "float16"): (F16X2, 4)}
_ROW = {"row_major": "row", "col_major": "col"}
_TY = {"float16": "f16", "float32": "f32"}

_lock = threading.Lock()
_initialised = False


def _init() -> None:
    global _initialised
    with _lock:
        if not _initialised:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _initialised = True


class CodeGenNVPTX(CodeGenLLVM):
    """One NVPTX module with one kernel per PrimFunc (prepared by :func:`autosched.tir.gpu.prepare_kernel`)."""

    def __init__(self, module_name: str = "autosched"):
        super().__init__(module_name, vector_bytes=16)  # PTX's widest load and store: v4.f32
        self.module.triple = TRIPLE
        self.module.data_layout = DATA_LAYOUT
        self.launch: Launch | None = None
        self._shared: dict[S.Buffer, ir.GlobalVariable] = {}

    def add_function(self, func: S.PrimFunc) -> None:
        self.launch = func.attrs.get("launch")
        if self.launch is None:
            raise CodegenError(f"kernel {func.name} has no launch dimensions; prepare it with tir.gpu.prepare_kernel")
        self._shared = {}
        self._frags = wmma.fragments(func.body)
        self._frag_regs: dict[int, ir.Value] = {}
        self._warp_memory = set().union(*wmma.memory_accesses(func.body))
        for x in S.walk_stmts(func.body):
            for e in S.stmt_exprs(x):
                for y in E.walk(e):
                    if isinstance(y, S.BufferLoad) and wmma.is_fragment_scope(y.buffer.scope):
                        raise CodegenError(f"kernel {func.name} reads fragment '{y.buffer.name}' element by element; "
                                           f"a warp's fragment is read only by tvm_mma_sync/tvm_store_matrix_sync")
            if isinstance(x, S.BufferStore) and wmma.is_fragment_scope(x.buffer.scope):
                raise CodegenError(f"kernel {func.name} writes fragment '{x.buffer.name}' element by element; a "
                                   f"warp's fragment is written only by the tvm_*_sync/tvm_fill_fragment builtins "
                                   f"(tensorize its stage)")
        self._emit_function(func, VOID, lambda b: b.ret_void(), calling_convention="ptx_kernel")

    # -------------------------------------------------------------- loops
    def _index(self, tag: str) -> ir.Value:
        kind, axis = tag.split(".")
        fn = self._decl(f"llvm.nvvm.read.ptx.sreg.{_SREG[kind]}.{axis}", I32, [])
        return self.b.zext(self.b.call(fn, []), I64)

    def _s_For(self, s: S.For):
        if s.kind == "thread_binding":
            idx = self._index(s.thread_tag)

            def body() -> None:
                self.cur.vars[s.var] = idx
                self.stmt(s.body)

            launch_extent = self.launch.extents.get(s.thread_tag, 1) if self.launch else 1
            if isinstance(launch_extent, int):
                covers = isinstance(s.extent, IntImm) and s.extent.value >= launch_extent
            else:  # a block extent evaluated at launch: no guard where the loop is the launch dimension
                covers = skey(s.extent) == skey(launch_extent)
            if covers:
                body()
            else:
                ops.branch(self, self.b.icmp_unsigned("<", idx, self.expr(s.extent)), body, None, "bound")
            return
        if s.kind == "parallel":
            raise ScheduleError(f"loop '{s.var.name}' is parallel inside a GPU kernel; bind it to a block or "
                                f"thread index instead")
        if s.kind == "vectorized":
            if _wide_access_loop(s):
                self._vector_for(s)  # chunks of 128 bits: ld/st.v4 where aligned, the arithmetic per lane
                return
            if isinstance(s.extent, IntImm) and s.extent.value <= VECTOR_UNROLL_LIMIT:
                s = S.For(s.var, s.extent, "unrolled", s.body)
            else:
                s = S.For(s.var, s.extent, "serial", s.body)
        super()._s_For(s)

    def lane_dtype(self, body: S.Stmt) -> str:
        """The widest store's type, halves included: a copy of float16 tiles moves 8 of them per 128 bits."""
        stores = [x.buffer.dtype for x in S.walk_stmts(body) if isinstance(x, S.BufferStore)]
        return max(stores, key=lambda d: DTYPE_BYTES[d]) if stores else "float32"

    def vector_align(self, buf: S.Buffer, base: E.Expr, lanes: int) -> int:
        """A GPU loads 64 or 128 bits in one instruction only from an address aligned to that size: claim it
        where the first element's index is a multiple of ``lanes`` (every term of its linear form is), as
        device buffers (cuMemAlloc: 256 bytes), shared arrays and register arrays (16 bytes) start aligned."""
        size = DTYPE_BYTES[buf.dtype]
        width = size * lanes
        if width not in (8, 16) or buf.base is not None:
            return size
        lin = linear(simplify(base))
        if lin.const % lanes or any(c % lanes for c, _ in lin.terms.values()):
            return size
        return width

    # ------------------------------------------------------------ memory
    def _s_Allocate(self, s: S.Allocate):
        buf = s.buffer
        if wmma.is_fragment_scope(buf.scope):
            self._fragment_alloca(buf)
            self.stmt(s.body)
            return
        if buf.scope != "shared":
            n = buf.const_size()
            if n is None:
                raise CodegenError(f"{buf.scope} buffer '{buf.name}' needs a constant size on the GPU")
            super()._s_Allocate(s)  # a stack array: registers once LLVM promotes it
            return
        g = self._shared.get(buf)
        if g is None:  # one array per buffer, however many copies of its scope loop partitioning made
            ty = ir.ArrayType(ltype(buf.dtype, True), buf.const_size())
            g = ir.GlobalVariable(self.module, ty, self._name(buf.name + ".shared"), addrspace=3)
            g.linkage = "internal"
            g.initializer = ir.Constant(ty, ir.Undefined)
            g.align = 32 if id(buf.data) in self._warp_memory else 16  # tensor-core tiles: 32-byte addresses
            g.type = ir.PointerType(addrspace=3)  # opaque, as LLVM 22 IR is (llvmlite types globals' pointers)
            self._shared[buf] = g
        self.cur.bufs[buf] = g
        self.stmt(s.body)

    # ------------------------------------------------------------ tensor cores
    def _fragment_alloca(self, buf: S.Buffer) -> None:
        """A fragment buffer: each thread's registers of each of its fragments, in one stack array that LLVM
        promotes to registers where the fragment indices are constants (unrolled loops)."""
        f = self._frags.get(id(buf.data))
        if f is None:
            raise CodegenError(f"fragment '{buf.name}' ({buf.scope}) is allocated but no tensor-core builtin uses it")
        ety, n = _REGS[(f.role, buf.dtype)]
        eb = ir.IRBuilder(self.cur.entry)
        eb.position_at_start(self.cur.entry)
        ptr = eb.alloca(ir.ArrayType(ety, n * f.count), name=self._name(buf.name + ".frag"))
        ptr.type = ir.PointerType()
        self._frag_regs[id(buf.data)] = ptr

    def _regs(self, data: E.Var, index: E.Expr) -> tuple[wmma.Fragment, list[ir.Value]]:
        """The addresses of a fragment's registers: fragment ``index`` of buffer ``data``."""
        f = self._frags[id(data)]
        ety, n = _REGS[(f.role, f.buffer.dtype)]
        first = self.b.mul(self._i64(index), ir.Constant(I64, n))
        base = self._frag_regs[id(data)]
        return f, [self.b.gep(base, [self.b.add(first, ir.Constant(I64, r))], source_etype=ety) for r in range(n)]

    def _i64(self, e: E.Expr) -> ir.Value:
        v = self.expr(e)
        return v if v.type == I64 else self.b.sext(v, I64)

    def _warp_op(self, e: E.Call) -> None:
        """``tvm_fill_fragment``, ``tvm_load_matrix_sync``, ``tvm_mma_sync`` and ``tvm_store_matrix_sync`` as
        LLVM's ``llvm.nvvm.wmma.*`` intrinsics (PTX ``wmma.load``, ``wmma.mma.sync``, ``wmma.store``)."""
        w = wmma.parse(e)
        b = self.b
        if w.name == "tvm_mma_sync":
            (d, dregs), (a, aregs), (bf, bregs), (c, cregs) = (self._regs(v, i) for v, i in w.frags)
            m, n, k = a.shape
            name = (f"llvm.nvvm.wmma.m{m}n{n}k{k}.mma.{_ROW[a.layout]}.{_ROW[bf.layout]}."
                    f"{_TY[d.buffer.dtype]}.{_TY[c.buffer.dtype]}")
            ins = [b.load(p, typ=_REGS[(f.role, f.buffer.dtype)][0]) for f, ps in ((a, aregs), (bf, bregs), (c, cregs))
                   for p in ps]
            out_ty = _REGS[("c", d.buffer.dtype)][0]
            res = b.call(self._decl(name, ir.LiteralStructType([out_ty] * len(dregs)), [v.type for v in ins]), ins)
            for r, p in enumerate(dregs):
                b.store(b.extract_value(res, r), p)
            return
        f, regs = self._regs(*w.frags[0])
        ety = _REGS[(f.role, f.buffer.dtype)][0]
        if w.name == "tvm_fill_fragment":
            v = ops.cast(b, self.expr(w.value), w.value.dtype, f.buffer.dtype, ltype(f.buffer.dtype))
            if isinstance(ety, ir.VectorType):
                v = b.insert_element(b.insert_element(ir.Constant(ety, ir.Undefined), v, ir.Constant(I32, 0)), v,
                                     ir.Constant(I32, 1))
            for p in regs:
                b.store(v, p)
            return
        m, n, k = f.shape
        ptr = self.expr(E.Call("handle", "access_ptr", list(w.memory)))
        space = ptr.type.addrspace if isinstance(ptr.type, ir.PointerType) else 0
        stride = b.trunc(self._i64(w.stride), I32)
        suffix = f"{_ROW[w.layout]}.stride.{_TY[f.buffer.dtype]}.p{3 if space == 3 else 0}"
        if space not in (0, 3):
            ptr = b.addrspacecast(ptr, ir.PointerType())
        if w.name == "tvm_load_matrix_sync":
            name = f"llvm.nvvm.wmma.m{m}n{n}k{k}.load.{f.role}.{suffix}"
            res = b.call(self._decl(name, ir.LiteralStructType([ety] * len(regs)), [ptr.type, I32]), [ptr, stride])
            for r, p in enumerate(regs):
                b.store(b.extract_value(res, r), p)
            return
        name = f"llvm.nvvm.wmma.m{m}n{n}k{k}.store.d.{suffix}"
        vals = [b.load(p, typ=ety) for p in regs]
        b.call(self._decl(name, VOID, [ptr.type] + [ety] * len(regs) + [I32]), [ptr, *vals, stride])

    def _s_Barrier(self, s: S.Barrier):
        self.b.call(self._decl("llvm.nvvm.barrier0", VOID, []), [])

    # ------------------------------------------------------------ math
    def _asm(self, text: str, args: list[ir.Value]) -> ir.Value:
        ty = ir.FunctionType(F32, [F32] * len(args))
        cons = ",".join(["=f"] + ["f"] * len(args))
        return self.b.call(ir.InlineAsm(ty, text, cons), args)

    def _e_Call(self, e: E.Call):
        if e.name in wmma.OPS:
            self._warp_op(e)
            return ir.Constant(ir.IntType(32), 0)
        if e.name == "prefetch":  # a CPU cache hint (Stage.prefetch): nothing to do on the GPU
            return ir.Constant(ir.IntType(32), 0)
        if e.name in ("sqrt", "fabs", "floor", "ceil", "nearbyint", "access_ptr", "reinterpret", "popcount"):
            return super()._e_Call(e)
        if e.dtype != "float32":
            raise CodegenError(f"{e.name} for {e.dtype} is not available on the cuda target (float32 only)")
        args = [self.expr(a) for a in e.args]
        b = self.b
        if e.name == "exp":
            return self._asm("ex2.approx.f32 $0, $1;", [b.fmul(args[0], ir.Constant(F32, _LOG2E))])
        if e.name == "log":
            return b.fmul(self._asm("lg2.approx.f32 $0, $1;", args), ir.Constant(F32, _LN2))
        if e.name == "pow":
            lg = self._asm("lg2.approx.f32 $0, $1;", [args[0]])
            return self._asm("ex2.approx.f32 $0, $1;", [b.fmul(args[1], lg)])
        if e.name == "sin":
            return self._asm("sin.approx.f32 $0, $1;", args)
        if e.name == "cos":
            return self._asm("cos.approx.f32 $0, $1;", args)
        if e.name == "tanh":  # (e^2x - 1) / (e^2x + 1), with e^2x clamped so that large |x| gives +-1
            x = b.call(self._decl("llvm.minnum.f32", F32, [F32, F32]), [args[0], ir.Constant(F32, 40.0)])
            x = b.call(self._decl("llvm.maxnum.f32", F32, [F32, F32]), [x, ir.Constant(F32, -40.0)])
            t = self._asm("ex2.approx.f32 $0, $1;", [b.fmul(x, ir.Constant(F32, 2 * _LOG2E))])
            one = ir.Constant(F32, 1.0)
            return b.fdiv(b.fsub(t, one), b.fadd(t, one))
        raise CodegenError(f"intrinsic {e.name} is not available on the cuda target")


def _wide_access_loop(s: S.For) -> bool:
    """Whether a vectorized loop is emitted as vectors: a constant extent of whole 64- or 128-bit chunks (of
    32- or 16-bit elements), no call in its body (the GPU's math is scalar inline assembly), no guard, and a
    body the vector emitter can express. Anything else is unrolled, a thread being scalar."""
    dtypes = {x.buffer.dtype for x in S.walk_stmts(s.body) if isinstance(x, S.BufferStore)}
    sizes = {DTYPE_BYTES[d] for d in dtypes}
    if len(sizes) != 1 or sizes & {1, 8} or not isinstance(s.extent, IntImm):
        return False
    nbytes = s.extent.value * next(iter(sizes))  # 32-bit floats, or 16-bit halves (tensor-core tiles)
    if nbytes not in (8, 16, 32, 64):
        return False
    if any(isinstance(x, S.IfThenElse) for x in S.walk_stmts(s.body)) or any(
            isinstance(n, (E.Call, E.Select)) for e in _body_exprs(s.body) for n in E.walk(e)):
        return False  # a guarded (masked) access has no vector form in shared memory: per lane, unrolled
    return vector_blocker(s.body, s.var) is None and all(_unit_or_no_stride(a, s.var) for a in _accesses(s.body))


def _accesses(body: S.Stmt) -> list[S.BufferLoad | S.BufferStore]:
    stores = [x for x in S.walk_stmts(body) if isinstance(x, S.BufferStore)]
    loads = [n for e in _body_exprs(body) for n in E.walk(e) if isinstance(n, S.BufferLoad)]
    return [*stores, *loads]


def _unit_or_no_stride(access: S.BufferLoad | S.BufferStore, var: E.Var) -> bool:
    """Whether the lanes of ``var`` read or write consecutive elements, or one element: a vector load, a
    store or a broadcast. A gather would build generic pointers out of shared-memory addresses."""
    lin = linear(simplify(flat_index(access.buffer, access.indices)))
    for c, atom in lin.terms.values():
        if atom is var:
            if c not in (0, 1):
                return False
        elif var in E.free_vars(atom):
            return False
    return True


def _body_exprs(s: S.Stmt) -> list[E.Expr]:
    return [e for x in S.walk_stmts(s) for e in S.stmt_exprs(x)]


def generate_ptx_ir(funcs: list[S.PrimFunc], name: str | None = None) -> str:
    """LLVM IR text (NVPTX) of prepared kernels."""
    cg = CodeGenNVPTX(name or funcs[0].name)
    for f in funcs:
        cg.add_function(f)
    return str(cg.module)


def compile_ptx(ir_text: str, arch: str = DEFAULT_ARCH) -> str:
    """Optimise NVPTX IR at -O3 and print PTX for ``arch`` (``sm_80``)."""
    _init()
    with _lock:
        try:
            mod = llvm.parse_assembly(ir_text)
            mod.verify()
        except RuntimeError as e:
            raise CodegenError(f"invalid NVPTX IR: {e}") from None
        tm = llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, features="", opt=3)
        mod.triple = TRIPLE
        mod.data_layout = str(tm.target_data)
        optimize(mod, tm)
        return tm.emit_assembly(mod)


def ptxas_path() -> str | None:
    """CUDA's PTX assembler (``$PTXAS``, else ``ptxas`` on the PATH or under ``$CUDA_HOME``), or None."""
    env = os.environ.get("PTXAS")
    if env:
        return env if os.path.exists(env) else None
    found = shutil.which("ptxas")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and os.path.exists(os.path.join(home, "bin", "ptxas")):
            return os.path.join(home, "bin", "ptxas")
    return None


def ptxas_check(ptx: str, arch: str = DEFAULT_ARCH, timeout: float = 60.0) -> str:
    """Assemble ``ptx`` for ``arch`` with ``ptxas -v``; returns its resource report (registers, shared
    memory per kernel). Raises CodegenError with ptxas's message when it refuses the code, or when no
    ptxas is installed."""
    exe = ptxas_path()
    if exe is None:
        raise CodegenError("ptxas (CUDA's PTX assembler) was not found: install the CUDA toolkit or set $PTXAS")
    with tempfile.TemporaryDirectory(prefix="autosched-ptx-") as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        res = subprocess.run([exe, f"-arch={arch}", "-v", src, "-o", os.path.join(tmp, "k.cubin")],
                             capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise CodegenError(f"ptxas -arch={arch} refused the generated PTX: {res.stderr.strip()[:2000]}")
    return res.stderr.strip()


_REGISTER_UNIT = 256  # registers are given to a warp in units of 256


def ptxas_registers(report: str) -> dict[str, int]:
    """Registers per thread of each kernel, read from a ``ptxas -v`` report."""
    out: dict[str, int] = {}
    name = None
    for line in report.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            name = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and name is not None:
            out[name] = int(m.group(1))
    return out


def check_registers(name: str, registers: int, block: Sequence[int], gpu: GPUDescription | None = None) -> None:
    """Refuse a kernel whose block needs more registers than a multiprocessor gives one block (``gpu``'s
    register file; 65,536 on every GPU since sm_50): the driver would refuse its launch
    (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES); better said at build time, with the fix."""
    per_block = (gpu or GPUDescription("sm_50")).registers_per_block
    threads = math.prod(block)
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // _REGISTER_UNIT) * _REGISTER_UNIT
    if warps * per_warp > per_block:
        raise ScheduleError(
            f"kernel {name}: {threads} threads per block x {registers} registers per thread need "
            f"{warps * per_warp} registers, over the {per_block} a block can have; use fewer threads "
            "per block or a smaller per-thread tile")


__all__ = ["CodeGenNVPTX", "DEFAULT_ARCH", "check_registers", "compile_ptx", "generate_ptx_ir", "ptxas_check",
           "ptxas_path", "ptxas_registers"]
