"""Worker runtime figures (printed, never asserted).

1. `legion dispatch` to the worker's first transcript line, with the real Claude Code CLI in a
   private tmux server against the scripted model server (median of several dispatches).
2. `legion workers --json` over 50 live workers whose transcripts hold ~200 KB each
   (target <= 0.3 s).

Run: .venv/bin/python bench/workers.py [--runs N]
(needs the pinned Claude Code: legion doctor --install)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.model_server import FakeModelServer, Scenario, text
from tests.support.claude_env import find_claude

from common import hosting_daemon, make_repo, swarm_env
from legion.backends import Backends, open_backends
from legion.config import Project
from legion.core.ids import session_id
from legion.core.model import Mode
from legion.runtime.claude.paths import transcript_path
from legion.services.projects import init_project
from legion.sessions.registry import Registry

LEGION = Path(sys.executable).with_name("legion")


def watch(path: Path, seen: threading.Event) -> None:
    while not seen.is_set():
        if path.exists() and path.stat().st_size > 0:
            seen.set()
        time.sleep(0.005)


def bench_dispatch(root: Path, runs: int) -> list[float]:
    repo = make_repo(root / "repo")
    project, _ = init_project(repo)
    backends = open_backends(project)
    sock = Path(tempfile.mkdtemp(prefix="lgb-")) / "sock"
    with FakeModelServer([Scenario("plan mode for", [[text("Planned.")]])]) as server:
        env = swarm_env(root, server.base_url, sock, find_claude())
        try:
            with hosting_daemon(repo, env):  # no session starts without a daemon
                samples = _dispatches(backends, project, env, repo, runs)
        finally:
            subprocess.run(
                ["tmux", "-S", str(sock), "kill-server"], capture_output=True, check=False
            )
            shutil.rmtree(sock.parent, ignore_errors=True)
    return samples


def _dispatches(
    backends: Backends, project: Project, env: dict[str, str], repo: Path, runs: int
) -> list[float]:
    samples = []
    for n in range(runs):
        issue = backends.tracker.create_issue(f"Bench {n}").identifier
        workspace = project.workspace_root / issue.lower()
        sid = session_id(project.settings.project_id, issue, Mode.PLAN)
        first_line = threading.Event()
        path = transcript_path(env, workspace, sid)
        start = time.perf_counter()
        watcher = threading.Thread(target=watch, args=(path, first_line), daemon=True)
        watcher.start()
        subprocess.run(
            [str(LEGION), "dispatch", issue, "plan"], cwd=repo, env=env, check=True,
            capture_output=True,
        )  # fmt: skip
        first_line.wait(60)
        samples.append(time.perf_counter() - start)
    return samples


def transcript_body(lines: int) -> str:
    out = []
    for n in range(lines):
        out.append(
            json.dumps(
                {"type": "user", "message": {"role": "user", "content": f"step {n} " + "x" * 200}}
            )
        )
        out.append(
            json.dumps(
                {
                    "type": "assistant",
                    "message": {
                        "role": "assistant",
                        "stop_reason": "end_turn",
                        "content": [{"type": "text", "text": "ok " + "y" * 150}],
                    },
                }
            )
        )
    return "\n".join(out) + "\n"


def bench_workers_listing(root: Path, runs: int) -> float:
    repo = make_repo(root / "repo")
    project, _ = init_project(repo)
    backends = open_backends(project)
    registry = Registry(backends.db)
    env = dict(os.environ, CLAUDE_CONFIG_DIR=str(root / "claude-config"))
    sock = Path(tempfile.mkdtemp(prefix="lgb-")) / "sock"
    tmux = ["tmux", "-S", str(sock), "-f", "/dev/null"]
    session = f"legion-{project.settings.project_id.replace('-', '')[:8]}"
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", session, "-n", "main", "sleep", "600"], check=True
    )
    body = transcript_body(500)  # ~200 KB
    try:
        for n in range(1, 51):
            issue = f"LEG-{n}"
            workspace = root / "ws" / issue.lower()
            workspace.mkdir(parents=True)
            sid = session_id(project.settings.project_id, issue, Mode.IMPLEMENT)
            path = transcript_path(env, workspace, sid)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
            name = f"{issue.lower()}-implement"
            subprocess.run(
                [*tmux, "new-window", "-d", "-t", f"{session}:", "-n", name, "sleep", "600"],
                check=True,
            )
            registry.start(issue, Mode.IMPLEMENT, sid, name, workspace)
        env |= {"LEGION_TMUX_SOCKET": str(sock), "LEGION_TMUX_CONFIG": "/dev/null"}
        out = subprocess.run(
            [str(LEGION), "workers", "--json"],
            cwd=repo,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        states = {w["state"] for w in json.loads(out.stdout)}
        assert len(json.loads(out.stdout)) == 50 and states == {"idle"}, states
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(
                [str(LEGION), "workers", "--json"],
                cwd=repo,
                env=env,
                check=True,
                capture_output=True,
            )
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)
        shutil.rmtree(sock.parent, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        dispatch = bench_dispatch(Path(tmp) / "dispatch", options.runs)
        listing = bench_workers_listing(Path(tmp) / "listing", options.runs)
    print(
        f"dispatch -> first transcript line: median {statistics.median(dispatch):.2f} s, "
        f"max {max(dispatch):.2f} s over {len(dispatch)} dispatches"
    )
    print(f"legion workers --json, 50 workers: median {listing:.3f} s (target <= 0.3 s)")


if __name__ == "__main__":
    main()
