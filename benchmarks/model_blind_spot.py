"""Does the cost model see kernels of a family its run never measured well? (a diagnostic for issue 7)

    python benchmarks/model_blind_spot.py A.db B.db [--workload conv2d] [--split s3] [--values 14 28]

Trains ``XGBCostModel`` on the first 64/128/256 records of run A (one ``autosched.tune`` database), then
scores A's ten fastest kernels and B's ten fastest kernels whose ``--split`` decision has an innermost
factor in ``--values``, and prints the most important features with their mean values in both groups.
On conv2d: A is a run that settled in the 8-wide family, B one that found the 14/28-wide family.
"""

from __future__ import annotations

import argparse

import numpy as np

import autosched
from autosched.cost_model.features import FEATURE_NAMES
from autosched.cost_model.model import XGBCostModel
from autosched.database import Database
from autosched.measure.result import MeasureInput


def load(path: str, task, split: str) -> list[tuple]:
    """(record, GFLOPS, innermost factor of the split decision) for every record of ``task`` in ``path``."""
    space = task.space("generated")
    out = []
    with Database(path, create=False) as db:
        for r in db.records(task):
            g = 0.0 if r.error_kind else task.flop / np.median(r.costs) / 1e9
            factors = [v for k, v in space.point_of(r.trace).items() if k.split("/")[-1] == split]
            out.append((r, g, factors[0][-1] if factors else None))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--workload", default="conv2d")
    ap.add_argument("--split", default="s3")
    ap.add_argument("--values", type=int, nargs="+", default=[14, 28])
    args = ap.parse_args()
    task = autosched.Task(args.workload, {})
    a, b = load(args.a, task, args.split), load(args.b, task, args.split)
    b_fam = sorted([x for x in b if x[2] in args.values], key=lambda x: -x[1])[:10]
    if not b_fam:
        raise SystemExit(f"{args.b} has no record with {args.split} ending in {args.values}")

    def inputs(rows: list[tuple]) -> list[MeasureInput]:
        return [MeasureInput(task, r.trace) for r, _, _ in rows]

    for n in (64, 128, 256):
        model = XGBCostModel(seed=0)
        model.update(inputs(a[:n]), [r.result for r, _, _ in a[:n]])
        a_top = sorted(a[:n], key=lambda x: -x[1])[:10]
        sa, sb = model.predict(inputs(a_top)), model.predict(inputs(b_fam))
        print(f"trained on A's first {n}: A's 10 fastest ({a_top[-1][1]:.0f}-{a_top[0][1]:.0f} GFLOPS, "
              f"{args.split} inner {sorted({x[2] for x in a_top})}) median score {np.median(sa):.2f}; "
              f"B's 10 fastest with {args.split} inner in {args.values} ({b_fam[-1][1]:.0f}-{b_fam[0][1]:.0f} "
              f"GFLOPS) median score {np.median(sb):.2f}, {np.mean(sb > np.median(sa)):.0%} above A's median")
    names = list(model.feature_gain().items())[:10]
    xa, xb = model.cache.features(inputs(a_top)).mean(0), model.cache.features(inputs(b_fam)).mean(0)  # cached
    print(f"{'feature (by gain, model on 256)':<34} {'gain':>7} {'A fastest':>10} {'B family':>10}")
    for name, gain in names:
        i = FEATURE_NAMES.index(name)
        print(f"{name:<34} {gain:7.2f} {xa[i]:10.3g} {xb[i]:10.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
