"""Features of a candidate, read from its lowered loop IR (not from knob values).

Because they describe loops and memory accesses rather than a template's
knobs, one cost model serves every workload and both kinds of space. A
candidate's vector is fixed-length (``FEATURE_NAMES``):

- totals over the whole kernel: float operations, bytes stored, number of
  stores, the largest parallel extent and the number of parallel loops, the product of
  vector widths used, the largest allocation (log2 scale where counts grow
  multiplicatively);
- for the two stores that do the most work (executions x operations), one
  block each (``s0_*``, ``s1_*``):

  ========================= ==========================================================
  ``exec``                  log2 executions of the store (product of enclosing extents)
  ``flop_add/mul/div``      float +,- / * / divisions per execution
  ``flop_minmax/call``      min/max and math calls per execution
  ``int_ops``               integer index arithmetic per execution
  ``select``                conditional values per execution
  ``guards``                enclosing if-statements (split tails, padding)
  ``depth``                 enclosing loops
  ``vec_len``               lanes of the innermost vectorized loop (0 if none)
  ``vec_inner``             1 if the innermost loop is the vectorized one
  ``unroll``                log2 product of enclosing unrolled extents
  ``par``                   log2 product of enclosing parallel extents
  ``inner_extent``          log2 extent of the innermost loop
  ``reduce``                1 if the store reads what it writes (an accumulation)
  ``a{k}_bytes``            for its three largest accesses: log2 distinct bytes touched
  ``a{k}_lines``            log2 distinct 64-byte lines touched by the innermost loop
  ``a{k}_stride``           element stride along the innermost loop (clipped to 64)
  ``a{k}_reuse``            log2 (executions / distinct elements)
  ``a{k}_write``            1 for the store itself
  ========================= ==========================================================

Extraction walks the IR once per candidate (``benchmarks/bench_features.py`` times it).
Lowering the candidate first costs more, so callers cache by trace (``FeatureCache``): the
XGBoost model lowers each candidate it scores once, and without loop partitioning
(``lower(..., partition=False)``): partitioning copies loop bodies for boundary iterations, which
made lowering several times slower on the candidates it multiplies, while the model ranked as well without
it. The figures: docs/measured_choices.md.
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np

from autosched.te import expr as E
from autosched.te.expr import DTYPE_BYTES
from autosched.tir import stmt as S
from autosched.tir import wmma
from autosched.tir.arith import ANY_RANGES, linear, simplify

N_ACCESS = 3
N_STORES = 2
_STORE_FIELDS = ["exec", "flop_add", "flop_mul", "flop_div", "flop_minmax", "flop_call", "int_ops", "select",
                 "guards", "depth", "vec_len", "vec_inner", "unroll", "par", "inner_extent", "reduce"]
_ACCESS_FIELDS = ["bytes", "lines", "stride", "reuse", "write"]
_TOTALS = ["total_flop", "total_store_bytes", "n_stores", "par_extent", "n_parallel", "vector_lanes",
           "max_alloc_bytes"]


def _store_names(k: int) -> list[str]:
    names = [f"s{k}_{f}" for f in _STORE_FIELDS]
    for a in range(N_ACCESS):
        names += [f"s{k}_a{a}_{f}" for f in _ACCESS_FIELDS]
    return names


FEATURE_NAMES: list[str] = _TOTALS + [n for k in range(N_STORES) for n in _store_names(k)]
N_FEATURES = len(FEATURE_NAMES)
# Bump when extract() computes a feature differently under the same name: a model trained on the old features
# (the shipped one, autosched/cost_model/data/) then refuses to load until it is retrained.
FEATURES_VERSION = 2  # 2: read before loop partitioning


def feature_fingerprint() -> str:
    """A short digest of ``FEATURE_NAMES`` and ``FEATURES_VERSION``: a stored model was trained on the features
    this process computes exactly when the fingerprints are equal."""
    text = json.dumps({"version": FEATURES_VERSION, "names": FEATURE_NAMES})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _log2(x: float) -> float:
    return math.log2(x + 1.0)


def _const(e: E.Expr, default: int = 16) -> int:
    return e.value if isinstance(e, E.IntImm) else default


class _Loop:
    __slots__ = ("var", "extent", "kind")

    def __init__(self, var, extent: int, kind: str):
        self.var, self.extent, self.kind = var, extent, kind


def _flat(buf: S.Buffer, indices) -> E.Expr:
    if not indices:
        return E.IntImm(0)
    flat = indices[0]
    for d in range(1, len(indices)):
        flat = flat * buf.shape[d] + indices[d]
    return simplify(flat)


def _flat_info(buf: S.Buffer, indices, memo: dict) -> tuple[frozenset, dict]:
    """Variables and per-variable coefficients of the flattened index; memoised per (buffer, index nodes):
    a store and the load of the same element share their index expressions."""
    key = (id(buf), *map(id, indices))
    hit = memo.get(key)
    if hit is None:
        hit = _flat_linear(buf, indices)
        if hit is None:
            flat = _flat(buf, indices)
            lin = linear(flat)
            hit = (E.free_var_set(flat), {id(atom): c for c, atom in lin.terms.values() if isinstance(atom, E.Var)})
        memo[key] = hit
    return hit


def _flat_linear(buf: S.Buffer, indices) -> tuple[frozenset, dict] | None:
    """``_flat_info`` without building the flattened index, when every index is a variable, a constant or a
    canonical sum of variables and the shape is constant (one integer type throughout): the simplified flat
    index is then exactly the sum of the indices' terms times the strides. None otherwise."""
    if not indices:
        return None
    dt = indices[0].dtype
    coef: dict = {}  # Var -> coefficient
    for d, ix in enumerate(indices):
        if ix.dtype != dt:
            return None
        if d:
            ext = buf.shape[d]
            if type(ext) is not E.IntImm or ext.dtype != dt:
                return None
            for v in coef:
                coef[v] *= ext.value
        t = type(ix)
        if t is E.Var:
            coef[ix] = coef.get(ix, 0) + 1
        elif t is E.IntImm:
            continue
        elif getattr(ix, "_fix", None) is ANY_RANGES:
            for c, a in linear(ix).terms.values():
                coef[a] = coef.get(a, 0) + c
        else:
            return None
    used = frozenset(v for v, c in coef.items() if c != 0)
    return used, {id(v): c for v, c in coef.items() if c != 0}


