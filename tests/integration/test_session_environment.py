"""The environment a session is started with holds no model key but the one its own CLI needs
for its own provider, and none at all when the daemon's proxy holds that key: whatever a
session's CLI holds, the model's commands can read (`/proc/$PPID/environ`). Seen from the CLI
itself: a stand-in `codex` that writes down the environment its session's turn loop gave it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from legion import proxy
from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.demo.codex_config import API_KEY_ENV, codex_config_toml
from legion.plugins import CODEX
from legion.runtime.codex.provider import OPENAI_KEY_VARIABLES
from tests.support.waits import wait_until

KEYS = {
    "ANTHROPIC_API_KEY": "sentinel-anthropic",
    **{name: f"sentinel-{name.lower()}" for name in OPENAI_KEY_VARIABLES},
    API_KEY_ENV: "sentinel-provider",  # the key of the provider Codex's config chooses
}


def _codex_environment(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, daemon_holds: bool
) -> dict[str, str]:
    """The environment a Codex worker's `codex` is run with, its provider not `openai`."""
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(codex_config_toml("http://127.0.0.1:9"))
    seen = tmp_path / "codex-env"
    codex = tmp_path / "bin" / "codex"
    codex.parent.mkdir()
    codex.write_text(f"#!/bin/sh\nenv > {seen}.tmp && mv {seen}.tmp {seen}\nsleep 30\n")
    codex.chmod(codex.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ) | KEYS
    env |= {"CODEX_HOME": str(codex_home), "LEGION_CODEX_BIN": str(codex)}
    env |= {"LEGION_SANDBOX": "none"}
    loaded = load_project(project, env)
    # A daemon runs for the project (its proxy holding Codex's key, or no key).
    monkeypatch.setattr("legion.sessions.supervisor.running_pid", lambda project: os.getpid())
    monkeypatch.setattr("legion.sessions.supervisor.daemon_ready", lambda project: True)
    held = [CODEX] if daemon_holds else []
    proxy.write_access(loaded.state_dir, proxy.access("http://127.0.0.1:9", held))
    backends = open_backends(loaded)
    workers = open_workers(loaded, backends, env)
    try:
        workers.supervisor.start_session_window(
            "LEG-1-implement",
            "sid-env",
            "Go on",
            project,
            {"LEGION_MODE": "implement"},
            issue="LEG-1",
            runtime=workers.runtimes.named(CODEX),
        )
        try:
            wait_until("codex started", seen.exists, timeout=60)
        except TimeoutError:
            window = workers.windows.live_window("sid-env")
            screen = "(no window)" if window is None else workers.windows.screen(window.id)
            raise AssertionError(f"codex never started: {screen}") from None
        lines = seen.read_text().splitlines()
    finally:
        workers.windows.close_all()
        backends.db.close()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_a_codex_session_gets_its_own_providers_key_and_no_other(
    project: Path, tmp_path: Path, tmux_socket: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _codex_environment(project, tmp_path, monkeypatch, daemon_holds=False)
    assert found.get(API_KEY_ENV) == KEYS[API_KEY_ENV]
    others = {name for name in KEYS if name != API_KEY_ENV}
    assert not others & found.keys(), others & found.keys()
    assert not set(KEYS.values()) - {KEYS[API_KEY_ENV]} & set(found.values())


def test_a_codex_session_gets_no_key_when_the_daemon_holds_it(
    project: Path, tmp_path: Path, tmux_socket: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _codex_environment(project, tmp_path, monkeypatch, daemon_holds=True)
    assert not set(KEYS.values()) & set(found.values()), found
    assert found.get("LEGION_MODEL_TOKEN")  # its capability, where its provider looks
