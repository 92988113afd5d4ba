"""The embedded forge's CI (`legion.forges.local_checks`): the `checks` setting's commands,
run by the daemon's step on each open pull request's head, confined, shown as any forge's
checks; a red pull request merges neither by a person (without --force) nor by a session."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest

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
    env, forge, step = _stepper(project, commands)
    backends = open_backends(load_project(project, env=dict(os.environ) | env))
    # LEG-1: its retro done; the finisher merges once its checks pass.
    backends.tracker.create_issue("Feature", status=Status.RETRO, labels=["worker-done"])
    git(project, "switch", "--quiet", "-c", "legion/leg-1")
    (project / "feature.txt").write_text("x\n")
    git(project, "add", "feature.txt")
    git(project, "commit", "--quiet", "-m", "feature")
    first = git(project, "rev-parse", "HEAD").strip()
    git(project, "switch", "--quiet", "main")
    forge.create_pr("LEG-1", "legion/leg-1")
    loaded = load_project(project, env=dict(os.environ) | env)

    # Before the daemon ran them: pending (queued), never "none": nothing moves on them.
    assert forge.get_pr("1").checks is ChecksState.PENDING
    waiting = json.loads(legion("state", "--json", env=env).stdout)["issues"]["LEG-1"]
    assert (waiting["row"], waiting["waiting"]) == (18, "checks pending")
    queued = legion("pr", "checks", "1", env=env)
    assert queued.returncode == 0 and queued.stdout.count("pending  ") == 3, queued.stdout

    def settled() -> dict[str, ChecksState]:
        return _settled(step, forge)

    assert settled() == {
        commands[0]: ChecksState.PASSING,  # it ran in a copy of the PR's head
        RED: ChecksState.FAILING,
        commands[2]: ChecksState.FAILING,  # confined: the user's checkout is not writable
    }
    assert not escape.exists()
    shown = legion("pr", "checks", "1", "--log", RED, env=env)
    assert shown.returncode == 0 and "red on stdout" in shown.stdout, shown.stderr
    state = json.loads(legion("state", "--json", env=env).stdout)["issues"]["LEG-1"]
    assert state["checks"] == "failing" and state["row"] == 19  # never the finisher
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


def test_a_head_with_no_file_is_checked_too(project: Path) -> None:
    _, forge, step = _stepper(project, ["test ! -e x"])
    open_backends(load_project(project)).tracker.create_issue("Empty", status=Status.IN_PROGRESS)
    git(project, "switch", "--quiet", "--orphan", "legion/leg-1")
    git(project, "commit", "--quiet", "--allow-empty", "-m", "nothing")  # an empty tree
    git(project, "switch", "--quiet", "main")
    forge.create_pr("LEG-1", "legion/leg-1")
    assert _settled(step, forge) == {"test ! -e x": ChecksState.PASSING}


def _stepper(
    project: Path, commands: list[str]
) -> tuple[dict[str, str], LocalForge, LocalChecksStep]:
    env = {"LEGION_CHECKS": "\n".join(commands), "LEGION_AUTHOR": "ada"}
    loaded = load_project(project, env=dict(os.environ) | env)
    backends = open_backends(loaded)
    forge = backends.forge
    assert isinstance(forge, LocalForge) and forge.checks is not None
    confinement = open_workers(loaded, backends).supervisor.confinement
    runner = CheckRunner(
        forge.checks,
        project,
        confinement.check_plan,
        lambda number: forge.branch_head(str(number)),
        timeout=60,
    )
    return env, forge, LocalChecksStep(forge, runner, ActionLog(backends.db))


def _settled(step: LocalChecksStep, forge: LocalForge) -> dict[str, ChecksState]:
    deadline = time.monotonic() + 60
    while True:
        step.run()
        states = {c.name: c.state for c in forge.get_pr("1").check_runs}
        if ChecksState.PENDING not in states.values() or time.monotonic() > deadline:
            return states
        time.sleep(0.1)


def test_a_branch_shows_its_checks_the_files_it_merges_and_its_newest_head(
    legion: LegionRunner, project: Path, tmp_path: Path
) -> None:
    """What an attacker's review found: `.gitattributes` hid a file from the copy
    (`export-ignore`) or rewrote one (`export-subst`); a link out of the copy left it half
    made; and commits a worker made after its checks passed were merged unchecked."""
    from legion.workspaces.git_worktree import GitWorktrees

    # As committed: `export-subst` would make `$Format:SAFE$` read `SAFE` in an archive.
    check = "test ! -e evil.txt && test ! -e hidden.txt && grep -qF '$Format:SAFE$' code.sh"
    env, forge, step = _stepper(project, [check])
    open_backends(load_project(project)).tracker.create_issue("Feature")
    worktrees = GitWorktrees(project, tmp_path / "ws", "main")
    worktrees.ensure("LEG-1")
    workspace = worktrees.path_for("LEG-1")
    (workspace / "code.sh").write_text("echo $Format:SAFE$\n")
    (workspace / ".gitattributes").write_text("code.sh export-subst\n")
    git(workspace, "add", "code.sh", ".gitattributes")
    git(workspace, "commit", "--quiet", "-m", "feature")
    forge.create_pr("LEG-1", "legion/leg-1")
    assert _settled(step, forge) == {check: ChecksState.PASSING}

    # A file a branch hides, and a link out of the copy: the check sees what merges.
    (workspace / "hidden.txt").write_text("x\n")
    (workspace / ".gitattributes").write_text("hidden.txt export-ignore\n")
    (workspace / "out").symlink_to("/etc/passwd")
    git(workspace, "add", "hidden.txt", ".gitattributes", "out")
    git(workspace, "commit", "--quiet", "-m", "hide")
    assert _settled(step, forge) == {check: ChecksState.FAILING}
    git(workspace, "rm", "--quiet", "hidden.txt")
    git(workspace, "commit", "--quiet", "-m", "unhide")
    assert _settled(step, forge) == {check: ChecksState.PASSING}

    # Committed after the checks passed: a person's merge sees a head with no checks yet.
    (workspace / "evil.txt").write_text("evil\n")
    git(workspace, "add", "evil.txt")
    git(workspace, "commit", "--quiet", "-m", "evil")
    merged = legion("pr", "merge", "1", env=env)
    assert merged.returncode == 1 and "while its checks run" in merged.stderr, merged.stderr
    assert _settled(step, forge) == {check: ChecksState.FAILING}
    assert legion("pr", "merge", "1", env=env).returncode == 1
    assert "evil.txt" not in git(project, "ls-tree", "--name-only", "main")


def test_a_head_too_large_to_copy_fails_its_checks_once_and_holds_up_no_other(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from legion.forges import local_checks

    monkeypatch.setattr(local_checks, "MAX_TREE_BYTES", 1000)  # a tiny branch of 3 GiB, scaled
    _, forge, step = _stepper(project, ["true"])
    tracker = open_backends(load_project(project)).tracker
    for issue, size in (("LEG-1", 5000), ("LEG-2", 10)):
        tracker.create_issue(issue)
        git(project, "switch", "--quiet", "-c", f"legion/{issue.lower()}")
        (project / "data.bin").write_bytes(b"\0" * size)
        git(project, "add", "data.bin")
        git(project, "commit", "--quiet", "-m", issue)
        git(project, "switch", "--quiet", "main")
        forge.create_pr(issue, f"legion/{issue.lower()}")
    assert _settled(step, forge) == {"true": ChecksState.FAILING}
    deadline = time.monotonic() + 60
    while forge.get_pr("2").checks is ChecksState.PENDING and time.monotonic() < deadline:
        step.run()
        time.sleep(0.1)
    assert forge.get_pr("2").checks is ChecksState.PASSING
    step.run()
    said = [e.detail for e in ActionLog(open_backends(load_project(project)).db).tail(50)]
    assert [d for d in said if "could not run" in d] == [
        f"#1: its checks could not run on {forge.branch_head('1')[:12]}: its files are 5,007 "
        "bytes, over the 1,000 a check's copy may take"  # README.md and data.bin
    ]