def _access(buf: S.Buffer, indices, loops: list[_Loop], execs: float, write: bool, memo: dict) -> list[float]:
    """Bytes, lines, stride, reuse of one access inside ``loops``."""
    used, coef = _flat_info(buf, indices, memo)
    distinct = 1.0
    for lp in loops:
        if lp.var in used:
            distinct *= lp.extent
    size = buf.const_size()
    if size is not None:
        distinct = min(distinct, size)
    esize = DTYPE_BYTES.get(buf.dtype, 4)
    inner = loops[-1] if loops else None
    stride = abs(coef.get(id(inner.var), 0)) if inner is not None and inner.var in used else 0
    if inner is not None and inner.var in used and id(inner.var) not in coef:
        stride = 64  # non-linear in the innermost loop: treat as scattered
    lines = 1.0 if inner is None else max(1.0, min(inner.extent, inner.extent * stride * esize / 64.0))
    return [_log2(distinct * esize), _log2(lines), float(min(stride, 64)), _log2(execs / max(distinct, 1.0)),
            1.0 if write else 0.0]


_OP_KIND: dict[type, tuple[str | None, str | None]] = {}  # node type -> (counter if float, counter if not)


def _op_kind(t: type) -> tuple[str | None, str | None]:
    """Which counter a node of type ``t`` increments (the first matching rule, as isinstance would pick)."""
    k = _OP_KIND.get(t)
    if k is None:
        if issubclass(t, (E.Add, E.Sub)):
            k = ("flop_add", "int_ops")
        elif issubclass(t, E.Mul):
            k = ("flop_mul", "int_ops")
        elif issubclass(t, (E.Div, E.FloorDiv, E.FloorMod)):
            k = ("flop_div", "int_ops")
        elif issubclass(t, (E.Min, E.Max)):
            k = ("flop_minmax", "int_ops")
        elif issubclass(t, E.BitOp):
            k = (None, "int_ops")
        elif issubclass(t, E.Call):
            k = ("flop_call", "flop_call")
        elif issubclass(t, E.Select):
            k = ("select", "select")
        else:
            k = (None, None)
        _OP_KIND[t] = k
    return k


