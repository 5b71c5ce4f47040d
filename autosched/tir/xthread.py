"""Cross-thread reductions: a reduction loop bound to a ``threadIdx`` (after ``rfactor``, as in TVM's reduction
tutorial) is reduced by the threads of a block together.

Each thread combines its share into a private accumulator; the accumulators go to a shared buffer (one row
per group of threads that reduce together: the stage's other thread-bound loops); a tree of halving steps
combines the row; the stage's store then writes the row's first element (every thread of the group writes the
same value unless ``set_store_predicate`` picks one). Each phase is a loop bound to the same ``threadIdx``, so a
GPU runs the phases one after another for the whole block (``prepare_kernel`` puts a ``__syncthreads()``
between them, since each reads the shared writes of the one before), and the CPU's serial view of the grid
(``serialize_bindings``) runs every thread through one phase before the next: the same result.

The stage is computed at the root, or (in ``shared`` scope) at a loop of the stage that reads it: a softmax's
row max and sum at the row's block loop, read by all the block's threads after a barrier.
"""

from __future__ import annotations

from typing import Any

from autosched.errors import ScheduleError
from autosched.te import expr as E
from autosched.te.expr import Expr, IntImm, Var
from autosched.te.stage import leaf_pos
from autosched.tir import stmt as S
from autosched.tir.arith import conj


def cross_thread_leaf(st: Any) -> int | None:
    """Position of the stage's reduction loop bound to a threadIdx, if any."""
    for k, iv in enumerate(st.leaf_iter_vars):
        if iv.kind == "reduce" and st.iter_attrs.get(iv, "").startswith("thread:threadIdx"):
            return k
    return None


