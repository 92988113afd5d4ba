"""Workers confined by bubblewrap (issue 21, the sandbox): the real Claude Code CLI, run by the
real daemon, whose scripted worker tries to read what a model-written command must never see.

Needs bubblewrap (`.ci/run` installs it; README: Quickstart). Where it is missing this test
fails and says so; where the machine forbids the namespaces it needs, it is skipped, saying why.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
from pathlib import Path

import pytest

from legion.runtime.tmux import session_processes
from legion.sandbox import find_bwrap, probe
from tests.e2e.test_recovery import controller, park
from tests.fakes.model_server import bash, text
from tests.support.swarm import Daemon, Swarm, issue_status, session_uuid
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SENTINEL = "sentinel-7f3a9c"


def _require_bwrap(env: dict[str, str]) -> None:
    """bubblewrap must be installed (the README asks for it, `.ci/run` installs it); a machine
    whose kernel or container refuses it namespaces is one this cannot be tested on."""
    found = find_bwrap(env)
    assert found is not None, "bubblewrap is not installed: apt install bubblewrap"
    problem = probe(found)
    if problem is not None:
        pytest.skip(f"this machine cannot confine a process: {problem}")


def _plant(path: Path, what: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{what} {SENTINEL}\n")
    return path


def test_a_worker_sees_its_workspace_and_nothing_else_of_the_machine(swarm: Swarm) -> None:
    _require_bwrap(swarm.env)
    home = Path(swarm.env["HOME"])
    secrets = [
        _plant(home / ".ssh" / "id_ed25519", "ssh key"),
        _plant(home / ".aws" / "credentials", "aws"),
        _plant(home / ".config" / "gh" / "hosts.yml", "gh token"),
        _plant(swarm.workspace_root / "leg-9" / "notes.txt", "another issue's workspace"),
        swarm.socket,  # the tmux server: typing into the controller's pane
    ]
    # The CLI's own login, in a folder the worker must use: shown empty.
    credentials = _plant(swarm.config_dir / ".credentials.json", "oauth")
    # Something else listening on this machine's loopback: out of a worker's reach.
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    looks = " ".join(shlex.quote(str(path)) for path in secrets)
    probe_command = (
        f'{{ for f in {looks}; do [ -e "$f" ] && echo "SEEN $f" && cat "$f"; done; '
        f'echo "CREDENTIALS $(wc -c < {shlex.quote(str(credentials))})"; '
        "echo \"PROCESSES $(ls /proc | grep -c '^[0-9]')\"; "
        f"(exec 3<>/dev/tcp/127.0.0.1/{listener.getsockname()[1]}) && echo REACHED; "
        "} > probe.txt 2>&1; "
        "git add probe.txt && git commit -qm probe"
    )
    controller(swarm)
    swarm.legion("issue", "create", "Probe", "--status", "In Progress")
    swarm.server.add_scenario(
        "implement mode for LEG-1",
        [[bash(probe_command, "Look around")], [bash(park("LEG-1"), "Done")], [text("Parked.")]],
        name="probe",
    )
    sid = session_uuid(swarm, "LEG-1:implement")
    with Daemon(swarm, tick=1.0):
        status = swarm.json("status")
        assert status["sandbox"] == {"confined": True, "why": "bubblewrap"}
        pids = wait_until("the worker's process", lambda: session_processes(sid), timeout=60)
        # Its own mount and process namespaces: not the daemon's, not this test's.
        for pid in pids:
            assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
            assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
        wait_until("LEG-1 parked", lambda: issue_status(swarm, "LEG-1") == "Icebox", timeout=90)
    workspace = swarm.workspace_root / "leg-1"
    found = (workspace / "probe.txt").read_text()
    assert SENTINEL not in found, found
    assert "REACHED" not in found, found
    with pytest.raises(TimeoutError):
        listener.accept()  # nobody came
    listener.close()
    assert "SEEN" not in found, found
    assert "CREDENTIALS 0" in found, found
    processes = int(found.split("PROCESSES ")[1].split()[0])
    assert processes < 10, found  # its own few, not the machine's
    # The workspace was its to write and commit in (its git metadata is the repository's).
    log = subprocess.run(
        ["git", "log", "-1", "--format=%s"],
        cwd=workspace,
        capture_output=True,
        text=True,
        check=True,
    )
    assert log.stdout.strip() == "probe", log
    assert SENTINEL not in json.dumps([r.body for r in swarm.server.snapshot()])
