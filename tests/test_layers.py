"""The import layering of autosched's packages, kept true by a test.

Bottom to top: errors; the target description (``autosched.target``: what a target is, what the host CPU is
called); TVM's PassContext (``autosched.transform``); te and tir; runtime; codegen; workloads; space; task;
the neutral results module (``autosched.result``); worker processes (``autosched.process``); measure,
database and cost_model beside each other (none imports another); search; relay; the command line (the
``autosched/cli`` package, one module per command, ``__main__`` and the package facade
``autosched/__init__``). A module may import its own package and
anything below its layer; the facade itself (``import autosched``, ``from autosched import lower``) only the
command line imports. The check reads every ``import`` in the source (function-level ones too, which a fresh
interpreter's ``sys.modules`` would not show until called), and a second check imports each package in a fresh
interpreter and looks at what it pulled in. The command modules import at their top, but for heavy
dependencies named with their reason.

Inside relay the same rule holds between its sub-packages, as in TVM: ir < op < dataflow_pattern < transform <
backend and frontend (beside each other); ``relay/__init__`` (the facade that gathers TVM's names) is above
them all, and relay's modules import one another without cycles.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "autosched"

LAYERS: list[set[str]] = [
    {"errors", "version"},  # the error classes; the version string records and compile caches stamp
    {"process"},  # worker processes serving an object named by text (a model build's, measurement's, the search's)
    {"container"},  # TVM's Map and Array: plain containers every layer may return
    {"target"},  # parsing targets and naming the host CPU: below the code generator and the database
    {"isa"},  # the instruction-set extensions code uses and the host has (no llvmlite needed at run time)
    {"transform"},  # TVM's PassContext and pass classes: build options that lowering reads
    {"instrument"},  # TVM's pass instruments (what a PassContext tells about each pass it runs)
    {"te", "tir"},  # the expression and loop IRs use each other's nodes
    {"ir"},  # TVM's tvm.ir names over te: save_json / load_json of te objects, Op, Range
    {"runtime"},
    {"contrib", "testing"},  # TVM's contrib helpers (cc.create_shared, utils.tempdir), testing.assert_allclose
    {"codegen"},
    {"driver"},  # TVM's tvm.driver.build_module names: lowering and building, over codegen
    {"workloads"},
    {"space"},
    {"task"},
    {"result"},
    {"shipment"},  # how a task travels to the worker processes
    {"measure", "database", "cost_model"},  # beside each other: none imports another
    {"search"},
    {"relay"},
    # TVM's tuning names over the search, the database and relay; TOPI's operators over te and relay's computes
    {"auto_scheduler", "autotvm", "topi"},
    {"cli"},
]
MUTUAL = {frozenset({"te", "tir"})}  # same layer and allowed to import each other
#: below the layer rule, imports the design rules out: the database stores and answers; it compiles nothing
FORBIDDEN = {("database", "codegen"), ("database", "llvmlite")}

#: imports that break the layering today, each with its reason; the test fails if one disappears (so the
#: list shrinks as they are fixed) or a new one appears
KNOWN: dict[tuple[str, str], str] = {}


def _layer(name: str) -> int:
    for i, layer in enumerate(LAYERS):
        if name in layer:
            return i
    raise KeyError(name)


def _unit(path: Path) -> str:
    """The layer unit of a source file: its top-level package, or 'cli' for the command line and the facade."""
    rel = path.relative_to(ROOT)
    if rel in (Path("__main__.py"), Path("__init__.py")):
        return "cli"
    return rel.parts[0].removesuffix(".py")


def _is_module(dotted: str) -> bool:
    """Whether ``autosched.a.b`` names a module or package of the source tree (not a name defined in one)."""
    rel = Path(*dotted.split(".")[1:]) if "." in dotted else Path()
    return (ROOT / rel).is_dir() or (ROOT / rel).with_suffix(".py").exists()


def _imports(path: Path) -> set[str]:
    """The autosched top-level units ``path`` imports, anywhere in the file (and llvmlite, if it does).
    ``import autosched`` and ``from autosched import NAME`` of a name the facade defines (``lower``,
    ``__version__``, ``Task``) count as 'facade'; ``from autosched import te`` imports the sub-package."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if node.module == "autosched" and any(not _is_module(f"autosched.{a.name}") for a in node.names):
                out.add("facade")
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
            if "autosched" in names:
                out.add("facade")
        for n in names:
            parts = n.split(".")
            if parts[0] == "llvmlite":
                out.add("llvmlite")
            if parts[0] == "autosched" and len(parts) > 1 and (
                    (ROOT / parts[1]).is_dir() or (ROOT / f"{parts[1]}.py").exists()):
                out.add(parts[1])
    return out


