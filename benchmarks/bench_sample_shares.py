"""Drawing fresh samples of a generated cuda space in shares, with the tuning run's feature helpers.

    python benchmarks/bench_sample_shares.py                  # ResNet-50's first kernels, 128 samples each
    python benchmarks/bench_sample_shares.py --n 256 --helpers 3 --kernels 0,3

Each draw of a generated cuda space lowers the kernel (the padding rule's bank analysis and the check of
the GPU's limits), so the evolutionary search's samples cost seconds per proposal: the search, not the GPU,
sets the pace of cuda tuning. For each chosen kernel of ResNet-50 (the test suite's seeded ONNX model,
``--target``, no GPU needed) it times ``space.sample(n)`` three ways, in alternating rounds, best of
``--rounds``: one sequence of draws (outside a tuning run), in shares drawn here only, and in shares with
``--helpers`` helper processes; and checks that the last two give the same traces. On a 2-core machine
use one helper and nothing else running.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from autosched.cost_model.helpers import FeatureHelpers
from autosched.relay.backend.build_module import extract_tasks
from autosched.relay.frontend import from_onnx
from autosched.target import host_cpu_name

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _onnx_models import FAMILIES  # noqa: E402


def timed_sample(task, helpers, n: int) -> tuple[float, list[str]]:
    space = task.space("generated")
    space.helpers, space.dry_sample = helpers, None
    space._points.clear()  # no point remembered from another way
    try:
        t0 = time.perf_counter()
        traces = space.sample(n, np.random.default_rng(0))
        return time.perf_counter() - t0, [t.dumps() for t in traces]
    finally:
        space.helpers = None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=128, help="samples per kernel (default 128: the search's scout)")
    ap.add_argument("--helpers", type=int, default=1, help="helper processes (default 1)")
    ap.add_argument("--kernels", default="0,2,3", help="ResNet-50 task indices (default 0,2,3)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds, best kept (default 2)")
    ap.add_argument("--target", default="cuda -arch=sm_90")
    args = ap.parse_args()
    mod, params = from_onnx(FAMILIES["resnet50"](), shape={"data": (1, 3, 224, 224)})
    tasks = extract_tasks(mod, params, target=args.target)
    print(f"CPU: {host_cpu_name()}; {args.helpers} helper(s); {args.n} samples per kernel; target {args.target}")
    with FeatureHelpers(args.helpers) as pool:
        ready = pool.wait_ready()
        here = FeatureHelpers(0)
        for k in (int(x) for x in args.kernels.split(",")):
            task = tasks[k]
            best: dict[str, float] = {}
            seen: dict[str, list[str]] = {}
            for _ in range(args.rounds):
                for name, helpers in (("one sequence", None), ("shares here", here), ("shares + helpers", pool)):
                    time.sleep(0.5)
                    dt, traces = timed_sample(task, helpers, args.n)
                    best[name] = min(best.get(name, float("inf")), dt)
                    seen[name] = traces
            same = seen["shares here"] == seen["shares + helpers"]
            cells = "  ".join(f"{name} {dt:5.2f} s" for name, dt in best.items())
            print(f"{task.label[:48]:48s} {cells}  speed-up {best['shares here'] / best['shares + helpers']:.2f}x"
                  f" ({ready} helper(s) ready), same traces: {same}")


if __name__ == "__main__":
    main()
