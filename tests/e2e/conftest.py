"""Fixtures of the end-to-end tests. Every test here is marked `e2e` (tests/conftest.py marks
them by folder), and every one that runs workers or the daemon stands on the one `swarm`
fixture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.demo.offline import codex_offline_home
from tests.fakes.responses_server import FakeResponsesServer
from tests.support.codex_env import find_codex
from tests.support.linear_github import LinearAndGitHub, running_linear_and_github
from tests.support.swarm import Daemon, Swarm, failure_sections, open_swarm


@pytest.fixture
def swarm_variables() -> dict[str, str]:
    """Variables added to the swarm's environment: none, unless a module overrides this (its
    project on Linear and GitHub, say)."""
    return {}


@pytest.fixture
def swarm(
    tmp_path: Path, project: Path, isolated_env: Path, swarm_variables: dict[str, str]
) -> Iterator[Swarm]:
    """The `project` (an embedded one, unless a module overrides the fixture) wired to the real
    Claude Code CLI, a private tmux server and the scripted model server (see `open_swarm`)."""
    with open_swarm(tmp_path, project, isolated_env) as made:
        made.env |= swarm_variables
        yield made


@pytest.fixture
def host(swarm: Swarm) -> Iterator[Daemon]:
    """A daemon in manual mode for the swarm: it hosts the sessions the test starts by hand
    (no session starts without a daemon), and runs no controller and no reconcile pass."""
    with Daemon(swarm, mode="manual") as daemon:
        yield daemon


@pytest.fixture
def linear_github(tmp_path: Path) -> Iterator[LinearAndGitHub]:
    """The fake Linear and GitHub servers, running, and the GitHub remote (a bare repository)."""
    with running_linear_and_github(tmp_path) as running:
        yield running


@pytest.fixture
def codex_server(swarm: Swarm, tmp_path: Path) -> Iterator[FakeResponsesServer]:
    """The swarm's environment with Codex set up too: its home's only model provider is this
    scripted server; any other request it tried goes to the swarm's proxy (and fails the test)."""
    with FakeResponsesServer() as server:
        swarm.env |= codex_offline_home(tmp_path / "codex-home", server.base_url)
        swarm.env["LEGION_CODEX_BIN"] = str(find_codex())
        yield server
    assert server.outbound_attempts() == [], [r.path for r in server.outbound_attempts()]
    assert server.unknown_requests() == [], [r.path for r in server.unknown_requests()]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test on a swarm (or on several, a fleet's hosts) reports what its sessions
    showed at the moment it failed (each pane's last lines), the model requests that came, and
    the daemon's log: what is needed to tell a flake's cause after the fact, when the test's
    folders are gone."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    swarms = {n: v for n, v in getattr(item, "funcargs", {}).items() if isinstance(v, Swarm)}
    seen: set[int] = set()  # a fleet's `alpha` is its `swarm`: shown once, by its own name
    for name, swarm in sorted(swarms.items(), key=lambda named: named[0] == "swarm"):
        if id(swarm) in seen:
            continue
        seen.add(id(swarm))
        prefix = "" if len(swarms) == 1 else f"{name}: "
        for title, text in failure_sections(swarm):
            report.sections.append((prefix + title, text))
