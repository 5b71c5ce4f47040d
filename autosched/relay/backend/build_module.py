"""``relay.build``: optimise a graph, fuse it into kernels, schedule each kernel (its best tuning record under
``apply_history_best``, else its default schedule), compile them all into one library, and describe the graph
for the executor (``_GraphBuilder``). Also ``extract_tasks``: the tunable kernels of a model.
"""

from __future__ import annotations

import bisect
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autosched.relay import op as _op
from autosched.relay import transform as T
from autosched.relay.backend.fused import describe, kernel_name
from autosched.relay.ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
    IRModule,
    RelayError,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
    post_order,
)
from autosched.relay.transform.alter_layout import AlterOpLayout
from autosched.runtime.graph_executor import NOP, GraphExecutorFactoryModule
from autosched.runtime.module import Module
from autosched.runtime.ndarray import Device, NDArray, cpu
from autosched.runtime.registry import get_global_func
from autosched.target import Target
from autosched.task import Task
from autosched.tir import stmt as S
from autosched.tir.lower import lower

logger = logging.getLogger("autosched.relay")
#: the one line that ends relay.build (WARNING when a kernel is untuned); ``autosched build`` prints it instead
summary_logger = logging.getLogger("autosched.relay.summary")


def _as_module(mod: IRModule | Function | Expr) -> IRModule:
    if isinstance(mod, IRModule):
        return mod
    if isinstance(mod, Expr):
        return IRModule.from_expr(mod)
    raise TypeError(f"relay.build expects an IRModule or a relay Function, got {type(mod).__name__}")


def optimize(mod: IRModule | Function, params: dict[str, Any] | None = None) -> IRModule:
    """Bind the parameters, then InferType, SimplifyInference, FoldConstant, EliminateCommonSubexpr,
    DeadCodeElimination, AlterOpLayout (blocked layouts, weights packed; opt_level 3, the default) and FuseOps
    under the current PassContext; returns the fused module."""
    mod = _as_module(mod)
    main = T.bind_params(mod["main"], params or {})
    seq = T.Sequential([T.InferType(), T.SimplifyInference(), T.FoldConstant(), T.EliminateCommonSubexpr(),
                        T.DeadCodeElimination(), T.FoldConstant(), T.InferType(), AlterOpLayout(),
                        T.FoldConstant(), T.InferType(), T.FuseOps()])
    return seq(IRModule({**mod.functions, "main": main}))  # external functions stay as partitioned


def _tasks_of(main: Function, target: Target) -> list[tuple[Call, str, Any]]:
    """``(call, description, Task)`` of every kernel call of a fused main function, in execution order."""
    out = []
    seen: dict[str, Any] = {}
    for node in post_order(main.body):
        if isinstance(node, Call) and isinstance(node.op, Function) and not node.op.attrs.get("Compiler"):
            desc = describe(node.op)
            task = seen.get(desc)
            if task is None:
                task = seen[desc] = Task("relay.fused", {"graph": desc}, target)
            out.append((node, desc, task))
    return out


def _is_tunable(desc: str) -> bool:
    return any(_op.get(n[0]).pattern > _op.INJECTIVE for n in json.loads(desc)["nodes"])


class TaskList(list):
    """The tasks of a model; ``external`` counts the calls partitioned out to each external compiler (not
    tasks: their compiler, not autosched, decides how they run)."""

    external: dict[str, int]


