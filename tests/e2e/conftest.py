"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.demo.offline import codex_offline_home
from tests.fakes.responses_server import FakeResponsesServer
from tests.support.codex_env import find_codex
from tests.support.swarm import Swarm, open_swarm


@pytest.fixture
def swarm(tmp_path: Path, project: Path, isolated_env: Path) -> Iterator[Swarm]:
    """A project wired to the real Claude Code CLI, a private tmux server and the scripted
    model server (see `open_swarm`)."""
    with open_swarm(tmp_path, project, isolated_env) as made:
        yield made


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
