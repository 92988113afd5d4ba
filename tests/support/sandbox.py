"""The bubblewrap sandbox, for tests that confine something: it must be installed (the README
asks for it, `.ci/run` installs it); a machine whose kernel or container refuses it the
namespaces it needs is one such a test cannot run on, and is skipped, saying why, except on CI
(`CI` set), where it fails: the containment proof must not be skipped there."""

from __future__ import annotations

import os
from collections.abc import Mapping

from legion.sandbox import Sandbox, find_bwrap, probe
from tests.support.ci import skip_here_fail_on_ci


def require_sandbox(env: Mapping[str, str] | None = None) -> Sandbox:
    """The sandbox this machine gives (bubblewrap found on `env`'s PATH, this process's by
    default); a failure when bubblewrap is missing, a skip when it cannot confine here (a
    failure on CI)."""
    found = find_bwrap(os.environ if env is None else env)
    assert found is not None, "bubblewrap is not installed: apt install bubblewrap"
    problem = probe(found)
    if problem is not None:
        skip_here_fail_on_ci(f"this machine cannot confine a process: {problem}")
    return Sandbox(found, "bubblewrap")
