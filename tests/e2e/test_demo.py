"""`legion demo`, the README's main job, end to end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_legion
from tests.fakes.claude_env import find_claude

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_demo_runs_every_issue_to_done(tmp_path: Path) -> None:
    env = {"LEGION_CLAUDE_BIN": str(find_claude())}
    result = run_legion(
        "demo", "--dir", str(tmp_path / "demo"), "--issues", "2", cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SCRIPTED model" in result.stdout
    assert "2 of 2 issues Done" in result.stdout
    for issue in ("LEG-1", "LEG-2"):
        assert f"{issue}  Retro -> Done" in result.stdout
    repo = tmp_path / "demo" / "repo"
    assert (repo / "src" / "feature_1.py").exists() and (
        repo / "docs" / "solutions" / "leg-2.md"
    ).exists()
    log = run_legion("log", "-n", "500", cwd=repo, env=env)
    assert "dispatch_finisher" in log.stdout


def test_demo_real_needs_a_key(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    result = run_legion(
        "demo", "--real", "--dir", str(tmp_path / "d"), cwd=tmp_path,
        env={**env, "LEGION_CLAUDE_BIN": str(find_claude())},
    )  # fmt: skip
    assert result.returncode != 0
    assert (
        result.stderr.strip()
        == "legion: error: --real needs ANTHROPIC_API_KEY set to your Anthropic API key"
    )
