"""`ClaudeRuntime.prepare`: what a worker's start writes into Claude Code's own config (the
workspace trusted, the API key approved), under the CLI's lock; a config that already says so
is only read, so a start never waits for a lock a running CLI holds."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from legion.errors import ConfigError
from legion.runtime.claude.runtime import ClaudeRuntime


def config_env(tmp_path: Path, config: object) -> tuple[dict[str, str], Path]:
    folder = tmp_path / "claude-config"
    folder.mkdir()
    path = folder / ".claude.json"
    path.write_text(json.dumps(config))
    return {
        "CLAUDE_CONFIG_DIR": str(folder),
        "ANTHROPIC_API_KEY": "sk-test-0123456789abcdefghij",
    }, path


def test_a_start_trusts_the_workspace_and_keeps_every_other_key(tmp_path: Path) -> None:
    env, path = config_env(tmp_path, {"hasCompletedOnboarding": True, "theme": "dark"})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ClaudeRuntime().prepare(env, workspace)
    config = json.loads(path.read_text())
    assert config["theme"] == "dark"
    assert config["projects"][os.path.realpath(workspace)]["hasTrustDialogAccepted"] is True
    assert config["customApiKeyResponses"]["approved"] == ["0123456789abcdefghij"]
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_config_that_needs_nothing_is_read_without_waiting_for_the_clis_lock(
    tmp_path: Path,
) -> None:
    env, path = config_env(tmp_path, {"hasCompletedOnboarding": True})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ClaudeRuntime().prepare(env, workspace)
    written = path.read_text()
    lock = path.with_name(".claude.json.lock")
    lock.mkdir()  # a running CLI holds its lock (proper-lockfile: a directory)
    started = time.monotonic()
    ClaudeRuntime().prepare(env, workspace)
    assert time.monotonic() - started < 1.0
    assert path.read_text() == written and lock.is_dir()


def test_a_config_not_past_onboarding_is_refused_whether_or_not_locked(tmp_path: Path) -> None:
    env, path = config_env(tmp_path, {"projects": {}})
    with pytest.raises(ConfigError, match="not set up yet"):
        ClaudeRuntime().prepare(env, tmp_path)
    path.write_text("[1, 2")  # half-written: read again under the lock, then refused
    with pytest.raises(ConfigError, match="cannot read"):
        ClaudeRuntime().prepare(env, tmp_path)
