"""The default schedules behind ``topi.generic``, ``topi.x86`` and ``topi.cuda``: relay's, chosen by the stage
the operator marked (its relay op and attributes), for the target in scope (``with tvm.target.Target("cuda")``)
or the one given; TOPI's several ``schedule_*`` functions are one function here, since the marked stage says
which operator it is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched import te
from autosched.relay.op import cuda_schedules, schedules
from autosched.relay.op import op as relay_op
from autosched.target import Target
from autosched.topi.utils import is_static


def _outputs(outs: te.Tensor | Sequence[te.Tensor]) -> list[te.Tensor]:
    return [outs] if isinstance(outs, te.Tensor) else list(outs)


def _anchor(out: te.Tensor) -> tuple[te.Tensor | None, dict]:
    """The marked stage of ``out``'s computation with the least fusable relay op (conv2d before softmax)."""
    best, attrs, level = None, {}, -1
    for t in schedules.compute_stages(out):
        mark = getattr(t.op, "topi_anchor", None)
        if mark is None:
            continue
        opdef = relay_op.get(mark["op"]) if mark["op"] in relay_op.list_ops() else None
        pattern = opdef.pattern if opdef is not None else relay_op.COMM_REDUCE
        if pattern > level:
            best, attrs, level = t, mark, pattern
    return best, attrs


def _static(out: te.Tensor) -> bool:
    return all(is_static(t.shape) for t in [out, *schedules.compute_stages(out)])


def default_schedule(outs: te.Tensor | Sequence[te.Tensor], target: Any = None) -> te.Schedule:
    """A schedule of ``outs`` with the target's default loop nests: on a CPU the anchor op's nest with the
    elementwise stages in its loops (parallel and vectorized), on ``cuda`` its thread mapping. Computations with
    symbolic shapes keep the plain schedule (their loops as written)."""
    tensors = _outputs(outs)
    sch = te.create_schedule([t.op for t in tensors])
    tgt = Target(target) if target is not None else Target.current(allow_none=True)
    gpu = tgt is not None and tgt.kind == "cuda"
    for out in tensors:
        if not _static(out):
            continue
        anchor, attrs = _anchor(out)
        if gpu:
            if anchor is None:
                cuda_schedules.generic(sch, out)
            else:
                cuda_schedules.BY_OP.get(attrs["op"], cuda_schedules.generic)(sch, out, anchor, attrs)
            continue
        if anchor is None:
            reduces = any(schedules.is_reduction(t) for t in [out, *schedules.compute_stages(out)])
            (schedules.reduction if reduces else schedules.injective)(sch, out)
            continue
        opdef = relay_op.get(attrs["op"]) if attrs["op"] in relay_op.list_ops() else None
        fn = (opdef.schedule if opdef is not None else None) or schedules.reduction
        fn(sch, out, anchor, attrs)
    return sch


def _named(name: str, what: str, default: str | None) -> Any:
    def schedule(outs: te.Tensor | Sequence[te.Tensor], layout: str | None = None) -> te.Schedule:
        # ``layout``: TVM's pooling schedules take it; the marked stage already says its layout
        in_scope = Target.current(allow_none=True)
        return default_schedule(outs, None if in_scope is not None else default)

    schedule.__name__ = name
    schedule.__doc__ = f"The default schedule of {what} for the target in scope (see ``default_schedule``)."
    return schedule


#: TOPI's schedule functions, each the default schedule of what it names
SCHEDULES = {
    "schedule_injective": "injective operators",
    "schedule_elemwise": "elementwise operators",
    "schedule_broadcast": "broadcast operators",
    "schedule_reduce": "reductions",
    "schedule_softmax": "softmax",
    "schedule_conv2d_nchw": "an NCHW convolution",
    "schedule_conv2d_nhwc": "an NHWC convolution",
    "schedule_depthwise_conv2d_nchw": "a depthwise convolution",
    "schedule_group_conv2d_nchw": "a grouped NCHW convolution",
    "schedule_group_conv2d_nhwc": "a grouped NHWC convolution",
    "schedule_conv2d_transpose_nchw": "a transposed convolution",
    "schedule_group_conv2d_transpose_nchw": "a grouped transposed convolution",
    "schedule_conv2d_hwcn": "an HWCN convolution",
    "schedule_conv1d_ncw": "an NCW convolution",
    "schedule_conv1d_nwc": "an NWC convolution",
    "schedule_conv1d_transpose_ncw": "a transposed NCW convolution",
    "schedule_conv3d_ncdhw": "an NCDHW convolution",
    "schedule_conv3d_ndhwc": "an NDHWC convolution",
    "schedule_conv3d_transpose_ncdhw": "a transposed NCDHW convolution",
    "schedule_deformable_conv2d_nchw": "a deformable convolution",
    "schedule_dense": "a dense layer",
    "schedule_dense_pack": "a dense layer",
    "schedule_dense_nopack": "a dense layer",
    "schedule_concatenate": "a concatenation",
    "schedule_matmul": "a matrix product",
    "schedule_batch_matmul": "batched matrix products",
    "schedule_pool": "pooling",
    "schedule_adaptive_pool": "adaptive pooling",
    "schedule_pool_grad": "a pooling gradient",
    "schedule_global_pool": "global pooling",
    "schedule_sparse_dense": "a sparse dense layer",
    "schedule_lrn": "local response normalisation",
    "schedule_extern": "extern operators",
    "schedule_sort": "a sort",
    "schedule_argsort": "an argsort",
    "schedule_topk": "a top-k selection",
    "schedule_scan": "a running sum or product",
    "schedule_roi_align": "RoIAlign",
    "schedule_roi_pool": "RoIPool",
    "schedule_unique": "unique",
}


def schedules_module(namespace: dict, default: str | None = None) -> None:
    """Fill a module (``topi.generic`` and the target modules) with the ``schedule_*`` functions, for the target
    in scope or else ``default`` (``"cuda"`` for ``topi.cuda``; None: a CPU)."""
    for name, what in SCHEDULES.items():
        namespace[name] = _named(name, what, default)
    namespace["default_schedule"] = default_schedule
