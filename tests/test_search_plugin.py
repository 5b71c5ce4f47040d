"""A third-party policy package (examples/autosched-hillclimb), installed in the test run and used to tune."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "autosched-hillclimb"


def test_installed_plugin_is_discovered_and_tunes(tmp_path):
    site = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                          "--target", str(site), str(EXAMPLE)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert list(site.glob("autosched_hillclimb-*.dist-info")), "installed with its entry points"
    code = f"""
import autosched
from autosched.search import list_policies
assert "hillclimb" in list_policies(), list_policies()
task = autosched.Task("matmul", dict(M=32, N=32, K=32))
best = autosched.tune(task, 12, policy="hillclimb", database={str(tmp_path / 'tuning.db')!r}, backend="local",
                      batch_size=4, seed=0, remeasure=0)
from autosched.database import Database
with Database({str(tmp_path / 'tuning.db')!r}) as db:
    n = db.count(task)
print("TUNED", n, best is not None)
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "TUNED 12 True" in run.stdout, run.stdout
