"""Shared pytest configuration: hypothesis profiles.

``HYPOTHESIS_PROFILE`` selects one (default ``ci``). Both are deterministic
(``derandomize=True``) and keep no example database, so a failure reproduces
exactly on every machine and the printed blob can be replayed with
``@reproduce_failure``.
"""

import compileall
import logging
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

_common = dict(derandomize=True, deadline=None, database=None, print_blob=True)

settings.register_profile(
    "ci",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    **_common,
)
settings.register_profile("dev", **_common)
# a long random bug hunt (not deterministic):
#   HYPOTHESIS_PROFILE=soak AUTOSCHED_EXAMPLES_SCALE=10 pytest -m property
settings.register_profile(
    "soak",
    derandomize=False,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    """Byte-compile the package once, where ``PYTHONDONTWRITEBYTECODE`` keeps Python from doing it: every
    process the tests start (commands, build and timing workers, Ray's workers) would otherwise compile
    autosched's sources again, about 0.9 s of CPU each (the flag stops the writing of caches, not their use)."""
    if sys.dont_write_bytecode:
        compileall.compile_dir(Path(__file__).resolve().parents[1] / "autosched", quiet=1)


@pytest.fixture(autouse=True)
def _autosched_log_level():
    """The CLI sets the level of the ``autosched`` logger (``-q``: errors only); tests that run the CLI in
    this process must not change what later tests' ``caplog`` sees."""
    logger = logging.getLogger("autosched")
    level = logger.level
    yield
    logger.setLevel(level)
