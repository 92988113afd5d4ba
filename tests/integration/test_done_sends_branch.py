"""In a fleet, a worker's `worker-done` is written only once its branch is on the shared
remote (docs/failure-model.md, gap 23): the daemon's relay (`start_relay`, with the checkpoint
step's `BranchSender`) sends it first, so a host lost just after the word takes no commit with
it. With the real `legion` CLI as a confined worker runs it, real git and a bare remote.

Costs about 2 s (one relay, five short `legion` runs)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from legion.backends import Backends, open_backends
from legion.bus import open_bus
from legion.bus.sessions import register_session
from legion.config import load_project
from legion.core.model import Label, Status
from legion.daemon.checkpoint_step import BranchSender
from legion.daemon.servers import start_relay
from legion.fleet.hosts import FencedStore
from legion.relay import CAPABILITY_ENV, SOCKET_ENV, socket_path
from legion.relay.capabilities import Capabilities
from legion.store import open_store
from legion.workspaces.git_worktree import GitWorktrees
from tests.support.cli import Result, git, run_legion

BRANCH = "legion/leg-1"
SID = "retro-session"


@dataclass
class Fleet:
    repo: Path
    workspace: Path
    shared: Path
    backends: Backends
    env: dict[str, str]

    def worker(self, *args: str) -> Result:
        return run_legion(*args, cwd=self.repo, env=self.env)

    def commit(self, name: str) -> str:
        (self.workspace / name).write_text(f"{name}\n", encoding="utf-8")
        git(self.workspace, "add", name)
        git(self.workspace, "commit", "-q", "-m", f"add {name}")
        return git(self.workspace, "rev-parse", "HEAD").strip()

    def on_remote(self) -> str:
        listed = git(self.shared, "for-each-ref", "--format=%(objectname)", f"refs/heads/{BRANCH}")
        return listed.strip()

    def labels(self) -> list[str]:
        return self.backends.tracker.get_issue("LEG-1").labels


@pytest.fixture
def fleet(project: Path, tmp_path: Path) -> Iterator[Fleet]:
    shared = tmp_path / "shared.git"
    git(tmp_path, "init", "-q", "--bare", str(shared))
    git(project, "remote", "add", "shared", str(shared))
    git(project, "push", "-q", "shared", "main")
    loaded = load_project(project)
    backends = open_backends(loaded)
    backends.tracker.create_issue("The retro's issue", status=Status.IN_PROGRESS)  # LEG-1
    workspace = GitWorktrees(project, tmp_path / "ws", "main").ensure("LEG-1").path
    bus = open_bus(os.environ)
    register_session(bus, loaded, mode="retro", session_id=SID, workspace=workspace,
                     runtime="claude-code")  # fmt: skip
    bus.close()
    token = Capabilities(backends.db).mint("LEG-1", mode="retro", session_id=SID)
    sender = BranchSender(project, "shared")
    fenced = FencedStore(open_store(loaded), "alpha")
    server = start_relay(loaded, os.environ, fenced, before_done=sender.before_done)
    env = {
        CAPABILITY_ENV: token,
        SOCKET_ENV: str(socket_path(loaded.state_dir)),
        "LEGION_MODE": "retro",
        "LEGION_RELAY_WAIT": "0.5",
        "XDG_STATE_HOME": str(tmp_path / "unseen"),
        "LEGION_STATE_DIR": str(tmp_path / "unseen" / "project"),
    }
    try:
        yield Fleet(project, workspace, shared, backends, env)
    finally:
        server.stop()
        fenced.close()
        backends.db.close()


def test_done_is_written_once_the_workers_commits_are_on_the_shared_remote(fleet: Fleet) -> None:
    first = fleet.commit("docs-solutions-leg-1.md")
    assert fleet.on_remote() == ""  # no checkpoint sent it yet: the soak's lost commit
    labelled = fleet.worker("issue", "label", "LEG-1", "--add", "worker-done")
    assert labelled.returncode == 0, labelled.stderr
    assert fleet.on_remote() == first
    assert Label.WORKER_DONE.value in fleet.labels()
    # `legion complete`, the skills' way, takes the same path.
    fleet.worker("issue", "label", "LEG-1", "--remove", "worker-done")
    second = fleet.commit("more.md")
    completed = fleet.worker("complete", "retro written")
    assert completed.returncode == 0, completed.stderr
    assert fleet.on_remote() == second
    assert Label.WORKER_DONE.value in fleet.labels()


def test_done_is_refused_while_the_branch_cannot_be_sent(fleet: Fleet) -> None:
    fleet.commit("a.md")
    # Someone else's commit on the remote's branch: this host's push may not replace it.
    other = fleet.shared.parent / "other"
    git(fleet.shared.parent, "clone", "-q", str(fleet.shared), str(other))
    git(other, "switch", "-q", "-c", BRANCH)
    git(other, "commit", "-q", "--allow-empty", "-m", "someone else's")
    git(other, "push", "-q", "origin", BRANCH)
    theirs = fleet.on_remote()
    refused = fleet.worker("issue", "label", "LEG-1", "--add", "worker-done")
    assert refused.returncode != 0
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "LEG-1 is not marked done" in lines[0] and "run the same command again" in lines[0]
    assert Label.WORKER_DONE.value not in fleet.labels()
    assert fleet.on_remote() == theirs  # nothing of theirs replaced
    # Other labels are no business of the gate's.
    other_label = fleet.worker("issue", "label", "LEG-1", "--remove", "worker-active")
    assert other_label.returncode == 0, other_label.stderr


def test_a_project_with_no_such_remote_holds_nothing_back(fleet: Fleet) -> None:
    # One host on a PostgreSQL store, with no remote of the `remote` setting's name.
    git(fleet.repo, "remote", "remove", "shared")
    fleet.commit("a.md")
    labelled = fleet.worker("issue", "label", "LEG-1", "--add", "worker-done")
    assert labelled.returncode == 0, labelled.stderr
    assert Label.WORKER_DONE.value in fleet.labels()
