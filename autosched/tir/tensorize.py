"""Lowering of ``Stage.tensorize``: the loops of a stage from the tensorized axis inward become the statement
of a tensor intrinsic, its buffers bound to the regions of the stage's inputs and output those loops cover.

Each intrinsic buffer becomes a view of the real buffer: the region's strides, and the region's start as its
element offset, so the intrinsic's loads and stores, its ``access_ptr`` and its symbolic ``strides`` /
``elem_offset`` all read the real memory. A reduction whose outer loops stay outside the tensorized ones runs
the intrinsic's reset before them and its update inside them.
"""

from __future__ import annotations

import math
from typing import Any

from autosched.errors import ScheduleError
from autosched.te import expr as E
from autosched.te.expr import Expr, IntImm
from autosched.te.intrin import shape_of_expr
from autosched.te.stage import leaf_pos
from autosched.tir import stmt as S
from autosched.tir.arith import conj, interval, linear, simplify
from autosched.tir.extern import bind_placeholder, dense_strides, rebind_buffers
from autosched.tir.wmma import is_fragment_scope


def _same(a: Expr, b: Expr) -> bool:
    d = simplify(a - b)
    return isinstance(d, IntImm) and d.value == 0


def _view(where: str, ph: S.Buffer, actual: S.Buffer, lo: list[Expr], ext: list[Expr], bmap: dict,
          vmap: dict) -> None:
    """Bind intrinsic buffer ``ph`` to the region (``lo``, ``ext``) of ``actual``."""
    if is_fragment_scope(actual.scope):
        _fragment_view(where, ph, actual, lo, ext, bmap, vmap)
        return
    strides = list(actual.strides or dense_strides(actual.shape))
    dims = list(range(len(actual.shape)))
    while len(dims) > len(ph.shape) and _same(ext[dims[0]], IntImm(1)):
        dims.pop(0)
    if len(dims) != len(ph.shape) or not all(_same(ext[d], n) for d, n in zip(dims, ph.shape)):
        raise ScheduleError(
            f"{where}: the loops cover [{', '.join(map(str, ext))}] of '{actual.name}', but the intrinsic's buffer "
            f"'{ph.name}' has shape [{', '.join(map(str, ph.shape))}]")
    offset: Expr = actual.elem_offset if actual.elem_offset is not None else IntImm(0)
    for d, start in enumerate(lo):
        offset = offset + start * strides[d]
    offset = simplify(offset)
    view_strides = [strides[d] for d in dims]
    if ph.strides is None and not all(_same(a, b) for a, b in zip(view_strides, dense_strides(ph.shape))):
        raise ScheduleError(
            f"{where}: the region of '{actual.name}' has strides [{', '.join(map(str, view_strides))}], but the "
            f"intrinsic's buffer '{ph.name}' is declared dense; declare it with strides=[te.var(...), ..., 1]")
    if ph.strides is not None:
        for mine, real in zip(ph.strides, view_strides):
            if not isinstance(mine, E.Var) and not _same(mine, real):
                raise ScheduleError(f"{where}: buffer '{ph.name}' has stride {mine} where '{actual.name}' has {real}")
    if not isinstance(ph.elem_offset, E.Var) and not _same(ph.elem_offset or IntImm(0), offset):
        raise ScheduleError(
            f"{where}: the region of '{actual.name}' starts at element {offset}, but the intrinsic's buffer "
            f"'{ph.name}' starts at {ph.elem_offset or 0}; declare its buffers with offset_factor "
            f"(default_buffer_params={{'offset_factor': 1}}) so they can start anywhere")
    bmap[ph] = S.Buffer(ph.name, ph.shape, ph.dtype, actual.scope, view_strides, offset, base=actual)
    bind_placeholder(ph, actual, vmap, offset, view_strides)


def _tile_bound(value: Expr, extent: Expr, inner: dict) -> Expr | None:
    """``value < extent`` without the tensorized loops (``inner``: variable -> (first, last)) where that is the same
    condition: the rest of ``value`` and ``extent`` are multiples of some g and the inner part stays in
    [0, g) (48 rows in 16-row tiles: ``32 * b + 16 * w + r < 48`` is ``32 * b + 16 * w < 48``); else None."""
    if not isinstance(extent, IntImm):
        return None
    lin = linear(simplify(value))
    g = extent.value
    outer: Expr = IntImm(lin.const, value.dtype)
    g = math.gcd(g, lin.const)
    low = high = 0
    for c, atom in lin.terms.values():
        if isinstance(atom, E.Var) and atom in inner:
            first, last = inner[atom]  # inclusive
            if not (isinstance(first, IntImm) and isinstance(last, IntImm)):
                return None
            lo, hi = c * first.value, c * last.value
            low, high = low + min(lo, hi), high + max(lo, hi)
        elif E.free_vars(atom) & inner.keys():
            return None
        else:
            g = math.gcd(g, c)
            outer = outer + atom * c
    if g <= 0 or low < 0 or high >= g:
        return None
    return simplify(E.LT(outer, extent))


