"""``autosched.build``: lower, generate LLVM IR, optimise, JIT; export to a shared library on request."""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import llvmlite.binding as llvm
import llvmlite.ir as ir

from autosched.codegen.llvm import CodeGenLLVM, gomp_available
from autosched.codegen.nvptx import (
    check_registers,
    compile_ptx,
    generate_ptx_ir,
    ptxas_check,
    ptxas_path,
    ptxas_registers,
)
from autosched.codegen.objcompile import Machine, build_jobs, compile_units, optimize
from autosched.codegen.units import Chunk, compile_chunks
from autosched.errors import CodegenError
from autosched.isa import check_runs_here, code_features
from autosched.runtime.module import ISA_SYMBOL, METADATA_SYMBOL, NUM_THREADS_SYMBOL, Module, PackedFunc
from autosched.runtime.module_base import RUN_PLAN_SYMBOL
from autosched.runtime.packed import SYMBOL
from autosched.target import Target, init_llvm
from autosched.te.schedule import Schedule
from autosched.tir import stmt as S
from autosched.tir.gpu import prepare_kernel
from autosched.tir.lower import lower
from autosched.tir.stmt import dim_to_json
from autosched.tir.wmma import has_warp_ops, memory_accesses

_lock = threading.RLock()


def _run_destructors(engine: Any) -> None:
    """Free what a JIT-compiled module kept between calls (its workspaces) once nothing can call it."""
    engine.run_static_destructors()


CACHE_SIZE = 64
_cache: OrderedDict[str, LLVMModule] = OrderedDict()


def signature(func: S.PrimFunc) -> dict:
    """The JSON description of ``func``'s arguments a host caller checks against; ``outputs`` are those
    it writes, by a store or by a warp matrix store (what a GPU call copies back)."""
    written = {id(s.buffer) for s in S.walk_stmts(func.body) if isinstance(s, S.BufferStore)}
    _, warp_written = memory_accesses(func.body)
    sig = {
        "name": func.name,
        "args": [
            {"name": b.name, "dtype": b.dtype, "shape": [dim_to_json(d, func.scalar_params) for d in b.shape]}
            for b in func.params
        ],
        "vars": [v.name for v in func.scalar_params],
        "outputs": [k for k, b in enumerate(func.params) if id(b) in written or id(b.data) in warp_written],
    }
    if func.attrs.get("scalar_args"):  # te.var arguments: [position in the call, index in "vars"]
        sig["scalar_args"] = [list(x) for x in func.attrs["scalar_args"]]
    if any(v.dtype != "int64" for v in func.scalar_params):
        sig["var_dtypes"] = [v.dtype for v in func.scalar_params]
    return sig


def target_machine(target: Target, for_object: bool = False) -> llvm.TargetMachine:
    init_llvm()
    tgt = llvm.Target.from_triple(llvm.get_process_triple())
    return tgt.create_target_machine(
        cpu=target.mcpu,
        features=target.mattr,
        opt=3,
        reloc="pic" if for_object else "default",
        codemodel="default" if for_object else "jitdefault",
    )


