"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.swarm_env import Swarm, open_swarm


@pytest.fixture
def swarm(tmp_path: Path, project: Path, isolated_env: Path) -> Iterator[Swarm]:
    """A project wired to the real Claude Code CLI, a private tmux server and the scripted
    model server (see `open_swarm`)."""
    with open_swarm(tmp_path, project, isolated_env) as made:
        yield made
