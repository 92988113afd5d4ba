"""Swarm figures (printed, never asserted), with real Claude Code workers on the scripted model.

1. Reaction latency: from a worker adding `worker-done` to the window of the next mode's worker
   appearing, over 20 transitions (4 issues x 5 each), with a 60 s tick so that only the
   wake-up a `legion` write sends can explain a fast reaction. Target: median <= 2 s.
2. Model requests over a 5-issue demo, in `auto` mode and in `llm` mode: how many the workers
   make, and how many the controller itself makes.

Run: .venv/bin/python bench/swarm.py   (needs the pinned Claude Code: legion doctor --install)
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.claude_env import find_claude

from common import make_repo, swarm_env
from legion.demo.model_server import FakeModelServer
from legion.demo.run import run_demo
from legion.demo.swarm_script import swarm_script
from legion.projects import init_project

LEGION = Path(sys.executable).with_name("legion")
ISSUES = ["LEG-1", "LEG-2", "LEG-3", "LEG-4"]


def reaction_latency(root: Path) -> list[float]:
    repo = make_repo(root / "repo")
    project, _ = init_project(repo)
    sock = Path(tempfile.mkdtemp(prefix="lgb-")) / "sock"
    tmux = ["tmux", "-S", str(sock)]
    samples: list[float] = []
    with FakeModelServer(swarm_script(ISSUES)) as server:
        env = swarm_env(root, server.base_url, sock, find_claude())
        for title in ISSUES:
            subprocess.run(
                [str(LEGION), "issue", "create", title],
                cwd=repo,
                env=env,
                check=True,
                capture_output=True,
            )
        daemon = subprocess.Popen(
            [str(LEGION), "start", "--foreground", "--tick", "60"],
            cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        db = sqlite3.connect(project.db_path)
        try:
            pending: dict[str, float] = {}  # issue -> when worker-done appeared
            windows_seen: set[str] = set()
            done_before: set[str] = set()
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and len(samples) < 20:
                now = time.monotonic()
                rows = db.execute(
                    "SELECT i.identifier, i.status, "
                    "EXISTS(SELECT 1 FROM issue_labels l "
                    "WHERE l.issue_id = i.id AND l.label = 'worker-done') "
                    "FROM issues i"
                ).fetchall()
                if all(status == "Done" for _, status, _ in rows):
                    break
                done_now = {identifier for identifier, _, done in rows if done}
                for issue in done_now - done_before:
                    pending.setdefault(issue, now)
                done_before = done_now
                listing = subprocess.run(
                    [*tmux, "list-windows", "-a", "-F", "#{window_id} #{window_name}"],
                    capture_output=True, text=True, check=False,
                ).stdout.split("\n")  # fmt: skip
                for line in filter(None, listing):
                    window_id, name = line.split(" ", 1)
                    if window_id in windows_seen:
                        continue
                    windows_seen.add(window_id)
                    issue = name.rsplit("-", 1)[0].upper()
                    if issue in pending:
                        samples.append(now - pending.pop(issue))
                time.sleep(0.02)
        finally:
            daemon.terminate()
            daemon.wait(30)
            subprocess.run(
                ["tmux", "-S", str(sock), "kill-server"], capture_output=True, check=False
            )
    return samples


def main() -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        os.environ["LEGION_CLAUDE_BIN"] = str(find_claude())
        samples = reaction_latency(Path(tmp) / "latency")
        counts = {}
        for mode in ("auto", "llm"):
            result = run_demo(
                Path(tmp) / f"demo-{mode}", issues=5, mode=mode, real=False, timeout=900,
                say=lambda _line: None,
            )  # fmt: skip
            counts[mode] = result
    ordered = sorted(samples)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)] if ordered else float("nan")
    print(
        f"worker-done -> next worker's window: median {statistics.median(samples):.2f} s, "
        f"p95 {p95:.2f} s over {len(samples)} transitions (target median <= 2 s)"
    )
    for mode, result in counts.items():
        done = sum(1 for status in result.statuses.values() if status == "Done")
        print(
            f"5-issue demo, {mode:4} mode: {result.requests} model requests, "
            f"{result.controller_requests} by the controller; "
            f"{done}/5 Done in {result.seconds:.0f} s"
        )


if __name__ == "__main__":
    main()