def _fragment_view(where: str, ph: S.Buffer, actual: S.Buffer, lo: list[Expr], ext: list[Expr], bmap: dict,
                   vmap: dict) -> None:
    """Bind ``ph`` to a tile of a tensor-core fragment buffer. Such a buffer is laid out in whole tiles (each
    rows x columns tile of its last two dimensions contiguous, the tiles row-major), whatever its shape: only
    the warp matrix builtins touch it, each naming a tile by its number (``elem_offset // (rows * columns)``)."""
    rows, cols = (int(d.value) for d in ph.shape)  # type: ignore[attr-defined]
    dims = [int(d.value) if isinstance(d, IntImm) else None for d in actual.shape]
    if len(dims) < 2 or None in dims or dims[-2] % rows or dims[-1] % cols:
        raise ScheduleError(f"{where}: fragment buffer '{actual.name}' has shape [{', '.join(map(str, actual.shape))}]"
                            f"; its last two dimensions must be constant multiples of the {rows}x{cols} tile")
    if not all(_same(e, IntImm(1)) for e in ext[:-2]) or not (_same(ext[-2], IntImm(rows))
                                                               and _same(ext[-1], IntImm(cols))):
        raise ScheduleError(f"{where}: the loops cover [{', '.join(map(str, ext))}] of fragment '{actual.name}', "
                            f"not one {rows}x{cols} tile")
    for start, n in ((lo[-2], rows), (lo[-1], cols)):
        if not _same(E.FloorMod(start, IntImm(n)), IntImm(0)):
            raise ScheduleError(f"{where}: a tile of fragment '{actual.name}' starts at {start}, not at a multiple "
                                f"of {n}")
    tile: Expr = IntImm(0)
    for d in range(len(dims) - 2):
        tile = tile * dims[d] + lo[d]
    tile = (tile * (dims[-2] // rows) + E.FloorDiv(lo[-2], IntImm(rows))) * (dims[-1] // cols) + \
        E.FloorDiv(lo[-1], IntImm(cols))
    offset = simplify(tile * (rows * cols))
    bmap[ph] = S.Buffer(ph.name, ph.shape, ph.dtype, actual.scope, None, offset, base=actual)
    bind_placeholder(ph, actual, vmap, offset, dense_strides(ph.shape))


def emit_tensorize(lw: Any, st: Any) -> S.Stmt:
    """The loop nest of ``st`` with the loops from its tensorized axis inward replaced by the intrinsic."""
    iv, intrin = st.tensorized
    leaves = st.leaf_iter_vars
    where = f"tensorize of stage '{st.name}' at axis '{iv.name}' with '{intrin.name}'"
    if all(iv is not x for x in leaves):
        raise ScheduleError(f"{where}: '{iv.name}' is no longer one of its loops (split or fused after tensorize)")
    pt = leaf_pos(st, iv)
    info = lw.infos[id(st)]
    rmap = lw.root_index(st, info)
    body = lw.eff_body[id(st)]
    if len(info.buffers) > 1:
        raise ScheduleError(f"{where}: a stage with several outputs cannot be tensorized")
    reads = lw.reads(st)
    if len(reads) != len(intrin.inputs) or shape_of_expr(body, reads) != shape_of_expr(intrin.op.bodies[0],
                                                                                        intrin.inputs):
        raise ScheduleError(f"{where}: the stage computes {body}, which is not the intrinsic's "
                            f"{intrin.op.bodies[0]} (the same operations on the inputs in the same order)")
    inner = {x.var for x in leaves[pt:]}
    relax = {v: lw.loop_range[v] for v in inner}

    # split tails must stay outside the intrinsic; the others guard the loops they depend on
    guards: dict[int, list[Expr]] = {}
    pos_of = {x.var: k for k, x in enumerate(leaves)}
    bounded = list(st.op.axis) + list(st.op.reduce_axis) + [r.parent for r in st.relations if hasattr(r, "parent")]
    for ax in bounded:
        if info.value[ax] is ax.var or info.simp.proves_lt(info.value[ax], info.extent[ax]):
            continue
        c = info.simp.run(info.value[ax] < info.extent[ax])
        vs = [pos_of[v] for v in E.free_vars(c) if v in pos_of]
        if any(v >= pt for v in vs):  # a tail at a tile boundary is decided by the loops outside the tiles
            c = _tile_bound(info.value[ax], info.extent[ax], {x.var: lw.loop_range[x.var] for x in leaves[pt:]})
            vs = [pos_of[v] for v in E.free_vars(c) if v in pos_of] if c is not None else [pt]
        if any(v >= pt for v in vs):
            raise ScheduleError(f"{where}: axis '{ax.name}' does not split evenly inside the tensorized loops "
                                f"(a tail would need a guard inside the intrinsic); choose factors that divide it")
        guards.setdefault(max(vs) if vs else -1, []).append(c)

    def region(indices: list[Expr]) -> tuple[list[Expr], list[Expr]]:
        lo, ext = [], []
        for i in indices:
            r = interval(simplify(i), relax)
            if r is None:
                raise ScheduleError(f"{where}: cannot bound the index {i} over the tensorized loops")
            e = simplify(r[1] - r[0] + 1)
            lo.append(r[0])
            ext.append(e)
        return lo, ext

    bmap: dict = {}
    vmap: dict = {}
    n_in = len(intrin.inputs)
    for k, t in enumerate(reads):
        boxes = []
        for node in E.walk(body):
            if isinstance(node, E.TensorLoad) and node.tensor is t:
                load = lw.buffer_load(E.TensorLoad(t, [E.substitute(i, rmap) for i in node.indices]))
                boxes.append((load.buffer, region(list(load.indices))))
        actual, (lo, ext) = boxes[0]
        for _, (lo2, ext2) in boxes[1:]:
            if not all(_same(a, b) for a, b in zip(lo + ext, lo2 + ext2)):
                raise ScheduleError(f"{where}: '{t.name}' is read at two different regions; the intrinsic's "
                                    f"buffer can be bound to one")
        _view(where, intrin.buffers[k], actual, lo, ext, bmap, vmap)
    out_idx = [info.value[ax] if info.local else rmap[ax.var] for ax in st.op.axis]
    lo, ext = region(out_idx)
    _view(where, intrin.buffers[n_in], info.buffer, lo, ext, bmap, vmap)

    is_red = isinstance(body, E.Reduce)
    outer_red = [k for k in range(pt) if leaves[k].kind == "reduce"]
    init = None
    if is_red and outer_red:
        if intrin.reduce_init is None or intrin.reduce_update is None:
            raise ScheduleError(f"{where}: reduction loops '{leaves[outer_red[0]].name}'... stay outside the "
                                f"intrinsic, so it needs a reset and an update (fcompute returning (body, reset, "
                                f"update))")
        p0 = outer_red[0]
        init = rebind_buffers(intrin.reduce_init, bmap, vmap)
        for k in reversed(range(p0, pt)):  # spatial loops among them: the reset runs in a nest of its own
            if leaves[k].kind != "reduce":
                if k in guards:
                    raise ScheduleError(f"{where}: spatial loop '{leaves[k].name}' runs between the outer "
                                        f"reduction loops and the tensorized ones with a split tail; reorder it "
                                        f"outside them or choose factors that divide it")
                init = lw.make_for(st, leaves[k], info.extent[leaves[k]], init)
        stmt = rebind_buffers(intrin.reduce_update, bmap, vmap)
    else:
        p0 = None
        if intrin.body is not None:
            stmt = rebind_buffers(intrin.body, bmap, vmap)
        elif is_red and intrin.reduce_init is not None and intrin.reduce_update is not None:
            stmt = S.seq([rebind_buffers(intrin.reduce_init, bmap, vmap),
                          rebind_buffers(intrin.reduce_update, bmap, vmap)])
        else:
            raise ScheduleError(f"{where}: the intrinsic has no body statement")

    attached: dict[int, list] = {}
    for c in lw.compute_stages:
        if c.attach_type == "scope" and c.attach_stage is st:
            lvl = leaf_pos(st, c.attach_ivar)
            if lvl >= pt:
                raise ScheduleError(f"{where}: stage '{c.name}' is computed at loop '{c.attach_ivar.name}', which "
                                    f"the intrinsic replaces; compute it at an outer loop")
            attached.setdefault(lvl, []).append(c)
    shared = [lvl for lvl, cs in attached.items() if any(lw.holds_shared(c) for c in cs)]
    if shared:  # shared copies inside are every thread's work: the guards around them move onto the intrinsic
        moved = [c for lvl in sorted(guards) if lvl <= max(shared) for c in guards.pop(lvl)]
        if moved:
            stmt = S.IfThenElse(conj(moved), stmt)
            if init is not None:
                init = S.IfThenElse(conj(moved), init)
    for level in range(pt - 1, -1, -1):
        parts: list[S.Stmt] = [lw.emit(c) for c in attached.get(level, [])]
        if init is not None and level == p0 - 1:
            parts.append(init)
        parts.append(stmt)
        content = S.seq(parts)
        for c in reversed(attached.get(level, [])):
            cinfo = lw.infos[id(c)]
            if cinfo.local:
                for k, b in enumerate(cinfo.buffers):
                    if (id(c), k) not in lw.out_buf:
                        content = S.Allocate(b, content)
        if level in guards:
            content = S.IfThenElse(conj(guards[level]), content)
        stmt = lw.make_for(st, leaves[level], info.extent[leaves[level]], content)
    if init is not None and p0 == 0:
        stmt = S.seq([init, stmt])
    if -1 in guards:
        stmt = S.IfThenElse(conj(guards[-1]), stmt)
    return stmt