def emit_cross_thread(lw: Any, st: Any, xt: int) -> S.Stmt:
    """The loop nest of stage ``st`` whose leaf ``xt`` is a reduction loop bound to a threadIdx (``lw`` is the
    lowerer, for its bound inference and emission helpers)."""
    info = lw.infos[id(st)]
    leaves = st.leaf_iter_vars
    n = len(leaves)
    red = lw.eff_body[id(st)]
    iv_x = leaves[xt]
    tag = st.iter_attrs[iv_x].split(":", 1)[1]
    where = f"cross-thread reduction of stage '{st.name}' over loop '{iv_x.name}' (bound to {tag})"
    if not isinstance(red, E.Reduce) or len(red.sources) > 1:
        raise ScheduleError(f"{where}: only a reduction of one value can be reduced across threads")
    for k, iv in enumerate(leaves):
        if k < xt and iv.kind == "reduce":
            raise ScheduleError(f"{where}: reduction loop '{iv.name}' runs outside it; make the thread-bound loop "
                                f"the outermost reduction loop (reorder)")
        if k > xt and iv.kind != "reduce":
            raise ScheduleError(f"{where}: spatial loop '{iv.name}' runs inside it; reorder it outside")
        if k != xt and iv.kind == "reduce" and st.iter_attrs.get(iv, "").startswith("thread:"):
            raise ScheduleError(f"{where}: reduction loop '{iv.name}' is bound too; bind one reduction loop")
    if st.attach_type == "scope" and st.scope != "shared":
        raise ScheduleError(f"{where}: the stage is computed at a loop of '{st.attach_stage.name}' in "
                            f"'{st.scope}' scope, so the threads that read its result would not see it: "
                            f"set_scope('shared') (one result per block, visible to all its threads)")
    if len(info.buffers) > 1:
        raise ScheduleError(f"{where}: a stage with several outputs cannot be reduced across threads")
    nthreads = info.extent[iv_x]
    if not isinstance(nthreads, IntImm):
        raise ScheduleError(f"{where}: its extent {nthreads} is not a constant")
    N = nthreads.value
    rmap = lw.root_index(st, info)
    out_idx = [info.value[ax] if info.local else rmap[ax.var] for ax in st.op.axis]  # local: its region's index
    dtype = st.op.dtype

    # every bound (split tails) of the stage: spatial ones guard the final store, all guard each step
    conds: list[Expr] = []
    bounded = list(st.op.axis) + list(st.op.reduce_axis)
    bounded += [rel.parent for rel in st.relations if hasattr(rel, "parent")]
    for ax in bounded:
        if info.value[ax] is ax.var:
            continue
        if not info.simp.proves_lt(info.value[ax], info.extent[ax]):
            conds.append(info.simp.run(info.value[ax] < info.extent[ax]))
    reduce_vars = {iv.var for iv in leaves if iv.kind == "reduce"}
    spatial_conds = [c for c in conds if not (E.free_vars(c) & reduce_vars)]

    acc = S.Buffer(f"{st.name}.acc", [IntImm(1)], dtype, "local")
    zero = [IntImm(0)]
    src = lw.load_expr(red.source, rmap)
    step: S.Stmt = S.BufferStore(acc, red.combiner.combine(S.BufferLoad(acc, zero), src), zero)
    if red.condition is not None:
        step = S.IfThenElse(lw.load_expr(red.condition, rmap), step)
    if conds:
        step = S.IfThenElse(conj(conds), step)

    attached: dict[int, list] = {}
    for c in lw.compute_stages:
        if c.attach_type == "scope" and c.attach_stage is st:
            attached.setdefault(leaf_pos(st, c.attach_ivar), []).append(c)

    def wrap(level: int, parts: list[S.Stmt]) -> S.Stmt:
        content = S.seq([lw.emit(c) for c in attached.get(level, [])] + parts)
        for c in reversed(attached.get(level, [])):
            cinfo = lw.infos[id(c)]
            if cinfo.local:
                for k, b in enumerate(cinfo.buffers):
                    if (id(c), k) not in lw.out_buf:
                        content = S.Allocate(b, content)
        return content

    stmt = step
    for level in range(n - 1, xt, -1):
        stmt = lw.make_for(st, leaves[level], info.extent[leaves[level]], wrap(level, [stmt]))

    # the groups of threads that reduce together: the stage's other threadIdx-bound loops
    row: Expr = IntImm(0)
    rows = 1
    for k in range(xt):
        ann = st.iter_attrs.get(leaves[k], "")
        if ann.startswith("thread:threadIdx"):
            if ann == "thread:" + tag:
                raise ScheduleError(f"{where}: loop '{leaves[k].name}' outside it is bound to {tag} too")
            ext = info.extent[leaves[k]]
            if not isinstance(ext, IntImm):
                raise ScheduleError(f"{where}: thread loop '{leaves[k].name}' has extent {ext}, not a constant")
            row = row * ext.value + leaves[k].var if rows > 1 else leaves[k].var
            rows *= ext.value
    red_buf = S.Buffer(f"{st.name}.red", [IntImm(rows), IntImm(N)], dtype, "shared")

    def at(v: Expr) -> list[Expr]:
        return [row, v]

    phase1 = S.seq([wrap(xt, [S.BufferStore(acc, red.combiner.identity(dtype), zero), stmt,
                               S.BufferStore(red_buf, S.BufferLoad(acc, zero), at(iv_x.var))])])
    phases: list[S.Stmt] = [S.For(iv_x.var, nthreads, "thread_binding", S.Allocate(acc, phase1), tag)]
    half = 1
    while half < N:
        half *= 2
    half //= 2
    k = 0
    while half >= 1:
        v = Var(f"{iv_x.name}.s{k}")
        cond = E.And(E.LT(v, IntImm(half)), E.LT(v + half, IntImm(N))) if 2 * half > N else E.LT(v, IntImm(half))
        upd = S.BufferStore(red_buf, red.combiner.combine(S.BufferLoad(red_buf, at(v)),
                                                          S.BufferLoad(red_buf, at(v + half))), at(v))
        phases.append(S.For(v, nthreads, "thread_binding", S.IfThenElse(cond, upd), tag))
        half //= 2
        k += 1
    v = Var(f"{iv_x.name}.w")
    store: S.Stmt = S.BufferStore(info.buffer, S.BufferLoad(red_buf, at(IntImm(0))), out_idx)
    final_conds = list(spatial_conds)
    pred = lw.store_predicate(st, {tag: v})
    if pred is not None:
        final_conds.append(pred)
    if final_conds:
        store = S.IfThenElse(conj(final_conds), store)
    phases.append(S.For(v, nthreads, "thread_binding", store, tag))
    stmt = S.Allocate(red_buf, S.SeqStmt(phases))
    for level in range(xt - 1, -1, -1):
        stmt = lw.make_for(st, leaves[level], info.extent[leaves[level]], wrap(level, [stmt]))
    return stmt