class LLVMModule(Module):
    """Functions JIT-compiled by llvmlite; keeps the LLVM IR so it can be exported later."""

    def __init__(self, ir_text: str, sigs: list[dict], target: Target, entry: str):
        self.ir_text = ir_text
        self.unhonoured: list[str] = []  # loop annotations the code does not honour (codegen.llvm.UNHONOURED)
        self.sigs = sigs
        self.target = target
        t0 = time.perf_counter()
        with _lock:
            init_llvm()
            mod = llvm.parse_assembly(ir_text)
            mod.verify()
            tm = target_machine(target)
            mod.triple = llvm.get_process_triple()
            mod.data_layout = str(tm.target_data)
            optimize(mod, tm, target.opt_level)
            self.opt_ir = str(mod)
            engine = llvm.create_mcjit_compiler(mod, tm)
            engine.finalize_object()
            if "llvm.global_dtors" in ir_text:  # the workspaces the code keeps go with the module
                weakref.finalize(self, _run_destructors, engine)
            self._open(engine, tm, entry, "GOMP_parallel" in ir_text, t0)

    def _open(self, engine: Any, tm: llvm.TargetMachine, entry: str, threads: bool, t0: float) -> None:
        """Make the functions compiled into ``engine`` callable: their addresses, the parallel loops' thread
        count (``threads``: the code has one; AUTOSCHED_NUM_THREADS sets it), and a check of the
        instruction set before the first call when the target names a CPU other than this host's own."""
        self._engine = engine
        self._tm = tm
        funcs = {s["name"]: PackedFunc(s, engine.get_function_address(s["name"]), self) for s in self.sigs}
        self.num_threads_address = engine.get_global_value_address(NUM_THREADS_SYMBOL) if threads else 0
        if RUN_PLAN_SYMBOL in self.opt_ir:
            self.run_plan_address = engine.get_function_address(RUN_PLAN_SYMBOL)
            self._plan_names = frozenset(s["name"] for s in self.sigs if not s["vars"])
        env = os.environ.get("AUTOSCHED_NUM_THREADS")
        if env:
            self.set_num_threads(int(env))
        self.compile_seconds = time.perf_counter() - t0
        Module.__init__(self, funcs, entry)
        self._features: frozenset[str] | None = None
        if "mcpu" in self.target.options or "mattr" in self.target.options:
            for f in funcs.values():
                f.isa_check = functools.partial(self.check_runs_here, f.name)

    @property
    def features(self) -> frozenset[str]:
        """The instruction-set extensions the code uses (read from LLVM's assembly of it, once)."""
        if self._features is None:
            self._features = code_features(self.get_source("asm"))
        return self._features

    def check_runs_here(self, name: str | None = None) -> None:
        """Raise :class:`~autosched.errors.UnsupportedCPUError` if this CPU lacks an extension the code uses."""
        check_runs_here(self.features, self.target.mcpu,
                        f"kernel {name or self.entry_name!r} (target '{self.target}')")

    def get_source(self, fmt: str = "ll") -> str:
        if fmt in ("ll", "llvm", ""):
            return self.opt_ir
        if fmt == "ll-unopt":
            return self.ir_text
        if fmt in ("asm", "s"):
            with _lock:
                mod = llvm.parse_assembly(self.opt_ir)
                return target_machine(self.target, for_object=True).emit_assembly(mod)
        raise ValueError(f"unknown source format {fmt!r}; use 'll', 'll-unopt' or 'asm'")

    def _object_files(self, prefix: str) -> tuple[list[str], bool, list[str]]:
        """Object code from llvmlite for :meth:`Module.export_library` (it embeds the kernels' metadata)."""
        if SYMBOL in self.ir_text:
            raise CodegenError("this module calls functions registered with register_func (tir.call_packed), "
                               "which live in this Python process: run it here (build's module) rather than "
                               "from an exported library")
        isa = json.dumps({"cpu": self.target.mcpu, "features": sorted(self.features)}).encode() + b"\0"
        with _lock:  # the CPU and extensions travel with the library: a host that lacks one refuses to load it
            isa_global = f'@{ISA_SYMBOL} = constant [{len(isa)} x i8] c"{_ir_bytes(isa)}"'
            mod = llvm.parse_assembly(f"{self.opt_ir}\n{isa_global}\n")
            obj = target_machine(self.target, for_object=True).emit_object(mod)
        path = prefix + ".o"
        with open(path, "wb") as f:
            f.write(obj)
        return [path], True, (["-lgomp", "-lm"] if "GOMP_parallel" in self.opt_ir else ["-lm"])


def _ir_bytes(data: bytes) -> str:
    """``data`` as the body of an LLVM IR ``c"..."`` string."""
    return "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in data)


def _free_workspaces(engine: Any, addresses: list[int]) -> None:
    """Run the compile units' workspace destructors (the JIT runs static destructors of IR modules only)."""
    for a in addresses:
        ctypes.CFUNCTYPE(None)(a)()
    del engine  # (kept alive until now: the code above lives in it)


