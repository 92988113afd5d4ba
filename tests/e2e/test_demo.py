"""`legion demo`, the README's main job, end to end."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.conftest import run_legion
from tests.fakes.claude_env import find_claude
from tests.fakes.codex_env import find_codex

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
        assert re.search(rf"{issue}\s+Retro -> Done", result.stdout)
    # The Claude Code it ran is the one the setting names, and it says so.
    assert "(claude_bin (LEGION_CLAUDE_BIN))" in result.stdout
    repo = tmp_path / "demo" / "repo"
    assert (repo / "src" / "feature_1.py").exists() and (
        repo / "docs" / "solutions" / "leg-2.md"
    ).exists()
    log = run_legion("log", "-n", "500", cwd=repo, env=env)
    assert "dispatch_finisher" in log.stdout


@pytest.mark.parametrize(
    ("runtime", "mode"), [("codex", "auto"), ("mixed", "auto"), ("codex", "llm")]
)
def test_demo_runs_on_codex_and_mixed(tmp_path: Path, runtime: str, mode: str) -> None:
    env = {"LEGION_CLAUDE_BIN": str(find_claude()), "LEGION_CODEX_BIN": str(find_codex())}
    demo = tmp_path / "demo"
    result = run_legion(
        "demo", "--runtime", runtime, "--mode", mode, "--dir", str(demo), "--issues", "1",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 of 1 issue Done" in result.stdout and f"({mode} mode, {runtime})." in result.stdout
    assert "(codex_bin (LEGION_CODEX_BIN))" in result.stdout
    assert ("Claude Code:" in result.stdout) is (runtime == "mixed")
    rollouts = list((demo / "codex-home" / "sessions").rglob("rollout-*.jsonl"))
    # codex: a session per role (the controller's too); mixed: the implementer's only
    assert len(rollouts) == (5 if runtime == "codex" else 1), rollouts
    transcripts = list((demo / "claude-config" / "projects").rglob("*.jsonl"))
    assert (transcripts == []) is (runtime == "codex")
    config = (demo / "repo" / ".legion" / "config.toml").read_text()
    assert ('runtime = "codex"' in config) is (runtime == "codex")
    assert ('runtimes = {"implement" = "codex"}' in config) is (runtime == "mixed")


def test_demo_refuses_an_unknown_runtime(tmp_path: Path) -> None:
    result = run_legion("demo", "--runtime", "gpt", "--dir", str(tmp_path / "d"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "legion: error: unknown runtime 'gpt' (known: claude-code, codex, mixed)"
    )
    assert not (tmp_path / "d").exists()


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


def test_demo_stops_at_once_when_workers_cannot_start(tmp_path: Path) -> None:
    """A Claude Code that cannot start: the demo says why in one line, within seconds."""
    broken = tmp_path / "claude"
    broken.write_text("#!/bin/sh\necho 'claude: this install is broken' >&2\nexit 3\n")
    broken.chmod(0o755)
    started = time.monotonic()
    result = run_legion(
        "demo", "--dir", str(tmp_path / "demo"), "--issues", "1", "--timeout", "120",
        cwd=tmp_path, env={"LEGION_CLAUDE_BIN": str(broken)},
    )  # fmt: skip
    took = time.monotonic() - started
    assert result.returncode == 1, result.stdout + result.stderr
    assert took < 50, took
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("legion: error: the demo stopped: ")
    assert "this install is broken" in errors[0]
