"""Every register tile of the packed NCHW ``conv2d`` (the ``register_tile`` knob of its template space, the
other knobs at their defaults) timed side by side in one run, the default tile marked: the figures behind
``tile_sizes.conv_tile`` (docs/measured_choices.md).

    python benchmarks/bench_conv_tiles.py [--target "llvm -mcpu=haswell"] [--shape '{"H": 14, "W": 14}']
                                          [--tiles '[[2,1,5],[4,1,2]]'] [--rounds 3] [--seconds 0.3]

``--shape`` overrides conv2d's arguments (3x3 256->256 at 14x14 by default); ``--tiles`` times only those.
Each build is checked against numpy once, then all are timed in alternating rounds with a pause before each
block, each keeping its best median (benchmarks/_timing.py). Prints the CPU and the tiles fastest first.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _timing import alternating_medians, median_time  # noqa: E402

import autosched  # noqa: E402
from autosched.isa import host_cpu, host_runs  # noqa: E402
from autosched.workloads.reference import get_reference  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="llvm", help="the target the kernels are built for (default: the host)")
    ap.add_argument("--shape", default="{}", help="JSON of conv2d arguments to override")
    ap.add_argument("--tiles", default=None, help="JSON list of [blocks, rows, pixels] to time (default: all)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.3)
    ap.add_argument("--pause", type=float, default=0.1)
    a = ap.parse_args(argv)
    if not host_runs(a.target):
        sys.exit(f"this CPU ({host_cpu()}) cannot run code built for {a.target!r}")
    args = dict(H=14, W=14, CI=256, CO=256, KH=3, KW=3, stride=1, padding=1) | json.loads(a.shape)
    task = autosched.Task("conv2d", args, a.target)
    space = task.space("template")
    default = space.point_of(task.default_trace())
    knob = next(k for k in space.knobs if k.name == "register_tile")
    wanted = [tuple(t) for t in json.loads(a.tiles)] if a.tiles else None
    tiles = [tuple(t) for t in knob.candidates if wanted is None or tuple(t) in wanted]
    _, tensors = task.default_schedule()
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in tensors[:-1]]
    ref = get_reference("conv2d")(ins, **task.args)
    arrays = [autosched.nd.array(x) for x in ins] + [autosched.nd.array(np.zeros(ref.shape, "float32"))]
    kernels = {}
    for tile in tiles:
        sch, ts = task.apply(space.generate({**default, "layout": "packed", "register_tile": list(tile)})[0])
        f = autosched.build(sch, ts, target=a.target)
        f(*arrays)
        np.testing.assert_allclose(arrays[-1].numpy(), ref, rtol=1e-4, atol=1e-3)
        kernels[tile] = (lambda f=f: f(*arrays))
    best = alternating_medians(kernels, a.rounds, a.seconds, a.pause, timer=median_time)
    mark = tuple(default["register_tile"])
    print(f"{host_cpu()}; built for {a.target}; conv2d {args}; default layout {default['layout']}")
    print("blocks x rows x pixels   ms      GFLOPS")
    for tile, t in sorted(best.items(), key=lambda kv: kv[1]):
        print(f"{'x'.join(map(str, tile)):<24} {t * 1e3:7.3f} {task.flop / t / 1e9:7.1f}"
              f"{'   <- default' if tile == mark else ''}")


if __name__ == "__main__":
    main()
