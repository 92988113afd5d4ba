"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.swarm_env import TEST_SKILL, Swarm
from tests.fakes.claude_env import base_environment, find_claude, offline_variables
from tests.fakes.model_server import FakeModelServer


@pytest.fixture
def swarm(tmp_path: Path, project: Path, isolated_env: Path) -> Iterator[Swarm]:
    claude = find_claude()
    server = FakeModelServer().start()
    config_dir = tmp_path / "claude-config"
    (config_dir / "skills" / "legion-worker").mkdir(parents=True)
    (config_dir / "skills" / "legion-worker" / "SKILL.md").write_text(TEST_SKILL)
    (config_dir / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
    socket_dir = Path(tempfile.mkdtemp(prefix="lgt-"))  # unix socket paths must stay short
    workspace_root = tmp_path / "work spaces"  # a space on purpose
    env = base_environment() | offline_variables(
        server.base_url, home=isolated_env, config_dir=config_dir, proxy_url=server.base_url
    )
    env |= {
        "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"],
        "XDG_CONFIG_HOME": os.environ["XDG_CONFIG_HOME"],
        "GIT_CONFIG_NOSYSTEM": "1",
        "LEGION_TMUX_SOCKET": str(socket_dir / "sock"),
        "LEGION_TMUX_CONFIG": "/dev/null",
        "LEGION_CLAUDE_BIN": str(claude),
        "LEGION_WORKSPACE_ROOT": str(workspace_root),
    }
    swarm = Swarm(project, server, env, config_dir, socket_dir / "sock", workspace_root)
    try:
        yield swarm
    finally:
        swarm.tmux("kill-server")
        server.stop()
        shutil.rmtree(socket_dir, ignore_errors=True)
    assert server.outbound_attempts() == []
