"""Fail fast: workers that cannot start pause dispatch, and say why.

The real daemon (in this process, as `legion demo` embeds it), real tmux on a private server, real
git and SQLite. The Claude Code CLI is what is broken here: missing, or a program that exits at
once, so none is needed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.backends import open_backends
from legion.config import load_project
from legion.core.model import Status
from legion.daemon import Daemon, DaemonConfig
from legion.store.actionlog import ActionLog, OutcomeKind
from tests.support.cli import Result, run_legion
from tests.support.tmux import start_environment


@pytest.fixture
def env(project: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    """What `legion start` would run with (`start_environment`)."""
    with start_environment(tmp_path) as values:
        yield values


def broken_claude(tmp_path: Path, last_words: str) -> Path:
    """A `claude` that says `last_words` and exits at once, as a broken install does."""
    path = tmp_path / "bin" / "claude"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {last_words!r}\nexit 3\n")
    path.chmod(0o755)
    return path


def issues(project: Path, env: dict[str, str], count: int) -> None:
    tracker = open_backends(load_project(project, env=env)).tracker
    for n in range(count):
        tracker.create_issue(f"Feature {n + 1}")


def run_daemon(project: Path, env: dict[str, str], **config: object) -> Daemon:
    settings = dict(tick=0.2, stop_on_pause=True, run_for=45.0) | config
    daemon = Daemon(load_project(project, env=env), DaemonConfig(**settings), env)  # type: ignore[arg-type]
    daemon.run()
    return daemon


def log_of(project: Path, env: dict[str, str]) -> ActionLog:
    return ActionLog(open_backends(load_project(project, env=env)).db)


def legion(project: Path, env: dict[str, str], *args: str) -> Result:
    return run_legion(*args, cwd=project, env=env)


def test_a_missing_claude_pauses_dispatch_and_the_demo_stops_at_once(
    project: Path, env: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "no-such-claude"
    env["LEGION_CLAUDE_BIN"] = str(missing)
    issues(project, env, 3)
    started = time.monotonic()
    daemon = run_daemon(project, env)
    assert time.monotonic() - started < 20  # stopped at the pause, not at run_for
    reason = daemon.paused_reason
    assert reason is not None
    # One line: the cause (what is missing, where) and the fix.
    assert "\n" not in reason and str(missing) in reason
    assert reason.startswith("dispatch paused: 2 worker starts in a row failed")
    assert "legion start" in reason
    # Said once in the daemon's log, and once in the action log.
    said = [r for r in caplog.records if "dispatch paused" in r.getMessage()]
    assert [(r.levelname, r.getMessage()) for r in said] == [("WARNING", reason)]
    log = log_of(project, env).tail(200)
    paused = [e for e in log if e.action == "pause_dispatch"]
    assert [(e.outcome, e.detail) for e in paused] == [(OutcomeKind.FAILED, reason)]
    # The controller's start failed first, then the first planner's: the others were not even
    # tried, and nothing is left half-started.
    starts = [e for e in log if e.action == "dispatch_planner"]
    assert [e.outcome for e in starts] == [OutcomeKind.FAILED] + [OutcomeKind.DEFERRED] * 2
    assert "dispatch paused" in starts[-1].detail
    tracker = open_backends(load_project(project, env=env)).tracker
    assert all(i.status is Status.TODO and not i.labels for i in tracker.list_issues())
    # `legion status` shows it (text and JSON), `legion reconcile` says it and starts nothing.
    status = json.loads(legion(project, env, "status", "--json").stdout)
    assert status["dispatch_paused"]["reason"] == reason and status["dispatch_paused"]["since"]
    assert f"dispatch:   PAUSED since {status['dispatch_paused']['since']}: {reason}" in (
        legion(project, env, "status").stdout
    )
    again = legion(project, env, "reconcile", "--json")
    assert again.returncode == 0 and f"legion: {reason}" in again.stderr
    outcomes = json.loads(again.stdout)
    assert {o["outcome"] for o in outcomes if o["action"] == "dispatch_planner"} == {"deferred"}
    assert set(outcomes[0]) == {"issue", "action", "outcome", "detail"}  # the JSON kept its shape


def test_the_next_start_clears_the_pause(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    env["LEGION_CLAUDE_BIN"] = str(tmp_path / "no-such-claude")
    issues(project, env, 2)
    reason = run_daemon(project, env).paused_reason
    assert reason is not None
    # Started again with nothing to dispatch (WIP limit 0): the pause is gone with the start.
    env["LEGION_WIP_LIMIT"] = "0"
    daemon = run_daemon(project, env, run_for=0.5)
    assert daemon.paused_reason is None
    resumed = [e for e in log_of(project, env).tail(200) if e.action == "resume_dispatch"]
    assert [e.detail for e in resumed] == [f"was: {reason}"]
    assert json.loads(legion(project, env, "status", "--json").stdout)["dispatch_paused"] is None
    assert legion(project, env, "reconcile").stderr == ""


def test_workers_that_exit_at_once_with_the_same_words_pause_dispatch(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    env["LEGION_CLAUDE_BIN"] = str(broken_claude(tmp_path, "claude: this install is broken"))
    issues(project, env, 3)
    daemon = run_daemon(project, env)
    reason = daemon.paused_reason
    assert reason is not None
    # The worker's own last words (not tmux's "Pane is dead" line), and where to look.
    assert "the worker exited as it started: claude: this install is broken" in reason
    assert "legion peek LEG-" in reason and "Pane is dead" not in reason
    log = log_of(project, env).tail(200)
    failed = [e for e in log if e.action == "worker_start"]
    assert len(failed) >= 2 and all(e.outcome is OutcomeKind.FAILED for e in failed)
    assert [e.action for e in log].count("pause_dispatch") == 1
    # Nothing more is started while paused.
    before = len(failed)
    legion(project, env, "reconcile")
    after = [e for e in log_of(project, env).tail(300) if e.action == "worker_start"]
    assert len(after) == before
