"""Workspace setup on a real git workspace, run by its detached runner under real bubblewrap
(`legion.workspaces.setup`, through `WorkerManager.setup.gate`, which a worker's start passes
first): what it may write and read, its log, a failure said once and backed off, a change of
the commands tried at once, a timeout that kills what it started.

Needs bubblewrap; where the machine forbids the namespaces it needs, skipped, saying why."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.sessions.workers import WorkerManager
from legion.workspaces import setup
from legion.workspaces.setup import SetupPendingError
from tests.support.cli import LegionRunner, run_legion, sleeping_claude
from tests.support.sandbox import require_sandbox
from tests.support.waits import wait_until


def _workers(project: Path, commands: Sequence[str], **more: object) -> WorkerManager:
    loaded = load_project(project, flags={"workspace_setup": list(commands), **more})
    return open_workers(loaded, open_backends(loaded))


def _issue(workers: WorkerManager) -> tuple[str, Path]:
    issue = workers.tracker.create_issue("Set me up").identifier
    return issue, workers.workspaces.ensure(issue).path


def _settled(workers: WorkerManager, issue: str, timeout: float = 30.0) -> setup.SetupState:
    files = workers.setup.files(issue)
    deadline = time.monotonic() + timeout
    while (state := setup.current(files)).running is not None:
        assert time.monotonic() < deadline, files.output()
        time.sleep(0.05)
    return state


def _pending(workers: WorkerManager, issue: str, workspace: Path) -> str:
    with pytest.raises(SetupPendingError) as caught:
        workers.setup.gate(issue, workspace)
    return str(caught.value)


def test_setup_writes_its_workspace_and_cache_and_nothing_of_the_home(project: Path) -> None:
    require_sandbox()
    home = Path(os.environ["HOME"])
    (home / "secret.txt").write_text("hunter2\n")
    workers = _workers(
        project,
        [
            "echo built > built.txt",
            'mkdir -p "$UV_CACHE_DIR" && echo warm > "$UV_CACHE_DIR/warm.txt"',
            'cat "$HOME/secret.txt" 2>/dev/null || echo no-secret',
            f'touch "$HOME/planted" {home}/planted-too 2>/dev/null; echo done',
        ],
    )
    issue, workspace = _issue(workers)
    assert "waiting for workspace setup" in _pending(workers, issue, workspace)
    state = _settled(workers, issue)
    assert state.status() == "ok", workers.setup.files(issue).output()
    workers.setup.gate(issue, workspace)  # the session's start goes on now
    assert (workspace / "built.txt").read_text() == "built\n"
    cache = workers.project.state_dir / "cache" / issue  # the issue's own
    assert (cache / "uv" / "warm.txt").read_text() == "warm\n"
    log = workers.setup.files(issue).output()
    assert "$ echo built > built.txt" in log and "no-secret" in log and "hunter2" not in log
    assert not (home / "planted").exists() and not (home / "planted-too").exists()
    # The next session in it refreshes first only when there are refresh commands: none here.
    workers.setup.gate(issue, workspace)


def test_a_failure_is_said_once_backs_off_and_a_change_retries_at_once(
    project: Path, tmux_socket: Path
) -> None:
    require_sandbox()
    workers = _workers(project, ["echo step one", "echo broken >&2; exit 3"])
    issue, workspace = _issue(workers)
    _pending(workers, issue, workspace)
    state = _settled(workers, issue)
    assert state.status() == "failed" and state.last is not None
    assert state.last.exit_code == 3 and state.last.command == "echo broken >&2; exit 3"
    for _ in range(3):  # the daemon's ticks
        assert "tried again in" in _pending(workers, issue, workspace)
    comments = [c.body for c in workers.tracker.list_comments(issue)]
    assert len(comments) == 1, comments
    assert "exited with 3" in comments[0] and "```text\n$ echo step one\nstep one" in comments[0]
    assert setup.current(workers.setup.files(issue)).running is None  # backing off
    # Shown: `legion workspace list` says it failed and when it runs again; `legion peek`,
    # with no worker window, shows its output.
    (row,) = json.loads(run_legion("workspace", "list", "--json", cwd=project).stdout)
    assert row["setup"]["status"] == "failed" and row["setup"]["attempt"] == 1
    listed = run_legion("workspace", "list", cwd=project).stdout
    assert "setup: failed (attempt 1, again in 1 min)" in listed
    peeked = run_legion("peek", issue, cwd=project)
    assert peeked.returncode == 0, peeked.stderr
    assert "workspace setup (failed: `echo broken >&2; exit 3` exited with 3)" in peeked.stdout
    assert "broken" in peeked.stdout.splitlines()[-1]
    # A person's `legion dispatch` tries again at once (and fails again: said once more).
    with pytest.raises(SetupPendingError):
        workers.setup.gate(issue, workspace, asked=True)
    assert _settled(workers, issue).failures == 2
    _pending(workers, issue, workspace)  # the next tick says so
    assert len(workers.tracker.list_comments(issue)) == 2
    # Mended commands run at once, whatever the back-off; success lets the start go on.
    mended = _workers(project, ["echo fine > fixed.txt"])
    _pending(mended, issue, workspace)
    assert _settled(mended, issue).status() == "ok"
    mended.setup.gate(issue, workspace)
    assert (workspace / "fixed.txt").exists()
    assert len(mended.tracker.list_comments(issue)) == 2


def test_a_timeout_kills_what_setup_started(project: Path) -> None:
    require_sandbox()
    workers = _workers(project, ["sleep 31.25 & sleep 31.5"], workspace_setup_timeout=1)
    issue, workspace = _issue(workers)
    _pending(workers, issue, workspace)
    state = _settled(workers, issue)
    assert state.last is not None and state.last.timed_out
    assert "timed out after" in state.last.why
    deadline = time.monotonic() + 20
    while _sleepers():
        assert time.monotonic() < deadline, "setup's processes outlived its time limit"
        time.sleep(0.1)


def _sleepers() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if args[:1] == [b"sleep"] and args[1:2] in ([b"31.25"], [b"31.5"], [b"31.75"]):
                found.append(int(entry.name))
    return found


def test_a_runner_killed_with_its_daemon_is_run_again(project: Path) -> None:
    require_sandbox()
    workers = _workers(project, ["test -e ran-once || { touch ran-once; sleep 31.75; }"])
    issue, workspace = _issue(workers)
    _pending(workers, issue, workspace)
    files = workers.setup.files(issue)
    setup._CHILDREN.clear()  # another daemon: it knows the runner by its pid and start time
    deadline = time.monotonic() + 45
    while not (workspace / "ran-once").exists():
        assert time.monotonic() < deadline, files.output()
        time.sleep(0.05)
    assert "(it runs)" in _pending(workers, issue, workspace)  # found running: not run twice
    running = files.load().running
    assert running is not None and files.load().attempt == 1
    os.kill(running.pid, signal.SIGKILL)  # killed with the machine's daemon, say
    deadline = time.monotonic() + 45
    while setup.pid_start(running.pid) is not None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    _pending(workers, issue, workspace)  # dead without a result: run again
    state = _settled(workers, issue)
    assert state.status() == "ok" and state.attempt == 2 and state.failures == 0
    workers.setup.gate(issue, workspace)
    assert not _sleepers()  # what the killed runner ran died with it


def test_the_daemon_starts_the_worker_once_setup_is_done(
    legion: LegionRunner, project: Path, tmux_socket: Path, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    """Through the real `legion` and its daemon (a `claude` that only sleeps): the first
    pass defers the worker and starts setup; the runner's end wakes the daemon, whose next
    pass starts the worker in the prepared workspace."""
    values: dict[str, str] = {"LEGION_WORKSPACE_SETUP": "echo prepared > prepared.txt"}
    sleeping_claude(tmp_path, values)
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    legion("issue", "create", "Needs its dependencies")
    dry = legion("start", "--dry-run")
    assert "LEG-1: dispatch_planner: deferred (waiting for workspace setup)" in dry.stdout
    started = legion("start", "--tick", "3600")  # no tick comes: the runner's end wakes it
    try:
        assert started.returncode == 0, started.stderr
        assert "LEG-1: dispatch_planner: deferred (waiting for workspace setup)" in started.stdout
        workers = wait_until(
            "the worker",
            lambda: json.loads(legion("workers", "--json").stdout),
            timeout=90,
        )
        (row,) = json.loads(legion("workspace", "list", "--json").stdout)
        assert row["setup"]["status"] == "ok"
        assert (Path(row["path"]) / "prepared.txt").read_text() == "prepared\n"
        assert [w["issue"] for w in workers] == ["LEG-1"]
        log = json.loads(legion("log", "-n", "50", "--json").stdout)
        deferred = [e for e in log if e["action"] == "dispatch_planner"]
        assert "waiting for workspace setup" in deferred[0]["detail"], deferred
    finally:
        legion("stop", "--all")


def test_a_later_session_runs_the_refresh_commands_first(project: Path) -> None:
    require_sandbox()
    workers = _workers(
        project, ["echo set-up >> runs.txt"], workspace_refresh=["echo refreshed >> runs.txt"]
    )
    issue, workspace = _issue(workers)
    _pending(workers, issue, workspace)
    _settled(workers, issue)
    workers.setup.gate(issue, workspace)  # the first session starts
    assert "waiting for workspace refresh" in _pending(workers, issue, workspace)
    assert _settled(workers, issue).status() == "ok"
    workers.setup.gate(issue, workspace)  # the second
    assert (workspace / "runs.txt").read_text() == "set-up\nrefreshed\n"
