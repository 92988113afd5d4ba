"""The daemon's checkpoint step (`legion.daemon.checkpoint_step`), alone, with real git and
SQLite: a worker's workspace is checkpointed when its session moved, at a turn's end or every
`checkpoint_every` seconds mid-turn, and not again while nothing moved; a workspace that cannot
be checkpointed is said once in the action log, however many ticks pass."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from legion.core.model import Mode
from legion.daemon.checkpoint_step import WorkspaceCheckpoints
from legion.runtime.transcript import TranscriptSummary, Turn
from legion.sessions.registry import WorkerRecord
from legion.store.actionlog import ActionLog
from legion.store.sqlite import SqliteStore
from legion.workspaces import checkpoint
from legion.workspaces.git_worktree import GitWorktrees
from tests.support.cli import git


class Runtime:
    """A CLI whose transcript is where the test put it and says what the test says."""

    def __init__(self, transcript: Path) -> None:
        self.path = transcript
        self.turn = Turn.OPEN

    def transcript(self, workspace: Path, sid: str) -> Path:
        return self.path

    def summarize(self, transcript: Path) -> TranscriptSummary:
        return TranscriptSummary(1, self.turn, None)


def issue_workspace(tmp_path: Path) -> tuple[GitWorktrees, Path]:
    """A repository with one commit, and LEG-1's workspace of it, as Legion makes it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    identity = ["-c", "user.name=T", "-c", "user.email=t@t"]
    git(repo, *identity, "commit", "-q", "--allow-empty", "-m", "base")
    worktrees = GitWorktrees(repo, tmp_path / "ws", "main")
    return worktrees, worktrees.ensure("LEG-1").path


def step(
    tmp_path: Path,
    worktrees: GitWorktrees,
    workspace: Path,
    every: float,
    host: str = "build-1",
) -> tuple[WorkspaceCheckpoints, Runtime]:
    """The step, over one worker record (run on `host`), on this machine, host `build-1`."""
    record = WorkerRecord(
        1, "LEG-1", Mode.IMPLEMENT, "sid", "leg-1-implement", workspace, "t", host=host
    )
    runtime = Runtime(tmp_path / "session.jsonl")
    workers = SimpleNamespace(
        registry=SimpleNamespace(current=lambda: [record]),
        runtimes=SimpleNamespace(of=lambda record: runtime),
        env={},
        host="build-1",
        workspaces=worktrees,
        issue_transcripts=lambda issue, workspace: {"sid": runtime.path},
    )
    log = ActionLog(SqliteStore(tmp_path / "legion.db"))
    return WorkspaceCheckpoints(workers, log, every), runtime  # type: ignore[arg-type]


def touch(path: Path, text: str, at: float) -> None:
    path.write_text(text)
    os.utime(path, (at, at))


def test_a_moved_session_is_checkpointed_at_its_turns_end_or_when_due(tmp_path: Path) -> None:
    worktrees, workspace = issue_workspace(tmp_path)
    checkpoints, runtime = step(tmp_path, worktrees, workspace, every=3600)
    checkpoints.run()
    assert checkpoint.find(worktrees.repo, "LEG-1") is None  # no session yet: nothing to keep
    touch(runtime.path, "turn 1\n", 1000.0)
    (workspace / "a.txt").write_text("one\n")
    checkpoints.run()  # first seen mid-turn: not at once
    assert checkpoint.find(worktrees.repo, "LEG-1") is None
    runtime.turn = Turn.ENDED
    checkpoints.run()  # its turn ended: taken
    first = checkpoint.find(worktrees.repo, "LEG-1")
    assert first is not None
    runtime.turn = Turn.OPEN
    (workspace / "a.txt").write_text("two\n")
    checkpoints.run()  # the session did not move: not again
    assert checkpoint.find(worktrees.repo, "LEG-1") == first
    touch(runtime.path, "turn 1, more\n", 1001.0)
    checkpoints.run()  # moved, mid-turn, and one was taken lately: later
    assert checkpoint.find(worktrees.repo, "LEG-1") == first
    runtime.turn = Turn.ENDED
    checkpoints.run()  # its turn ended: taken
    second = checkpoint.find(worktrees.repo, "LEG-1")
    assert second is not None and second != first
    assert git(workspace, "show", f"{second.commit}:workspace/a.txt") == "two\n"
    # Mid-turn, once `checkpoint_every` has passed since the last.
    checkpoints.every = 0.0
    runtime.turn = Turn.OPEN
    touch(runtime.path, "turn 2\n", 1002.0)
    checkpoints.run()
    third = checkpoint.find(worktrees.repo, "LEG-1")
    assert third is not None and third != second
    assert ActionLog(SqliteStore(tmp_path / "legion.db")).tail(10) == []  # successes say nothing


def test_a_workspace_that_cannot_be_checkpointed_is_said_once(tmp_path: Path) -> None:
    worktrees, workspace = issue_workspace(tmp_path)
    (workspace / ".git").write_text("gitdir: /nowhere\n")  # a worktree whose repository is gone
    checkpoints, runtime = step(tmp_path, worktrees, workspace, every=0.0)
    for at in (1000.0, 1001.0, 1002.0):
        touch(runtime.path, f"{at}\n", at)
        checkpoints.run()
    entries = ActionLog(SqliteStore(tmp_path / "legion.db")).tail(10)
    assert [(e.issue, e.action, e.outcome.value) for e in entries] == [
        ("LEG-1", "checkpoint", "failed")
    ]
    assert entries[0].detail.startswith("leg-1-implement: ")


def test_only_this_hosts_workers_are_checkpointed(tmp_path: Path) -> None:
    """A worker recorded on another host of the fleet is that host's to checkpoint."""
    worktrees, workspace = issue_workspace(tmp_path)
    elsewhere, runtime = step(tmp_path, worktrees, workspace, every=0.0, host="build-2")
    runtime.turn = Turn.ENDED
    touch(runtime.path, "turn 1\n", 1000.0)
    elsewhere.run()
    assert checkpoint.find(worktrees.repo, "LEG-1") is None
    here, runtime = step(tmp_path, worktrees, workspace, every=0.0, host="build-1")
    runtime.turn = Turn.ENDED
    touch(runtime.path, "turn 1\n", 1000.0)
    here.run()
    assert checkpoint.find(worktrees.repo, "LEG-1") is not None


def test_a_worker_asked_of_this_host_is_not_checkpointed_before_it_starts_here(
    tmp_path: Path,
) -> None:
    """The leader records a start it asks of this host with no workspace yet (`Path()`, set
    when it starts here). A session whose transcript is found from its id alone (Codex's) was
    looked at then, its workspace read as the daemon's own folder, and a failed checkpoint
    said; nothing is done until the worker has its workspace."""
    worktrees, _ = issue_workspace(tmp_path)
    asked, runtime = step(tmp_path, worktrees, Path(), every=0.0)
    runtime.turn = Turn.ENDED
    touch(runtime.path, "turn 1 (on the host it came from)\n", 1000.0)
    asked.run()
    assert ActionLog(SqliteStore(tmp_path / "legion.db")).tail(10) == []
    assert checkpoint.find(worktrees.repo, "LEG-1") is None
