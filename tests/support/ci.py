"""Whether the tests run in CI, and what a test does when what it needs is missing: CI must run every
test, so there it fails; elsewhere it skips, saying why."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """CI sets CI=true (`.ci/run` too); CI=false, 0 or empty is not CI."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def unavailable(reason: str) -> NoReturn:
    """Fail the calling test in CI, skip it elsewhere, for ``reason``."""
    if in_ci():
        pytest.fail(f"in CI: {reason}")
    pytest.skip(reason)
