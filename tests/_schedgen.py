"""Random *legal* schedules for property-based tests.

A workload (``Workload``) is a small te computation plus a numpy reference.
``RandomSchedule`` applies a random sequence of schedule primitives to it and
keeps its own model of every stage's leaf axes, so that it only ever emits
primitives that TVM would accept and that preserve the computation's value:

1. ``cache_read`` of a placeholder for one or all of its readers, then ``cache_write`` of
   reduction stages ("local" or "global"), before anything else touches the
   stage (TVM's order).
2. ``compute_inline`` of elementwise, non-output stages.
3. For each remaining non-output stage with exactly one (effective) consumer,
   maybe ``compute_at`` into that consumer (the cache-write stage into its
   copy stage, most of the time: TVM's local-accumulator pattern).
4. Loop transforms on every stage: ``split`` (factor= or nparts=, factors that
   need not divide), ``fuse`` of two adjacent axes of the same kind,
   ``reorder`` (any permutation of any subset of leaves), ``tile``.
5. The ``compute_at`` calls, at a random leaf axis of the consumer (now and
   then undone by ``compute_root``).
6. Annotations: ``parallel`` only on the outermost leaf of a root-attached
   stage when it is spatial; ``vectorize`` only on the innermost leaf when it
   is spatial (maybe after moving a spatial leaf innermost), of known constant
   extent <= 64, and nothing is computed at it;
   ``unroll`` on a leaf of known constant extent <= 8.

Every decision is drawn through hypothesis (``Chooser``), so failing cases
shrink towards fewer primitives, and the schedule is also recorded as a Python
script (``RandomSchedule.script()``) that is attached to a failure with
``hypothesis.note``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from autosched import te

RTOL, ATOL = 1e-4, 1e-5
F32_MIN = float(np.finfo(np.float32).min)


class Chooser:
    """All random decisions go through hypothesis' ``data.draw`` (shrinkable)."""

    def __init__(self, data):
        self.data = data

    def int(self, lo: int, hi: int, label: str | None = None) -> int:
        return self.data.draw(st.integers(lo, hi), label=label)

    def chance(self, num: int, den: int, label: str | None = None) -> bool:
        """True with probability num/den; shrinks to False."""
        return self.data.draw(st.integers(0, den - 1), label=label) >= den - num

    def choice(self, seq, label: str | None = None):
        return self.data.draw(st.sampled_from(list(seq)), label=label)

    def perm(self, seq, label: str | None = None) -> list:
        return list(self.data.draw(st.permutations(list(seq)), label=label))


# ----------------------------------------------------------------------------
# Workloads
# ----------------------------------------------------------------------------


@dataclass
class StageInfo:
    name: str
    tensor: object
    shape: tuple  # ints, None for symbolic dims
    reads: list  # names of tensors (placeholders or stages) read
    rext: tuple = ()  # extents of reduce axes, in op.reduce_axis order
    output: bool = False


