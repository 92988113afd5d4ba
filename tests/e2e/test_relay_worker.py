"""The relay with a real worker: one started by `WorkerManager` (the real Claude Code CLI, tmux,
the scripted model) for a remote-tracker project holds a capability and no credential."""

from __future__ import annotations

from pathlib import Path

import pytest

from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.core.ids import session_id
from legion.core.model import Mode, Status
from legion.reconcile import start_worker
from legion.relay import CAPABILITY_ENV, SOCKET_ENV, relay_needed, socket_path
from legion.store.actionlog import ActionLog
from tests.fakes.model_server import bash, text
from tests.support.processes import session_processes
from tests.support.swarm import Daemon, Swarm
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]

REMOTE = {"LEGION_TRACKER": "linear", "LEGION_LINEAR_TEAM": "ENG"}


def test_a_real_worker_holds_a_capability_and_no_credential(swarm: Swarm) -> None:
    """A worker started by `WorkerManager` (the real Claude Code CLI, tmux, the scripted model)
    for a remote-tracker project, under a daemon: its process has its capability and the
    socket, none of the dispatcher's credentials, and its `legion` reaches the tracker only
    through the daemon's relay."""
    project = swarm.repo
    credentials = {"LINEAR_API_KEY": "lin_api_relaytest", "GITHUB_TOKEN": "ghp_relaytest"}
    dispatcher_env = swarm.env | REMOTE | credentials
    remote = load_project(project, env=dispatcher_env)
    embedded = load_project(project, env=swarm.env)
    assert relay_needed(remote.settings)
    backends = open_backends(embedded, direct=True)
    backends.tracker.create_issue("Say hello", status=Status.IN_PROGRESS)  # LEG-1
    backends.tracker.create_issue("Not yours")  # LEG-2
    swarm.server.add_scenario(
        "implement mode for LEG-1",
        [
            [
                bash(
                    "legion issue comment LEG-2 --body nope; echo refused=$?; "
                    "legion issue label LEG-1 --add worker-done"
                )
            ],
            [text("Done.")],
        ],
    )
    path = socket_path(embedded.state_dir)
    # The daemon hosts the session and serves the relay, on the embedded backends.
    with Daemon(swarm, mode="manual"):
        workers = open_workers(remote, backends, dispatcher_env)
        assert workers.capabilities is not None
        view = start_worker(workers, backends.tracker, "LEG-1", Mode.IMPLEMENT)
        wait_until(
            "worker-done through the relay",
            lambda: "worker-done" in backends.tracker.get_issue("LEG-1").labels,
        )
        sid = session_id(embedded.settings.project_id, "LEG-1", Mode.IMPLEMENT)
        pids = wait_until("the worker's process", lambda: session_processes({sid}).get(sid))
        raw = Path(f"/proc/{pids[0]}/environ").read_bytes()
        environ = dict(entry.decode().partition("=")[::2] for entry in raw.split(b"\0") if entry)
        assert environ[SOCKET_ENV] == str(path)
        scope = workers.capabilities.lookup(environ[CAPABILITY_ENV])
        assert scope is not None and scope.issue == "LEG-1" and scope.mode == "implement"
        assert not set(credentials) & set(environ)
        assert all(value not in raw.decode() for value in credentials.values())
        assert backends.tracker.list_comments("LEG-2") == []
        refusals = [e for e in ActionLog(backends.db).tail(50) if e.action == "relay_refuse"]
        assert [e.issue for e in refusals] == ["LEG-1"]
        # Retired: the window closes and the capability with it.
        workers.retire(view)
        assert workers.capabilities.lookup(environ[CAPABILITY_ENV]) is None
    backends.db.close()
