"""Sketch rules for blocked-channel convolutions (``conv2d_nchwc`` and its 8-bit ``_vnni`` and ``_i16`` forms,
``depthwise_conv2d_nchwc`` and Winograd's ``conv2d_winograd_nchwc`` stages, in the workloads and in fused relay
kernels alike): the generated space of such a kernel is the family of register-tiled nests of the expert schedule,
its choices decisions of the space.

Multi-level tiling does not find these nests (the reduction over a channel block must sit outside a tile of
pixels x channel blocks, broadcasting one input into several FMAs), and a space of them is small: a few
hundred points, all of them fast on some CPU. The rules run first; other stages of the kernel (a padded copy
at the root) are left to the built-in rules.
"""

from __future__ import annotations

from autosched.space.sketch import SketchContext, SketchRule
from autosched.te.schedule import Stage
from autosched.workloads.cpu import _window_nest, blocked_conv_nest, winograd_nest
from autosched.workloads.tile_sizes import MIN_ACCUMULATORS, conv_tile, cpu, lanes, step_temporaries


def _blocked_kind(st: Stage) -> str | None:
    name = st.op.name
    if name.endswith("depthwise_conv2d_nchwc") and len(st.op.reduce_axis) == 2 and len(st.op.axis) == 5:
        return "depthwise"
    if name.endswith(("conv2d_nchwc", "conv2d_nchwc_vnni", "conv2d_nchwc_i16")) and len(st.op.reduce_axis) == 4 \
            and len(st.op.axis) == 5:
        return "conv"
    return None


def _pad_of(ctx: SketchContext, st: Stage) -> Stage | None:
    return next((p for p in ctx.flow.reads(st) if not p.is_placeholder and p.op.name == "pad"), None)


class PlanBlockedConv(SketchRule):
    """Prepare: the padding read in place or copied at the root (a decision), the epilogue inlined into the
    kernel's output, and the accumulator stage chosen (a local cache of the convolution when the convolution
    is itself the output)."""

    name = "blocked_conv_plan"
    phase = "prepare"

    def condition(self, ctx, st):
        return not st.is_placeholder and _blocked_kind(st) is not None and not ctx.info(st)

    def apply(self, ctx, st):
        kind = _blocked_kind(st)
        pad = _pad_of(ctx, st)
        if pad is not None and pad.attach_type == "root" and not ctx.flow.read_as_dot_operand(pad):
            inline = kind == "depthwise" or ctx.decide(f"pad/{ctx.key(st)}", (True, False), kind="location",
                                                       weights=(1.0, 1.0))
            if inline:
                pad.compute_inline()
        for other in list(ctx.live_stages()):  # the epilogue: every elementwise stage after the convolution
            if other is not st and not other.is_output and not other.is_reduction and \
                    ctx.sch.consumes(other, st):
                other.compute_inline()
        if st.is_output:
            acc = ctx.cache_write(st, "local")
            out = st
        else:
            acc, out = st, next(s for s in ctx.live_stages() if s.is_output)
        ctx.info(out)["blocked"] = {"kind": kind, "acc": acc}
        # placed with its output; "tile" keeps multi-level tiling from planning it again
        ctx.info(acc).update(blocked_done=True, tile="blocked")