def _violations() -> dict[tuple[str, str], str]:
    bad = {}
    for path in sorted(ROOT.rglob("*.py")):
        unit = _unit(path)
        if unit == "cli":
            continue
        for dep in _imports(path) - {unit}:
            if (unit, dep) in FORBIDDEN:
                bad[(str(path.relative_to(ROOT)), dep)] = f"{unit} must not import {dep}"
                continue
            if dep == "llvmlite":
                continue
            if dep == "facade":
                bad[(str(path.relative_to(ROOT)), dep)] = ("imports the package facade (autosched/__init__), which "
                                                           "only the command line may: import the module that "
                                                           "defines the name")
                continue
            if dep == "cli" or dep == "__main__":
                bad[(str(path.relative_to(ROOT)), dep)] = "imports the command line"
                continue
            same = _layer(dep) == _layer(unit)
            if _layer(dep) > _layer(unit) or (same and frozenset({unit, dep}) not in MUTUAL):
                bad[(str(path.relative_to(ROOT)), dep)] = f"{unit} (layer {_layer(unit)}) imports {dep} " \
                                                          f"(layer {_layer(dep)})"
    return bad


def test_every_package_is_in_a_layer():
    units = {_unit(p) for p in ROOT.rglob("*.py")}
    assert not [p for p in ROOT.rglob("cli.py")], "command-line modules live in autosched/cli/"
    assert units <= set().union(*LAYERS), units - set().union(*LAYERS)


def test_imports_follow_the_layers():
    bad = _violations()
    new = {k: v for k, v in bad.items() if k not in KNOWN}
    assert not new, "imports against the layering:\n" + "\n".join(f"  {f} -> {d}: {why}"
                                                                 for (f, d), why in sorted(new.items()))
    fixed = set(KNOWN) - set(bad)
    assert not fixed, f"no longer imported, drop from KNOWN: {sorted(fixed)}"


def _pulled(statement: str) -> set[str]:
    """The autosched units in ``sys.modules`` of a fresh interpreter after ``statement``."""
    code = (f"import sys, json; {statement}; "
            "print(json.dumps(sorted({m.split('.')[1] for m in sys.modules if m.startswith('autosched.')})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=ROOT.parent)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("package", ["target", "te", "tir", "runtime", "codegen", "workloads", "space", "task",
                                     "result", "measure", "database", "cost_model", "search", "relay"])
def test_importing_a_package_pulls_in_only_lower_layers(package):
    """What importing a package adds to what ``import autosched`` (the facade, which every import runs first)
    already loaded lies in lower layers."""
    base = _pulled("import autosched")
    pulled = _pulled(f"import autosched.{package}") - base - {package, "cli"}
    mine = _layer(package)
    above = {p for p in pulled if _layer(p) > mine or (_layer(p) == mine and frozenset({p, package}) not in MUTUAL)}
    assert not above, f"importing autosched.{package} pulled in {sorted(above)}"


def test_the_database_compiles_nothing(tmp_path):
    """Storing a record, and asking for the best on the host's target (whose key names the host CPU), loads no
    code generator and compiles nothing (the CPU-describing probe of autosched.target never runs)."""
    code = f"""
import sys, json
import autosched
from autosched.database import Database
from autosched.result import MeasureResult
from autosched.te.trace import Split, Trace
from autosched.target import _probe_isa, host_cpu_name
db = Database({str(tmp_path / "t.db")!r})
task = autosched.Task("matmul", dict(M=16, N=16, K=16), target="llvm")
db.commit(task, Trace([Split(2, 0, 4, None)]), MeasureResult(costs=[1e-3], timestamp=1.0))
(best,) = db.best(task.workload_key, "llvm")
print(json.dumps([best.target, host_cpu_name(), best.host_cpu, _probe_isa.cache_info().currsize,
                  sorted(m for m in sys.modules if m.startswith("autosched.codegen"))]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT.parent)
    assert out.returncode == 0, out.stderr
    target, host, record_cpu, probes, codegen = json.loads(out.stdout)
    assert target == f"llvm -mcpu={host}" and record_cpu == host
    assert probes == 0 and codegen == []


RELAY = ROOT / "relay"
RELAY_LAYERS: list[set[str]] = [
    {"ir"},  # expressions, printer, type inference
    {"op"},  # the registry, every op's compute and default schedules, constant evaluation
    {"dataflow_pattern"},  # patterns name registered ops
    {"transform"},  # passes, layouts, partitioning
    # build and external compilers; the ONNX importer; TVM's test networks; the weight-dependent rewrites
    {"backend", "frontend", "testing", "data_dep_optimization"},
]
#: relay imports against its internal order, each with its reason (none today)
RELAY_KNOWN: dict[tuple[str, str], str] = {}


def _relay_modules() -> dict[str, Path]:
    """Every module of autosched.relay by dotted name (a package by its own name)."""
    return _modules(RELAY)


def _modules(under: Path) -> dict[str, Path]:
    """Every module below ``under`` by dotted name (a package by its own name)."""
    out = {}
    for path in under.rglob("*.py"):
        parts = ("autosched",) + path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _relay_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The relay modules ``path`` imports, anywhere in the file (``from pkg import sub`` names the submodule)."""
    return {n for n in _module_imports(path, modules) if n.startswith("autosched.relay")}