def extract_tasks(mod: IRModule | Function, params: dict[str, Any] | None = None, target: Any = "llvm",
                  include_simple: bool = False) -> TaskList:
    """The tuning tasks of a model: one Task per distinct fused kernel that has an anchor op (conv2d, dense,
    matmul, batch_matmul, pooling, softmax; ``include_simple=True`` adds injective kernels), each with
    ``task.weight`` = how many times the model runs that kernel. Tune them with
    ``autosched.tune_tasks(tasks, [t.weight for t in tasks])``. Calls of external functions (PartitionGraph)
    are not tasks; ``tasks.external`` and the log say how many went to each external compiler."""
    target = Target(target)  # parsed once: every task and pass below shares it
    with T.PassContext.current(), target:
        fused = optimize(mod, params)
    external: dict[str, int] = {}
    for node in post_order(fused["main"].body):
        if isinstance(node, Call) and isinstance(node.op, Function) and node.op.attrs.get("Compiler"):
            c = node.op.attrs["Compiler"]
            external[c] = external.get(c, 0) + 1
    counts: dict[Any, int] = {}
    order: list[Any] = []
    for _, desc, task in _tasks_of(fused["main"], target):
        if not include_simple and not _is_tunable(desc):
            continue
        if task not in counts:
            counts[task] = 0
            order.append(task)
        counts[task] += 1
    for t in order:
        t.weight = counts[t]
    out = TaskList(order)
    out.external = external
    if external:
        logger.info("extract_tasks: %d tasks; calls left to external compilers: %s", len(out),
                    ", ".join(f"{c}: {k}" for c, k in sorted(external.items())))
    return out


def _schedule(task: Any, use_records: bool) -> tuple[Any, list, Any, S.PrimFunc | None]:
    """``(schedule, args, record or None, its lowered function or None)``: the best record of the active
    apply_history_best contexts that replays and lowers, else the default schedule (not lowered yet)."""
    if use_records and "autosched.database.apply" in sys.modules:  # records only when the user loaded them
        from autosched.database.apply import current_contexts  # (SQLAlchemy: not imported otherwise)

        for ctx in reversed(current_contexts()):
            for rec in ctx.candidates(task):
                try:
                    sch, args = task.apply(rec.trace)
                    func = lower(sch, args)
                except Exception as e:  # a record that no longer replays: try the next one
                    logger.warning("record %s of kernel %s (key %s) does not apply (%s: %s); trying the next",
                                   getattr(rec, "id", "?"), task.name, task.workload_key[:16], type(e).__name__, e)
                    continue
                return sch, args, rec, func
    sch, args = task.default_schedule()
    return sch, args, None, None


