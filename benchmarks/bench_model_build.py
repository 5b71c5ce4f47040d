"""How long ``relay.build`` of a model takes, in the build's process alone and with its build workers.

    python benchmarks/bench_model_build.py                        # ResNet-50 and DenseNet-121
    python benchmarks/bench_model_build.py --families vgg11 --rounds 2

Each family is the test suite's seeded ONNX model (``tests/_onnx_models.FAMILIES``), imported once and built
for this CPU (``llvm``, default schedules) with ``AUTOSCHED_BUILD_JOBS=1`` (code generation and LLVM in this
process) and with the default (one worker per core), in alternating rounds, best of ``--rounds``; both
builds' outputs are compared on one random input. Needs the machine to itself.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from autosched import relay
from autosched.codegen.objcompile import JOBS_ENV, build_jobs
from autosched.runtime.graph_executor import GraphModule
from autosched.target import host_cpu_name

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _onnx_models import FAMILIES  # noqa: E402


def timed_build(mod, params, jobs: str | None) -> tuple[float, Any]:
    if jobs is None:
        os.environ.pop(JOBS_ENV, None)
    else:
        os.environ[JOBS_ENV] = jobs
    t0 = time.perf_counter()
    built = relay.build(mod, target="llvm", params=params)
    return time.perf_counter() - t0, built


def run(built, data: np.ndarray) -> np.ndarray:
    m = GraphModule(*built)
    m.set_input("data", data)
    m.run()
    got = m.get_output(0)
    return np.asarray(got.numpy() if hasattr(got, "numpy") else got)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default="resnet50,densenet121")
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds, best kept (default 1)")
    args = ap.parse_args()
    default_jobs = build_jobs() if not os.environ.get(JOBS_ENV) else int(os.environ[JOBS_ENV])
    print(f"CPU: {host_cpu_name()}; {os.cpu_count()} cores; workers by default: {default_jobs}")
    for name in args.families.split(","):
        model = FAMILIES[name]()
        mod, params = relay.frontend.from_onnx(model, shape={"data": (1, 3, 224, 224)})
        data = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32")
        best: dict[str, float] = {}
        outs: dict[str, np.ndarray] = {}
        for _ in range(args.rounds):
            for label, jobs in (("1 process", "1"), ("workers", None)):
                time.sleep(1.0)
                dt, built = timed_build(mod, params, jobs)
                best[label] = min(best.get(label, float("inf")), dt)
                outs[label] = run(built, data)
        same = np.allclose(outs["1 process"], outs["workers"], rtol=1e-5, atol=1e-5)
        print(f"{name:14s} build in 1 process {best['1 process']:6.1f} s  with workers {best['workers']:6.1f} s  "
              f"({best['1 process'] / best['workers']:.2f}x), same outputs: {same}")


if __name__ == "__main__":
    main()
