"""A test the machine cannot run is skipped on a developer's machine and fails on CI
(`tests.support.ci`): a CI whose container refuses namespaces or mounts must not go green with
the sandbox's and the storage's proofs skipped. Here against a real `bwrap` on PATH that cannot
confine (as in a container without user namespaces)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from legion.sandbox import probe
from tests.support.ci import on_ci, skip_here_fail_on_ci
from tests.support.sandbox import require_sandbox

REFUSED = "bwrap: No permissions to create new namespace"


@pytest.fixture
def refusing_path(tmp_path: Path) -> str:
    """A PATH whose `bwrap` is installed but refused its namespaces, as in such a container."""
    folder = tmp_path / "bin"
    folder.mkdir()
    bwrap = folder / "bwrap"
    bwrap.write_text(f"#!/bin/sh\necho '{REFUSED}' >&2\nexit 1\n")
    bwrap.chmod(0o755)
    return str(folder)


def outcome(test: Callable[[], object]) -> tuple[str, str]:
    """What `test` did to the test running it: "skipped" or "failed" and why, else "ran"
    (caught here, so that a skip where a failure is due fails this test, not skips it)."""
    try:
        test()
    except pytest.skip.Exception as exc:
        return "skipped", str(exc)
    except pytest.fail.Exception as exc:
        return "failed", str(exc)
    return "ran", ""


@pytest.mark.parametrize(
    ("value", "ci"),
    [(None, False), ("", False), ("0", False), ("false", False), ("true", True), ("1", True)],
)
def test_ci_is_the_ci_variable_set_to_anything_but_off(value: str | None, ci: bool) -> None:
    assert on_ci({} if value is None else {"CI": value}) is ci


def test_a_test_that_cannot_run_here_is_skipped_off_ci_and_fails_on_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert outcome(lambda: skip_here_fail_on_ci("no mounts here")) == ("skipped", "no mounts here")
    monkeypatch.setenv("CI", "true")
    did, why = outcome(lambda: skip_here_fail_on_ci("no mounts here"))
    assert did == "failed" and why.startswith("no mounts here") and "CI must run" in why, why


def test_a_sandbox_refused_its_namespaces_fails_the_test_on_ci(
    monkeypatch: pytest.MonkeyPatch, refusing_path: str
) -> None:
    env = {"PATH": refusing_path}
    assert probe(f"{refusing_path}/bwrap") is not None  # the real probe finds it cannot confine
    monkeypatch.delenv("CI", raising=False)
    did, why = outcome(lambda: require_sandbox(env))
    assert did == "skipped" and "cannot confine a process" in why and REFUSED in why, why
    monkeypatch.setenv("CI", "true")
    did, why = outcome(lambda: require_sandbox(env))
    assert did == "failed" and REFUSED in why and "CI must run this test" in why, why