class LLVMUnitsModule(LLVMModule):
    """Many kernels (``build_many``: a model's), each a compile unit of its own, compiled in chunks to object
    code (:mod:`autosched.codegen.units`: on every core when they are many), then loaded into one JIT engine
    with the module that defines what they share (the metadata, the thread count). Exporting links the same
    objects; ``get_source`` gives each chunk's text in turn."""

    def __init__(self, chunks: list[Chunk], root: str, sigs: list[dict], target: Target, entry: str,
                 processes: int = 1, t0: float | None = None):
        self.unhonoured = []
        self.sigs = sigs
        self.target = target
        self.root = root
        t0 = time.perf_counter() if t0 is None else t0
        order = {s["name"]: k for k, s in enumerate(sigs)}  # the kernels' units in the order they were given
        self.ir_text = _join([u.text for u in sorted((u for c in chunks for u in c.units),
                                                     key=lambda u: order[u.name])] + [root])
        self.objects = [c.object for c in chunks]
        self._unit_irs = [c.opt_ir for c in chunks] + [root]
        self.opt_ir = _join(self._unit_irs)
        destructors = [u.destructor for c in chunks for u in c.units if u.destructor]
        with _lock:
            init_llvm()
            mod = llvm.parse_assembly(root)
            mod.verify()
            tm = target_machine(target)
            mod.triple = llvm.get_process_triple()
            mod.data_layout = str(tm.target_data)
            engine = llvm.create_mcjit_compiler(mod, tm)
            for obj in self.objects:
                engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            engine.finalize_object()
            if destructors:
                weakref.finalize(self, _free_workspaces, engine,
                                 [engine.get_function_address(d) for d in destructors])
            self.compile_groups = processes  # how many processes generated and compiled the chunks
            self._open(engine, tm, entry, NUM_THREADS_SYMBOL in root, t0)

    def get_source(self, fmt: str = "ll") -> str:
        """The optimised IR (``ll``: each chunk's, then the shared module's), the IR as generated (``ll-unopt``:
        each kernel's unit, then the shared module) or the assembly (``asm``: as ``ll``), each part after a
        ``; compile unit k of n`` line."""
        if fmt in ("asm", "s"):
            with _lock:
                tm = target_machine(self.target, for_object=True)
                return _join([tm.emit_assembly(llvm.parse_assembly(t)) for t in self._unit_irs], comment="#")
        return super().get_source(fmt)

    def _object_files(self, prefix: str) -> tuple[list[str], bool, list[str]]:
        """The units' objects as compiled, and the shared module's with the CPU and extensions the code uses."""
        if SYMBOL in self.ir_text:
            return super()._object_files(prefix)  # (raises: such code runs only here)
        isa = json.dumps({"cpu": self.target.mcpu, "features": sorted(self.features)}).encode() + b"\0"
        isa_global = f'@{ISA_SYMBOL} = constant [{len(isa)} x i8] c"{_ir_bytes(isa)}"'
        machine = Machine(llvm.get_process_triple(), self.target.mcpu, self.target.mattr, self.target.opt_level)
        with _lock:
            root_obj, _ = compile_units([f"{self.root}\n{isa_global}\n"], machine)
        paths = []
        for k, obj in enumerate([*self.objects, root_obj]):
            paths.append(f"{prefix}_{k}.o")
            with open(paths[-1], "wb") as f:
                f.write(obj)
        return paths, True, (["-lgomp", "-lm"] if "GOMP_parallel" in self.opt_ir else ["-lm"])


def _join(texts: list[str], comment: str = ";") -> str:
    """Texts of several compile units as one, each after a ``; compile unit k of n`` line."""
    return "\n".join(f"{comment} compile unit {k + 1} of {len(texts)}\n{t}" for k, t in enumerate(texts))


def _add_metadata(module: ir.Module, sigs: list[dict], entry: str) -> None:
    data = json.dumps({"version": 1, "entry": entry, "functions": sigs}).encode() + b"\0"
    ty = ir.ArrayType(ir.IntType(8), len(data))
    g = ir.GlobalVariable(module, ty, METADATA_SYMBOL)
    g.initializer = ir.Constant(ty, bytearray(data))
    g.global_constant = True


