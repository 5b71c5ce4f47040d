"""Schedule primitives that rewrite the dataflow: ``rfactor`` (a reduction split into a factored stage and a
smaller reduction over its result), ``cache_write`` laid out by the loops, ``transform_layout`` (a tensor
stored in blocked dimensions).

They build new operations from a stage's current ones; :mod:`autosched.te.schedule` records each call as a
step and installs the operations, so a replayed trace rewrites the same way.
"""

from __future__ import annotations

from typing import Any

from autosched.errors import ScheduleError
from autosched.te import expr as E
from autosched.te.expr import Expr, IntImm, Var
from autosched.te.tensor import ComputeOp, IterVar, Range
from autosched.tir.arith import ceildiv, simplify


def _touched(stage: Any, axis: IterVar) -> set[int]:
    """Ids of the iteration variables derived from the same root axes as ``axis`` (its ancestors through the
    stage's splits and fuses, then every axis derived from those): what TVM's rfactor calls touched."""
    touched = {id(axis)}
    for rel in reversed(stage.relations):  # up: to the root axes
        if hasattr(rel, "fused"):
            if id(rel.fused) in touched:
                touched.update(id(a) for a in rel.axes)
        elif id(rel.outer) in touched or id(rel.inner) in touched:
            touched.add(id(rel.parent))
    for rel in stage.relations:  # down: everything split or fused from them
        if hasattr(rel, "fused"):
            if any(id(a) in touched for a in rel.axes):
                touched.add(id(rel.fused))
        elif id(rel.parent) in touched:
            touched.update((id(rel.outer), id(rel.inner)))
    return touched


