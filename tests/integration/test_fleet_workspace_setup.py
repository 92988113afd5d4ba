"""Workspace setup on a fleet's other host: a start the leader asks of host beta waits there
for the workspace's setup (the START stays pending, beta reports the worker running, so the
leader neither takes it for dead nor starts it elsewhere), and starts once setup is done; a
failed setup is said on the issue once and starts nothing; a leader deposed meanwhile has its
START dropped. Beta is a real daemon (`legion start --mode manual`, a `claude` that only
sleeps) on a real PostgreSQL store; the test leads as host alpha, asking as the leader does
(`WorkerManager._ask_start`: the record under beta, then the command)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from legion.config import load_project
from legion.core.liveness import SessionState
from legion.core.model import Mode
from legion.fleet.hosts import Fleet
from legion.sessions.placement import START, HostSessions, wake_name
from legion.sessions.registry import Registry
from legion.store import Store, open_store
from legion.trackers.local import LocalTracker
from legion.workspaces.setup import FOLDER, SetupFiles, summary
from tests.support.cli import run_legion, sleeping_claude
from tests.support.waits import wait_for_ticks, wait_until

# Setup waits for the test's word, a file it writes into the workspace: `go` prepares it,
# `fail` fails it.
SETUP = (
    "while [ ! -e go ] && [ ! -e fail ]; do sleep 0.05; done; "
    "if [ -e fail ]; then echo broken >&2; exit 3; fi; echo prepared > prepared.txt"
)


@dataclass
class Fleet2:
    repo: Path
    beta: dict[str, str]
    store: Store
    epoch: int

    def legion(self, *args: str) -> Any:
        found = run_legion(*args, "--json", cwd=self.repo, env=self.beta)
        assert found.returncode == 0, found.stderr
        return json.loads(found.stdout)

    def setups(self) -> dict[str, dict[str, Any]]:
        """Each issue's setup on beta, as `legion workspace list` shows it (read in this
        process: cheaper to poll than the command, which the test runs once too)."""
        state = Path(self.beta["LEGION_STATE_DIR"])
        folder = state / FOLDER
        names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        return {name: summary(SetupFiles(state, name)) for name in names}

    def ask_start(self, issue: str) -> tuple[int, int]:
        """What the leader's `_ask_start` does: the worker recorded under beta, then asked."""
        project_id = load_project(self.repo, {**os.environ, **self.beta}).settings.project_id
        window = f"{issue.lower()}-plan"
        record = Registry(self.store).start(
            issue, Mode.PLAN, f"sid-{issue}", window, Path(), "claude-code", host="beta"
        )
        command = HostSessions(self.store).ask(
            "beta", self.epoch, START, record.id, "plan it", wake=wake_name(project_id, "beta")
        )
        return record.id, command

    def record_only(self, issue: str) -> int:
        """The leader's first half of `_ask_start`: the worker recorded under beta, not asked
        yet (as beta may see it between the two)."""
        record = Registry(self.store).start(
            issue, Mode.PLAN, f"sid-{issue}", f"{issue.lower()}-plan", Path(), "claude-code",
            host="beta",
        )  # fmt: skip
        return record.id

    def workspace(self, worker: int) -> Path:
        """Where beta recorded the worker's workspace (once it made it)."""
        record = Registry(self.store).current_by_id(worker)
        assert record is not None and record.workspace != Path()
        return record.workspace

    def reported(self, worker: int) -> tuple[SessionState, float | None] | None:
        report = HostSessions(self.store).reports().get(worker)
        return None if report is None else (report.state, report.last_activity)

    def windows(self) -> list[str]:
        listed = subprocess.run(
            ["tmux", "-S", self.beta["LEGION_TMUX_SOCKET"], "list-windows", "-a", "-F", "#W"],
            capture_output=True,
            text=True,
            check=False,
        )
        return listed.stdout.split()


@pytest.fixture
def fleet(git_repo: Path, postgres_url: str, tmp_path: Path) -> Iterator[Fleet2]:
    """Alpha leads (this test, under a lease of 60 s); beta, a real daemon, follows with
    `workspace_setup` set."""
    assert run_legion("init", cwd=git_repo, env={"LEGION_STORE": postgres_url}).returncode == 0
    folder = tmp_path / "beta"
    beta = {
        "LEGION_STORE": postgres_url,
        "LEGION_HOST_NAME": "beta",
        "LEGION_STATE_DIR": str(folder / "state"),
        "LEGION_TMUX_SOCKET": str(folder / "tmux.sock"),
        "LEGION_TMUX_CONFIG": "/dev/null",
        "LEGION_HOST_TIMEOUT": "60",
        "LEGION_WORKSPACE_ROOT": str(folder / "workspaces"),
        "LEGION_WORKSPACE_SETUP": SETUP,
    }
    sleeping_claude(tmp_path, beta)
    store = open_store(load_project(git_repo, {**os.environ, **beta}))
    try:
        Fleet(store).join("alpha", 1, 60.0, machine="elsewhere", pid=1)
        lease = Fleet(store).lead("alpha", 60.0)
        assert lease is not None
        started = run_legion("start", "--mode", "manual", "--tick", "0.3", cwd=git_repo, env=beta)
        assert started.returncode == 0, started.stderr
        yield Fleet2(git_repo, beta, store, lease.epoch)
    finally:
        run_legion("stop", "--all", cwd=git_repo, env=beta)
        store.close()


