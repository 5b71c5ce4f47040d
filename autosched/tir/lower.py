"""Lowering: a scheduled te computation becomes a loop nest (PrimFunc).

The steps, in order:

1. bind arguments to buffers and inline ``compute_inline`` stages into readers;
2. bound inference, consumers first: each stage gets the region of its output
   that its readers need inside its attach point (the whole tensor at the
   root), its leaf loop extents, and each root axis as an expression of the
   leaf loops;
3. emission: every stage's loop nest, with attached stages (and their
   buffers) placed at the start of the loop they are attached to, reduction
   initialisation placed just outside the first reduction loop, and guards
   for split tails and over-approximated regions placed at the innermost loop
   they depend on;
4. simplification with the loop ranges, which removes the guards that can be
   proven and folds index arithmetic;
5. loop partitioning (:mod:`autosched.tir.partition`): guards linear in a loop
   variable (padding read in place, split tails) become loop bounds or confine
   themselves to the first and last iterations.
"""

from __future__ import annotations

from collections.abc import Sequence

from autosched.errors import LoweringError, ScheduleError
from autosched.te import expr as E
from autosched.te.expr import DTYPE_BYTES, Expr, IntImm, Var
from autosched.te.extern import ExternOp
from autosched.te.scan import ScanOp
from autosched.te.stage import Schedule, SplitRel, Stage, leaf_pos
from autosched.te.tensor import PlaceholderOp, Tensor
from autosched.tir import stmt as S
from autosched.tir.arith import ANY_RANGES, Simplifier, ceildiv, conj, interval, simplify, skey
from autosched.tir.extern import bind_placeholder, dense_strides, rebind_buffers
from autosched.tir.partition import partition_loops
from autosched.tir.tensorize import emit_tensorize
from autosched.tir.transform import free_vars_stmt, simplify_stmt
from autosched.tir.xthread import cross_thread_leaf, emit_cross_thread
from autosched.transform import PassContext

_KIND = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}


class _Info:
    """What bound inference learned about one stage."""

    __slots__ = ("region", "extent", "value", "buffer", "buffers", "local", "mult", "simp", "spatial_root", "db")

    def __init__(self):
        self.region: list[tuple[Expr, Expr]] = []  # per output dim: (min, extent)
        self.extent: dict = {}  # IterVar -> loop extent
        self.value: dict = {}  # root IterVar -> offset expression in leaf loop vars
        self.buffer: S.Buffer | None = None
        self.buffers: list[S.Buffer] = []  # one per output of the operation (buffer is the first)
        self.local = False  # buffer holds only the region (indices offset by region min)
        self.simp: Simplifier | None = None  # the simplifier under the leaf loop ranges (inference, guards)
        self.spatial_root: dict = {}  # spatial root var -> its index in the stage's loops (region min + offset)
        self.db: Expr | None = None  # double_buffer: which of the two copies (the attach loop's parity)


def lower(sch: Schedule, args: Sequence[Tensor], name: str = "main", *, partition: bool = True,
          binds: dict | None = None) -> S.PrimFunc:
    """Lower ``sch`` with ``args`` (the kernel's tensors, in calling order) to a PrimFunc. ``partition=False``
    skips loop partitioning: the same loops with their guards still inside, for readers that need the
    structure, not the code (the cost model's features), at a fraction of the time. ``binds`` maps argument
    tensors to buffers declared with ``tir.decl_buffer`` (their names, and strides that the call's dense arrays
    have)."""
    lw = _Lowerer(sch, args, name)
    lw.binds = dict(binds or {})
    func = lw.run(partition)
    ctx = PassContext.current()
    step = ctx.unroll_max_step  # TVM's tir.UnrollLoop auto_max_step
    if step:
        func = S.PrimFunc(func.name, func.params, func.scalar_params, _auto_unroll(func.body, step), dict(func.attrs))
    for user_pass in ctx.lower_passes:  # TVM's tir.add_lower_pass
        func = user_pass(func)
    return func