@dataclass
class Workload:
    name: str
    params: dict
    inputs: list = field(default_factory=list)  # placeholder tensors
    stages: dict = field(default_factory=dict)  # name -> StageInfo, topological order
    reference: object = None  # fn(dict name -> ndarray) -> list of ndarrays (outputs)
    make_inputs: object = None  # fn(rng) -> list of dicts name -> ndarray (one per run)
    tensors: dict = field(default_factory=dict)  # every tensor by name (stages, placeholders, caches)
    input_names: list = field(default_factory=list)
    shapes: dict = field(default_factory=dict)  # placeholder name -> shape (None for symbolic dims)

    def placeholder(self, shape, name, dtype="float32"):
        t = te.placeholder(shape, name=name, dtype=dtype)
        self.inputs.append(t)
        self.input_names.append(name)
        self.tensors[name] = t
        self.shapes[name] = tuple(d if isinstance(d, int) else None for d in shape)
        return t

    def stage(self, tensor, name, shape, reads, rext=(), output=False):
        self.stages[name] = StageInfo(name, tensor, tuple(shape), list(reads), tuple(rext), output)
        self.tensors[name] = tensor
        return tensor

    @property
    def outputs(self):
        return [si.tensor for si in self.stages.values() if si.output]

    @property
    def output_names(self):
        return [si.name for si in self.stages.values() if si.output]

    @property
    def args(self):
        return list(self.inputs) + self.outputs

    def describe(self) -> str:
        ps = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.name}({ps})"

    def check(self, mod, rng=None, misalign: int = 0):
        """Run ``mod`` on random inputs (outputs pre-filled with NaN) and compare with numpy.

        Every array sits between sentinel guards (out-of-bounds writes fail);
        ``misalign`` > 0 places it that many elements further into its buffer:
        still C-contiguous, but not aligned beyond the element size (numpy
        promises no more than that). Inputs must come back unmodified.
        """
        rng = rng or np.random.default_rng(0)
        for ins in self.make_inputs(rng):
            refs = self.reference(ins)
            gins = [Guarded(ins[nm], misalign) for nm in self.input_names]
            gouts = [Guarded(np.full(r.shape, np.nan, dtype="float32"), misalign) for r in refs]
            mod(*[g.view for g in gins], *[g.view for g in gouts])
            for g, nm in zip(gins + gouts, self.input_names + self.output_names):
                g.check(nm)
            for g, nm in zip(gins, self.input_names):
                np.testing.assert_array_equal(g.view, ins[nm], err_msg=f"input {nm} was modified")
            outs = [g.view for g in gouts]
            for o, r, nm in zip(outs, refs, self.output_names):
                np.testing.assert_allclose(
                    o,
                    r,
                    rtol=RTOL,
                    atol=ATOL,
                    err_msg=f"output {nm} of {self.describe()}, sizes {ins_sizes(ins)}",
                )


GUARD = 16  # elements of sentinel before and after every array, to catch out-of-bounds writes
SENTINEL = 12345.0


class Guarded:
    """A C-contiguous copy of ``arr`` placed ``offset`` elements into a buffer with sentinel guards.

    ``offset`` > 0 makes the array misaligned beyond its element size (numpy promises no more).
    ``check()`` fails if anything was written before or after the array.
    """

    def __init__(self, arr: np.ndarray, offset: int):
        self.offset, self.size = GUARD + offset, arr.size
        self.buf = np.full(self.size + self.offset + GUARD, SENTINEL, dtype=arr.dtype)
        self.view = self.buf[self.offset : self.offset + self.size].reshape(arr.shape)
        self.view[...] = arr
        assert self.view.flags.c_contiguous

    def check(self, name: str):
        before, after = self.buf[: self.offset], self.buf[self.offset + self.size :]
        assert (before == SENTINEL).all() and (after == SENTINEL).all(), (
            f"out-of-bounds write around {name}: before={before.tolist()} after={after.tolist()}"
        )


def ins_sizes(ins: dict) -> dict:
    return {k: v.shape for k, v in ins.items()}


def _rand(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype("float32")


def _windows(xp, kh, kw, stride, oh, ow):
    from numpy.lib.stride_tricks import sliding_window_view

    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))
    return win[:, :, ::stride, ::stride][:, :, :oh, :ow]