def rfactor_ops(stage: Any, axis: IterVar, factor_axis: int) -> tuple[ComputeOp, ComputeOp]:
    """The factored operation (its output has the extent of ``axis`` as a new dimension at ``factor_axis``,
    and reduces over every other reduction loop) and the operation that replaces the stage's (the reduction of
    the factored output over that dimension)."""
    op = stage.op
    where = f"rfactor of stage '{stage.name}' at axis '{axis.name}'"
    if not isinstance(op, ComputeOp) or not isinstance(op.bodies[0], E.Reduce):
        raise ScheduleError(f"{where}: the stage is not a reduction")
    if axis.kind != "reduce":
        raise ScheduleError(f"{where}: '{axis.name}' is a spatial axis; rfactor factors out a reduction axis")
    ndim = len(op.axis)
    pos = factor_axis if factor_axis >= 0 else ndim + 1 + factor_axis
    if not 0 <= pos <= ndim:
        raise ScheduleError(f"{where}: factor_axis {factor_axis} is out of range for {ndim} output dimensions")
    touched = _touched(stage, axis)
    for ax in op.axis:
        if id(ax) in touched:
            raise ScheduleError(f"{where}: it is fused with spatial axis '{ax.name}'; factor a reduction axis")
    # extents of the touched axes, root to leaves (the same rules as lowering's bound inference)
    ext: dict[int, Expr] = {}
    for ax in op.reduce_axis:
        if id(ax) in touched:
            ext[id(ax)] = ax.dom.extent
    mult = _extents_down(stage, ext, touched)
    root = any(a is axis for a in op.reduce_axis)
    if root and not (isinstance(axis.dom.min, IntImm) and axis.dom.min.value == 0):
        raise ScheduleError(f"{where}: its range starts at {axis.dom.min}; rfactor needs a range from 0 "
                            f"(split it and factor a part)")
    # values of the touched axes from the touched leaves, leaves to roots
    val: dict[int, Expr] = {id(iv): iv.var for iv in stage.leaf_iter_vars if id(iv) in touched}
    bound_checks: list[Expr] = []
    for rel in reversed(stage.relations):
        if hasattr(rel, "fused"):
            if id(rel.fused) not in touched:
                continue
            fv, stride = val[id(rel.fused)], IntImm(1)
            for k in range(len(rel.axes) - 1, -1, -1):
                a = rel.axes[k]
                q = fv if stride.value == 1 else E.FloorDiv(fv, stride, fv.dtype)
                val[id(a)] = q if k == 0 else E.FloorMod(q, ext[id(a)], fv.dtype)
                stride = simplify(stride * ext[id(a)])
        elif id(rel.parent) in touched:
            v = simplify(val[id(rel.outer)] * mult[id(rel.parent)] + val[id(rel.inner)])
            val[id(rel.parent)] = v
            exact = (isinstance(ext[id(rel.parent)], IntImm) and isinstance(ext[id(rel.outer)], IntImm)
                     and isinstance(ext[id(rel.inner)], IntImm)
                     and ext[id(rel.outer)].value * ext[id(rel.inner)].value == ext[id(rel.parent)].value)
            if not exact:
                bound_checks.append(E.LT(v, ext[id(rel.parent)]))
    vsub: dict[Var, Expr] = {}
    rf_reduce: list[IterVar] = []
    for ax in op.reduce_axis:
        if id(ax) in touched:
            vsub[ax.var] = simplify(ax.dom.min + val[id(ax)])
        else:
            rf_reduce.append(ax)
    for iv in stage.leaf_iter_vars:
        if id(iv) in touched and iv is not axis:
            rf_reduce.append(IterVar(Range(0, ext[id(iv)]), iv.var, "reduce"))
    factored = IterVar(Range(0, ext[id(axis)]), axis.var, "spatial")
    rf_axes = list(op.axis[:pos]) + [factored] + list(op.axis[pos:])
    red = op.bodies[0]
    cond = red.condition
    for c in bound_checks:
        cond = c if cond is None else E.And(cond, c)
    sources = [E.substitute(x, vsub) for x in red.sources]  # several: a tuple reduction (argmax)
    cond = E.substitute(cond, vsub) if cond is not None else None
    nout = len(sources)
    if not rf_reduce and nout == 1:  # every reduction loop factored out: the factored stage is elementwise
        ident = red.combiner.identity(op.dtype)
        bodies: list[Expr] = [sources[0] if cond is None else E.Select(cond, sources[0], ident)]
    else:
        if not rf_reduce:  # a tuple reduction keeps a Reduce node: over one iteration
            rf_reduce = [IterVar(Range(0, 1), Var(axis.name + ".one"), "reduce")]
        bodies = [E.Reduce(red.combiner, sources[k], rf_reduce, cond, sources=sources, value_index=k)
                  for k in range(nout)]
    rf_op = ComputeOp(op.name + ".rf", rf_axes, bodies if nout > 1 else bodies[0], op.tag, op.attrs)
    # the stage's new operation: a reduction of the factored output over the factored dimension
    new_axes = [IterVar(Range(0, a.dom.extent), Var(a.name), "spatial") for a in op.axis]
    rv = IterVar(Range(0, ext[id(axis)]), Var(axis.name + ".v"), "reduce")
    idx = [a.var for a in new_axes]
    idx.insert(pos, rv.var)
    parts = [rf_op.output(k)[tuple(idx)] for k in range(nout)]
    comb = rename_reducer(red.combiner, {a.var: b.var for a, b in zip(op.axis, new_axes)})
    repl_bodies = [E.Reduce(comb, parts[k], [rv], None, sources=parts, value_index=k) for k in range(nout)]
    repl = ComputeOp(op.name, new_axes, repl_bodies if nout > 1 else repl_bodies[0], op.tag, op.attrs)
    return rf_op, repl


def _extents_down(stage: Any, ext: dict[int, Expr], only: set[int] | None = None) -> dict[int, Expr]:
    """Carry the loop extents in ``ext`` (root axes' to start) down the stage's splits and fuses, as lowering's
    bound inference does, for the relations whose input is in ``only`` (all when None); returns each split
    axis's multiplier of its outer loop (the inner extent)."""
    mult: dict[int, Expr] = {}
    for rel in stage.relations:
        if hasattr(rel, "fused"):
            if only is None or id(rel.fused) in only:
                prod: Expr = IntImm(1)
                for a in rel.axes:
                    prod = simplify(prod * ext[id(a)])
                ext[id(rel.fused)] = prod
        elif only is None or id(rel.parent) in only:
            e = ext[id(rel.parent)]
            if rel.factor is not None:
                ext[id(rel.inner)] = IntImm(min(rel.factor, e.value)) if isinstance(e, IntImm) else IntImm(rel.factor)
                ext[id(rel.outer)] = ceildiv(e, rel.factor)
                mult[id(rel.parent)] = IntImm(rel.factor)
            else:
                inner = ceildiv(e, rel.nparts)
                ext[id(rel.inner)] = inner
                ext[id(rel.outer)] = IntImm(rel.nparts)
                mult[id(rel.parent)] = inner
    return mult


