"""Shared test settings."""

from __future__ import annotations

import os
import sys

# The suite starts hundreds of Python processes (its workers, and the servers, CLIs and tools under
# test); with PYTHONDONTWRITEBYTECODE set, as on our CI machines, each one compiled the project and
# rewrote the test modules' asserts again: about an eighth of the suite's CPU. The bytecode goes to
# __pycache__ (ignored by git); the processes the suite starts inherit this environment.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from tests.support import dbutil  # noqa: E402
from tests.support.ci import in_ci  # noqa: E402

# "ci": what Hypothesis' own CI profile does (the same examples on every run, no example database,
# a failure's blob printed to reproduce it) with twice the examples; CI sets CI=true (.ci/run too).
settings.register_profile(
    "ci",
    max_examples=200,
    derandomize=True,
    database=None,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", settings.get_profile("default"), max_examples=100, deadline=None)


settings.load_profile("ci" if in_ci() else "dev")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The test databases still being dropped in the background, and the templates, go now."""
    dbutil.drop_what_is_left()
