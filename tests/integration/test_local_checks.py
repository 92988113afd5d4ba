"""The embedded forge's CI (`legion.forges.local_checks`): the `checks` setting's commands,
run by the daemon's step on each open pull request's head, confined, shown as any forge's
checks; a red pull request merges neither by a person (without --force) nor by a session."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.core.model import ChecksState, Status
from legion.daemon.checks_step import LocalChecksStep
from legion.errors import ConflictError
from legion.forges.local import LocalForge
from legion.forges.local_checks import CheckRunner
from legion.forges.reviewed import ReviewedHeads
from legion.relay import socket_path
from legion.relay.capabilities import Capabilities
from legion.relay.client import RelayClient, RelayForge
from legion.relay.server import RelayServer
from legion.services.session_ops import session_ops
from legion.store.actionlog import ActionLog
from tests.support.cli import LegionRunner, git

RED = "echo red on stdout; exit 3"


def test_checks_run_on_each_head_confined_and_gate_every_merge(
    legion: LegionRunner, project: Path
) -> None:
    escape = project / "escaped.txt"  # in the user's checkout, outside the check's copy
    commands = ["test -f feature.txt", RED, f"echo out > {escape}"]
    env = {"LEGION_CHECKS": "\n".join(commands), "LEGION_AUTHOR": "ada"}
    loaded = load_project(project, env=dict(os.environ) | env)
    backends = open_backends(loaded)
    forge = backends.forge
    assert isinstance(forge, LocalForge) and forge.checks is not None
    # LEG-1: its retro done; the finisher merges once its checks pass.
    backends.tracker.create_issue("Feature", status=Status.RETRO, labels=["worker-done"])
    git(project, "switch", "--quiet", "-c", "legion/leg-1")
    (project / "feature.txt").write_text("x\n")
    git(project, "add", "feature.txt")
    git(project, "commit", "--quiet", "-m", "feature")
    first = git(project, "rev-parse", "HEAD").strip()
    git(project, "switch", "--quiet", "main")
    forge.create_pr("LEG-1", "legion/leg-1")

    # Before the daemon ran them: pending (queued), never "none": nothing moves on them.
    assert forge.get_pr("1").checks is ChecksState.PENDING
    waiting = json.loads(legion("state", "--json", env=env).stdout)["issues"]["LEG-1"]
    assert (waiting["row"], waiting["waiting"]) == (16, "checks pending")
    queued = legion("pr", "checks", "1", env=env)
    assert queued.returncode == 0 and queued.stdout.count("pending  ") == 3, queued.stdout

    confinement = open_workers(loaded, backends).supervisor.confinement
    runner = CheckRunner(forge.checks, project, confinement.check_plan, timeout=60)
    step = LocalChecksStep(forge, runner, ActionLog(backends.db))

    def settled() -> dict[str, ChecksState]:
        deadline = time.monotonic() + 60
        while True:
            step.run()
            states = {c.name: c.state for c in forge.get_pr("1").check_runs}
            if ChecksState.PENDING not in states.values() or time.monotonic() > deadline:
                return states
            time.sleep(0.1)

    assert settled() == {
        commands[0]: ChecksState.PASSING,  # it ran in a copy of the PR's head
        RED: ChecksState.FAILING,
        commands[2]: ChecksState.FAILING,  # confined: the user's checkout is not writable
    }
    assert not escape.exists()
    shown = legion("pr", "checks", "1", "--log", RED, env=env)
    assert shown.returncode == 0 and "red on stdout" in shown.stdout, shown.stderr
    state = json.loads(legion("state", "--json", env=env).stdout)["issues"]["LEG-1"]
    assert state["checks"] == "failing" and state["row"] == 17  # never the finisher
    assert state["suggested_action"] == "resume_implementer_for_checks"

    # A person's merge is refused, naming the failing checks.
    refused = legion("pr", "merge", "1", env=env)
    assert refused.returncode == 1
    assert "does not merge while its checks fail: echo red on stdout; exit 3" in refused.stderr
    # A finisher session's, through the relay's end, is refused too, approval or not.
    path = socket_path(loaded.state_dir)
    server = RelayServer(
        path, lambda: open_backends(loaded, direct=True), ops=session_ops(loaded, os.environ)
    )
    server.start()
    try:
        ReviewedHeads(backends.db).record(1, "legion/leg-1", first)
        forge.add_review("1", "approved", body="", author="legion-review")
        token = Capabilities(backends.db).mint("LEG-1", mode="finish", session_id=str(uuid.uuid4()))
        finisher = RelayForge(RelayClient(path, token, wait=0.5))
        try:
            finisher.merge("LEG-1")
            raise AssertionError("a red pull request was merged by a session")
        except ConflictError as exc:
            assert "fix what fails, push, and stop" in str(exc)
    finally:
        server.stop()

    # A new head: its checks run again, from pending.
    git(project, "switch", "--quiet", "legion/leg-1")
    (project / "more.txt").write_text("y\n")
    git(project, "add", "more.txt")
    git(project, "commit", "--quiet", "-m", "more")
    git(project, "switch", "--quiet", "main")
    assert forge.get_pr("1").checks is ChecksState.PENDING
    assert settled()[commands[0]] is ChecksState.PASSING
    started = [e for e in ActionLog(backends.db).tail(50) if e.action == "local_check"]
    assert len([e for e in started if "started" in e.detail]) == 6, started