def _module_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports, anywhere in the file (``from pkg import sub`` names
    the submodule)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                     for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for n in names:
            while n and n not in modules:
                n = n.rpartition(".")[0]
            if n:
                out.add(n)
    return out


def _relay_unit(name: str) -> str:
    """``ir``, ``op``, ... for a module of relay; 'facade' for relay/__init__."""
    parts = name.split(".")
    return "facade" if len(parts) == 2 else parts[2]


def _relay_layer(unit: str) -> int:
    if unit == "facade":
        return len(RELAY_LAYERS)
    return next(i for i, layer in enumerate(RELAY_LAYERS) if unit in layer)


def test_relay_sub_packages_follow_their_order():
    modules = _relay_modules()
    units = {_relay_unit(m) for m in modules} - {"facade"}
    assert units <= set().union(*RELAY_LAYERS), units - set().union(*RELAY_LAYERS)
    bad = {}
    for name, path in modules.items():
        unit = _relay_unit(name)
        if unit == "facade":
            continue
        for dep in _relay_imports(path, modules):
            d = _relay_unit(dep)
            if d == unit:
                continue
            if d == "facade":
                bad[(name, dep)] = "imports the relay facade; import the module that defines the name"
            elif _relay_layer(d) >= _relay_layer(unit):
                bad[(name, dep)] = f"{unit} (relay layer {_relay_layer(unit)}) imports {d} (layer {_relay_layer(d)})"
    new = {k: v for k, v in bad.items() if k not in RELAY_KNOWN}
    assert not new, "relay imports against its order:\n" + "\n".join(f"  {m} -> {d}: {why}"
                                                                    for (m, d), why in sorted(new.items()))
    fixed = set(RELAY_KNOWN) - set(bad)
    assert not fixed, f"no longer imported, drop from RELAY_KNOWN: {sorted(fixed)}"


@pytest.mark.parametrize("under", [RELAY, ROOT], ids=["relay", "autosched"])
def test_no_import_cycles(under):
    """No module reaches itself through imports (function-level ones included): Tarjan's strongly connected
    components of the module graph, relay's and the whole package's, are all single modules."""
    modules = _modules(under)
    graph = {m: _module_imports(p, modules) - {m} for m, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


#: what a command module may import inside a function, each with its reason: heavy dependencies that
#: ``autosched --help``, and every other command, must not pay for
CLI_DEFERRED: dict[str, str] = {
    "sqlalchemy.exc": "SQLAlchemy loads when a database is opened (autosched.database keeps it lazy)",
    "autosched.database": "Database and DatabaseError: their module imports SQLAlchemy",
    "autosched.database.query": "trusted(): the query module imports SQLAlchemy",
    "autosched.database.apply": "apply_history_best: imports SQLAlchemy, only with build --db",
    "autosched.measure.ray_backend": "imports Ray, only when a run will use it",
    "onnx": "an optional dependency: only a model file needs it",
    "sklearn": "scikit-learn, only for the held-out evaluation (checked before minutes of work)",
}


def test_command_modules_import_at_the_top():
    """A function-level import in autosched/cli/ defers a heavy dependency named in CLI_DEFERRED; nothing else
    (no cycle is hidden there: the command modules sit above every layer)."""
    bad, used = [], set()
    for path in sorted((ROOT / "cli").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                         [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                bad += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if n not in CLI_DEFERRED]
                used.update(names)
    assert not bad, "function-level imports in the command line without a reason:\n  " + "\n  ".join(bad)
    stale = sorted(set(CLI_DEFERRED) - used)
    assert not stale, f"no longer deferred, drop from CLI_DEFERRED: {stale}"


def test_the_package_imports_without_its_test_extras():
    """onnx and onnxruntime are test extras (pyproject.toml): the ONNX frontend, relay, TOPI and AutoTVM import
    without them (the converters name onnx's types for type checkers only)."""
    code = ("import sys\n"
            "sys.modules['onnx'] = sys.modules['onnxruntime'] = None  # as if not installed\n"
            "import autosched.relay.frontend, autosched.relay, autosched.topi, autosched.autotvm.task.space\n"
            "print('ok')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]