#: an expression whose tree (every path to a shared node counted) is larger than this is counted over its
#: distinct nodes: te lambdas make DAGs whose trees grow exponentially with depth
TREE_WALK_MAX = 1 << 16


def _count_ops(e: E.Expr, loads: list | None = None) -> dict[str, float]:
    """Operations in ``e`` by kind, each node as often as it appears in the expression's tree (the counts the
    shipped model was trained on); its buffer loads (pre-order) are appended to ``loads`` when given. A tree
    beyond ``TREE_WALK_MAX`` nodes gets the same counts from its distinct nodes and each load once."""
    c = {"flop_add": 0.0, "flop_mul": 0.0, "flop_div": 0.0, "flop_minmax": 0.0, "flop_call": 0.0, "int_ops": 0.0,
         "select": 0.0}
    children, is_float = E.children, E.is_float
    stack, seen, first = [e], 0, len(loads) if loads is not None else 0
    while stack:
        x = stack.pop()
        seen += 1
        if seen > TREE_WALK_MAX:  # a DAG whose tree outgrows the walk: start over on its distinct nodes
            if loads is not None:
                del loads[first:]
            return _count_ops_shared(e, dict.fromkeys(c, 0.0), loads)
        t = type(x)
        fk, ik = _OP_KIND.get(t) or _op_kind(t)
        if fk is not None:
            c[fk if is_float(x.dtype) else ik] += 1
        elif loads is not None and isinstance(x, S.BufferLoad):
            loads.append(x)
        kids = children(x)
        if kids:
            stack.extend(reversed(kids))
    return c


def _count_ops_shared(e: E.Expr, c: dict[str, float], loads: list | None) -> dict[str, float]:
    """The tree's counts from each distinct node times the number of paths to it (its parents' paths summed,
    parents visited before children in reverse post-order)."""
    order: list[E.Expr] = []
    seen: set[int] = set()
    stack: list[tuple[E.Expr, bool]] = [(e, False)]
    while stack:  # post-order over distinct nodes
        x, done = stack.pop()
        if done:
            order.append(x)
            continue
        if id(x) in seen:
            continue
        seen.add(id(x))
        stack.append((x, True))
        stack.extend((k, False) for k in reversed(E.children(x)))
    paths = {id(e): 1.0}
    for x in reversed(order):
        n = paths.get(id(x), 0.0)
        fk, ik = _OP_KIND.get(type(x)) or _op_kind(type(x))
        if fk is not None:
            c[fk if E.is_float(x.dtype) else ik] += n
        for k in E.children(x):
            paths[id(k)] = paths.get(id(k), 0.0) + n
    if loads is not None:
        loads.extend(x for x in E.walk(e) if isinstance(x, S.BufferLoad))
    return c


