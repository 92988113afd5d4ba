"""`legion start` writes nothing into your own `~/.claude` or `~/.codex`: Legion's skills are in
each session's own CLI home (`legion.runtime.homes`), where its CLI finds them, and a session
runs with its CLI's updater off (Legion runs the CLI it pinned). Seen from the CLI itself: a
stand-in that writes down, in its own home, its environment, its arguments and the skills it
finds there, from wherever the session runs (confined when the machine can confine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from legion.config import load_project
from legion.core.ids import controller_session_id
from legion.runtime.homes import session_home
from tests.support.cli import LegionRunner
from tests.support.waits import wait_until

SEEN = "seen-by-the-cli"


def stand_in(folder: Path, name: str, home_variable: str) -> Path:
    """A `name` that writes what it was given into `$<home_variable>/SEEN`, then waits."""
    binary = folder / name
    binary.parent.mkdir(exist_ok=True)
    home = f'"${home_variable}"'
    binary.write_text(
        "#!/bin/sh\n"
        f"{{ env; echo '-- args'; printf '%s\\n' \"$@\"; echo '-- skills';"
        f" cd {home}/skills/ && find . -name SKILL.md; }} > {home}/{SEEN}.tmp\n"
        f"mv {home}/{SEEN}.tmp {home}/{SEEN}\n"
        "exec sleep 600\n"
    )
    binary.chmod(0o755)
    return binary


def seen(project: Path, runtime: str) -> tuple[dict[str, str], list[str], list[str]]:
    """The controller's CLI's environment, arguments and skills, once it wrote them down."""
    loaded = load_project(project)
    home = session_home(
        loaded.state_dir, runtime, controller_session_id(loaded.settings.project_id)
    )
    text = wait_until("the CLI started", lambda: _read(home / SEEN), timeout=60)
    env_part, rest = text.split("-- args\n", 1)
    args, skills = rest.split("-- skills\n", 1)
    env = dict(line.split("=", 1) for line in env_part.splitlines() if "=" in line)
    return env, args.splitlines(), sorted(skills.split())


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def run_start(legion: LegionRunner) -> None:
    started = legion("start", "--tick", "3600", "--json")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["pid"] > 0


def test_start_leaves_your_claude_home_alone_and_the_session_finds_legions_skills(
    legion: LegionRunner,
    project: Path,
    tmux_socket: Path,
    isolated_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = isolated_env  # a fresh HOME: your config folder would be ~/.claude
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key-0123456789")
    monkeypatch.setenv(
        "LEGION_CLAUDE_BIN", str(stand_in(tmp_path / "bin", "claude", "CLAUDE_CONFIG_DIR"))
    )
    run_start(legion)
    try:
        env, args, skills = seen(project, "claude-code")
    finally:
        assert legion("stop", "--all").returncode == 0
    assert not (home / ".claude").exists()
    assert {"./legion-controller/SKILL.md", "./legion-worker/SKILL.md"} <= set(skills)
    assert env["DISABLE_AUTOUPDATER"] == "1"  # the pinned CLI never updates itself
    assert "--session-id" in args


def test_start_leaves_your_codex_home_alone_and_the_session_finds_legions_skills(
    legion: LegionRunner,
    project: Path,
    tmux_socket: Path,
    isolated_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = isolated_env  # a fresh HOME: your CODEX_HOME would be ~/.codex
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("LEGION_RUNTIME", "codex")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-0123456789")
    monkeypatch.setenv("LEGION_CODEX_BIN", str(stand_in(tmp_path / "bin", "codex", "CODEX_HOME")))
    run_start(legion)
    try:
        _, args, skills = seen(project, "codex")
    finally:
        assert legion("stop", "--all").returncode == 0
    assert not (home / ".codex").exists()
    assert {"./legion-controller/SKILL.md", "./legion-worker/SKILL.md"} <= set(skills)
    assert args[:2] == ["exec", "--json"]
    # Codex's own check for a newer version is off (its TUI's; belt and braces for `exec`).
    assert "check_for_update_on_startup=false" in args