class ScheduleBlockedConv(SketchRule):
    """Schedule: the kernel's output gets the register-tiled nest, its tile (channel blocks x rows x pixels,
    among those that fit the target's registers), parallel order and unrolling decided; the accumulator stage
    is placed by it."""

    name = "blocked_conv"

    def condition(self, ctx, st):
        info = ctx.info(st)
        return "blocked" in info or "blocked_done" in info

    def apply(self, ctx, st):
        plan = ctx.info(st).get("blocked")
        if plan is None:
            return None  # the accumulator stage: placed with its output
        acc = plan["acc"]
        out, acc_t = st.op.output(0), acc.op.output(0)
        _, ocb, oh, ow, block = (int(d) for d in out.shape)
        key = ctx.key(st)
        per = -(-block // lanes(out.dtype))
        regs = cpu().vector_registers
        if plan["kind"] == "depthwise":
            pixels = [p for p in range(1, min(ow, 32) + 1) if 2 * p * per < regs]
            _window_nest(ctx.sch, out, acc_t, ctx.decide(f"pixels/{key}", pixels, kind="tile"))
            return None
        temporaries = step_temporaries(acc.op.input_tensors[-1].dtype)
        default = conv_tile(oh, ow, ocb, block, out.dtype, temporaries)
        # tiles with enough accumulators to hide the FMA latency, that fit the registers; bigger ones likelier
        tiles = [(b, r, p) for b in range(1, 5) if ocb % b == 0 for r in (1, 2) if oh % r == 0
                 for p in range(1, min(ow, 32) + 1)
                 if b * per * (r * p + 1) + temporaries <= regs and (r == 1 or p == ow)
                 and b * per * r * p >= min(MIN_ACCUMULATORS, b * per * r * ow)]
        tiles.sort(key=lambda t: t != default)  # the target's default first: it is the run's default point
        b, r, p = ctx.decide(f"register_tile/{key}", tiles, kind="tile",
                             weights=[8.0 if t == default else (t[0] * t[1] * t[2]) ** 0.5 for t in tiles])
        ib = int(acc.op.reduce_axis[3].dom.extent.value)
        # the channel block unrolled by 4 at most: fully unrolled it compiled much slower and ran no faster
        # (docs/measured_choices.md)
        unroll_ib = ctx.decide(f"unroll_ib/{key}", sorted({min(ib, 4), 1}, reverse=True), kind="unroll")
        rows_outer = ctx.decide(f"rows_outer/{key}", (True, False), kind="parallel")
        unroll_kw = ctx.decide(f"unroll_kw/{key}", (False, True), kind="unroll", weights=(3.0, 1.0))
        blocked_conv_nest(ctx.sch, out, acc_t, blocks=b, rows=r, pixels=p, rows_outer=rows_outer,
                          unroll_ib=unroll_ib if ib % unroll_ib == 0 else 1, unroll_kw=unroll_kw)
        return None


WINOGRAD_STAGES = ("winograd_in1", "winograd_in", "winograd_gemm", "winograd_out1")


def _is_winograd(st: Stage) -> bool:
    return st.op.name.endswith("conv2d_winograd_nchwc") and not st.op.reduce_axis and len(st.op.axis) == 5


class PlanWinograd(SketchRule):
    """Prepare a Winograd convolution (``conv2d_winograd_nchwc``): its epilogue inlined into the kernel's
    output, and its transform and product stages claimed for the Winograd nest. Generic rules would inline
    the transforms into one another before their loops are unrolled, and the select chains that pick a
    transform coefficient by index would then multiply into expressions of thousands of terms."""

    name = "winograd_plan"
    phase = "prepare"

    def condition(self, ctx, st):
        return not st.is_placeholder and _is_winograd(st) and not ctx.info(st)

    def apply(self, ctx, st):
        out = st if st.is_output else next(s for s in ctx.live_stages() if s.is_output)
        if [int(d) for d in out.op.output(0).shape] != [int(d) for d in st.op.output(0).shape]:
            return False  # an epilogue that changes the shape: left to the generic rules
        for other in list(ctx.live_stages()):  # the epilogue (and the convolution itself) into the output
            if other is not out and not other.is_reduction and other.op.name not in WINOGRAD_STAGES and \
                    (other is st or ctx.sch.consumes(other, st)):
                other.compute_inline()
        for other in ctx.live_stages():
            if other.op.name in WINOGRAD_STAGES:
                ctx.info(other).update(winograd_done=True, tile="winograd")
        ctx.info(out)["winograd"] = True


class ScheduleWinograd(SketchRule):
    """Schedule: the nests of :func:`autosched.workloads.cpu.winograd_nest`, with the product's register tile
    (output-channel blocks x tiles, among those that fit the target's registers) and the unrolling of its
    input-channel loop decided."""

    name = "winograd"

    def condition(self, ctx, st):
        info = ctx.info(st)
        return "winograd" in info or "winograd_done" in info

    def apply(self, ctx, st):
        if "winograd" not in ctx.info(st):
            return None  # a transform or the product: placed by the output's nest
        gemm = next(s for s in ctx.live_stages() if s.op.name == "winograd_gemm").op.output(0)
        alpha, _, ocb, tiles_n, block = (int(d) for d in gemm.shape)
        key = ctx.key(st)
        per, regs = -(-block // lanes(gemm.dtype)), cpu().vector_registers
        default = conv_tile(1, tiles_n, ocb, block, gemm.dtype)
        default = (default[0], default[2])
        tiles = [(b, p) for b in range(1, 5) if ocb % b == 0 for p in range(1, min(tiles_n, 32) + 1)
                 if b * per * (p + 1) + 1 <= regs and b * per * p >= min(MIN_ACCUMULATORS, b * per * tiles_n)]
        tiles.sort(key=lambda t: t != default)
        b, p = ctx.decide(f"register_tile/{key}", tiles, kind="tile",
                          weights=[8.0 if t == default else (t[0] * t[1]) ** 0.5 for t in tiles])
        unroll_ic = ctx.decide(f"unroll_ic/{key}", (4, 2, 1), kind="unroll", weights=(2.0, 1.0, 1.0))
        winograd_nest(ctx.sch, st.op.output(0), tile=alpha - 2, blocks=b, pixels=p, unroll_ic=unroll_ic)
        return None


BLOCKED_RULES: list[SketchRule] = [PlanBlockedConv(), ScheduleBlockedConv(), PlanWinograd(), ScheduleWinograd()]