def relayout_cache(stage: Any, scope: str) -> tuple[ComputeOp, ComputeOp]:
    """``cache_write`` of a stage whose spatial axes were already split, fused or reordered (TVM's
    cache_write with relayout): the cache is laid out by the stage's current spatial loops (one dimension per
    loop, in loop order, each of the loop's extent), computed by the original body (guarded where a split has
    a tail); the stage then copies from it. Returns (cache op, the stage's new op)."""
    op = stage.op
    where = f"cache_write of '{stage.name}'"
    red_ids = {id(a) for a in op.reduce_axis}
    for rel in stage.relations:
        ids = [id(rel.fused)] + [id(a) for a in rel.axes] if hasattr(rel, "fused") else [id(rel.parent)]
        if any(i in red_ids for i in ids) or (hasattr(rel, "parent") and rel.parent.kind == "reduce") or (
                hasattr(rel, "fused") and rel.fused.kind == "reduce"):
            raise ScheduleError(f"{where}: its reduction axes are split or fused; a cache can be laid out only by "
                                f"spatial loops (call cache_write before splitting the reduction)")
    ext: dict[int, Expr] = {id(a): a.dom.extent for a in op.axis}
    mult = _extents_down(stage, ext)
    leaves = [iv for iv in stage.leaf_iter_vars if iv.kind != "reduce"]
    new_axis = [IterVar(Range(0, ext[id(iv)]), Var(iv.name + ".c"), "spatial") for iv in leaves]
    # each root axis in the cache's loops (up the relations), with a guard for every uneven split
    val: dict[int, Expr] = {id(iv): n.var for iv, n in zip(leaves, new_axis)}
    checks: list[Expr] = []
    for rel in reversed(stage.relations):
        if hasattr(rel, "fused"):
            fv, stride = val[id(rel.fused)], IntImm(1)
            for k in range(len(rel.axes) - 1, -1, -1):
                a = rel.axes[k]
                q = fv if stride.value == 1 else E.FloorDiv(fv, stride, fv.dtype)
                val[id(a)] = q if k == 0 else E.FloorMod(q, ext[id(a)], fv.dtype)
                stride = simplify(stride * ext[id(a)]) if isinstance(ext[id(a)], IntImm) else stride
        else:
            v = simplify(val[id(rel.outer)] * mult[id(rel.parent)] + val[id(rel.inner)])
            val[id(rel.parent)] = v
            if not (isinstance(ext[id(rel.parent)], IntImm) and isinstance(ext[id(rel.outer)], IntImm)
                    and ext[id(rel.outer)].value * ext[id(rel.inner)].value == ext[id(rel.parent)].value):
                checks.append(E.LT(v, ext[id(rel.parent)]))
    vmap: dict[Var, Expr] = {a.var: val[id(a)] for a in op.axis}
    bodies = list(op.bodies)  # every output of a multi-output compute (a tuple reduction's values too)
    if isinstance(bodies[0], E.Reduce):
        red = bodies[0]
        new_raxis = [IterVar(Range(E.substitute(a.dom.min, vmap), E.substitute(a.dom.extent, vmap)),
                             Var(a.name + ".c"), "reduce") for a in red.axis]
        vmap.update({a.var: b.var for a, b in zip(red.axis, new_raxis)})
        cond = E.substitute(red.condition, vmap) if red.condition is not None else None
        for c in checks:
            cond = c if cond is None else E.And(cond, c)
        sources = [E.substitute(x, vmap) for x in red.sources]
        comb = rename_reducer(red.combiner, {a.var: val[id(a)] for a in op.axis})
        cbodies: list[Expr] = [E.Reduce(comb, sources[b.value_index], new_raxis, cond,
                                        sources if len(sources) > 1 else None, b.value_index) for b in bodies]
    else:
        cbodies = []
        for b in bodies:
            cb = E.substitute(b, vmap)
            for c in checks:
                cb = E.Select(c, cb, E.const(0, cb.dtype))
            cbodies.append(cb)
    multi = len(cbodies) > 1
    cache_op = ComputeOp(f"{op.name}.{scope}", new_axis, cbodies if multi else cbodies[0], op.tag, op.attrs)
    # the stage reads the cache at its loops' values (down the relations from its root axes)
    down: dict[int, Expr] = {id(a): a.var for a in op.axis}
    for rel in stage.relations:
        if hasattr(rel, "fused"):
            f: Expr = IntImm(0)
            for a in rel.axes:
                f = f * ext[id(a)] + down[id(a)]
            down[id(rel.fused)] = simplify(f)
        else:
            p = down[id(rel.parent)]
            down[id(rel.outer)] = E.FloorDiv(p, mult[id(rel.parent)], p.dtype)
            down[id(rel.inner)] = E.FloorMod(p, mult[id(rel.parent)], p.dtype)
    idx = tuple(down[id(iv)] for iv in leaves)
    copies = [cache_op.output(k)[idx] for k in range(len(cbodies))]
    copy = ComputeOp(op.name, op.axis, copies if multi else copies[0], op.tag, op.attrs)
    return cache_op, copy