def _run_plan_ir(arities: Sequence[int]) -> str:
    """LLVM IR of RUN_PLAN_SYMBOL (see :mod:`autosched.runtime.module_base`): a loop over calls whose arity is
    read at run time, one call site per arity of ``arities`` (those of the module's kernels)."""
    arities = sorted(set(arities))
    cases = " ".join(f"i32 {k}, label %call{k}" for k in arities)
    calls, incoming = [], ["[-1, %unsupported]"]
    for k in arities:
        loads = [f"  %p{k}_{j} = getelementptr ptr, ptr %a, i64 {j}\n  %x{k}_{j} = load ptr, ptr %p{k}_{j}"
                 for j in range(k)]
        params = ", ".join(f"ptr %x{k}_{j}" for j in range(k))
        calls.append(f"call{k}:\n" + "".join(x + "\n" for x in loads)
                     + f"  %r{k} = call i32 %f({params})\n  br label %next")
        incoming.append(f"[%r{k}, %call{k}]")
    body = "\n".join(calls)
    return f"""
define i32 @{RUN_PLAN_SYMBOL}(i64 %n, ptr %fns, ptr %nargs, ptr %args, ptr %failed) {{
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%i.next, %next]
  %offset = phi i64 [0, %entry], [%offset.next, %next]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %fp = getelementptr ptr, ptr %fns, i64 %i
  %f = load ptr, ptr %fp
  %kp = getelementptr i32, ptr %nargs, i64 %i
  %k = load i32, ptr %kp
  %a = getelementptr ptr, ptr %args, i64 %offset
  switch i32 %k, label %unsupported [{cases}]
{body}
unsupported:
  br label %next
next:
  %status = phi i32 {", ".join(incoming)}
  %i.next = add i64 %i, 1
  %k64 = sext i32 %k to i64
  %offset.next = add i64 %offset, %k64
  %ok = icmp eq i32 %status, 0
  br i1 %ok, label %head, label %fail
fail:
  store i64 %i, ptr %failed
  ret i32 %status
done:
  ret i32 0
}}
"""


def generate_ir(func: S.PrimFunc, target: Target) -> tuple[str, dict, list[str]]:
    """LLVM IR text of one PrimFunc (with its embedded signature), the signature itself, and the loop
    annotations the code does not honour (``codegen.llvm.UNHONOURED`` flags, each logged once at WARNING)."""
    cg = CodeGenLLVM(func.name, int(target.options.get("num-cores", 0)), target.cpu.vector_bytes,
                     dot_u8s8=target.cpu.dot_u8s8)
    cg.add_function(func)
    sig = signature(func)
    _add_metadata(cg.module, [sig], func.name)
    return str(cg.finish()), sig, sorted(cg.unhonoured)


def compile_object(ir_text: str, target: Target) -> bytes:
    """Optimise IR for ``target`` (-O3 unless its ``-opt-level`` says less) and emit position-independent
    object code (no JIT engine).

    Each call parses into an LLVM context of its own, freed at the end: LLVM keeps every type and
    constant a module uses in its context until the context goes, so a builder that compiled thousands
    of candidates into the global one grew by about a megabyte per candidate."""
    with _lock:
        init_llvm()
        ctx = llvm.create_context()
        try:
            mod = llvm.parse_assembly(ir_text, context=ctx)
            try:
                mod.verify()
                tm = target_machine(target, for_object=True)
                mod.triple = llvm.get_process_triple()
                mod.data_layout = str(tm.target_data)
                optimize(mod, tm, target.opt_level)
                return tm.emit_object(mod)
            finally:
                mod.close()
        finally:
            ctx.close()


def build_many(funcs: Sequence[S.PrimFunc], target: Any = "llvm", entry: str | None = None) -> Module:
    """Compile several PrimFuncs into one module (one LLVM module; one shared library on export), e.g. the
    kernels of a model. Function names must differ. For a ``cuda`` target: one host module, one PTX module."""
    tgt = Target(target)
    if not funcs:
        raise ValueError("build_many needs at least one function")
    names = [f.name for f in funcs]
    if len(set(names)) != len(names):
        raise ValueError(f"build_many: function names must be unique, got {names}")
    if tgt.kind == "cuda":
        return build_cuda(funcs, tgt, entry)
    if tgt.kind != "llvm":
        raise CodegenError(f"target {tgt} is not supported by build (llvm or cuda)")
    num_threads = int(tgt.options.get("num-cores", 0))
    t0 = time.perf_counter()
    init_llvm()
    machine = Machine(llvm.get_process_triple(), tgt.mcpu, tgt.mattr, tgt.opt_level)
    chunks, processes = compile_chunks(funcs, num_threads, tgt.cpu.vector_bytes, machine, build_jobs(), _lock)
    units = {u.name: u for c in chunks for u in c.units}
    if any(u.parallel for u in units.values()):
        gomp_available()  # libgomp into this process too (a worker that generated a parallel loop found it)
    entry = entry or names[0]
    sigs = [signature(f) for f in funcs]
    root = ir.Module(name="autosched_shared")
    root.triple = llvm.get_process_triple()
    _add_metadata(root, sigs, entry)
    if any(u.parallel for u in units.values()):  # the thread count every unit's parallel loops read
        g = ir.GlobalVariable(root, ir.IntType(32), NUM_THREADS_SYMBOL)
        g.initializer = ir.Constant(ir.IntType(32), num_threads)
    plan = _run_plan_ir([len(sig["args"]) for sig in sigs if not sig["vars"]])
    mod = LLVMUnitsModule(chunks, str(root) + plan, sigs, tgt, entry, processes, t0)
    mod.unhonoured = sorted({flag for u in units.values() for flag in u.unhonoured})
    return mod


