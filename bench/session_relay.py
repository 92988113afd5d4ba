"""What going through the daemon costs a session's commands (printed, never asserted).

A confined session sees neither the bus nor the project's database (issue 21): its `legion
say` is posted by the daemon's relay, as the session its capability names, and the
controller's `legion state --json` is run by the daemon for it (`legion.services.session_ops`). Each
command is run N times the old way (the session opens the bus and the database itself) and N
times through a real relay server with the daemon's operations, alternating. Printed: the
median wall time of the real `legion` command each way, and the ratio.

Run: .venv/bin/python bench/session_relay.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import make_repo
from legion.backends import open_backends
from legion.bus import open_bus
from legion.bus.sessions import register_session
from legion.core.model import Status
from legion.relay import CAPABILITY_ENV, SOCKET_ENV, socket_path
from legion.relay.capabilities import Capabilities
from legion.relay.server import RelayServer
from legion.services.projects import init_project
from legion.services.session_ops import session_ops

LEGION = Path(sys.executable).parent / "legion"


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [str(LEGION), *argv], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"legion {' '.join(argv)}: {done.stderr.strip()}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        repo = make_repo(Path(tmp) / "repo")
        project, _ = init_project(repo)
        backends = open_backends(project)
        for n in range(20):
            backends.tracker.create_issue(f"Issue {n}", status=Status.TODO)
        bus = open_bus(os.environ)
        for sid, mode in (("controller-sid", "controller"), ("worker-sid", "implement")):
            register_session(
                bus, project, mode=mode, session_id=sid, workspace=repo, runtime="claude-code"
            )
        bus.close()
        capabilities = Capabilities(backends.db)
        worker = capabilities.mint("LEG-1", mode="implement", session_id="worker-sid")
        controller = capabilities.mint(None, mode="controller", session_id="controller-sid")
        base = dict(os.environ)
        path = socket_path(project.state_dir)
        server = RelayServer(
            path, lambda: open_backends(project, direct=True), ops=session_ops(project, base)
        )
        server.start()
        relayed = {SOCKET_ENV: str(path)}
        ways = {
            "say, the session opening the bus": (
                ["say", "hello @legion"],
                base | {"LEGION_SESSION_ID": "worker-sid", "LEGION_MODE": "implement"},
            ),
            "say, through the relay": (
                ["say", "hello @legion"],
                base | relayed | {CAPABILITY_ENV: worker},
            ),
            "state --json, run by the controller": (
                ["state", "--json"],
                base | {"LEGION_SESSION_ID": "controller-sid", "LEGION_MODE": "controller"},
            ),
            "state --json, run by the daemon for it": (
                ["state", "--json"],
                base | relayed | {CAPABILITY_ENV: controller},
            ),
        }
        samples: dict[str, list[float]] = {name: [] for name in ways}
        try:
            for argv, env in ways.values():
                timed(argv, repo, env)  # warm up
            for _ in range(options.runs):
                for name, (argv, env) in ways.items():
                    samples[name].append(timed(argv, repo, env))
        finally:
            server.stop()
            backends.db.close()
    print(f"a session's commands, the real `legion`, median of {options.runs} runs each:")
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name, median in medians.items():
        print(f"  {name:<42} {median * 1000:7.1f} ms")
    names = list(medians)
    for direct, through in ((names[0], names[1]), (names[2], names[3])):
        ratio = medians[through] / medians[direct]
        added = (medians[through] - medians[direct]) * 1000
        print(f"  {through}: x{ratio:.2f} ({added:+.1f} ms)")


if __name__ == "__main__":
    main()
