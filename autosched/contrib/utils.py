"""A temporary directory with TVM's ``tvm.contrib.utils.tempdir`` interface."""

from __future__ import annotations

import os
import shutil
import tempfile


class TempDirectory:
    """A directory removed when the object is (or on :meth:`remove`); ``relpath(name)`` is a path inside it."""

    def __init__(self, custom_path: str | None = None, keep_for_debug: bool = False):
        if custom_path is not None:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = os.path.abspath(custom_path)
        else:
            self.temp_dir = tempfile.mkdtemp(prefix="autosched-")
        self._remove = custom_path is None and not keep_for_debug

    @property
    def path(self) -> str:
        return self.temp_dir

    def relpath(self, name: str) -> str:
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        return sorted(os.listdir(self.temp_dir))

    def remove(self) -> None:
        if self._remove and self.temp_dir and os.path.isdir(self.temp_dir):
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        self.temp_dir = ""

    def __enter__(self) -> TempDirectory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def __del__(self) -> None:
        try:
            self.remove()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def tempdir(custom_path: str | None = None, keep_for_debug: bool = False) -> TempDirectory:
    return TempDirectory(custom_path, keep_for_debug)


__all__ = ["TempDirectory", "tempdir"]