def build(sch: Any, args: Sequence[Any] | None = None, target: Any = "llvm", name: str = "main") -> Module:
    """Compile a schedule (with its argument tensors) or a PrimFunc into a callable module. Building the same
    loops again for the same target returns the module already compiled, unless it has parallel loops (then
    each build is a module of its own, whose ``set_num_threads`` affects no other)."""
    tgt = Target(target)
    if isinstance(sch, S.PrimFunc):
        func = sch
    elif isinstance(sch, Schedule):
        if args is None:
            raise TypeError("build(schedule, args): give the argument tensors in calling order")
        func = lower(sch, args, name=name)
    else:
        raise TypeError(f"build expects a te.Schedule or a PrimFunc, got {type(sch).__name__}")
    if tgt.kind == "cuda":
        return build_cuda([func], tgt)
    ir_text, sig, unhonoured = generate_ir(func, tgt)
    key = hashlib.sha256(f"{ir_text}\0{tgt.key}\0{tgt.mattr}".encode()).hexdigest()
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    mod = LLVMModule(ir_text, [sig], tgt, func.name)
    mod.unhonoured = unhonoured
    if mod.num_threads_address:  # its thread count is its own (set_num_threads): not shared with a later build
        return mod
    with _lock:
        _cache[key] = mod
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return mod


def generate_ptx(funcs: Sequence[S.PrimFunc], target: Target) -> tuple[str, str, list[dict], dict[str, dict]]:
    """GPU rules, barriers and PTX for lowered kernels: ``(ptx, llvm ir, signatures, launch per kernel)``."""
    prepared = []
    launches = {}
    for f in funcs:
        if has_warp_ops(f.body) and int(target.arch.removeprefix("sm_").rstrip("a") or 0) < 70:
            raise CodegenError(f"kernel {f.name} uses tensor cores (wmma), which need sm_70 or newer; the target "
                               f"is {target.arch}: build for 'cuda -arch=sm_80' or newer")
        k, launch = prepare_kernel(f, target.gpu)
        prepared.append(k)
        launches[f.name] = launch.to_json(f.scalar_params)
    ir_text = generate_ptx_ir(prepared)
    return compile_ptx(ir_text, target.arch), ir_text, [signature(f) for f in prepared], launches


def build_cuda(funcs: Sequence[S.PrimFunc], target: Any = "cuda", entry: str | None = None) -> Module:
    """Kernels for a ``cuda`` target: PTX from llvmlite's NVPTX backend, checked by ``ptxas`` when it is
    installed (it refuses what LLVM lets through: too many registers or too much shared memory). Returns the
    host module (launch dimensions per function) with the device module (the PTX) imported."""
    from autosched.runtime.cuda import CUDAModule

    tgt = Target(target)
    ptx, ir_text, sigs, launches = generate_ptx(funcs, tgt)
    if ptxas_path() is not None:
        for name, regs in ptxas_registers(ptxas_check(ptx, tgt.arch)).items():
            if name in launches:
                check_registers(name, regs, launches[name]["block"], tgt.gpu)
    return CUDAModule(ptx, sigs, launches, entry or funcs[0].name, tgt.arch, ir_text)


def clear_cache() -> None:
    """Forget compiled modules (they are reused when the same loop IR is built for the same target)."""
    with _lock:
        _cache.clear()
