"""A test the machine cannot run (no namespaces for the sandbox, no mounts for a full disk) is
skipped on a developer's machine, saying why; on CI it fails instead. CI runs the suite with
`CI` set (`CI=true bash .ci/run`), and a CI whose container refuses namespaces or mounts must
not go green with the sandbox's or the storage's proof skipped."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NoReturn

import pytest

CI_VARIABLE = "CI"
# What CI services set `CI` to when it is off (anything else, set, counts as on).
_OFF = frozenset({"", "0", "false", "no"})


def on_ci(env: Mapping[str, str] | None = None) -> bool:
    """Whether the suite runs on CI: `CI` set in `env` (this process's by default), to anything
    but "", 0, false or no."""
    value = (os.environ if env is None else env).get(CI_VARIABLE)
    return value is not None and value.strip().lower() not in _OFF


def skip_here_fail_on_ci(reason: str) -> NoReturn:
    """Skip the running test for `reason`; on CI, fail it: there the proof must run."""
    if on_ci():
        pytest.fail(
            f"{reason} (skipped elsewhere, but {CI_VARIABLE} is set: CI must run this test)",
            pytrace=False,
        )
    pytest.skip(reason)
