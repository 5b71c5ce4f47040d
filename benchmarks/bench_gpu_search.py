"""The search's own time in a cuda tuning run, with and without the run's feature helpers.

    python benchmarks/bench_gpu_search.py                       # ResNet-50's kernels 2 and 3, 64 trials each
    python benchmarks/bench_gpu_search.py --kernels 0 --trials 96 --helpers 3

On a GPU every candidate the evolutionary search breeds or draws is lowered to check the device's limits, so
the search, not the GPU, sets the pace of cuda tuning. This times ``autosched.tune`` of ResNet-50's kernels
(the test suite's seeded ONNX model, ``--target``) with the evolutionary policy, where each candidate's
"cost" is a hash of its trace (no GPU, no build: only the search is timed, and it is the same search whatever
the costs), once with ``AUTOSCHED_FEATURE_HELPERS=0`` (every share of samples, children and features here)
and once with ``--helpers``, in alternating rounds, best of ``--rounds``; and checks that both runs
proposed the same candidates. On a 2-core machine use one helper and nothing else running.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

from autosched.database import Database
from autosched.measure import MeasureResult
from autosched.relay.backend.build_module import extract_tasks
from autosched.relay.frontend import from_onnx
from autosched.search import tune
from autosched.target import host_cpu_name

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _onnx_models import FAMILIES  # noqa: E402


class HashedCosts:
    """A measurer whose cost of a candidate is a hash of its trace: a fixed landscape for the search."""

    accepts_during_build = False

    def __init__(self) -> None:
        self.seen: list[str] = []

    def measure(self, inputs, during_build=None):  # noqa: ANN001, ANN201 - the Measurer protocol
        self.seen += [i.trace.dumps() for i in inputs]
        return [MeasureResult(costs=[1e-4 * (1 + int(hashlib.sha256(i.trace.dumps().encode()).hexdigest()[:8], 16)
                                             / 2**32)]) for i in inputs]


def timed_run(task, trials: int, helpers: int) -> tuple[float, list[str]]:
    os.environ["AUTOSCHED_FEATURE_HELPERS"] = str(helpers)
    measurer = HashedCosts()
    with tempfile.TemporaryDirectory() as d, Database(os.path.join(d, "search.db")) as db:
        t0 = time.perf_counter()
        tune(task, trials, measurer=measurer, database=db, seed=0, remeasure=0)
        return time.perf_counter() - t0, measurer.seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=64, help="trials per kernel (default 64: four batches)")
    ap.add_argument("--helpers", type=int, default=1, help="helper processes (default 1)")
    ap.add_argument("--kernels", default="2,3", help="ResNet-50 task indices (default 2,3)")
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds, best kept (default 1)")
    ap.add_argument("--target", default="cuda -arch=sm_90")
    args = ap.parse_args()
    mod, params = from_onnx(FAMILIES["resnet50"](), shape={"data": (1, 3, 224, 224)})
    tasks = extract_tasks(mod, params, target=args.target)
    print(f"CPU: {host_cpu_name()}; {args.trials} trials per kernel, evolutionary; target {args.target}")
    for k in (int(x) for x in args.kernels.split(",")):
        task = tasks[k]
        best: dict[int, float] = {}
        seen: dict[int, list[str]] = {}
        for _ in range(args.rounds):
            for n in (0, args.helpers):
                time.sleep(1.0)
                dt, seen[n] = timed_run(task, args.trials, n)
                best[n] = min(best.get(n, float("inf")), dt)
        print(f"{task.label[:48]:48s} no helper {best[0]:6.1f} s  {args.helpers} helper(s) "
              f"{best[args.helpers]:6.1f} s  speed-up {best[0] / best[args.helpers]:.2f}x, "
              f"same candidates: {seen[0] == seen[args.helpers]}")


if __name__ == "__main__":
    main()
