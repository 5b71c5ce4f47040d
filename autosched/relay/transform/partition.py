"""Bring your own codegen: hand parts of a graph to an external compiler.

Three passes, run in this order (each an ordinary Pass, usable in ``transform.Sequential``):

- ``MergeComposite(pattern_table)``: each match of a named pattern becomes a call of a composite function
  (``attrs["Composite"] = name``), so that an external target sees ``conv2d + bias + relu`` as one thing.
- ``AnnotateTarget(["ccompiler"])``: marks every call that a target takes (``call.compiler``): composites
  whose name starts with ``"target."``, and ops whose ``"target.NAME"`` attribute (a bool or a predicate on
  the call) says yes. The first target in the list that takes a call gets it.
- ``PartitionGraph()``: maximal connected regions of calls marked for the same target become global
  functions (``attrs["Compiler"] = target``, ``attrs["global_symbol"]``) called from ``main``. A region
  never creates a cycle: a call joins a region only when no path leaves the region and comes back.

``relay.build`` then asks ``relay.ext.TARGET`` (the global function registry) to compile each global
function into a runtime module, imported into the model's library; see docs/relay_byoc.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from autosched.relay import op as _op
from autosched.relay.dataflow_pattern import DFPattern, get_pattern_table, match
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
    Var,
    children,
    post_order,
    rebuild,
)
from autosched.relay.ir.type_infer import infer_type
from autosched.relay.transform import transform as T
from autosched.relay.transform.transform import Pass


def _is_scalar_const(e: Expr) -> bool:
    return isinstance(e, Constant) and e.data.ndim == 0


def _use_counts(body: Expr) -> dict[int, int]:
    uses: dict[int, int] = {id(body): 1}
    for n in post_order(body):
        for c in children(n):
            uses[id(c)] = uses.get(id(c), 0) + 1
    return uses


def _outline(nodes: Sequence[Expr], inputs: Sequence[Expr], outputs: Sequence[Expr], attrs: dict,
             param_prefix: str) -> tuple[Function, list[Expr]]:
    """A Function computing ``outputs`` from ``nodes`` (producers first), whose parameters stand for
    ``inputs`` (scalar constants stay inline); returns it with the arguments to call it with."""
    params: list[Var] = []
    args: list[Expr] = []
    memo: dict[int, Expr] = {}
    for e in inputs:
        if _is_scalar_const(e):
            memo[id(e)] = e
            continue
        v = Var(f"{param_prefix}{len(params)}", e.checked_type)
        params.append(v)
        args.append(e)
        memo[id(e)] = v
    for n in nodes:
        args_n = [memo[id(c)] for c in children(n)]
        # a fresh Call (never the original: the marking of AnnotateTarget stays outside)
        memo[id(n)] = Call(n.op, args_n, n.attrs) if isinstance(n, Call) else rebuild(n, args_n)
    body = memo[id(outputs[0])] if len(outputs) == 1 else Tuple([memo[id(o)] for o in outputs])
    fn = Function(params, body, None, attrs)
    infer_type(fn)
    return fn, args


def _fresh_copy(node: Call) -> Call:
    return Call(node.op, node.args, node.attrs, node.compiler)


# ------------------------------------------------------------ MergeComposite
def merge_composite(func: Function, table: Sequence[tuple]) -> Function:
    """Replace each match of the table's patterns (earlier entries first, larger matches first: the graph is
    searched from its outputs) by a call of a composite function named after the pattern."""
    infer_type(func)
    uses = _use_counts(func.body)
    nodes = post_order(func.body)
    claimed: set[int] = set()
    found: dict[int, tuple[str, Any]] = {}  # root id -> (name, Match)
    for entry in table:
        if len(entry) not in (2, 3):
            raise RelayError(f"a pattern table entry is (name, pattern) or (name, pattern, check), got {entry!r}")
        name, pattern = entry[0], entry[1]
        check: Callable[[Expr], bool] | None = entry[2] if len(entry) == 3 else None
        if not isinstance(pattern, DFPattern):
            raise RelayError(f"pattern {name!r} is not a dataflow pattern: {pattern!r}")
        for n in reversed(nodes):
            if not isinstance(n, Call) or id(n) in claimed or isinstance(n.op, Function):
                continue
            m = match(pattern, n)
            if m is None:
                continue
            ids = {id(x) for x in m.nodes}
            if ids & claimed:
                continue
            # an inner node used outside the match would be computed twice (or lost): not a match
            inner_uses = {id(x): 0 for x in m.nodes}
            for x in m.nodes:
                for c in children(x):
                    if id(c) in inner_uses:
                        inner_uses[id(c)] += 1
            if any(uses.get(i, 0) != inner_uses[i] for i in ids if i != id(n)):
                continue
            if not all(isinstance(x.checked_type, TensorType) for x in m.nodes if isinstance(x, Call)):
                continue
            if check is not None and not check(n):
                continue
            claimed |= ids
            found[id(n)] = (name, m)
    if not found:
        return func
    memo: dict[int, Expr] = {}
    for n in nodes:
        if id(n) in found:
            name, m = found[id(n)]
            fn, args = _outline(m.nodes, m.inputs, [n], {"Composite": name, "PartitionedFromPattern": name}, "c")
            memo[id(n)] = Call(fn, [memo[id(a)] for a in args])
        elif id(n) not in claimed:
            memo[id(n)] = rebuild(n, [memo[id(c)] for c in children(n)])
    out = Function(func.params, memo[id(func.body)], func.ret_type, func.attrs)
    infer_type(out)
    return out


def MergeComposite(pattern_table: Sequence[tuple]) -> Pass:  # noqa: N802 - TVM's name
    """Group the subgraphs matched by ``pattern_table`` (``[(name, pattern[, check])]``) into composite
    functions."""
    table = list(pattern_table)
    return Pass("MergeComposite", 0, lambda mod: _map_main(mod, lambda f: merge_composite(f, table)))


def _map_main(mod: IRModule, fn: Callable[[Function], Function]) -> IRModule:
    return IRModule({k: fn(f) if k == "main" else f for k, f in mod.functions.items()})


# ------------------------------------------------------------ AnnotateTarget
def _supported(call: Call, target: str) -> bool:
    if any(not isinstance(a.checked_type, TensorType) for a in call.args):
        return False  # external functions take tensors only
    if not isinstance(call.checked_type, TensorType):
        return False
    if isinstance(call.op, Function):
        comp = call.op.attrs.get("Composite")
        return isinstance(comp, str) and comp.split(".")[0] == target
    rule = _op.get_op_attr(call.op.name, f"target.{target}")
    if rule is None:
        return False
    if callable(rule):
        try:
            return bool(rule(call))
        except Exception as e:
            raise RelayError(f"the support predicate of {call.op.name} for target {target!r} raised "
                             f"{type(e).__name__}: {e}") from e
    return bool(rule)


def annotate_target(func: Function, targets: Sequence[str]) -> Function:
    """Mark the calls each target takes (``call.compiler``)."""
    infer_type(func)
    marked: dict[int, str] = {}
    for n in post_order(func.body):
        if not isinstance(n, Call) or (isinstance(n.op, Function) and not n.op.attrs.get("Composite")):
            continue
        for t in targets:
            if _supported(n, t):
                marked[id(n)] = t
                break
    memo: dict[int, Expr] = {}
    for n in post_order(func.body):
        new = rebuild(n, [memo[id(c)] for c in children(n)])
        if isinstance(new, Call):
            want = marked.get(id(n))
            if new.compiler != want:
                new = _fresh_copy(new) if new is n else new
                new.compiler = want
        memo[id(n)] = new
    out = Function(func.params, memo[id(func.body)], func.ret_type, func.attrs)
    infer_type(out)
    return out


def AnnotateTarget(targets: str | Sequence[str]) -> Pass:  # noqa: N802
    """Mark the calls that the external ``targets`` support (asked in order)."""
    ts = [targets] if isinstance(targets, str) else list(targets)
    if not ts:
        raise RelayError("AnnotateTarget needs at least one target name")
    return Pass("AnnotateTarget", 0, lambda mod: _map_main(mod, lambda f: annotate_target(f, ts)))


# ------------------------------------------------------------ PartitionGraph
def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def partition_graph(mod: IRModule) -> IRModule:
    """Outline the maximal acyclic regions of calls marked for one target into global functions."""
    func = mod["main"]
    infer_type(func)
    nodes = post_order(func.body)
    index = {id(n): k for k, n in enumerate(nodes)}
    anc = [0] * len(nodes)  # bit k: node k is this node or one of its ancestors
    for k, n in enumerate(nodes):
        m = 1 << k
        for c in children(n):
            m |= anc[index[id(c)]]
        anc[k] = m

    def convex(members: int) -> bool:
        reach = 0
        for k in _bits(members):
            reach |= anc[k]
        return all(anc[x] & members == 0 for x in _bits(reach & ~members))

    region_of: dict[int, int] = {}  # node index -> region id
    regions: dict[int, list] = {}   # region id -> [target, member mask]
    for k, n in enumerate(nodes):
        if not isinstance(n, Call) or not n.compiler:
            continue
        cands: list[int] = []
        for c in n.args:
            r = region_of.get(index[id(c)])
            if r is not None and regions[r][0] == n.compiler and r not in cands:
                cands.append(r)
        chosen = None
        if cands:
            union = (1 << k)
            for r in cands:
                union |= regions[r][1]
            if convex(union):
                chosen = cands[0]
                for r in cands[1:]:
                    for x in _bits(regions[r][1]):
                        region_of[x] = chosen
                    regions[chosen][1] |= regions.pop(r)[1]
            else:
                for r in cands:
                    if convex(regions[r][1] | (1 << k)):
                        chosen = r
                        break
        if chosen is None:
            chosen = k
            regions[chosen] = [n.compiler, 0]
        regions[chosen][1] |= 1 << k
        region_of[k] = chosen
    if not regions:
        return mod

    uses_outside: dict[int, bool] = {}
    for k, n in enumerate(nodes):
        for c in children(n):
            ci = index[id(c)]
            if ci in region_of and region_of.get(k) != region_of[ci]:
                uses_outside[ci] = True
    uses_outside[index[id(func.body)]] = True

    functions = dict(mod.functions)
    counter: dict[str, int] = {}
    outlined: dict[int, tuple[Function, list[Expr], list[int]]] = {}  # region -> (fn, arg exprs, output idx)
    for rid in sorted(regions):
        target, mask = regions[rid]
        members = sorted(_bits(mask))
        outs = [k for k in members if uses_outside.get(k)]
        inputs: list[Expr] = []
        seen: set[int] = set()
        for k in members:
            for c in children(nodes[k]):
                if not (mask >> index[id(c)]) & 1 and id(c) not in seen:
                    seen.add(id(c))
                    inputs.append(c)
        n_ext = counter.get(target, 0)
        counter[target] = n_ext + 1
        name = f"{target}_main_{n_ext}"
        while name in functions:
            n_ext += 1
            name = f"{target}_main_{n_ext}"
        fn, args = _outline([nodes[k] for k in members], inputs, [nodes[k] for k in outs],
                            {"Compiler": target, "global_symbol": name, "Primitive": 1, "Inline": 0},
                            f"{target}_{n_ext}_i")
        functions[name] = fn
        outlined[rid] = (fn, args, outs)

    # rebuild main over the graph with each region contracted to one call (acyclic by construction)
    def deps(key: Any) -> list[Any]:
        if key[0] == "region":
            return [_key(a) for a in outlined[key[1]][1]]
        return [_key(c) for c in children(nodes[key[1]])]

    def _key(e: Expr) -> tuple[str, int]:
        k = index[id(e)]
        return ("region", region_of[k]) if k in region_of else ("node", k)

    memo: dict[Any, Expr] = {}
    root = _key(func.body)
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        key, expanded = stack.pop()
        if key in memo:
            continue
        if not expanded:
            stack.append((key, True))
            stack.extend((d, False) for d in deps(key) if d not in memo)
            continue
        if key[0] == "region":
            fn, args, _ = outlined[key[1]]
            memo[key] = Call(fn, [_value(a, memo, _key, outlined, region_of, index) for a in args])
        else:
            n = nodes[key[1]]
            memo[key] = rebuild(n, [_value(c, memo, _key, outlined, region_of, index) for c in children(n)])
    body = _value(func.body, memo, _key, outlined, region_of, index)
    main = Function(func.params, body, func.ret_type, func.attrs)
    infer_type(main)
    functions["main"] = main
    return IRModule(functions)


def _value(e: Expr, memo: dict, key_of: Any, outlined: dict, region_of: dict, index: dict) -> Expr:
    """The new expression for old ``e``: itself rebuilt, or its output of the region call."""
    key = key_of(e)
    if key[0] == "node":
        return memo[key]
    call = memo[key]
    outs = outlined[key[1]][2]
    if len(outs) == 1:
        return call
    return TupleGetItem(call, outs.index(index[id(e)]))


def PartitionGraph() -> Pass:  # noqa: N802
    """Outline the regions marked by AnnotateTarget into global functions for their external compilers."""
    return Pass("PartitionGraph", 0, partition_graph)


def external_functions(mod: IRModule) -> dict[str, Function]:
    """The global functions of ``mod`` that belong to an external compiler, by name."""
    return {k: f for k, f in mod.functions.items() if f.attrs.get("Compiler")}


def partition_for(mod: IRModule | Function, target: str, params: dict[str, Any] | None = None) -> IRModule:
    """The usual sequence for one external target: bind the weights (so ``is_constant()`` sees them),
    InferType, SimplifyInference and FoldConstant, then MergeComposite with the target's pattern table,
    AnnotateTarget and PartitionGraph."""
    if isinstance(mod, Expr):
        mod = IRModule.from_expr(mod)
    main = T.bind_params(mod["main"], params or {})
    seq = T.Sequential([T.InferType(), T.SimplifyInference(), T.FoldConstant(),
                        MergeComposite(get_pattern_table(target)), AnnotateTarget([target]), PartitionGraph()])
    with T.PassContext(opt_level=3):
        return seq(IRModule({**mod.functions, "main": main}))


def is_external_call(node: Expr) -> bool:
    """A call of a function partitioned out for an external compiler."""
    return isinstance(node, Call) and isinstance(node.op, Function) and bool(node.op.attrs.get("Compiler"))


__all__ = [
    "AnnotateTarget", "MergeComposite", "PartitionGraph", "annotate_target", "external_functions",
    "is_external_call", "merge_composite", "partition_for", "partition_graph",
]
