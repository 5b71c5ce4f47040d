"""The shipped tuning logs stay usable: every line imports (a workload whose computation changed since it was
tuned would be refused line by line), and the best record of each built-in workload replays, builds and
equals numpy. A change to a workload's computation that orphans its shipped log fails here, not silently at a
user's build."""

from pathlib import Path

import numpy as np
import pytest

import autosched
from autosched.database import Database
from autosched.workloads.reference import get_reference

LOGS = sorted((Path(__file__).resolve().parent.parent / "tuning_logs").glob("*.jsonl"))
MAX_LOG_BYTES = 1_000_000  # shipped logs are compact (`autosched db export --best K`, tuning_logs/make_logs.sh)
BUILTIN = ["batch_matmul", "conv2d", "dense", "depthwise_conv2d", "elementwise", "matmul", "pool2d", "softmax"]


def test_every_builtin_workload_has_a_log():
    assert {p.stem for p in LOGS} >= set(BUILTIN)


@pytest.mark.parametrize("path", LOGS, ids=[p.stem for p in LOGS])
def test_log_is_under_1_mb(path):
    assert path.stat().st_size < MAX_LOG_BYTES, (f"{path.name} is {path.stat().st_size:,} bytes: export it with "
                                                 f"fewer records per task (autosched db export --best K)")


@pytest.mark.parametrize("path", LOGS, ids=[p.stem for p in LOGS])
def test_log_imports_without_a_bad_line(path, tmp_path):
    with Database(str(tmp_path / "t.db")) as db:
        report = db.import_(path)
    assert report.ok and report.imported > 0, str(report)


@pytest.mark.parametrize("name", BUILTIN)
def test_best_record_of_the_log_replays_and_equals_numpy(name, tmp_path):
    log = Path(LOGS[0]).parent / f"{name}.jsonl"
    with Database(str(tmp_path / "t.db")) as db:
        db.import_(log)
        recs = db.records(workload_name=name, ok=True)
    best = min(recs, key=lambda r: r.cost)
    task = autosched.Task(name, best.workload_args)
    assert task.workload_key == best.workload_key
    sch, args = task.apply(best.trace)
    mod = autosched.build(sch, args)
    rng = np.random.default_rng(0)
    ins = [(rng.integers(-8, 9, size=tuple(int(d) for d in t.shape)) / 8.0).astype(t.dtype) for t in args[:-1]]
    out = np.full(tuple(int(d) for d in args[-1].shape), np.nan, dtype=args[-1].dtype)
    mod(*ins, out)
    want = get_reference(name)([a.astype(np.float64) for a in ins], **task.args)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_resnet18_log_covers_every_kernel_of_the_model_it_was_made_for(tmp_path):
    """The model log keys each fused kernel by its graph in blocked layouts: a change to the layout pass or the
    fusion rules that orphans it (the build would silently fall back to defaults) fails here."""
    import json
    import sys

    pytest.importorskip("onnx")
    sys.path.insert(0, str(Path(__file__).parent))
    from _onnx_models import make_resnet18
    from autosched import relay
    from autosched.relay.frontend import from_onnx

    log = Path(LOGS[0]).parent / "resnet18.jsonl"
    targets = {json.loads(line)["target"] for line in log.read_text().splitlines()}
    assert len(targets) == 1, targets
    mod, params = from_onnx(make_resnet18(batch=1, image=224), shape={"data": (1, 3, 224, 224)})
    tasks = relay.extract_tasks(mod, params, targets.pop())
    with Database(str(tmp_path / "t.db")) as db:
        db.import_(log)
        tuned = {r.workload_key for r in db.records(ok=True)}
    missing = [t.label for t in tasks if t.workload_key not in tuned]
    assert len(tasks) >= 18 and not missing, missing
