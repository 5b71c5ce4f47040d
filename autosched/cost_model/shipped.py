"""The cost model shipped with autosched: an XGBoost ranker trained on the shipped tuning logs (one trained at
tuning time on a database's other tasks is :mod:`autosched.cost_model.transfer`).

It is package data (``autosched/cost_model/data/pretrained.ubj`` and ``pretrained.json``), read on first use
with :mod:`importlib.resources`: no network, no training, nothing at import. A new task with no records of
its own starts from it (``tune(..., cost_model="pretrained")``, and the default when the database holds no
record of the task); the task's own records then train trees on top of it. The model is refused, with one
warning naming the command that retrains it, when it was trained on other features than this process
computes (``features.py`` changed since: another ``FEATURES_VERSION`` or other ``FEATURE_NAMES``).
"""

from __future__ import annotations

import json
import logging
from importlib import resources
from pathlib import Path
from typing import Any

from autosched.cost_model.features import feature_fingerprint
from autosched.cost_model.model import XGBCostModel
from autosched.cost_model.xgb import xgboost

log = logging.getLogger("autosched.cost_model")

MODEL_FILE = "pretrained.ubj"
META_FILE = "pretrained.json"
RETRAIN = "python -m autosched.cli.train_pretrained"


_loaded: dict[str | None, tuple[bytes, dict]] = {}  # folder (None: the package data) -> model bytes, metadata
_warned: set[str | None] = set()  # folders whose refusal was logged


def _read(where: str | None) -> tuple[bytes, dict] | str:
    """The model's bytes and metadata from the folder ``where`` (None: the package data), or why not. Read once
    per process; a refusal is not remembered, so a folder written later (a retrained model) is read then."""
    got = _loaded.get(where)
    if got is not None:
        return got
    folder: Any = resources.files("autosched.cost_model") / "data" if where is None else Path(where)
    try:
        raw = (folder / MODEL_FILE).read_bytes()
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return f"the pretrained cost model in {folder} does not load ({e})"
    if meta.get("feature_fingerprint") != feature_fingerprint():
        return (f"the pretrained cost model in {folder} was trained on other features (fingerprint "
                f"{meta.get('feature_fingerprint')}, features version {meta.get('features_version')}) than this "
                f"autosched computes ({feature_fingerprint()}): autosched/cost_model/features.py changed since. "
                f"Retrain it from the repository root with `{RETRAIN}`")
    _loaded[where] = raw, meta
    return raw, meta


def pretrained_info(where: str | Path | None = None) -> dict | None:
    """The metadata of the pretrained model in ``where`` (default: the shipped one): what it was trained on,
    when, its held-out figures; None when it cannot be used here."""
    got = _read(None if where is None else str(where))
    return None if isinstance(got, str) else dict(got[1])


def pretrained_booster(where: str | Path | None = None) -> Any:
    """A fresh ``xgboost.Booster`` of the pretrained model in ``where`` (default: the shipped one), or None,
    with one warning per process and folder, when it cannot be used here (missing, or trained on other
    features)."""
    key = None if where is None else str(where)
    got = _read(key)
    if isinstance(got, str):
        if key not in _warned:
            _warned.add(key)
            log.warning("%s; starting from a cold model instead", got)
        return None
    xgb = xgboost()

    booster = xgb.Booster()
    booster.load_model(bytearray(got[0]))
    booster.set_param({"nthread": 1})
    return booster


def suits(task: Any) -> bool:
    """False when the shipped model was trained on other kinds of target than ``task``'s (a CPU-trained model
    does not know GPU kernels); True otherwise, also when it does not load (then :func:`load_pretrained`
    warns)."""
    info = pretrained_info()
    return info is None or task.target.kind in info.get("target_kinds", ["llvm"])


def load_pretrained(seed: int = 0, where: str | Path | None = None) -> XGBCostModel:
    """An :class:`XGBCostModel` that starts from the pretrained model in ``where`` (default: the shipped one)
    and learns the task's own records on top of it; a cold one (with a warning) when that model cannot be
    used here. Its ``origin`` says which it is."""
    base = pretrained_booster(where)
    if base is None:
        return XGBCostModel(seed=seed, origin="cold (the pretrained model cannot be used here: see the warning)")
    meta = pretrained_info(where) or {}
    what = "the shipped pretrained model" if where is None else f"the pretrained model in {where}"
    return XGBCostModel(seed=seed, base=base,
                        origin=f"{what} ({meta.get('records', '?')} records of {meta.get('tasks', '?')} tasks, "
                               f"{meta.get('date', '?')})")