def rename_reducer(comb: E.CommReducer, vmap: dict) -> E.CommReducer:
    """``comb`` with the variables of ``vmap`` renamed in what it builds: a combiner or identity may read the
    axes of its compute (``te.max(x + y, n)``), which cache_write and rfactor give new variables."""
    if not vmap:
        return comb

    def sub(out: Any) -> Any:
        if isinstance(out, (list, tuple)):
            return type(out)(sub(o) for o in out)
        return E.substitute(out, vmap) if isinstance(out, Expr) else out

    return E.CommReducer(lambda x, y: sub(comb.fcombine(x, y)), lambda *dt: sub(comb.fidentity(*dt)), comb.name)


# ----------------------------------------------------------------- predicates as data
_BINOPS = {cls.__name__: cls for cls in (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max, E.EQ, E.NE,
                                         E.LT, E.LE, E.GT, E.GE, E.And, E.Or)}


def predicate_to_json(e: Expr, name_var: Any) -> list:
    """An integer/boolean expression as JSON; ``name_var(var)`` gives the JSON reference of each variable
    (a loop of the stage, a thread index) or raises ScheduleError."""
    if isinstance(e, IterVar):
        e = e.var
    if isinstance(e, IntImm):
        return ["int", e.value, e.dtype]
    if isinstance(e, Var):
        return name_var(e)
    if isinstance(e, E.Not):
        return ["Not", predicate_to_json(e.a, name_var)]
    cls = type(e).__name__
    if cls in _BINOPS and type(e) is _BINOPS[cls]:
        return [cls, predicate_to_json(e.a, name_var), predicate_to_json(e.b, name_var)]
    raise ScheduleError(f"a store predicate is integer arithmetic, comparisons and logic on loop variables and "
                        f"thread indices; {e} ({cls}) is none of those")


def predicate_from_json(data: list, var_of: Any) -> Expr:
    """The expression :func:`predicate_to_json` wrote; ``var_of(ref)`` resolves a variable reference."""
    head = data[0]
    if head == "int":
        return IntImm(data[1], data[2])
    if head == "Not":
        return E.Not(predicate_from_json(data[1], var_of))
    if head in _BINOPS:
        a, b = predicate_from_json(data[1], var_of), predicate_from_json(data[2], var_of)
        return _BINOPS[head](a, b, a.dtype)
    return var_of(data)


def layout_dims(op: ComputeOp, mapping: Any) -> tuple[str, ...]:
    """The new dimensions of ``op``'s tensor that ``mapping`` (``lambda n, c, y, x: [n, c // 8, y, x, c % 8]``)
    gives, as the trace stores them: ``"i"`` (axis i whole), ``"i//b"`` and ``"i%b"`` (its blocks of ``b``,
    both present, ``b`` dividing its extent), each axis used once."""
    where = f"transform_layout of '{op.name}'"
    vars_ = [Var(a.var.name) for a in op.axis]
    try:
        out = list(mapping(*vars_))
    except TypeError as e:
        raise ScheduleError(f"{where}: the mapping takes the {len(vars_)} indices of the tensor and returns a "
                            f"list of new indices ({e})") from None
    dims = []
    for e in out:
        e = E.convert(e)
        v = e.a if isinstance(e, (E.FloorDiv, E.FloorMod)) else e
        if not (isinstance(v, Var) and any(v is x for x in vars_)) or (
                v is not e and not isinstance(e.b, IntImm)):
            raise ScheduleError(f"{where}: new index {e} is not an index, index // constant or index % constant")
        i = next(k for k, x in enumerate(vars_) if x is v)
        dims.append(str(i) if v is e else f"{i}{'//' if isinstance(e, E.FloorDiv) else '%'}{e.b.value}")
    return tuple(dims)


