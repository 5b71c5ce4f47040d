"""The default schedules of the plain NCHW ``conv2d`` workload (what ``autosched tune --workload conv2d``
starts from) against onnxruntime on the same shapes, side by side in one run.

    python benchmarks/bench_nchw_conv.py [--rows conv_a stem ...] [--threads 2] [--rounds 5] [--seconds 0.5]
                                         [--pause 0.3] [--out benchmarks/results]

For each convolution of a ResNet (3x3 at 64x56x56 and 256x14x14, the 7x7 stride-2 stem, the 1x1 stride-2
downsampling 256->512): the default schedule built for this CPU and for the other vector ISA
(``-mcpu=haswell`` on an AVX-512 host, ``-mcpu=skylake-avx512`` on an AVX2 one: timed where the host runs
it, else built and checked only), each in both of its forms (``direct``: output columns in lanes; ``packed``:
blocked layouts in the schedule, see docs/cpu_kernels.md) with the default form marked. Every build is
checked against numpy once; then all sides and the vendor libraries are timed in ``--rounds`` alternating
rounds, each block after a ``--pause``, each side keeping its best median (benchmarks/_timing.py). The
vendors use the host's ISA: an AVX2 build's ratio to them on an AVX-512 host is a stricter figure than it
would meet on an AVX2 CPU. Prints the CPU; writes ``nchw_conv.json``. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _timing import alternating_medians, median_time  # noqa: E402
from bench_tuning import local_libraries  # noqa: E402

import autosched  # noqa: E402
from autosched.isa import host_cpu, host_runs  # noqa: E402
from autosched.measure.data import make_inputs  # noqa: E402
from autosched.target import Target  # noqa: E402
from autosched.workloads.reference import get_reference  # noqa: E402

ROWS = {
    "conv_a": dict(H=56, W=56, CI=64, CO=64, KH=3, KW=3, stride=1, padding=1),
    "conv_b": dict(H=14, W=14, CI=256, CO=256, KH=3, KW=3, stride=1, padding=1),
    "stem": dict(H=224, W=224, CI=3, CO=64, KH=7, KW=7, stride=2, padding=3),
    "conv_1x1s2": dict(H=28, W=28, CI=256, CO=512, KH=1, KW=1, stride=2, padding=0),
}


def builds(task: autosched.Task) -> tuple[dict[str, tuple], str]:
    """``form -> (schedule, args)`` of the task's default schedule in each form (its template's point with
    every other knob at the expert's default), and the default form."""
    space = task.space("template")
    forms = {form: task.apply(space.generate({"layout": form})[0]) for form in ("direct", "packed")}
    return forms, space.point_of(task.default_trace())["layout"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--pause", type=float, default=0.3)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    a = ap.parse_args()
    host = Target("llvm")
    other = "llvm -mcpu=haswell" if host.cpu.vector_registers >= 32 else "llvm -mcpu=skylake-avx512"
    print(f"CPU: {host_cpu()} (LLVM: {host.cpu.name}, {host.cpu.isa}), {a.threads} threads; other ISA: {other}")
    results = []
    for row in a.rows:
        sides, meta = {}, {}
        for target in ("llvm", other):
            task = autosched.Task("conv2d", dict(ROWS[row]), target)
            forms, chosen = builds(task)
            for form, (sch, args) in forms.items():
                name = f"{'host' if target == 'llvm' else other.split('=')[-1]} {form}" + (
                    " (default)" if form == chosen else "")
                mod = autosched.build(sch, args, task.target)
                mod.set_num_threads(a.threads)
                if not host_runs(task.target):
                    meta[name] = "built, not run: this CPU lacks the ISA"
                    continue
                ins = make_inputs(task, seed=0)
                arrs = [autosched.nd.array(x) for x in ins]
                mod(*arrs)
                ref = get_reference("conv2d")(ins[:-1], **task.args)
                np.testing.assert_allclose(arrs[-1].numpy(), ref, rtol=1e-3, atol=1e-3)
                sides[name] = (lambda m=mod, x=arrs: m(*x))
        with contextlib.ExitStack() as scope:
            vendors = local_libraries(autosched.Task("conv2d", dict(ROWS[row])), a.threads, scope)
            sides.update(vendors)
            best = alternating_medians(sides, a.rounds, a.seconds, a.pause, timer=median_time)
        flop = autosched.Task("conv2d", dict(ROWS[row])).flop
        vendor = min((t for k, t in best.items() if k in vendors), default=None)
        print(f"\n{row} {ROWS[row]}")
        for name, t in best.items():
            ratio = f"{vendor / t:.2f}x the best vendor" if vendor and name not in vendors else ""
            print(f"  {name:34s} {t * 1e3:8.3f} ms {flop / t / 1e9:7.1f} GFLOPS  {ratio}")
        for name, why in meta.items():
            print(f"  {name:34s} {why}")
        results.append({"row": row, "args": ROWS[row], "ms": {k: v * 1e3 for k, v in best.items()},
                        "vendor_ms": None if vendor is None else vendor * 1e3, "not_run": meta})
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "nchw_conv.json").write_text(json.dumps({"cpu": host_cpu(), "llvm_cpu": host.cpu.name,
                                                       "threads": a.threads, "rows": results}, indent=1))
    print(f"\nwrote {a.out / 'nchw_conv.json'}")


if __name__ == "__main__":
    main()