class _Lowerer:
    def __init__(self, sch: Schedule, args: Sequence[Tensor], name: str):
        if not isinstance(sch, Schedule):
            raise TypeError(f"lower expects a te.Schedule, got {type(sch).__name__}")
        if isinstance(args, Tensor):
            args = [args]
        self.sch = sch
        self.name = name
        self.binds: dict = {}
        self.args = list(args)
        self.arg_buf: dict[int, S.Buffer] = {}  # id(stage) -> buffer (of its first output that is an argument)
        self.out_buf: dict[tuple[int, int], S.Buffer] = {}  # (id(stage), output index) -> argument buffer
        self.infos: dict[int, _Info] = {}
        self.eff_body: dict[int, Expr] = {}
        self.loop_range: dict[Var, tuple[Expr, Expr]] = {}
        self.root_maps: dict[int, dict] = {}  # id(stage) -> root_index
        self.read_lists: dict[int, list[Tensor]] = {}  # id(stage) -> reads (eff_body is fixed once built)

    # ----------------------------------------------------------------- helpers
    def stage_of(self, t: Tensor) -> Stage:
        st = self.sch.stage_map.get(t.op)
        if st is None:
            raise LoweringError(f"tensor '{t.name}' is read but is not part of the schedule")
        return st

    def run(self, partition: bool = True) -> S.PrimFunc:
        sch = self.sch
        names = set()
        explicit: list[tuple[int, Var]] = []  # scalar arguments (te.var) and their positions in the call
        for pos, t in enumerate(self.args):
            if isinstance(t, Var):
                if any(t is v for _, v in explicit):
                    raise LoweringError(f"variable '{t.name}' appears twice in the argument list")
                explicit.append((pos, t))
        self.args = [t for t in self.args if not isinstance(t, Var)]
        for t in self.args:
            if not isinstance(t, Tensor):
                raise TypeError(f"lower: arguments must be te tensors or scalar te.var, got {t!r}")
            # a placeholder the computation does not read may be listed, as TVM allows (full_like's input): a
            # parameter the kernel neither reads nor writes
            st = sch.stage_map.get(t.op) if isinstance(t.op, PlaceholderOp) else sch[t]
            st = t.op if st is None else st
            vi = getattr(t, "value_index", 0)
            if (id(st), vi) in self.out_buf:
                raise LoweringError(f"tensor '{t.name}' appears twice in the argument list")
            # an inlined tensor may be listed, as TVM allows: it is a parameter the kernel neither reads nor writes
            bname = t.name
            while bname in names:
                bname += "_"
            names.add(bname)
            buf = self.out_buf[(id(st), vi)] = self.bound_buffer(t) or S.Buffer(bname, t.shape, t.dtype)
            self.arg_buf.setdefault(id(st), buf)
        self.compute_stages = [s for s in sch.stages if not s.is_placeholder and s.attach_type != "inline"]
        # te.scan: its init and update stages write the scan's output buffers, which its states read
        self.scan_alias: dict[int, tuple[Stage, int]] = {}  # id(init/update/state stage) -> (scan stage, k)
        for st in sch.stages:
            if isinstance(st.op, ScanOp):
                for k in range(st.op.num_outputs):
                    for t in (st.op.init[k], st.op.update[k], st.op.state_placeholder[k]):
                        self.scan_alias[id(sch[t])] = (st, k)
        for st in sch.stages:
            if st.is_placeholder:
                continue
            if st.attach_type != "inline":
                self.eff_body[id(st)] = self.effective_body(st)
        for st in self.compute_stages:
            for t in self.reads(st):
                rs = self.stage_of(t)
                if rs.is_placeholder and id(rs) not in self.arg_buf and id(rs) not in self.scan_alias:
                    raise LoweringError(
                        f"stage '{st.name}' reads placeholder '{rs.name}', which is not in the argument list"
                    )
        self.check_attach()
        for st in reversed(self.compute_stages):
            self.infer(st)
        body_parts = [self.emit(st) for st in self.compute_stages if st.attach_type == "root"]
        body = S.seq(body_parts) if body_parts else S.SeqStmt([])
        for st in reversed(self.compute_stages):
            if st.attach_type == "root" and id(st) not in self.scan_alias:
                for k, b in enumerate(self.infos[id(st)].buffers):
                    if (id(st), k) not in self.out_buf:
                        body = S.Allocate(b, body)
        params = [self.out_buf[(id(sch.stage_map.get(t.op, t.op)), getattr(t, "value_index", 0))] for t in self.args]
        scalars = self.scalar_params(params, body, [v for _, v in explicit])
        body = simplify_stmt(body, {})
        if partition and any(isinstance(x, S.IfThenElse) or (isinstance(x, S.BufferStore) and any(
                isinstance(y, E.Select) for y in E.walk(x.value))) for x in S.walk_stmts(body)):
            body = simplify_stmt(partition_loops(body), {})
        # where each scalar argument goes in the call (the C function takes the buffers, then the scalars)
        attrs = {"scalar_args": [[pos, k] for k, (pos, _) in enumerate(explicit)]} if explicit else None
        return S.PrimFunc(self.name, params, scalars, body, attrs)

    def bound_buffer(self, t: Tensor) -> S.Buffer | None:
        """The buffer ``binds`` gives argument ``t``, checked against what a call passes: a dense array of the
        tensor's shape and dtype."""
        buf = self.binds.get(t)
        if buf is None:
            return None
        if not isinstance(buf, S.Buffer):
            raise LoweringError(f"binds[{t.name}]: expected a buffer from tir.decl_buffer, got {buf!r}")
        if len(buf.shape) != len(t.shape) or any(
                not isinstance(simplify(a - b), IntImm) or simplify(a - b).value != 0
                for a, b in zip(buf.shape, t.shape)):
            raise LoweringError(f"binds[{t.name}]: buffer '{buf.name}' has shape [{', '.join(map(str, buf.shape))}]"
                                f", the tensor [{', '.join(map(str, t.shape))}]")
        if buf.dtype != t.dtype:
            raise LoweringError(f"binds[{t.name}]: buffer '{buf.name}' holds {buf.dtype}, the tensor {t.dtype}")
        dense = dense_strides(buf.shape)
        if buf.strides is not None and any(
                not (isinstance(simplify(a - b), IntImm) and simplify(a - b).value == 0)
                for a, b in zip(buf.strides, dense)):
            raise LoweringError(
                f"binds[{t.name}]: buffer '{buf.name}' has strides [{', '.join(map(str, buf.strides))}]; a "
                f"kernel's arguments are dense arrays (strides [{', '.join(map(str, dense))}]), so only "
                f"those can be bound (other strides are for te.extern and tensorize buffers)")
        if buf.elem_offset is not None and not (isinstance(buf.elem_offset, IntImm) and buf.elem_offset.value == 0):
            raise LoweringError(f"binds[{t.name}]: buffer '{buf.name}' starts at element {buf.elem_offset}; a "
                                f"kernel's arguments start at element 0")
        return S.Buffer(buf.name, t.shape, buf.dtype, buf.scope)

    def scalar_params(self, params: list[S.Buffer], body: S.Stmt, explicit: Sequence[Var] = ()) -> list[Var]:
        """The function's scalar parameters: the variables given as arguments (in their order), then the shape
        variables that some argument's dimension defines."""
        out: list[Var] = list(explicit)
        for b in params:
            for d in b.shape:
                if isinstance(d, Var) and all(d is not v for v in out):
                    out.append(d)
        bound = set(out)
        for b in params:
            for d in b.shape:
                for v in E.free_vars(d):
                    if v not in bound:
                        raise LoweringError(
                            f"shape variable '{v.name}' of argument '{b.name}' appears only inside an expression "
                            f"({d}); some argument must have a dimension that is exactly '{v.name}'"
                        )
        for v in free_vars_stmt(body):
            if v not in bound and v.dtype != "handle":  # a buffer's address is bound with the buffer
                raise LoweringError(
                    f"variable '{v.name}' is used by the computation but no argument's shape defines it"
                )
        return out

    # ---------------------------------------------------------- inlining
    def effective_body(self, st: Stage) -> Expr:
        key = id(st)
        if key in self.eff_body:
            return self.eff_body[key]

        def fn(e):
            if isinstance(e, E.TensorLoad):
                src = self.stage_of(e.tensor)
                if src.attach_type == "inline" and not src.is_placeholder:
                    body = self.effective_body(src)
                    if _is_tuple(body):  # one of the outputs of a multi-output compute
                        body = body.args[getattr(e.tensor, "value_index", 0)]
                    return E.substitute(body, {ax.var: i for ax, i in zip(src.op.axis, e.indices)})
            return None

        if isinstance(st.op, ExternOp):  # what the extern reads: its inputs
            ts = st.op.inputs
            out = self.eff_body[key] = E.Call(st.op.dtype, "extern", [t[(0,) * len(t.shape)] for t in ts])
            return out
        if isinstance(st.op, ScanOp):  # what the scan reads: its inits and updates
            ts = st.op.init + st.op.update
            out = self.eff_body[key] = E.Call(st.op.dtype, "scan", [t[(0,) * len(t.shape)] for t in ts])
            return out
        bodies = getattr(st.op, "bodies", [st.op.body])
        if len(bodies) > 1 and not isinstance(bodies[0], E.Reduce):
            # the outputs of a multi-output compute, held in one node so that every walk sees all their reads
            out = E.Call(bodies[0].dtype, _TUPLE, [E.transform(b, fn) for b in bodies])
        else:  # a tuple reduction's first value carries every source
            out = E.transform(bodies[0], fn)
        self.eff_body[key] = out
        return out

    def reads(self, st: Stage) -> list[Tensor]:
        """The tensors ``st`` reads (after inlining), in first-read order; computed once per stage."""
        out = self.read_lists.get(id(st))
        if out is None:
            seen: dict[int, Tensor] = {}
            for node in E.walk(self.eff_body[id(st)]):
                if isinstance(node, E.TensorLoad):
                    seen.setdefault(id(node.tensor), node.tensor)
            out = self.read_lists[id(st)] = list(seen.values())
        return list(out)

    def readers(self, st: Stage) -> list[Stage]:
        return [r for r in self.compute_stages if any(self.stage_of(t) is st for t in self.reads(r))]

    # ------------------------------------------------------- attach checks
    def check_attach(self) -> None:
        for st in self.compute_stages:
            if st.attach_type != "scope":
                continue
            tgt, iv = st.attach_stage, st.attach_ivar
            if tgt.attach_type == "inline":
                raise LoweringError(f"stage '{st.name}' is computed at '{tgt.name}', which is inlined")
            if all(iv is not x for x in tgt.leaf_iter_vars):
                raise LoweringError(
                    f"stage '{st.name}' is computed at axis '{iv.name}' of '{tgt.name}', which is no longer one "
                    f"of its loops ({', '.join(x.name for x in tgt.leaf_iter_vars)})"
                )
            chain, cur = [], st
            while cur.attach_type == "scope":
                if any(cur is c for c in chain):
                    raise LoweringError(
                        f"compute_at forms a cycle: {' -> '.join(c.name for c in chain + [cur])}"
                    )
                chain.append(cur)
                cur = cur.attach_stage
            pos = leaf_pos(tgt, iv)
            for r in self.readers(st):
                if not self.within(r, tgt, pos):
                    raise LoweringError(
                        f"stage '{st.name}' is computed at axis '{iv.name}' of '{tgt.name}', but its reader "
                        f"'{r.name}' runs outside that loop nest; compute '{st.name}' at the root or inside "
                        f"every reader"
                    )

    def within(self, r: Stage, tgt: Stage, pos: int) -> bool:
        cur = r
        while True:
            if cur is tgt:
                return True
            if cur.attach_type != "scope":
                return False
            if cur.attach_stage is tgt:
                return leaf_pos(tgt, cur.attach_ivar) >= pos
            cur = cur.attach_stage

    # ---------------------------------------------------------- bound inference
    def fixed_vars(self, st: Stage) -> set:
        """The loop variables whose value is fixed where ``st`` is computed: those of the loops around its
        attach point. A ``shared`` buffer serves a whole GPU block, so the ``threadIdx`` loops around it are
        not fixed: its region covers what every thread of the block reads (TVM relaxes them the same way)."""
        out = set()
        cur = st
        while cur.attach_type == "scope":
            tgt = cur.attach_stage
            pos = leaf_pos(tgt, cur.attach_ivar)
            for iv in tgt.leaf_iter_vars[: pos + 1]:
                if st.scope == "shared" and tgt.iter_attrs.get(iv, "").startswith("thread:threadIdx"):
                    continue
                out.add(iv.var)
            cur = tgt
        return out

    def root_index(self, st: Stage, info: _Info) -> dict:
        """root axis var -> its actual index (region/domain min + loop-derived offset); computed once per stage
        (the emission and every stage computed inside it ask)."""
        m = self.root_maps.get(id(st))
        if m is not None:
            return m
        m = self.root_maps[id(st)] = {}
        for d, ax in enumerate(st.op.axis):
            m[ax.var] = _offset(info.region[d][0], info.value[ax])
        for ax in st.op.reduce_axis:
            lo = ax.dom.min
            if E.free_vars(lo) & info.spatial_root.keys():  # a reduce range that starts at a spatial index
                lo = simplify(E.substitute(lo, info.spatial_root))
            m[ax.var] = _offset(lo, info.value[ax])
        return m

    def infer(self, st: Stage) -> None:
        info = _Info()
        shape = st.op.shape
        is_arg = id(st) in self.arg_buf
        if isinstance(st.op, ScanOp):
            return self.infer_scan(st, info)
        if isinstance(st.op, ExternOp):
            return self.infer_extern(st, info)
        alias = self.scan_alias.get(id(st))
        if alias is not None and st.attach_type == "scope" and alias[0] is st.attach_stage:  # a scan's update
            scan = alias[0]
            t = self.root_index(scan, self.infos[id(scan)])[scan.op.scan_axis.var]
            info.region = [(t, IntImm(1))] + [(IntImm(0), d) for d in shape[1:]]
        elif st.attach_type == "root":
            info.region = [(IntImm(0), d) for d in shape]
        else:
            info.region = self.infer_region(st)
            info.local = not is_arg
        dtypes = getattr(st.op, "dtypes", [st.op.dtype])
        for k, dt in enumerate(dtypes):
            buf = self.out_buf.get((id(st), k))
            if buf is None and alias is not None:  # a scan's init or update writes the scan's output
                buf = self.infos[id(alias[0])].buffers[alias[1]]
            if buf is None:
                bshape = [ext for _, ext in info.region] if info.local else list(shape)
                buf = S.Buffer(st.name if k == 0 else f"{st.name}.v{k}", bshape, dt, st.scope,
                               aligned_strides(bshape, st.aligned) if st.aligned else None)
            info.buffers.append(buf)
        if st.double_buffered:
            self.double_buffer(st, info)
        info.buffer = info.buffers[0]
        # leaf extents
        ext = info.extent
        for d, ax in enumerate(st.op.axis):
            ext[ax] = info.region[d][1]
        for ax in st.op.reduce_axis:
            ext[ax] = ax.dom.extent
        mult = {}
        for rel in st.relations:
            if isinstance(rel, SplitRel):
                e = ext[rel.parent]
                if rel.factor is not None:
                    f = rel.factor
                    inner = IntImm(min(f, e.value)) if isinstance(e, IntImm) else IntImm(f)
                    ext[rel.inner] = inner
                    ext[rel.outer] = ceildiv(e, f)
                    mult[rel.parent] = IntImm(f)
                else:
                    inner = ceildiv(e, rel.nparts)
                    ext[rel.inner] = inner
                    ext[rel.outer] = ceildiv(e, inner.value) if isinstance(inner, IntImm) else IntImm(rel.nparts)
                    mult[rel.parent] = inner
            else:
                prod: Expr = IntImm(1)
                for a in rel.axes:
                    prod = _mul(prod, ext[a])
                ext[rel.fused] = prod
        for iv in st.leaf_iter_vars:
            self.loop_range[iv.var] = (IntImm(0), _minus_one(ext[iv]))
        # root values from leaves
        val = {iv: iv.var for iv in st.leaf_iter_vars}
        for rel in reversed(st.relations):
            if isinstance(rel, SplitRel):
                val[rel.parent] = val[rel.outer] * mult[rel.parent] + val[rel.inner]
            else:
                fv = val[rel.fused]
                stride: Expr = IntImm(1)
                for k in range(len(rel.axes) - 1, -1, -1):
                    a = rel.axes[k]
                    q = fv // stride if not (isinstance(stride, IntImm) and stride.value == 1) else fv
                    val[a] = q if k == 0 else q % ext[a]
                    stride = _mul(stride, ext[a])
        info.spatial_root = {ax.var: _offset(info.region[d][0], val[ax]) for d, ax in enumerate(st.op.axis)}
        if any(E.free_vars(ax.dom.extent) & info.spatial_root.keys() for ax in st.op.reduce_axis):
            self.dependent_reduce(st, info, val)
        simp = info.simp = Simplifier({iv.var: self.loop_range[iv.var] for iv in st.leaf_iter_vars})
        for ax, v in val.items():
            info.value[ax] = simp.run(v)
        self.infos[id(st)] = info

    def dependent_reduce(self, st: Stage, info: _Info, val: dict) -> None:
        """A reduction whose range depends on a spatial axis (``te.reduce_axis((0, i + 1))``): its extents, and
        those split or fused from it, are written in the root variable ``i``, which is a loop only while the axis
        is neither split nor fused nor renamed (``cache_write``): rewrite them in the stage's own loops, and
        refuse a loop order that puts such a reduction loop outside a loop its extent needs."""
        sub = info.spatial_root
        ext = info.extent
        for iv in list(ext):
            if E.free_vars(ext[iv]) & sub.keys():
                ext[iv] = simplify(E.substitute(ext[iv], sub))
        for iv in list(val):
            if iv.kind == "reduce":  # a spatial leaf that is its own root keeps its variable
                val[iv] = E.substitute(val[iv], sub)
        pos = {iv.var: k for k, iv in enumerate(st.leaf_iter_vars)}
        for k, iv in enumerate(st.leaf_iter_vars):
            late = [v for v in E.free_vars(ext[iv]) if pos.get(v, -1) >= k]
            if late:
                raise ScheduleError(
                    f"stage '{st.name}': the extent of reduction loop '{iv.name}' ({ext[iv]}) depends on loop "
                    f"'{late[0].name}', which runs inside it; keep '{late[0].name}' outside '{iv.name}' "
                    f"(reorder)")
            self.loop_range[iv.var] = (IntImm(0), _minus_one(ext[iv]))

    def double_buffer(self, st: Stage, info: _Info) -> None:
        """``double_buffer``: two copies of the stage's buffer, the one written and read chosen by the parity of
        the loop the stage is computed at (a leading dimension of 2)."""
        if st.attach_type != "scope":
            raise LoweringError(f"double_buffer of stage '{st.name}': it is computed at the root; compute_at it "
                                f"inside the loop whose iterations should alternate between the two copies")
        if any((id(st), k) in self.out_buf for k in range(len(info.buffers))):
            raise LoweringError(f"double_buffer of stage '{st.name}': it is an argument of the kernel")
        info.db = E.FloorMod(st.attach_ivar.var, IntImm(2, st.attach_ivar.var.dtype), st.attach_ivar.var.dtype)
        info.buffers = [S.Buffer(b.name, [IntImm(2)] + list(b.shape), b.dtype, b.scope,
                                 [simplify(b.strides[0] * b.shape[0])] + list(b.strides) if b.strides else None)
                        for b in info.buffers]

    def prefetch_stmts(self, st: Stage, level: int) -> list[S.Stmt]:
        """``prefetch``: at the start of loop ``level``, what iteration ``+ offset`` of it reads of each prefetched
        tensor, one ``llvm.prefetch`` per cache line of the innermost dimension."""
        out: list[S.Stmt] = []
        leaves = st.leaf_iter_vars
        info = self.infos[id(st)]
        rmap = self.root_index(st, info)
        for t, iv, off in st.prefetches:
            if iv is not leaves[level]:
                continue
            src = self.stage_of(t)
            relax = {x.var: self.loop_range[x.var] for x in leaves[level + 1:]}
            shift = {iv.var: iv.var + off}
            box: list | None = None
            buf = None
            for node in E.walk(self.eff_body[id(st)]):
                if not (isinstance(node, E.TensorLoad) and self.stage_of(node.tensor) is src):
                    continue
                load = self.buffer_load(E.TensorLoad(node.tensor, [E.substitute(i, rmap) for i in node.indices]))
                buf = load.buffer
                ivs = [interval(simplify(E.substitute(i, shift)), relax) for i in load.indices]
                if any(r is None for r in ivs):
                    box = None
                    break
                if box is None:
                    box = [list(r) for r in ivs]
                else:
                    for d, (lo, hi) in enumerate(ivs):
                        box[d][0] = _pick(box[d][0], lo, min) if box[d][0] is not None else None
                        box[d][1] = _pick(box[d][1], hi, max) if box[d][1] is not None else None
            if box is None or buf is None or any(lo is None or hi is None for lo, hi in box):
                continue  # a region that cannot be bounded is not prefetched (a hint, never needed)
            strides = list(buf.strides or dense_strides(buf.shape))
            line = max(1, 64 // DTYPE_BYTES[buf.dtype]) if isinstance(strides[-1], IntImm) and \
                strides[-1].value == 1 else 1
            vs = [Var(f"{buf.name}.pf{d}") for d in range(len(box))]
            addr: Expr = buf.elem_offset if buf.elem_offset is not None else IntImm(0)
            for d, ((lo, _), v) in enumerate(zip(box, vs)):
                step = line if d == len(box) - 1 else 1
                addr = addr + (lo + v * step) * strides[d]
            stmt: S.Stmt = S.Evaluate(E.Call("int32", "prefetch", [E.Call("handle", "access_ptr",
                                                                          [(buf.base or buf).data, simplify(addr)])]))
            for d in range(len(box) - 1, -1, -1):
                lo, hi = box[d]
                ext = simplify(hi - lo + 1)
                if d == len(box) - 1:
                    ext = simplify((ext + (line - 1)) // line) if line > 1 else ext
                stmt = S.For(vs[d], ext, "serial", stmt)
            out.append(stmt)
        return out

    def infer_scan(self, st: Stage, info: _Info) -> None:
        """A scan's stage: its output buffers (which its states read) and its time loop."""
        op = st.op
        ax = op.scan_axis
        info.region = [(ax.dom.min, ax.dom.extent)]
        for k, dt in enumerate(op.dtypes):
            buf = self.out_buf.get((id(st), k))
            if buf is None:
                buf = S.Buffer(st.name if k == 0 else f"{st.name}.v{k}", op.shapes[k], dt, st.scope)
            info.buffers.append(buf)
            self.arg_buf[id(self.sch[op.state_placeholder[k]])] = buf
        info.buffer = info.buffers[0]
        leaf = st.leaf_iter_vars[0]
        info.extent[ax] = ax.dom.extent
        self.loop_range[leaf.var] = (IntImm(0), _minus_one(ax.dom.extent))
        info.value[ax] = leaf.var
        info.simp = Simplifier({leaf.var: self.loop_range[leaf.var]})
        self.infos[id(st)] = info

    def infer_extern(self, st: Stage, info: _Info) -> None:
        """An extern stage: its output buffers, computed whole at the root."""
        op = st.op
        if st.attach_type != "root":
            raise LoweringError(f"stage '{st.name}' is a te.extern, which has no loops to be computed at: compute "
                                f"it at the root")
        info.region = [(IntImm(0), d) for d in op.shape]
        for k, dt in enumerate(op.dtypes):
            buf = self.out_buf.get((id(st), k))
            if buf is None:
                buf = S.Buffer(st.name if k == 0 else f"{st.name}.v{k}", op.shapes[k], dt, st.scope)
            info.buffers.append(buf)
        info.buffer = info.buffers[0]
        info.simp = Simplifier({})
        self.infos[id(st)] = info

    def emit_extern(self, st: Stage) -> S.Stmt:
        """The extern's statement on the buffers of its inputs and outputs."""
        op = st.op
        bmap: dict = {}
        vmap: dict = {}
        for ph, t in zip(op.input_placeholders, op.inputs):
            src = self.stage_of(t)
            if src.is_placeholder:
                actual = self.arg_buf[id(src)]
            else:
                sinfo = self.infos[id(src)]
                if sinfo.local:
                    raise LoweringError(f"te.extern '{st.name}' reads '{t.name}', which is computed at a loop: "
                                        f"compute '{t.name}' at the root")
                actual = sinfo.buffers[getattr(t, "value_index", 0)]
            bmap[ph] = actual
            bind_placeholder(ph, actual, vmap)
        for ph, actual in zip(op.output_placeholders, self.infos[id(st)].buffers):
            bmap[ph] = actual
            bind_placeholder(ph, actual, vmap)
        return rebind_buffers(op.body, bmap, vmap)

    def emit_scan(self, st: Stage) -> S.Stmt:
        """The time loop of a scan, with its update stages (and those computed at them) inside."""
        info = self.infos[id(st)]
        leaf = st.leaf_iter_vars[0]
        inner = [c for c in self.compute_stages if c.attach_type == "scope" and c.attach_stage is st]
        content = S.seq([self.emit(c) for c in inner]) if inner else S.SeqStmt([])
        for c in reversed(inner):
            cinfo = self.infos[id(c)]
            if cinfo.local:
                for k, b in enumerate(cinfo.buffers):
                    if (id(c), k) not in self.out_buf:
                        content = S.Allocate(b, content)
        return S.For(leaf.var, info.extent[st.op.scan_axis], "serial", content)

    def infer_region(self, st: Stage) -> list[tuple[Expr, Expr]]:
        shape = st.op.shape
        fixed = self.fixed_vars(st)
        per_dim: list[list[tuple[Expr, Expr]] | None] = [[] for _ in shape]
        for r in self.readers(st):
            rinfo = self.infos[id(r)]
            rmap = self.root_index(r, rinfo)
            body = self.eff_body[id(r)]
            # a packed dot product's operand reads a word: that many elements along the last axis
            words = {id(a): E.PACKED_DOTS[c.name][1] for c in E.walk(body)
                     if isinstance(c, E.Call) and c.name in E.PACKED_DOTS for a in c.args[1:]}
            for node in E.walk(body):
                if not (isinstance(node, E.TensorLoad) and self.stage_of(node.tensor) is st):
                    continue
                for d, idx in enumerate(node.indices):
                    if per_dim[d] is None:
                        continue
                    e = simplify(E.substitute(idx, rmap))
                    relax = {v: self.loop_range[v] for v in E.free_vars(e) if v in self.loop_range and v not in fixed}
                    iv = interval(e, relax)
                    if iv is None:
                        per_dim[d] = None
                    else:
                        if d == len(node.indices) - 1 and id(node) in words:
                            iv = (iv[0], simplify(iv[1] + words[id(node)] - 1))
                        per_dim[d].append(iv)
        region = []
        for d, ivs in enumerate(per_dim):
            full = (IntImm(0), shape[d])
            if not ivs:
                region.append(full)
                continue
            lo, hi = ivs[0]
            for lo2, hi2 in ivs[1:]:
                lo = _pick(lo, lo2, min)
                hi = _pick(hi, hi2, max)
                if lo is None or hi is None:
                    break
            if lo is None or hi is None:
                region.append(full)
                continue
            ext = simplify(hi - lo + 1)
            if not isinstance(ext, IntImm):
                region.append(full)
            elif isinstance(shape[d], IntImm) and ext.value >= shape[d].value:
                region.append(full)
            else:
                region.append((lo, ext))
        return region

    # ---------------------------------------------------------------- emission
    def buffer_load(self, x: E.TensorLoad) -> S.BufferLoad:
        """The buffer load for a te tensor load (offset into a local region)."""
        src = self.stage_of(x.tensor)
        if src.is_placeholder:
            return S.BufferLoad(self.arg_buf[id(src)], x.indices)
        info = self.infos[id(src)]
        idx = x.indices
        if info.local:
            idx = [simplify(i - mn) for i, (mn, _) in zip(idx, info.region)]
        if info.db is not None:
            idx = [info.db] + list(idx)
        return S.BufferLoad(info.buffers[getattr(x.tensor, "value_index", 0)], idx)

    def load_expr(self, e: Expr, vmap: dict | None = None) -> Expr:
        """Replace variables by ``vmap`` and then te tensor loads by buffer loads, in one bottom-up pass: the
        same result as ``E.substitute`` followed by the load rewrite of every node (replacement values
        included), without building the substituted tree first."""
        vmap = vmap or {}
        memo: dict[tuple[int, bool], Expr] = {}  # (node id, substituting) -> result; e and vmap keep nodes alive

        def go(x: Expr, sub: bool) -> Expr:
            key = (id(x), sub)
            out = memo.get(key)
            if out is not None:
                return out
            if sub and isinstance(x, Var) and vmap.get(x) is not None:
                out = go(vmap[x], False)  # substitute does not look inside the value; the load rewrite does
            else:
                kids = E.children(x)
                if kids:
                    new = [go(c, sub) for c in kids]
                    if any(n is not o for n, o in zip(new, kids)):
                        x = E.rebuild(x, new)
                out = self.buffer_load(x) if isinstance(x, E.TensorLoad) else x
            memo[key] = out
            return out

        return go(e, True)

    def store_predicate(self, st: Stage, tag_vars: dict | None = None) -> Expr | None:
        """``st``'s store predicate (``set_store_predicate``) in its loops: a thread index is the variable of
        the loop bound to it here (``tag_vars``), in the stage or in the stages it is computed in."""
        pred = st.store_predicate
        if pred is None:
            return None
        tag_vars = dict(tag_vars or {})
        cur = st
        while True:
            for iv in cur.leaf_iter_vars:
                ann = cur.iter_attrs.get(iv, "")
                if ann.startswith("thread:"):
                    tag_vars.setdefault(ann.split(":", 1)[1], iv.var)
            if cur.attach_type != "scope":
                break
            cur = cur.attach_stage
        vmap = {}
        for v, tag in st.thread_vars.items():
            if tag not in tag_vars:
                raise LoweringError(f"the store predicate of stage '{st.name}' reads {tag}, but no loop around "
                                    f"its stores is bound to {tag}")
            vmap[v] = tag_vars[tag]
        rmap = self.root_index(st, self.infos[id(st)])
        out = simplify(E.substitute(E.substitute(pred, rmap), vmap))
        lost = [v for v in E.free_vars(out) if v not in self.loop_range and v not in tag_vars.values()
                and not any(v is d for b in self.out_buf.values() for d in b.shape)]
        if lost:
            raise LoweringError(f"the store predicate of stage '{st.name}' reads '{lost[0].name}', which is no "
                                f"longer one of its loops (split or fused after set_store_predicate): set the "
                                f"predicate after the loop structure")
        return out

    def emit(self, st: Stage) -> S.Stmt:
        if isinstance(st.op, ScanOp):
            return self.emit_scan(st)
        if isinstance(st.op, ExternOp):
            return self.emit_extern(st)
        if st.tensorized is not None:
            return emit_tensorize(self, st)
        xt = cross_thread_leaf(st)
        if xt is not None:
            return emit_cross_thread(self, st, xt)
        info = self.infos[id(st)]
        leaves = st.leaf_iter_vars
        n = len(leaves)
        pos_of = {iv.var: k for k, iv in enumerate(leaves)}
        rmap = self.root_index(st, info)
        body_expr = self.eff_body[id(st)]
        out_idx = [info.value[ax] if info.local else rmap[ax.var] for ax in st.op.axis]
        if info.db is not None:
            out_idx = [info.db] + out_idx
        buf = info.buffer

        # guards
        guards: dict[int, list[Expr]] = {}
        top_guards: list[Expr] = []
        leaf_ranges = info.simp  # the leaf ranges have not changed since inference
        all_ranges = Simplifier(dict(self.loop_range))

        # loops of one iteration disappear (their variable is 0): a guard must not be placed at them
        unit = {iv.var: IntImm(0, iv.var.dtype) for iv in leaves
                if isinstance(info.extent[iv], IntImm) and info.extent[iv].value == 1}

        padding: set = set()  # keys of the guards that skip a reduction step: they never guard its init

        def add_guard(cond: Expr, simp: Simplifier, skips_step: bool = False) -> None:
            c = simp.run(E.substitute(cond, unit) if unit else cond)
            if isinstance(c, IntImm) and c.value == 1:
                return
            if skips_step:
                padding.add(skey(c))
            vs = [pos_of[v] for v in E.free_vars(c) if v in pos_of]
            (guards.setdefault(max(vs), []) if vs else top_guards).append(c)

        # every root axis and every split parent must stay inside its extent (split tails)
        bounded = list(st.op.axis) + list(st.op.reduce_axis)
        bounded += [rel.parent for rel in st.relations if isinstance(rel, SplitRel)]
        for ax in bounded:
            if info.value[ax] is ax.var and ax.var in pos_of:  # an unsplit loop: its own extent bounds it
                continue
            if not leaf_ranges.proves_lt(info.value[ax], info.extent[ax]):
                add_guard(info.value[ax] < info.extent[ax], leaf_ranges)
        if st.attach_type == "scope":
            for d, ax in enumerate(st.op.axis):
                actual = rmap[ax.var]
                add_guard(E.LE(IntImm(0), actual), all_ranges)
                add_guard(E.LT(actual, st.op.shape[d]), all_ranges)

        # innermost statement
        if isinstance(body_expr, E.Reduce) and len(body_expr.sources) > 1:
            stmt, init, p = self.emit_tuple_reduce(st, info, body_expr, rmap, out_idx, guards)
        elif isinstance(body_expr, E.Reduce):
            red = body_expr
            src = self.load_expr(red.source, rmap)
            p = next(k for k, iv in enumerate(leaves) if iv.kind == "reduce")
            src, pads = _peel_padding(src, red.combiner, st.op.dtype)
            for c in pads:  # padding: skip the step (a guard at its innermost loop) instead of adding zero
                inner = E.free_vars(E.substitute(c, unit) if unit else c)
                if max((pos_of[v] for v in inner if v in pos_of), default=-1) >= p:  # inside the reduction
                    add_guard(c, leaf_ranges, skips_step=True)
                else:
                    src = _guarded(src, c, red.combiner, st.op.dtype)
            cur = S.BufferLoad(buf, out_idx)
            stmt: S.Stmt = S.BufferStore(buf, _combine(red.combiner, cur, src, rmap), out_idx)
            if red.condition is not None:
                stmt = S.IfThenElse(self.load_expr(red.condition, rmap), stmt)
            identity = red.combiner.identity(st.op.dtype)
            if E.free_vars(identity) & rmap.keys():  # an identity that reads the compute's axes
                identity = simplify(E.substitute(identity, rmap))
            init = self.emit_init(st, info, out_idx, identity, p,
                                  {k: [c for c in cs if skey(c) not in padding] for k, cs in guards.items()})
        elif _is_tuple(body_expr):
            stmt = S.seq([S.BufferStore(b, self.load_expr(x, rmap), out_idx)
                          for b, x in zip(info.buffers, body_expr.args)])
            p, init = None, None
        else:
            stmt = S.BufferStore(buf, self.load_expr(body_expr, rmap), out_idx)
            p, init = None, None

        pred = self.store_predicate(st)
        if pred is not None:
            stmt = S.IfThenElse(pred, stmt)

        attached: dict[int, list[Stage]] = {}
        for c in self.compute_stages:
            if c.attach_type == "scope" and c.attach_stage is st:
                attached.setdefault(leaf_pos(st, c.attach_ivar), []).append(c)
        shared = [lvl for lvl, cs in attached.items() if any(self.holds_shared(c) for c in cs)]
        if shared:  # a shared copy is every thread's work: no guard of this stage's own may skip it
            deep = max(shared)
            moved = {lvl: guards.pop(lvl) for lvl in list(guards) if lvl <= deep}
            own = [c for cs in moved.values() for c in cs] + top_guards
            if own:
                stmt = S.IfThenElse(conj(own), stmt)
            outer = [c for lvl, cs in moved.items() if p is not None and lvl < p for c in cs] + top_guards
            if init is not None and outer:
                init = S.IfThenElse(conj(outer), init)
            top_guards = []

        for level in range(n - 1, -1, -1):
            parts: list[S.Stmt] = [self.emit(c) for c in attached.get(level, [])]
            if st.prefetches:
                parts = self.prefetch_stmts(st, level) + parts
            if p is not None and level == p - 1:
                parts.append(init)
            parts.append(stmt)
            content = S.seq(parts)
            for c in reversed(attached.get(level, [])):
                cinfo = self.infos[id(c)]
                if cinfo.local:
                    for k, b in enumerate(cinfo.buffers):
                        if (id(c), k) not in self.out_buf:
                            content = S.Allocate(b, content)
            if level in guards:
                cond = conj(guards[level])
                content = S.IfThenElse(self.load_expr(cond) if _reads_tensor(cond) else cond, content)
            extent = info.extent[leaves[level]]
            if _reads_tensor(extent):  # a data-dependent extent (a sparse row's length): read from its buffer
                extent = self.load_expr(extent)
            stmt = self.make_for(st, leaves[level], extent, content)
        if p == 0:
            stmt = S.seq([init, stmt])
        if top_guards:
            stmt = S.IfThenElse(conj(top_guards), stmt)
        return stmt

    def holds_shared(self, st: Stage) -> bool:
        """Whether ``st`` is a shared copy or has one computed inside it (at any depth): every thread of the
        block must run it, whatever guards the stage it is attached to has. Inside, a stage's own guards
        keep it within its tensor, so a thread past a split tail computes only what no one stores."""
        return st.scope == "shared" or any(
            c.attach_type == "scope" and c.attach_stage is st and self.holds_shared(c) for c in self.compute_stages)

    def make_for(self, st: Stage, iv, extent: Expr, body: S.Stmt, var: Var | None = None) -> S.For:
        """The loop of leaf ``iv`` of ``st`` with its annotation (and its pragmas' effect)."""
        loop = self._make_for(st, iv, extent, body, var)
        prs = st.pragmas.get(iv)
        return _apply_pragmas(loop, dict(prs)) if prs else loop

    def _make_for(self, st: Stage, iv, extent: Expr, body: S.Stmt, var: Var | None = None) -> S.For:
        ann = st.iter_attrs.get(iv)
        if ann is None:
            return S.For(iv.var if var is None else var, extent, "serial", body)
        if ann.startswith("thread:"):
            return S.For(iv.var if var is None else var, extent, "thread_binding", body, ann.split(":", 1)[1])
        return S.For(iv.var if var is None else var, extent, _KIND[ann], body)

    def emit_tuple_reduce(self, st: Stage, info: _Info, red: E.Reduce, rmap: dict, out_idx: list,
                          guards: dict) -> tuple[S.Stmt, S.Stmt, int]:
        """One step of a tuple reduction (argmax): every value's update reads the old values of all of them, so
        the new values go to one-element temporaries first and are copied back after."""
        leaves = st.leaf_iter_vars
        p = next(k for k, iv in enumerate(leaves) if iv.kind == "reduce")
        srcs = [self.load_expr(x, rmap) for x in red.sources]
        cur = [S.BufferLoad(b, out_idx) for b in info.buffers]
        new = red.combiner.combine_tuple(cur, srcs)
        if any(E.free_vars(v) & rmap.keys() for v in new):  # a combiner that reads the compute's axes
            xs, ys = [Var("x", c.dtype) for c in cur], [Var("y", x.dtype) for x in srcs]
            vals = dict(zip(xs, cur)) | dict(zip(ys, srcs))
            new = [E.substitute(E.substitute(t, rmap), vals) for t in red.combiner.combine_tuple(xs, ys)]
        zero = [IntImm(0)]
        tmps = [S.Buffer(f"{b.name}.new", [IntImm(1)], b.dtype, "local") for b in info.buffers]
        stmt: S.Stmt = S.seq([S.BufferStore(t, v, zero) for t, v in zip(tmps, new)]
                             + [S.BufferStore(b, S.BufferLoad(t, zero), out_idx) for b, t in zip(info.buffers, tmps)])
        for t in tmps:
            stmt = S.Allocate(t, stmt)
        if red.condition is not None:
            stmt = S.IfThenElse(self.load_expr(red.condition, rmap), stmt)
        identity = [simplify(E.substitute(i, rmap)) if E.free_vars(i) & rmap.keys() else i
                    for i in red.combiner.identity_tuple([b.dtype for b in info.buffers])]
        init = self.emit_init(st, info, out_idx, identity[0], p, guards, identity)
        return stmt, init, p

    def emit_init(self, st: Stage, info: _Info, out_idx, identity: Expr, p: int, guards: dict,
                  identities: list[Expr] | None = None) -> S.Stmt:
        leaves = st.leaf_iter_vars
        init_leaves = [iv for iv in leaves[p:] if iv.kind != "reduce"]
        fresh = {iv.var: Var(iv.var.name + ".init") for iv in init_leaves}
        pos_of = {iv.var: k for k, iv in enumerate(leaves)}
        init_pos = {fresh[iv.var]: k for k, iv in enumerate(init_leaves)}
        inner_guards: dict[int, list[Expr]] = {}
        for level, conds in guards.items():
            if level < p:
                continue
            for c in conds:
                vs = E.free_vars(c)
                if any(v in pos_of and leaves[pos_of[v]].kind == "reduce" for v in vs):
                    continue
                c2 = E.substitute(c, fresh)
                ks = [init_pos[v] for v in E.free_vars(c2) if v in init_pos]
                inner_guards.setdefault(max(ks) if ks else -1, []).append(c2)
        idx = [E.substitute(i, fresh) for i in out_idx]
        if identities is None:
            stmt: S.Stmt = S.BufferStore(info.buffer, identity, idx)
        else:  # a tuple reduction starts every value at its identity
            stmt = S.seq([S.BufferStore(b, v, idx) for b, v in zip(info.buffers, identities)])
        for k in range(len(init_leaves) - 1, -1, -1):
            if k in inner_guards:
                stmt = S.IfThenElse(conj(inner_guards[k]), stmt)
            iv = init_leaves[k]
            self.loop_range[fresh[iv.var]] = self.loop_range[iv.var]
            stmt = self.make_for(st, iv, info.extent[iv], stmt, fresh[iv.var])
        if -1 in inner_guards:
            stmt = S.IfThenElse(conj(inner_guards[-1]), stmt)
        return stmt


_TUPLE = "tuple"  # the Call that holds the bodies of a multi-output compute during lowering


def aligned_strides(shape: Sequence[Expr], align: dict) -> list[Expr]:
    """Row-major strides with dimension ``d``'s stride padded to ``factor * k + offset`` (``storage_align``)."""
    strides: list[Expr] = [IntImm(0)] * len(shape)
    stride: Expr = IntImm(1)
    for d in range(len(shape) - 1, -1, -1):
        if d in align:
            factor, offset = align[d]
            stride = simplify(stride + E.FloorMod(IntImm(factor + offset) - E.FloorMod(stride, IntImm(factor)),
                                                  IntImm(factor)))
        strides[d] = stride
        stride = simplify(stride * shape[d])
    return strides


def _apply_pragmas(loop: S.For, prs: dict) -> S.For:
    """What the pragmas of a loop do to it (``Stage.pragma``): ``debug_skip_region`` drops its body;
    ``auto_unroll_max_step`` unrolls the loops of constant extent in it (itself included) whose unrolled body
    runs at most that many steps, unless ``unroll_explicit`` is false (then LLVM's unroller decides)."""
    if "debug_skip_region" in prs:
        return S.For(loop.var, loop.extent, loop.kind, S.SeqStmt([]), loop.thread_tag)
    step = prs.get("auto_unroll_max_step")
    if step and prs.get("unroll_explicit", True):
        loop = _auto_unroll(loop, int(step))
    return loop


def _auto_unroll(s: S.Stmt, max_step: int) -> S.Stmt:
    if isinstance(s, S.For):
        body = _auto_unroll(s.body, max_step)
        kind = s.kind
        if (kind == "serial" and isinstance(s.extent, IntImm)
                and s.extent.value * S.emitted_size(body) <= max_step):
            kind = "unrolled"
        return S.For(s.var, s.extent, kind, body, s.thread_tag)
    if isinstance(s, S.SeqStmt):
        return S.SeqStmt([_auto_unroll(x, max_step) for x in s.seq])
    if isinstance(s, S.IfThenElse):
        return S.IfThenElse(s.cond, _auto_unroll(s.then_case, max_step),
                            _auto_unroll(s.else_case, max_step) if s.else_case is not None else None)
    if isinstance(s, S.Allocate):
        return S.Allocate(s.buffer, _auto_unroll(s.body, max_step))
    if isinstance(s, S.LetStmt):
        return S.LetStmt(s.var, s.value, _auto_unroll(s.body, max_step))
    return s


def _is_tuple(e: Expr) -> bool:
    return isinstance(e, E.Call) and e.name == _TUPLE


def _combine(comb: E.CommReducer, cur: Expr, src: Expr, rmap: dict) -> Expr:
    """``comb.combine(cur, src)``; a combiner that reads the compute's axes (``te.max(x + y, n)``) reads them
    through ``rmap`` (their values in the stage's loops), while ``cur`` and ``src`` are already lowered."""
    out = comb.combine(cur, src)
    if not (E.free_vars(out) & rmap.keys()):
        return out
    x, y = Var("x", cur.dtype), Var("y", src.dtype)
    tmpl = E.substitute(comb.combine(x, y), rmap)
    return E.substitute(tmpl, {x: cur, y: src})


def _conjuncts(c: Expr) -> list[Expr]:
    return _conjuncts(c.a) + _conjuncts(c.b) if isinstance(c, E.And) else [c]


def _is_identity(e: Expr, combiner: E.CommReducer, dtype: str) -> bool:
    ident = combiner.identity(dtype)
    return isinstance(e, (IntImm, E.FloatImm)) and isinstance(ident, (IntImm, E.FloatImm)) and e.value == ident.value


def _peel_padding(src: Expr, combiner: E.CommReducer, dtype: str) -> tuple[Expr, list[Expr]]:
    """A reduction source that reads padding, ``select(inside, x, identity)`` (or ``select(inside, x, 0) * w``
    under a sum), as ``(x or x * w, conjuncts of inside)``: the step can be skipped where ``inside`` fails
    instead of combining the identity, and guards on loop variables can be partitioned away later."""
    if isinstance(src, E.Select) and _is_identity(src.f, combiner, dtype):
        return src.t, _conjuncts(src.cond)
    if combiner.name == "sum" and isinstance(src, E.Mul):
        for sel, other, left in ((src.a, src.b, True), (src.b, src.a, False)):
            if isinstance(sel, E.Select) and isinstance(sel.f, E.FloatImm | IntImm) and sel.f.value == 0:
                return (E.Mul(sel.t, other) if left else E.Mul(other, sel.t)), _conjuncts(sel.cond)
    return src, []


def _guarded(src: Expr, cond: Expr, combiner: E.CommReducer, dtype: str) -> Expr:
    """``src`` where ``cond`` holds, else the combiner's identity (a padding conjunct kept in the value)."""
    return E.Select(cond, src, combiner.identity(dtype))


def _offset(lo: Expr, v: Expr) -> Expr:
    """``simplify(lo + v)``; ``v`` itself when ``lo`` is 0 and ``v`` a variable or a canonical sum of variables
    of its type (the simplifier would rebuild the same sum)."""
    if type(lo) is IntImm and lo.value == 0 and lo.dtype == v.dtype and (
            type(v) is Var or getattr(v, "_fix", None) is ANY_RANGES):
        return v
    return simplify(lo + v)


def _mul(a: Expr, b: Expr) -> Expr:
    """``simplify(a * b)``, without building it when both are constants of one type."""
    if type(a) is IntImm and type(b) is IntImm and a.dtype == b.dtype and E.is_int(a.dtype):
        return IntImm(a.value * b.value, a.dtype)
    return simplify(a * b)


def _minus_one(a: Expr) -> Expr:
    """``simplify(a - 1)``, without building it for a constant."""
    if type(a) is IntImm and E.is_int(a.dtype):
        return IntImm(a.value - 1, a.dtype)
    return simplify(a - 1)


def _pick(a: Expr, b: Expr, choose) -> Expr | None:
    """min/max of two bounds when their difference is a known constant, else None."""
    if skey(a) == skey(b):
        return a
    d = simplify(a - b)
    if isinstance(d, IntImm):
        return a if choose(d.value, 0) == d.value else b
    return None


def _reads_tensor(e: Expr) -> bool:
    """Whether ``e`` reads a te tensor (a loop extent or guard that depends on data)."""
    return any(isinstance(x, E.TensorLoad) for x in E.walk(e))