class _GraphBuilder:
    """Turns a fused main function into the executor's graph JSON, the kernels and the parameters."""

    def __init__(self, main: Function, target: Target | str, use_records: bool):
        self.main = main
        self.target = Target(target)  # (a copy when given a Target: nothing parsed)
        self.use_records = use_records
        self.nodes: list[dict] = []
        self.shapes: list[list[int]] = []
        self.dtypes: list[str] = []
        self.row_ptr: list[int] = [0]
        self.arg_nodes: list[int] = []
        self.params: dict[str, np.ndarray] = {}
        self.entry: dict[int, list] = {}  # expr id -> [entry refs] ([node, index, 0] each)
        self.kernels: dict[str, tuple[str, Any, Any]] = {}  # desc -> (func name, task, record)
        self.prims: list[Any] = []
        self.external: dict[str, tuple[str, Any]] = {}  # global symbol -> (compiler, runtime module)

    def _add_node(self, node: dict, types: Sequence[TensorType]) -> list:
        nid = len(self.nodes)
        self.nodes.append(node)
        for t in types:
            self.shapes.append(list(t.shape))
            self.dtypes.append(t.dtype)
        self.row_ptr.append(self.row_ptr[-1] + len(types))
        return [[nid, k, 0] for k in range(len(types))]

    def _input(self, name: str, t: Any) -> list:
        if not isinstance(t, TensorType):
            raise RelayError(f"graph input {name!r} has type {t!r}; inputs must be tensors")
        refs = self._add_node({"op": "null", "name": name, "inputs": []}, [t])
        self.arg_nodes.append(refs[0][0])
        return refs

    def _kernel(self, fn: Function, desc: str) -> tuple[str, Any, Any]:
        got = self.kernels.get(desc)
        if got is not None:
            return got
        task = Task("relay.fused", {"graph": desc}, self.target)
        sch, args, rec, func = _schedule(task, self.use_records)
        name = f"{kernel_name(fn)}_{len(self.kernels)}"
        self.prims.append(lower(sch, args, name=name) if func is None else  # (a record's: lowered as it was checked)
                          S.PrimFunc(name, func.params, func.scalar_params, func.body, func.attrs))
        self.kernels[desc] = (name, task, rec)
        return self.kernels[desc]

    def _external(self, fn: Function) -> str:
        """Compile an external function with its compiler's codegen (``relay.ext.NAME``), once."""
        name, compiler = fn.attrs.get("global_symbol"), fn.attrs["Compiler"]
        if not name:
            raise RelayError(f"an external function for {compiler!r} has no global_symbol; run PartitionGraph")
        if name in self.external:
            return name
        codegen = get_global_func(f"relay.ext.{compiler}", allow_missing=True)
        if codegen is None:
            raise RelayError(f"function {name} is partitioned for external compiler {compiler!r}, but no codegen "
                             f"is registered as 'relay.ext.{compiler}' (register_func('relay.ext.{compiler}'))")
        try:
            mod = codegen(fn)
        except Exception as e:
            raise RelayError(f"external codegen relay.ext.{compiler} failed on function {name}: "
                             f"{type(e).__name__}: {e}") from e
        if not isinstance(mod, Module) or name not in mod:
            raise RelayError(f"external codegen relay.ext.{compiler} must return a runtime Module defining "
                             f"{name!r} for function {name}, got {mod!r}")
        self.external[name] = (compiler, mod)
        return name

    def run(self) -> str:
        for p in self.main.params:  # (an input the outputs do not read has only its annotation: CastLike's model)
            t = p.type_annotation if getattr(p, "_checked_type", None) is None else p.checked_type
            self.entry[id(p)] = self._input(p.name_hint, t)
        for node in post_order(self.main.body):
            if id(node) in self.entry:
                continue
            if isinstance(node, Var):
                raise RelayError(f"variable {node.name_hint} is not an input of the main function")
            if isinstance(node, Constant):
                name = f"p{len(self.params)}"
                arr = np.asarray(node.data, order="C")  # (ascontiguousarray would make a 0-d constant 1-d)
                self.params[name] = arr
                self.entry[id(node)] = self._input(name, TensorType(arr.shape, str(arr.dtype)))
            elif isinstance(node, Tuple):
                self.entry[id(node)] = [r for f in node.fields for r in self.entry[id(f)]]
            elif isinstance(node, TupleGetItem):
                refs = self.entry[id(node.tuple_value)]
                self.entry[id(node)] = [refs[node.index]]
            elif isinstance(node, Call) and isinstance(node.op, Function) and node.op.attrs.get("Compiler"):
                name = self._external(node.op)
                inputs = [r for a in node.args for r in self.entry[id(a)]]
                t = node.checked_type
                outs = list(t.fields) if isinstance(t, TupleType) else [t]
                attrs = {"func_name": name, "num_inputs": str(len(inputs)), "num_outputs": str(len(outs)),
                         "flatten_data": "0", "compiler": node.op.attrs["Compiler"]}
                self.entry[id(node)] = self._add_node(
                    {"op": "tvm_op", "name": name, "attrs": attrs, "inputs": inputs}, outs)
            elif (isinstance(node, Call) and isinstance(node.op, Function) and _reshape_only(node.op)
                  and not isinstance(node.args[0], (Var, Constant))):  # (an input's reshape is a kernel: a copy)
                inputs = self.entry[id(node.args[0])]
                attrs = {"func_name": NOP, "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}
                self.entry[id(node)] = self._add_node(
                    {"op": "tvm_op", "name": NOP, "attrs": attrs, "inputs": inputs}, [node.checked_type])
            elif isinstance(node, Call) and isinstance(node.op, Function):
                desc = describe(node.op)
                name, task, rec = self._kernel(node.op, desc)
                inputs = [r for a in node.args for r in self.entry[id(a)]]
                attrs = {"func_name": name, "num_inputs": str(len(inputs)), "num_outputs": "1",
                         "flatten_data": "0", "workload_key": task.workload_key,
                         "tuned": "1" if rec is not None else "0"}
                self.entry[id(node)] = self._add_node(
                    {"op": "tvm_op", "name": name, "attrs": attrs, "inputs": inputs}, [node.checked_type])
            elif isinstance(node, Function):
                continue
            else:
                raise RelayError(f"relay.build: unexpected node {node!r} after FuseOps")
        heads = self.entry[id(self.main.body)]
        graph = {
            "nodes": self.nodes,
            "arg_nodes": self.arg_nodes,
            "heads": heads,
            "node_row_ptr": self.row_ptr,
            "attrs": {"shape": ["list_shape", self.shapes], "dltype": ["list_str", self.dtypes],
                      "storage_id": ["list_int", self._plan_storage(heads)]},
        }
        return json.dumps(graph)


    def _plan_storage(self, heads: list) -> list[int]:
        """Storage of each entry: a kernel output reuses the storage (same dtype and size) of an intermediate
        value whose last reader has run; inputs, parameters and outputs keep their own. A reshape-only node
        (``__nop``) is its input's storage under another shape: the storage is freed after the last reader of
        either, and kept for good when either is an output."""
        nbytes = [int(np.prod(s, dtype=np.int64)) * np.dtype(d).itemsize for s, d in zip(self.shapes, self.dtypes)]
        root = list(range(len(self.shapes)))  # the entry whose storage each one is (itself, or a nop's input's)
        readers = [0] * len(self.shapes)
        for nid, node in enumerate(self.nodes):
            for ref in node["inputs"]:
                readers[root[self.row_ptr[ref[0]] + ref[1]]] += 1
            if node.get("attrs", {}).get("func_name") == NOP:
                src = node["inputs"][0]
                root[self.row_ptr[nid]] = root[self.row_ptr[src[0]] + src[1]]
        pinned = {root[self.row_ptr[h[0]] + h[1]] for h in heads}
        sid = [-1] * len(self.shapes)
        free: dict[tuple[str, int], list[int]] = {}
        count = 0
        for nid, node in enumerate(self.nodes):
            outs = range(self.row_ptr[nid], self.row_ptr[nid + 1])
            for e in outs:
                if root[e] != e:
                    sid[e] = sid[root[e]]
                    continue
                pool = free.get((self.dtypes[e], nbytes[e])) if node["op"] == "tvm_op" and e not in pinned else None
                if pool:
                    sid[e] = pool.pop()
                else:
                    sid[e] = count
                    count += 1
            if node["op"] != "tvm_op":
                continue
            for ref in node["inputs"]:
                e = root[self.row_ptr[ref[0]] + ref[1]]
                readers[e] -= 1
                if readers[e] == 0 and e not in pinned and self.nodes[self._node_of(e)]["op"] == "tvm_op":
                    free.setdefault((self.dtypes[e], nbytes[e]), []).append(sid[e])
        return sid

    def _node_of(self, entry: int) -> int:
        return bisect.bisect_right(self.row_ptr, entry) - 1


def _reshape_only(fn: Function) -> bool:
    """Whether a fused function only reshapes its one input (same elements in the same order): the executor
    then runs nothing, its output a view of the input's storage (TVM's ``__nop``)."""
    e = fn.body
    while isinstance(e, Call) and not isinstance(e.op, Function) and e.op.name in _RESHAPES:
        e = e.args[0]
    return len(fn.params) == 1 and e is fn.params[0] and fn.body is not e


_RESHAPES = frozenset({"reshape", "nn.batch_flatten"})


class BuildResult(GraphExecutorFactoryModule):
    """``(graph_json, lib, params)`` and TVM's factory module (``res["default"](dev)`` makes an executor,
    ``res.export_library(path)`` writes the model as one library), also with ``.kernels``: per kernel, its name,
    task and whether a tuning record was applied; and ``.summary``, the line that ended the build."""

    kernels: list[dict]
    summary: str


def _build_fused(fused: IRModule, target: Target, use_records: bool) -> tuple[str, Any, dict, _GraphBuilder]:
    from autosched.codegen.build import build_many  # llvmlite, needed only to compile

    gb = _GraphBuilder(fused["main"], target, use_records)
    graph_json = gb.run()
    ext = [m for _, m in gb.external.values()]
    if ext and target.kind == "cuda":
        raise RelayError(f"relay.build: functions partitioned for external compilers "
                         f"({', '.join(sorted({c for c, _ in gb.external.values()}))}) run on the CPU, and a cuda "
                         f"graph runs on the GPU: build for llvm, or do not partition the graph")
    if not gb.prims and not ext:
        raise RelayError("relay.build: the model computes nothing (its outputs are its inputs)")
    lib = build_many(gb.prims, target) if gb.prims else ext.pop(0)
    for m in ext:
        lib.import_module(m)
    return graph_json, lib, gb.params, gb


def build(mod: IRModule | Function, target: Any = "llvm", params: dict[str, Any] | None = None) -> BuildResult:
    """Compile a model: returns ``(graph_json, lib, params)`` for ``graph_executor.GraphModule``. Under
    ``autosched.apply_history_best(db)`` each kernel uses its best record when one matches, else its default
    schedule; the build ends with one line (logger ``autosched.relay.summary``, WARNING when a kernel is untuned)
    saying how many kernels were tuned, and which CPUs the records are for when not this one."""
    target = Target(target)  # parsed once, here; the passes, the tasks, codegen and the summary share it
    with target:  # AlterOpLayout sizes the layouts for it
        fused = optimize(mod, params)
    graph_json, lib, out_params, gb = _build_fused(fused, target, use_records=True)
    kernels = [{"name": n, "workload_key": t.workload_key, "task": t, "tuned": r is not None,
                "record_id": getattr(r, "id", None)} for n, t, r in gb.kernels.values()]
    kernels += [{"name": n, "external": c, "tuned": False, "record_id": None} for n, (c, _) in gb.external.items()]
    for k in kernels:
        logger.info("relay.build: kernel %s %s", k["name"],
                    f"is compiled by external compiler {k['external']}" if k.get("external") else
                    f"uses tuning record {k['record_id']}" if k["tuned"] else "uses its default schedule")
    line, warn = build_summary(kernels, gb.kernels, target)
    summary_logger.log(logging.WARNING if warn else logging.INFO, "%s", line)
    res = BuildResult(graph_json, lib, out_params)
    res.kernels = kernels
    res.summary = line
    return res


EXECUTOR_KINDS = ("graph", "debug", "vm", "aot")


class Executor:
    """What TVM's ``relay.create_executor(kind, mod, device, target, params)`` returns: ``evaluate()`` builds the
    model (under the current PassContext) and gives a function of its inputs that runs it. Every kind runs the
    compiled graph in the graph executor: TVM's interpreter ("debug"), VM and AOT compute the same values."""

    def __init__(self, kind: str, mod: IRModule | Function | None, device: Device | None, target: Any,
                 params: dict[str, Any] | None):
        if kind not in EXECUTOR_KINDS:
            raise ValueError(f"create_executor: unknown kind {kind!r} (one of {', '.join(EXECUTOR_KINDS)})")
        self.kind = kind
        self.mod = mod
        self.device = device if device is not None else cpu(0)
        self.target = target
        self.params = dict(params or {})

    def evaluate(self, expr: Expr | None = None, binds: dict | None = None) -> Callable[..., Any]:
        """A function that runs the model (``expr`` instead of ``mod["main"]`` when given): its inputs
        positionally in the order of the function's parameters (those not bound by ``params``) or by name;
        it returns the output as an NDArray, a tuple of them when the model has several."""
        if binds:
            raise ValueError("create_executor(...).evaluate: binds is not supported; pass the values as params")
        if expr is None and self.mod is None:
            raise ValueError("create_executor(...).evaluate(): give a module to create_executor or an expression here")
        mod = _as_module(expr if expr is not None else self.mod)
        names = [v.name_hint for v in mod["main"].params if v.name_hint not in self.params]
        executor = build(mod, self.target, self.params)["default"](self.device)

        def run(*args: Any, **kwargs: Any) -> Any:
            if len(args) > len(names):
                raise TypeError(f"the model takes {len(names)} inputs ({', '.join(names)}), got {len(args)}")
            inputs = {**dict(zip(names, args)), **kwargs}
            missing = [n for n in names if n not in inputs]
            if missing:
                raise TypeError(f"the model's input{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                                f"{'were' if len(missing) > 1 else 'was'} not given")
            executor.run(**inputs)
            outs = [NDArray(executor.get_output(i).numpy(), self.device) for i in range(executor.get_num_outputs())]
            return outs[0] if len(outs) == 1 else tuple(outs)

        return run


def create_executor(kind: str = "debug", mod: IRModule | Function | None = None, device: Device | None = None,
                    target: Any = "llvm", params: dict[str, Any] | None = None) -> Executor:
    """TVM's ``relay.create_executor``: ``create_executor("graph", mod, cpu(0), "llvm", params).evaluate()(x)``."""
    return Executor(kind, mod, device, target, params)


def build_summary(kernels: list[dict], built: dict, target: Target | str) -> tuple[str, bool]:
    """The one line that ends a build, and whether it deserves a WARNING: how many kernels were tuned; which
    use records of another CPU (``allow_other_cpus``) or have records for other CPUs only, with the command
    that tunes for this one (on a ``cuda`` target: GPUs, named by architecture). A kernel on its default
    schedule is the untuned speed, so it is worth a warning."""
    contexts = []
    if "autosched.database.apply" in sys.modules:
        from autosched.database.apply import current_contexts

        contexts = current_contexts()
    here = next((k["task"].target.key for k in kernels if k.get("task") is not None), None)
    if here is None:
        here = (target if isinstance(target, Target) else Target(target)).key
    device = "GPU" if here.split(" ", 1)[0] == "cuda" else "CPU"  # what the kernels run on, for the messages
    n_ext = sum(1 for k in kernels if k.get("external"))
    n = len(kernels) - n_ext
    tuned = sum(k["tuned"] for k in kernels)
    parts = [f"relay.build: {n} kernels, {tuned} tuned (from records), {n - tuned} with default schedules"
             + (f", and {n_ext} external functions" if n_ext else "")]
    if not contexts:
        if tuned < n:
            parts.append("no tuning records given (build inside autosched.apply_history_best(db), or "
                         "`autosched build --db DB`)")
        return "; ".join(parts), tuned < n
    missing: dict[str, int] = {}  # other CPU -> kernels without a record here that have one there
    for k in kernels:
        if k.get("task") is not None and not k["tuned"]:
            for t in {t for c in contexts for t in c.database.targets(k["task"])} - {here}:
                missing[t] = missing.get(t, 0) + 1
    applied: dict[str, int] = {}
    for _, task, rec in built.values():
        if rec is not None and rec.target != task.target.key:
            applied[rec.target] = applied.get(rec.target, 0) + 1
    if applied:
        parts.append(f"{_kernels(sum(applied.values()))} use records tuned on another {device} "
                     f"({', '.join(sorted(applied))}), not on this one ({here})")
    if missing:
        parts.append(f"{_kernels(max(missing.values()))} have records only for other {device}s "
                     f"({', '.join(f'{t}: {m} kernels' for t, m in sorted(missing.items()))}) and use default "
                     "schedules (apply_history_best(db, allow_other_cpus=True) would use them)")
    if tuned < n or applied:
        parts.append(f"tune for this {device} with `autosched tune --model MODEL.onnx --db {contexts[-1].database} "
                     f"--target '{here}'`")
    return "; ".join(parts), tuned < n or bool(applied)


def _kernels(n: int) -> str:
    return f"{n} kernel{'s' if n != 1 else ''}"


__all__ = ["BuildResult", "Executor", "TaskList", "build", "build_summary", "create_executor", "extract_tasks",
           "optimize"]
