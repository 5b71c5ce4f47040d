"""Shared pytest configuration: hypothesis profiles.

``HYPOTHESIS_PROFILE`` selects one (default ``ci``). Both are deterministic
(``derandomize=True``) and keep no example database, so a failure reproduces
exactly on every machine and the printed blob can be replayed with
``@reproduce_failure``.
"""

import logging
import os

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


@pytest.fixture(autouse=True)
def _autosched_log_level():
    """The CLI sets the level of the ``autosched`` logger (``-q``: errors only); tests that run the CLI in
    this process must not change what later tests' ``caplog`` sees."""
    logger = logging.getLogger("autosched")
    level = logger.level
    yield
    logger.setLevel(level)