def test_a_start_asked_of_another_host_waits_there_for_its_workspace_setup(
    fleet: Fleet2,
) -> None:
    tracker = LocalTracker(fleet.store, issue_key="LEG")
    ready = tracker.create_issue("Set me up").identifier
    broken = tracker.create_issue("Broken setup").identifier
    placement = HostSessions(fleet.store)
    # A worker recorded under beta and not asked of it yet: beta, looking in between, sees no
    # window, and reports nothing (the leader counts it starting), never dead, which would
    # have the leader start it again and the two starts of one session meet on beta.
    unasked = fleet.record_only(tracker.create_issue("Recorded, not asked yet").identifier)
    (ok, ok_start), (bad, bad_start) = fleet.ask_start(ready), fleet.ask_start(broken)
    wait_until(
        "both setups run on beta",
        lambda: (
            {s["status"] for s in fleet.setups().values()} == {"running"}
            and len(fleet.setups()) == 2
        ),
    )
    # Both START commands pending; both workers reported running (starting), their activity
    # their setup's last change: the leader sees them live however long setup takes, and
    # starts them nowhere else.
    wait_until("beta reports them", lambda: fleet.reported(ok) and fleet.reported(bad))
    assert [c.id for c in placement.pending("beta")] == [ok_start, bad_start]
    for worker in (ok, bad):
        state, activity = fleet.reported(worker)  # type: ignore[misc]
        assert state is SessionState.RUNNING and activity is not None
    assert not [window for window in fleet.windows() if window.endswith("-plan")]
    wait_for_ticks(Path(fleet.beta["LEGION_STATE_DIR"]) / "heartbeat", 2)
    assert fleet.reported(unasked) is None

    # One setup ends well: its worker starts on beta, in the prepared workspace.
    (fleet.workspace(ok) / "go").write_text("")
    outcome = wait_until("the worker starts", lambda: placement.outcome(ok_start), timeout=30)
    assert outcome.startswith(f"started {ready.lower()}-plan"), outcome
    assert (fleet.workspace(ok) / "prepared.txt").read_text() == "prepared\n"
    assert f"{ready.lower()}-plan" in fleet.windows()

    # The other fails: said on its issue once, its worker not started, its START pending
    # (backing off), the worker still reported running; `legion workspace list` shows it.
    (fleet.workspace(bad) / "fail").write_text("")
    comments = wait_until("the failure is said", lambda: tracker.list_comments(broken))
    assert "exited with 3" in comments[0].body
    wait_until("backing off", lambda: fleet.setups()[broken]["status"] == "failed")
    listed = {row["issue"]: row["setup"] for row in fleet.legion("workspace", "list")}
    assert (listed[broken]["status"], listed[broken]["attempt"]) == ("failed", 1)
    assert listed[ready]["status"] == "ok"
    wait_for_ticks(Path(fleet.beta["LEGION_STATE_DIR"]) / "heartbeat", 3)
    assert len(tracker.list_comments(broken)) == 1
    assert [c.id for c in placement.pending("beta")] == [bad_start]
    assert f"{broken.lower()}-plan" not in fleet.windows()
    assert fleet.reported(bad) is not None
    assert fleet.reported(bad)[0] is SessionState.RUNNING  # type: ignore[index]
    log = fleet.legion("log", "-n", "100")
    deferred = [e for e in log if e["action"] == "host_start" and e["outcome"] == "deferred"]
    # Said as it changed (setup started, runs, failed), not at every pass.
    assert 3 <= len(deferred) <= 5, deferred

    # A person's `legion dispatch` on the host that runs it tries again at once (and it
    # fails again: said once more); on the leader the worker is live (starting).
    again = run_legion("dispatch", broken, "plan", cwd=fleet.repo, env=fleet.beta)
    assert again.returncode == 1 and "waiting for workspace setup" in again.stderr, again
    wait_until("the second failure is said", lambda: len(tracker.list_comments(broken)) == 2)
    assert fleet.setups()[broken]["attempt"] == 2
    assert [c.id for c in placement.pending("beta")] == [bad_start]

    # The leader is deposed: its START is dropped at beta's next pass, and the worker is
    # reported dead (the new leader decides again).
    Fleet(fleet.store).leave("alpha")
    Fleet(fleet.store).join("gamma", 1, 60.0, machine="elsewhere", pid=2)
    assert Fleet(fleet.store).lead("gamma", 60.0) is not None
    outcome = wait_until("dropped", lambda: placement.outcome(bad_start))
    assert outcome == f"dropped: asked under epoch {fleet.epoch}"
    wait_until("reported dead", lambda: fleet.reported(bad) == (SessionState.DEAD, None))
    assert len(tracker.list_comments(broken)) == 2
