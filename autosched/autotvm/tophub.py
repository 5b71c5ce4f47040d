"""TVM's ``autotvm.tophub.context``: TVM wraps builds in it to apply the pre-tuned records it downloads from its
TopHub. autosched downloads nothing (a record is only trusted for the CPU that measured it), so the context
applies the logs given as ``extra_files``, and without them the schedules in scope (defaults, or an enclosing
``apply_history_best``) stay as they are."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

from autosched.database.apply import ApplyHistoryBest


@contextlib.contextmanager
def context(target: Any, extra_files: str | os.PathLike | Sequence[str | os.PathLike] | None = None) -> Iterator[None]:
    """Apply the best records of ``extra_files`` (AutoTVM logs or autosched databases) inside the block; ``target``
    is TVM's argument (the records name their own targets)."""
    files = [extra_files] if isinstance(extra_files, (str, os.PathLike)) else list(extra_files or ())
    with contextlib.ExitStack() as stack:
        for f in files:
            stack.enter_context(ApplyHistoryBest(f))
        yield


__all__ = ["context"]