def _parse_dims(op: ComputeOp, dims: tuple[str, ...], where: str) -> list[tuple[int, str, int]]:
    """``(axis, part, block)`` per new dimension (part: "whole", "outer" or "inner"), checked: every axis once,
    whole or as both blocks of one size that divides it."""
    parsed, seen = [], {}
    for d in dims:
        for sep, part in (("//", "outer"), ("%", "inner")):
            if sep in d:
                a, b = d.split(sep)
                parsed.append((int(a), part, int(b)))
                break
        else:
            parsed.append((int(d), "whole", 1))
    for axis, part, block in parsed:
        if not 0 <= axis < len(op.axis):
            raise ScheduleError(f"{where}: no axis {axis} (the tensor has {len(op.axis)})")
        seen.setdefault(axis, []).append((part, block))
    for axis, parts in seen.items():
        extent = op.axis[axis].dom.extent
        name = op.axis[axis].var.name
        if sorted(p for p, _ in parts) not in (["whole"], ["inner", "outer"]):
            raise ScheduleError(f"{where}: axis '{name}' must appear once whole, or once as {name} // b and once "
                                f"as {name} % b; got {[p for p, _ in parts]}")
        block = parts[0][1]
        if parts[0][0] != "whole" and (parts[1][1] != block or block < 1 or not isinstance(extent, IntImm)
                                       or extent.value % block):
            raise ScheduleError(f"{where}: axis '{name}' (extent {extent}) splits into blocks of one size that "
                                f"divides it; got {[b for _, b in parts]}")
    if len(seen) != len(op.axis):
        missing = [op.axis[i].var.name for i in range(len(op.axis)) if i not in seen]
        raise ScheduleError(f"{where}: axes {missing} are missing from the new layout")
    return parsed


def transform_layout_op(op: ComputeOp, dims: tuple[str, ...]) -> tuple[ComputeOp, Any]:
    """``op`` computed over its new dimensions (each element where the old indices put it), and the function
    that maps old indices (expressions) to new ones, for the readers."""
    where = f"transform_layout of '{op.name}'"
    if isinstance(op.bodies[0], E.Reduce):
        raise ScheduleError(f"{where}: it is a reduction; cache_write it after splitting and reordering its loops "
                            f"(the cache is laid out by them), or transform the layout of a copy")
    parsed = _parse_dims(op, dims, where)
    new_axis = []
    for axis, part, block in parsed:
        a = op.axis[axis]
        if part == "whole":
            extent, name = a.dom.extent, a.var.name
        elif part == "outer":
            extent, name = IntImm(a.dom.extent.value // block), a.var.name + ".outer"
        else:
            extent, name = IntImm(block), a.var.name + ".inner"
        new_axis.append(IterVar(Range(0, extent), Var(name), "spatial"))
    old: dict[int, Expr] = {}
    for (axis, part, block), n in zip(parsed, new_axis):
        if part == "whole":
            old[axis] = n.var
        else:
            term = n.var * IntImm(block) if part == "outer" else n.var
            old[axis] = term if axis not in old else simplify(old[axis] + term)
    vmap: dict[Var, Expr] = {a.var: old[i] for i, a in enumerate(op.axis)}
    bodies = [E.substitute(b, vmap) for b in op.bodies]
    new = ComputeOp(op.name, new_axis, bodies if len(bodies) > 1 else bodies[0], op.tag, op.attrs)

    def remap(indices: list[Expr]) -> list[Expr]:
        out = []
        for axis, part, block in parsed:
            i = indices[axis]
            out.append(i if part == "whole" else
                       simplify(E.FloorDiv(i, IntImm(block, i.dtype), i.dtype) if part == "outer"
                                else E.FloorMod(i, IntImm(block, i.dtype), i.dtype)))
        return out

    return new, remap
