"""`legion doctor` and the one-line errors of commands that need Claude Code when it is missing."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

from tests.conftest import run_legion


def no_claude_path(tmp_path: Path) -> str:
    """PATH with git, tmux and npm but no `claude`."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for tool in ("git", "tmux", "npm", "node"):
        found = shutil.which(tool)
        if found and not (folder / tool).exists():
            (folder / tool).symlink_to(found)
    return str(folder)


def fake_claude(tmp_path: Path, version: str) -> Path:
    path = tmp_path / "fake" / "claude"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{version} (Claude Code)'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_doctor_names_what_is_missing_and_how_to_fix_it(tmp_path: Path) -> None:
    result = run_legion("doctor", "--json", cwd=tmp_path, env={"PATH": no_claude_path(tmp_path)})
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    checks = {check["name"]: check for check in report["checks"]}
    assert checks["git"]["ok"] and checks["tmux"]["ok"]
    assert checks["claude"]["ok"] is False
    assert "legion doctor --install" in checks["claude"]["fix"]
    text = run_legion("doctor", cwd=tmp_path, env={"PATH": no_claude_path(tmp_path)})
    assert text.returncode == 1
    assert "MISSING  claude" in text.stdout and "fix: " in text.stdout


def test_doctor_is_happy_with_a_configured_claude_and_warns_about_the_version(
    tmp_path: Path,
) -> None:
    claude = fake_claude(tmp_path, "0.0.1")
    env = {"PATH": no_claude_path(tmp_path), "LEGION_CLAUDE_BIN": str(claude)}
    result = run_legion("doctor", "--json", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    assert checks["claude"]["detail"].startswith(
        f"0.0.1 at {claude} (claude_bin (LEGION_CLAUDE_BIN)"
    )
    assert checks["claude version"]["ok"] is False
    assert checks["claude version"]["required"] is False


def test_dispatch_without_claude_fails_in_one_line_naming_the_fix(
    project: Path, tmp_path: Path
) -> None:
    env = {"PATH": no_claude_path(tmp_path)}
    created = run_legion("issue", "create", "Something", cwd=project)
    assert created.returncode == 0
    result = run_legion("dispatch", "LEG-1", "plan", cwd=project, env=env)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert "Claude Code CLI not found" in result.stderr
    assert "legion doctor --install" in result.stderr
