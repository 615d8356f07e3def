"""Shared test settings."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

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


# CI=false, 0 or empty is not CI.
settings.load_profile("ci" if os.environ.get("CI", "").strip().lower() not in ("", "0", "false") else "dev")