def wl_matmul(ch: Chooser) -> Workload:
    M, N, K = ch.int(8, 40, "M"), ch.int(8, 40, "N"), ch.int(8, 40, "K")
    epi = ch.chance(1, 2, "epilogue")
    wl = Workload("matmul", dict(M=M, N=N, K=K, epilogue=epi))
    A = wl.placeholder((M, K), "A")
    B = wl.placeholder((K, N), "B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    wl.stage(C, "C", (M, N), ["A", "B"], (K,), output=not epi)
    if epi:
        bias = wl.placeholder((N,), "bias")
        D = te.compute((M, N), lambda i, j: te.max(C[i, j] + bias[j], te.const(0.0, "float32")), name="D")
        wl.stage(D, "D", (M, N), ["C", "bias"], output=True)

    def make_inputs(rng):
        d = {"A": _rand(rng, (M, K)), "B": _rand(rng, (K, N))}
        if epi:
            d["bias"] = _rand(rng, (N,))
        return [d]

    def reference(d):
        c = d["A"].astype("float64") @ d["B"].astype("float64")
        if epi:
            return [np.maximum(c + d["bias"], 0.0)]
        return [c]

    wl.make_inputs, wl.reference = make_inputs, reference
    return wl


def _pad_stage(wl, data, name, shape, P, pad_value):
    N, C, H, W = shape
    Hp, Wp = H + 2 * P, W + 2 * P
    padded = te.compute(
        (N, C, Hp, Wp),
        lambda n, c, y, x: te.if_then_else(
            te.all(y >= P, y < H + P, x >= P, x < W + P),
            data[n, c, y - P, x - P],
            te.const(pad_value, "float32"),
        ),
        name=name,
    )
    return wl.stage(padded, name, (N, C, Hp, Wp), ["data"])


def wl_conv2d(ch: Chooser) -> Workload:
    N = ch.int(1, 2, "N")
    CI, CO = ch.int(1, 4, "CI"), ch.int(1, 4, "CO")
    KH, KW = ch.int(1, 3, "KH"), ch.int(1, 3, "KW")
    H, W = ch.int(max(KH, 3), 9, "H"), ch.int(max(KW, 3), 9, "W")
    P = ch.int(0, 1, "pad")
    S = ch.int(1, 2, "stride")
    epi = ch.chance(1, 3, "epilogue")
    OH, OW = (H + 2 * P - KH) // S + 1, (W + 2 * P - KW) // S + 1
    wl = Workload("conv2d_nchw", dict(N=N, CI=CI, CO=CO, H=H, W=W, KH=KH, KW=KW, pad=P, stride=S, epi=epi))
    data = wl.placeholder((N, CI, H, W), "data")
    weight = wl.placeholder((CO, CI, KH, KW), "weight")
    pad = _pad_stage(wl, data, "pad", (N, CI, H, W), P, 0.0)
    rc = te.reduce_axis((0, CI), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    conv = te.compute(
        (N, CO, OH, OW),
        lambda n, f, y, x: te.sum(pad[n, rc, y * S + ry, x * S + rx] * weight[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv",
    )
    wl.stage(conv, "conv", (N, CO, OH, OW), ["pad", "weight"], (CI, KH, KW), output=not epi)
    if epi:
        bias = wl.placeholder((CO,), "bias")
        relu = te.compute(
            (N, CO, OH, OW),
            lambda n, f, y, x: te.max(conv[n, f, y, x] + bias[f], te.const(0.0, "float32")),
            name="relu",
        )
        wl.stage(relu, "relu", (N, CO, OH, OW), ["conv", "bias"], output=True)

    def make_inputs(rng):
        d = {"data": _rand(rng, (N, CI, H, W)), "weight": _rand(rng, (CO, CI, KH, KW))}
        if epi:
            d["bias"] = _rand(rng, (CO,))
        return [d]

    def reference(d):
        xp = np.pad(d["data"].astype("float64"), ((0, 0), (0, 0), (P, P), (P, P)))
        win = _windows(xp, KH, KW, S, OH, OW)
        out = np.einsum("ncyxhw,fchw->nfyx", win, d["weight"].astype("float64"))
        if epi:
            out = np.maximum(out + d["bias"][None, :, None, None], 0.0)
        return [out]

    wl.make_inputs, wl.reference = make_inputs, reference
    return wl


def wl_depthwise(ch: Chooser) -> Workload:
    N, C = 1, ch.int(1, 6, "C")
    K = ch.int(1, 3, "K")
    H, W = ch.int(3, 10, "H"), ch.int(3, 10, "W")
    P, S = ch.int(0, 1, "pad"), ch.int(1, 2, "stride")
    OH, OW = (H + 2 * P - K) // S + 1, (W + 2 * P - K) // S + 1
    wl = Workload("depthwise_conv2d_nchw", dict(C=C, H=H, W=W, K=K, pad=P, stride=S))
    data = wl.placeholder((N, C, H, W), "data")
    weight = wl.placeholder((C, 1, K, K), "weight")
    pad = _pad_stage(wl, data, "pad", (N, C, H, W), P, 0.0)
    ry = te.reduce_axis((0, K), name="ry")
    rx = te.reduce_axis((0, K), name="rx")
    out = te.compute(
        (N, C, OH, OW),
        lambda n, c, y, x: te.sum(pad[n, c, y * S + ry, x * S + rx] * weight[c, 0, ry, rx], axis=[ry, rx]),
        name="dw",
    )
    wl.stage(out, "dw", (N, C, OH, OW), ["pad", "weight"], (K, K), output=True)

    def make_inputs(rng):
        return [{"data": _rand(rng, (N, C, H, W)), "weight": _rand(rng, (C, 1, K, K))}]

    def reference(d):
        xp = np.pad(d["data"].astype("float64"), ((0, 0), (0, 0), (P, P), (P, P)))
        win = _windows(xp, K, K, S, OH, OW)
        return [np.einsum("ncyxhw,chw->ncyx", win, d["weight"][:, 0].astype("float64"))]

    wl.make_inputs, wl.reference = make_inputs, reference
    return wl


def wl_maxpool(ch: Chooser) -> Workload:
    N, C = 1, ch.int(1, 4, "C")
    K = ch.int(1, 3, "K")
    P = ch.int(0, K - 1, "pad")
    S = ch.int(1, 2, "stride")
    H, W = ch.int(K, 10, "H"), ch.int(K, 10, "W")
    OH, OW = (H + 2 * P - K) // S + 1, (W + 2 * P - K) // S + 1
    wl = Workload("max_pool2d", dict(C=C, H=H, W=W, K=K, pad=P, stride=S))
    data = wl.placeholder((N, C, H, W), "data")
    pad = _pad_stage(wl, data, "pad", (N, C, H, W), P, F32_MIN)
    ry = te.reduce_axis((0, K), name="ry")
    rx = te.reduce_axis((0, K), name="rx")
    out = te.compute(
        (N, C, OH, OW),
        lambda n, c, y, x: te.max(pad[n, c, y * S + ry, x * S + rx], axis=[ry, rx]),
        name="pool",
    )
    wl.stage(out, "pool", (N, C, OH, OW), ["pad"], (K, K), output=True)

    def make_inputs(rng):
        return [{"data": _rand(rng, (N, C, H, W))}]

    def reference(d):
        xp = np.pad(d["data"], ((0, 0), (0, 0), (P, P), (P, P)), constant_values=F32_MIN)
        return [_windows(xp, K, K, S, OH, OW).max(axis=(4, 5))]

    wl.make_inputs, wl.reference = make_inputs, reference
    return wl


def wl_softmax(ch: Chooser) -> Workload:
    M, N = ch.int(1, 12, "M"), ch.int(1, 40, "N")
    wl = Workload("softmax", dict(M=M, N=N))
    X = wl.placeholder((M, N), "X")
    k1 = te.reduce_axis((0, N), name="k1")
    mx = te.compute((M,), lambda i: te.max(X[i, k1], axis=k1), name="mx")
    wl.stage(mx, "mx", (M,), ["X"], (N,))
    e = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="e")
    wl.stage(e, "e", (M, N), ["X", "mx"])
    k2 = te.reduce_axis((0, N), name="k2")
    sm = te.compute((M,), lambda i: te.sum(e[i, k2], axis=k2), name="sm")
    wl.stage(sm, "sm", (M,), ["e"], (N,))
    out = te.compute((M, N), lambda i, j: e[i, j] / sm[i], name="out")
    wl.stage(out, "out", (M, N), ["e", "sm"], output=True)

    def make_inputs(rng):
        return [{"X": _rand(rng, (M, N), -4.0, 4.0)}]

    def reference(d):
        x = d["X"].astype("float64")
        ex = np.exp(x - x.max(axis=1, keepdims=True))
        return [ex / ex.sum(axis=1, keepdims=True)]

    wl.make_inputs, wl.reference = make_inputs, reference
    return wl


def wl_broadcast(ch: Chooser) -> Workload:
    M, N = ch.int(1, 24, "M"), ch.int(1, 40, "N")
    three = ch.chance(1, 2, "three_stages")
    wl = Workload("broadcast_chain", dict(M=M, N=N, three=three))
    A = wl.placeholder((M, N), "A")
    B = wl.placeholder((N,), "B")
    Cc = wl.placeholder((M, 1), "Cc")
    t1 = te.compute((M, N), lambda i, j: A[i, j] + B[j], name="t1")
    wl.stage(t1, "t1", (M, N), ["A", "B"])
    t2 = te.compute((M, N), lambda i, j: t1[i, j] * Cc[i, 0], name="t2")
    wl.stage(t2, "t2", (M, N), ["t1", "Cc"], output=not three)
    if three:
        t3 = te.compute((M, N), lambda i, j: te.max(t2[i, j], A[i, j] * 0.5) - B[j], name="t3")
        wl.stage(t3, "t3", (M, N), ["t2", "A", "B"], output=True)

    def make_inputs(rng):
        return [{"A": _rand(rng, (M, N)), "B": _rand(rng, (N,)), "Cc": _rand(rng, (M, 1))}]

    def reference(d):
        a, b, c = (d[k].astype("float64") for k in ("A", "B", "Cc"))
        r = (a + b[None, :]) * c
        if three:
            r = np.maximum(r, a * 0.5) - b[None, :]
        return [r]

    wl.make_inputs, wl.reference = make_inputs, reference
    return wl


def wl_vecadd(ch: Chooser) -> Workload:
    inter = ch.chance(1, 2, "intermediate")
    sizes = (ch.int(1, 70, "n1"), ch.int(1, 70, "n2"))
    wl = Workload("vecadd_symbolic", dict(intermediate=inter, run_sizes=sizes))
    n = te.var("n")
    A = wl.placeholder((n,), "A")
    B = wl.placeholder((n,), "B")
    if inter:
        T = te.compute((n,), lambda i: A[i] * 2.0, name="T")
        wl.stage(T, "T", (None,), ["A"])
        C = te.compute((n,), lambda i: T[i] + B[i], name="C")
        wl.stage(C, "C", (None,), ["T", "B"], output=True)
    else:
        C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
        wl.stage(C, "C", (None,), ["A", "B"], output=True)

    def make_inputs(rng):
        return [{"A": _rand(rng, (m,)), "B": _rand(rng, (m,))} for m in sizes]

    def reference(d):
        return [d["A"].astype("float64") * (2.0 if inter else 1.0) + d["B"]]

    wl.make_inputs, wl.reference = make_inputs, reference
    return wl


def wl_matmul_symbolic(ch: Chooser) -> Workload:
    """Matmul whose row count is a symbolic var: every split of it has a symbolic tail."""
    N, K = ch.int(1, 24, "N"), ch.int(1, 24, "K")
    sizes = (ch.int(1, 30, "m1"), ch.int(1, 30, "m2"))
    epi = ch.chance(1, 2, "epilogue")
    wl = Workload("matmul_symbolic", dict(N=N, K=K, run_sizes=sizes, epilogue=epi))
    m = te.var("m")
    A = wl.placeholder((m, K), "A")
    B = wl.placeholder((K, N), "B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((m, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    wl.stage(C, "C", (None, N), ["A", "B"], (K,), output=not epi)
    if epi:
        D = te.compute((m, N), lambda i, j: C[i, j] * 2.0 - B[0, j], name="D")
        wl.stage(D, "D", (None, N), ["C", "B"], output=True)

    def make_inputs(rng):
        return [{"A": _rand(rng, (mm, K)), "B": _rand(rng, (K, N))} for mm in sizes]

    def reference(d):
        c = d["A"].astype("float64") @ d["B"].astype("float64")
        return [c * 2.0 - d["B"][0].astype("float64") if epi else c]

    wl.make_inputs, wl.reference = make_inputs, reference
    return wl


WORKLOADS = {
    "matmul": wl_matmul,
    "conv2d": wl_conv2d,
    "depthwise": wl_depthwise,
    "maxpool": wl_maxpool,
    "softmax": wl_softmax,
    "broadcast": wl_broadcast,
    "vecadd": wl_vecadd,
    "matmul_symbolic": wl_matmul_symbolic,
}


# ----------------------------------------------------------------------------
# The random scheduler
# ----------------------------------------------------------------------------


@dataclass
class Leaf:
    iv: object  # the IterVar
    name: str  # Python identifier used in the reproduction script
    kind: str  # "S" spatial, "R" reduce
    ext: int | None  # known constant extent, or None


@dataclass
class StageModel:
    name: str
    handle: object  # the tensor used to index the schedule: s[handle]
    shape: tuple
    rext: tuple
    reads: list
    output: bool
    leaves: list = field(default_factory=list)
    inlined: bool = False
    attach_to: str | None = None  # consumer stage name
    attached_here: set = field(default_factory=set)  # leaf names with stages computed at them
    counter: int = 0
    cache_stage: str | None = None  # for a cache_write'd stage: the name of its cache stage

    @property
    def is_reduce(self):
        return len(self.rext) > 0

    @property
    def pyname(self):
        return self.name.replace(".", "_")


def _ceildiv(a, b):
    return -(-a // b)


class RandomSchedule:
    def __init__(self, wl: Workload, ch: Chooser):
        self.wl, self.ch = wl, ch
        self.lines: list[str] = []
        self.models: dict[str, StageModel] = {}
        for si in wl.stages.values():
            self.models[si.name] = StageModel(si.name, si.tensor, si.shape, si.rext, list(si.reads), si.output)
        self.placeholders = set(wl.input_names)

    # -- helpers ---------------------------------------------------------------
    def log(self, line: str):
        self.lines.append(line)

    def script(self) -> str:
        head = [
            f"# workload: {self.wl.describe()}; T = dict of its tensors by name",
            "s = te.create_schedule([" + ", ".join(f'T["{nm}"].op' for nm in self.wl.output_names) + "])",
        ]
        return "\n".join(head + self.lines)

    def ref(self, m: StageModel) -> str:
        return f's[T["{m.name}"]]'

    def readers(self, name: str) -> list[str]:
        return [m.name for m in self.models.values() if name in m.reads]

    def effective_consumers(self, name: str) -> set[str]:
        out = set()
        for r in self.readers(name):
            if self.models[r].inlined:
                out |= self.effective_consumers(r)
            else:
                out.add(r)
        return out

    # -- the generator -----------------------------------------------------------
    def generate(self):
        ch, wl = self.ch, self.wl
        s = te.create_schedule([t.op for t in wl.outputs])
        self.s = s

        # 1a. cache_read of one placeholder for one of its readers
        if ch.chance(1, 3, "cache_read?"):
            cands = sorted(p for p in self.placeholders if self.readers(p))
            pname = ch.choice(cands, "cache_read.tensor")
            all_readers = sorted(self.readers(pname))
            if len(all_readers) > 1 and ch.chance(1, 3, "cache_read for all readers?"):
                readers = all_readers
            else:
                readers = [ch.choice(all_readers, "cache_read.reader")]
            tens = wl.tensors[pname]
            cached = s.cache_read(tens, "global", [self.models[r].handle for r in readers])
            cname = f"{pname}.shared"
            wl.tensors[cname] = cached
            rlist = ", ".join(f'T["{r}"]' for r in readers)
            self.log(f'T["{cname}"] = s.cache_read(T["{pname}"], "global", [{rlist}])')
            self.models[cname] = StageModel(cname, cached, wl.shapes[pname], (), [pname], False)
            for r in readers:
                rm = self.models[r]
                rm.reads = [cname if x == pname else x for x in rm.reads]
            self._reorder_models(cname, before=min(readers, key=list(self.models).index))

        # 1b. cache_write of reduction stages
        for name in [m.name for m in self.models.values() if m.is_reduce]:
            if not ch.chance(1, 2, f"cache_write {name}?"):
                continue
            scope = ch.choice(["local", "global"], "scope")
            m = self.models[name]
            cached = s.cache_write(m.handle, scope)
            cname = f"{name}.{scope}"
            wl.tensors[cname] = cached
            self.log(f'T["{cname}"] = s.cache_write(T["{name}"], "{scope}")')
            cm = StageModel(cname, cached, m.shape, m.rext, m.reads, False)
            m.rext, m.reads = (), [cname]
            self.models[cname] = cm
            self._reorder_models(cname, before=name)
            m.cache_stage = cname

        # 2. compute_inline of elementwise non-output stages
        for m in self.models.values():
            if not m.is_reduce and not m.output and ch.chance(1, 3, f"inline {m.name}?"):
                m.inlined = True
                s[m.handle].compute_inline()
                self.log(f"{self.ref(m)}.compute_inline()")

        # 3. decide which stages are computed at their single consumer
        for m in self.models.values():
            if m.inlined or m.output:
                continue
            cons = self.effective_consumers(m.name)
            if len(cons) != 1:
                continue
            (c,) = cons
            is_cache = self.models[c].cache_stage == m.name
            if ch.chance(3, 4) if is_cache else ch.chance(1, 2, f"compute_at {m.name}?"):
                m.attach_to = c

        # 4. root leaves, then loop transforms
        for m in self.models.values():
            if m.inlined:
                continue
            self._init_leaves(m)
            self._transforms(m)

        # 5. compute_at at a random leaf of the consumer
        for m in self.models.values():
            if m.attach_to is None:
                continue
            c = self.models[m.attach_to]
            leaf = ch.choice(c.leaves, f"compute_at {m.name} axis")
            s[m.handle].compute_at(s[c.handle], leaf.iv)
            self.log(f"{self.ref(m)}.compute_at({self.ref(c)}, {leaf.name})")
            if ch.chance(1, 10, f"compute_root {m.name} again?"):
                s[m.handle].compute_root()  # undoes the compute_at; leaf extents stay "unknown" (None)
                self.log(f"{self.ref(m)}.compute_root()")
                m.attach_to = None
            else:
                c.attached_here.add(leaf.name)

        # 6. annotations
        for m in self.models.values():
            if not m.inlined:
                self._annotate(m)
        return s

    def _reorder_models(self, new: str, before: str):
        items = list(self.models.items())
        new_item = next(it for it in items if it[0] == new)
        items.remove(new_item)
        idx = [k for k, _ in items].index(before)
        items.insert(idx, new_item)
        self.models = dict(items)

    def _init_leaves(self, m: StageModel):
        st_ = self.s[m.handle]
        attached = m.attach_to is not None
        m.leaves = []
        for i, iv in enumerate(st_.op.axis):
            nm = f"{m.pyname}_s{i}"
            ext = None if attached else m.shape[i]
            m.leaves.append(Leaf(iv, nm, "S", ext))
            self.log(f"{nm} = {self.ref(m)}.op.axis[{i}]")
        for i, iv in enumerate(st_.op.reduce_axis):
            nm = f"{m.pyname}_r{i}"
            m.leaves.append(Leaf(iv, nm, "R", m.rext[i]))
            self.log(f"{nm} = {self.ref(m)}.op.reduce_axis[{i}]")
        assert len(m.leaves) == len(m.shape) + len(m.rext), (m.name, len(m.leaves))

    def _factor(self, ext, label):
        hi = min(ext + 1, 16) if ext is not None else 8
        return self.ch.int(1, max(hi, 2), label)

    def _split(self, m: StageModel, pos: int):
        ch, st_ = self.ch, self.s[m.handle]
        leaf = m.leaves[pos]
        f = self._factor(leaf.ext, "factor")
        o_nm, i_nm = leaf.name + "o", leaf.name + "i"
        if ch.chance(1, 4, "nparts?"):
            o, i = st_.split(leaf.iv, nparts=f)
            self.log(f"{o_nm}, {i_nm} = {self.ref(m)}.split({leaf.name}, nparts={f})")
            oe, ie = f, (_ceildiv(leaf.ext, f) if leaf.ext is not None else None)
        else:
            o, i = st_.split(leaf.iv, factor=f)
            self.log(f"{o_nm}, {i_nm} = {self.ref(m)}.split({leaf.name}, factor={f})")
            oe, ie = (_ceildiv(leaf.ext, f) if leaf.ext is not None else None), f
        m.leaves[pos : pos + 1] = [Leaf(o, o_nm, leaf.kind, oe), Leaf(i, i_nm, leaf.kind, ie)]

    def _transforms(self, m: StageModel):
        ch, st_ = self.ch, self.s[m.handle]
        for _ in range(ch.int(0, 4, f"#transforms {m.name}")):
            op = ch.choice(["split", "reorder", "fuse", "tile", "split"], "op")
            L = m.leaves
            if op == "split" and len(L) < 8:
                self._split(m, ch.int(0, len(L) - 1, "split axis"))
            elif op == "fuse":
                cands = [p for p in range(len(L) - 1) if L[p].kind == L[p + 1].kind]
                if not cands:
                    continue
                p = ch.choice(cands, "fuse at")
                a, b = L[p], L[p + 1]
                f = st_.fuse(a.iv, b.iv)
                m.counter += 1
                nm = f"{m.pyname}_f{m.counter}"
                self.log(f"{nm} = {self.ref(m)}.fuse({a.name}, {b.name})")
                ext = a.ext * b.ext if a.ext is not None and b.ext is not None else None
                L[p : p + 2] = [Leaf(f, nm, a.kind, ext)]
            elif op == "reorder" and len(L) >= 2:
                order = ch.perm(range(len(L)), "reorder perm")
                k = ch.int(2, len(L), "reorder size")
                chosen = order[:k]
                st_.reorder(*[L[c].iv for c in chosen])
                self.log(f"{self.ref(m)}.reorder({', '.join(L[c].name for c in chosen)})")
                new = list(L)
                for pos, c in zip(sorted(chosen), chosen):
                    new[pos] = L[c]
                m.leaves = new
            elif op == "tile" and len(L) >= 2 and len(L) < 7:
                p = ch.int(0, len(L) - 2, "tile x")
                q = ch.int(p + 1, len(L) - 1, "tile y")
                x, y = L[p], L[q]
                xf, yf = self._factor(x.ext, "x_factor"), self._factor(y.ext, "y_factor")
                xo, yo, xi, yi = st_.tile(x.iv, y.iv, x_factor=xf, y_factor=yf)
                names = [x.name + "o", y.name + "o", x.name + "i", y.name + "i"]
                self.log(f"{', '.join(names)} = {self.ref(m)}.tile({x.name}, {y.name}, x_factor={xf}, y_factor={yf})")
                ce = lambda e, f: _ceildiv(e, f) if e is not None else None
                nxo, nxi = Leaf(xo, names[0], x.kind, ce(x.ext, xf)), Leaf(xi, names[2], x.kind, xf)
                nyo, nyi = Leaf(yo, names[1], y.kind, ce(y.ext, yf)), Leaf(yi, names[3], y.kind, yf)
                new = L[:p] + [nxo, nxi] + L[p + 1 : q] + [nyo, nyi] + L[q + 1 :]
                # tile == split x, split y, reorder(xo, yo, xi, yi) over the positions of those four
                pos = sorted([p, p + 1, q + 1, q + 2])
                for ps, lf in zip(pos, [nxo, nyo, nxi, nyi]):
                    new[ps] = lf
                m.leaves = new

    def _annotate(self, m: StageModel):
        ch, st_ = self.ch, self.s[m.handle]
        L = m.leaves
        used = set()
        if m.attach_to is None and L[0].kind == "S" and ch.chance(1, 3, f"parallel {m.name}?"):
            st_.parallel(L[0].iv)
            self.log(f"{self.ref(m)}.parallel({L[0].name})")
            used.add(0)
        last = len(L) - 1
        if L[last].kind == "R" and last not in used and ch.chance(1, 2, f"spatial innermost {m.name}?"):
            # bring the innermost spatial leaf inside the reduce leaves (a legal reorder), to vectorize it
            p = max((q for q, lf in enumerate(L) if lf.kind == "S" and q not in used), default=None)
            if p is not None:
                order = [lf for q, lf in enumerate(L) if q != p] + [L[p]]
                moved = order[p:]
                st_.reorder(*[lf.iv for lf in moved])
                self.log(f"{self.ref(m)}.reorder({', '.join(lf.name for lf in moved)})")
                m.leaves = L = order
        v = L[last]
        if (
            v.kind == "S"
            and v.ext is not None
            and v.ext <= 64
            and last not in used
            and v.name not in m.attached_here
            and ch.chance(1, 2, f"vectorize {m.name}?")
        ):
            st_.vectorize(v.iv)
            self.log(f"{self.ref(m)}.vectorize({v.name})")
            used.add(last)
        cands = [p for p, lf in enumerate(L) if p not in used and lf.ext is not None and lf.ext <= 8]
        if cands and ch.chance(1, 3, f"unroll {m.name}?"):
            p = ch.choice(cands, "unroll axis")
            st_.unroll(L[p].iv)
            self.log(f"{self.ref(m)}.unroll({L[p].name})")
