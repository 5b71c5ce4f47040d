"""Which timing ranks a model's kernels as they run inside the model: warm caches (a kernel repeated alone, what
tuning measures by default) or cold caches (its arguments evicted before each run)? (issue 44's evidence for
what ``autosched tune --model`` should time with)

    python benchmarks/model_ranking.py --model gpt2_small --db /tmp/gpt2.db [--top 3] [--threads 2]

For every kernel (task) of the model: its default schedule and the ``--top`` fastest distinct records of the
database (made by ``autosched tune --model``) are measured again, once with warm caches and once cold, each
into a fresh database of its own (the two in alternating order, candidate by candidate). The model is then
built three ways: untuned (default schedules), with the warm ranking's pick per kernel, with the cold
ranking's pick per kernel; the three builds and onnxruntime are checked against each other and timed in
alternating rounds, each block after a pause, each keeping its best round median. The build whose picks run
faster inside the model is the timing that ranks better. Prints per kernel where the two rankings disagree,
and the latencies; writes ``OUT/model_ranking.json``. On a 2-core machine run it with nothing else running.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from _timing import alternating_medians  # noqa: E402
from bench_e2e import TRANSFORMERS, build_autosched, ort_session  # noqa: E402

import _onnx_models  # noqa: E402
import _transformer_models  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.database.database import open_database  # noqa: E402
from autosched.measure.measurer import Measurer  # noqa: E402
from autosched.measure.result import MeasureInput  # noqa: E402
from autosched.measure.runner import RunConfig  # noqa: E402
from autosched.relay.backend.build_module import extract_tasks  # noqa: E402
from autosched.target import host_cpu_name  # noqa: E402


def load(name: str):
    """(onnx model, inputs) of a benchmark model by name."""
    if name in TRANSFORMERS:
        make, sizes = TRANSFORMERS[name]
        model = make(**sizes)
        return model, _transformer_models.token_inputs(model, sizes["seq"], sizes["vocab"])
    model = getattr(_onnx_models, f"make_{name}")()
    rng = np.random.default_rng(0)
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    return model, {inp.name: rng.standard_normal(shape).astype(np.float32)}


def candidates(task, db, top: int) -> list:
    """The task's default trace and its ``top`` fastest distinct traces in ``db``."""
    out, seen = [], set()
    try:
        d = task.default_trace()
        out.append(("default", d))
        seen.add(d.dumps())
    except Exception:  # noqa: BLE001 - a kernel without a default schedule ranks its records only
        pass
    for r in db.best(task, k=4 * top):
        if r.trace.dumps() not in seen and sum(1 for n, _ in out if n != "default") < top:
            seen.add(r.trace.dumps())
            out.append((f"record {r.id}", r.trace))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gpt2_small")
    ap.add_argument("--db", required=True, help="the database `autosched tune --model` filled for this model")
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    import os

    os.environ["AUTOSCHED_NUM_THREADS"] = str(args.threads)
    model, inputs = load(args.model)
    sess = ort_session(model.SerializeToString(), args.threads)
    ref = sess.run(None, inputs)[0]
    mod, params = relay.frontend.from_onnx(model)
    tasks = extract_tasks(mod, params, "llvm")
    src, own = open_database(args.db, create=False)
    work = Path(tempfile.mkdtemp(prefix="model-ranking-"))
    dbs = {how: open_database(str(work / f"{how}.db"))[0] for how in ("warm", "cold")}
    configs = {"warm": RunConfig(num_threads=args.threads),
               "cold": RunConfig(num_threads=args.threads, flush_cache=True, number=1, min_repeat_ms=0.0)}
    per_task = []
    # no adaptive cut-off: every candidate is timed to the end, however slow against the task's best
    with Measurer(backend="local", config=configs["warm"], timeout_factor=1e6) as warm, \
            Measurer(backend="local", config=configs["cold"], timeout_factor=1e6) as cold:
        measurers = {"warm": warm, "cold": cold}
        for i, task in enumerate(tasks):
            cands = candidates(task, src, args.top)
            if len(cands) < 2:
                continue
            costs: dict[str, list[float]] = {"warm": [], "cold": []}
            for j, (_, trace) in enumerate(cands):
                order = ("warm", "cold") if j % 2 == 0 else ("cold", "warm")
                for how in order:
                    inp = MeasureInput(task, trace)
                    (res,) = measurers[how].measure([inp])
                    dbs[how].commit_many([(inp, res)])
                    costs[how].append(res.cost)
                    if not res.ok:
                        print(f"  {cands[j][0]} failed {how}: {res.error_kind} {res.error_msg[:200]}", file=sys.stderr)
            pick = {how: cands[int(np.argmin(c))][0] for how, c in costs.items()}
            row = {"task": task.label[:90], "weight": float(task.weight),
                   "candidates": [n for n, _ in cands], "warm_us": [c * 1e6 for c in costs["warm"]],
                   "cold_us": [c * 1e6 for c in costs["cold"]], "pick": pick}
            per_task.append(row)
            flag = "" if pick["warm"] == pick["cold"] else "   <- the rankings disagree"
            print(f"[{i + 1}/{len(tasks)}] {row['task'][:60]} x{task.weight}: warm picks {pick['warm']}, "
                  f"cold picks {pick['cold']}{flag}", file=sys.stderr, flush=True)
    if own:
        src.close()
    for d in dbs.values():
        d.close()
    fns = {"onnxruntime": lambda: sess.run(None, inputs)}
    errors = {}
    for label, d in (("untuned", None), ("warm picks", str(work / "warm.db")), ("cold picks", str(work / "cold.db"))):
        m, _, _ = build_autosched(mod, params, d)
        m.set_input(**inputs)
        m.run()
        y = m.get_output(0)
        errors[label] = float(np.abs(y - ref).max() / np.abs(ref).max())
        fns[label] = m.run
    best = alternating_medians(fns, rounds=7)
    result = {"cpu": host_cpu_name(), "threads": args.threads, "model": args.model, "db": args.db,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "tasks": per_task,
              "disagree": sum(r["pick"]["warm"] != r["pick"]["cold"] for r in per_task),
              "ms": {k: v * 1e3 for k, v in best.items()}, "max_rel_err": errors}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "model_ranking.json").write_text(json.dumps(result, indent=1))
    print(f"\n{args.model} on {host_cpu_name()}, {args.threads} threads: the warm and cold rankings pick "
          f"different kernels for {result['disagree']} of {len(per_task)} tasks")
    for k, v in best.items():
        rel = f"  {v / best['onnxruntime']:.3f}x onnxruntime" if k != "onnxruntime" else ""
        err = f"  max rel err {errors[k]:.1e}" if k in errors else ""
        print(f"  {k:<12} {v * 1e3:8.2f} ms{rel}{err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