def extract(func: S.PrimFunc) -> np.ndarray:
    """The feature vector (``FEATURE_NAMES``) of one lowered kernel (a tensor-core kernel's warp builtins read
    as the loops over tiles they do, so their arithmetic and memory traffic count)."""
    func = wmma.emulate(func)
    stores: list[tuple[float, list[float]]] = []
    totals = dict.fromkeys(_TOTALS, 0.0)
    par_extent, n_par, lanes, max_alloc = 1.0, 0, 1.0, 0.0
    flat_memo: dict = {}  # (buffer, index nodes) -> _flat_info; keys hold ids of nodes that func keeps alive

    def visit(s: S.Stmt, loops: list[_Loop], guards: int) -> None:
        nonlocal par_extent, n_par, lanes, max_alloc
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                visit(x, loops, guards)
        elif isinstance(s, S.For):
            ext = _const(s.extent)
            if s.kind == "parallel":
                par_extent = max(par_extent, ext)
                n_par += 1
            elif s.kind == "vectorized":
                lanes = max(lanes, ext)
            visit(s.body, loops + [_Loop(s.var, ext, s.kind)], guards)
        elif isinstance(s, S.IfThenElse):
            visit(s.then_case, loops, guards + 1)
            if s.else_case is not None:
                visit(s.else_case, loops, guards + 1)
        elif isinstance(s, (S.Allocate, S.LetStmt)):
            if isinstance(s, S.Allocate):
                n = s.buffer.const_size() or 0
                max_alloc = max(max_alloc, float(n * DTYPE_BYTES.get(s.buffer.dtype, 4)))
            visit(s.body, loops, guards)
        elif isinstance(s, S.BufferStore):
            execs = 1.0
            for lp in loops:
                execs *= lp.extent
            loads: list[S.BufferLoad] = []
            ops = _count_ops(s.value, loads)
            for ix in s.indices:
                if type(ix) is not E.Var and type(ix) is not E.IntImm:
                    ops["int_ops"] += _count_ops(ix)["int_ops"]
            flops = sum(v for k, v in ops.items() if k.startswith("flop"))
            vec = [lp for lp in loops if lp.kind == "vectorized"]
            unroll = 1.0
            par = 1.0
            for lp in loops:
                if lp.kind == "unrolled":
                    unroll *= lp.extent
                elif lp.kind == "parallel":
                    par *= lp.extent
            reduce = any(x.buffer is s.buffer for x in loads)
            accesses = [_access(s.buffer, s.indices, loops, execs, True, flat_memo)]
            accesses += [_access(x.buffer, x.indices, loops, execs, False, flat_memo) for x in loads]
            accesses.sort(key=lambda a: -a[0])
            accesses = (accesses + [[0.0] * len(_ACCESS_FIELDS)] * N_ACCESS)[:N_ACCESS]
            row = [_log2(execs), ops["flop_add"], ops["flop_mul"], ops["flop_div"], ops["flop_minmax"],
                   ops["flop_call"], ops["int_ops"], ops["select"], float(guards), float(len(loops)),
                   float(vec[-1].extent) if vec else 0.0, 1.0 if loops and loops[-1].kind == "vectorized" else 0.0,
                   _log2(unroll), _log2(par), _log2(loops[-1].extent if loops else 1), 1.0 if reduce else 0.0]
            for a in accesses:
                row += a
            stores.append((execs * max(flops, 1.0), row))
            totals["total_flop"] += execs * flops
            totals["total_store_bytes"] += execs * DTYPE_BYTES.get(s.buffer.dtype, 4)
            totals["n_stores"] += 1

    visit(func.body, [], 0)
    stores.sort(key=lambda t: -t[0])
    out = [_log2(totals["total_flop"]), _log2(totals["total_store_bytes"]), totals["n_stores"], _log2(par_extent),
           float(n_par), float(lanes), _log2(max_alloc)]
    width = len(_store_names(0))
    for k in range(N_STORES):
        out += stores[k][1] if k < len(stores) else [0.0] * width
    return np.asarray(out, dtype=np.float32)


def extract_batch(funcs: list[S.PrimFunc]) -> np.ndarray:
    """Features of many kernels as one ``(n, N_FEATURES)`` array."""
    if not funcs:
        return np.zeros((0, N_FEATURES), dtype=np.float32)
    return np.stack([extract(f) for f in funcs])
