"""Swarm figures (printed, never asserted), with real Claude Code workers on the scripted model.

1. Reaction latency: from a worker adding `worker-done` to the window of the next mode's worker
   appearing, over 20 transitions (4 issues x 5 each), with a 60 s tick so that only the
   wake-up a `legion` write sends can explain a fast reaction. Target: median <= 1 s, p95 <= 2 s.
   Then where that time goes: the swarm runs with `LEGION_TRACE`
   (`legion.diagnostics.tracing`), and each
   hand-off, from the start of the worker's `legion issue label` to the new window, is split
   among the steps that ran in it (each instant to the innermost step running then; another
   issue's steps as "other issues"; no step at all as "no step running"), with the median and
   p95 of each step over the hand-offs.
2. Model requests over a 5-issue demo, in `auto` mode and in `llm` mode: how many the workers
   make, and how many the controller itself makes.

Run: .venv/bin/python bench/swarm.py [--latency-only] [--trace FILE (kept)]
(needs the pinned Claude Code: legion doctor --install)
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.claude_env import find_claude

from common import make_repo, swarm_env
from legion.demo.model_server import FakeModelServer
from legion.demo.run import run_demo
from legion.demo.swarm_script import swarm_script
from legion.diagnostics.tracing import TRACE_ENV, Span, read_spans
from legion.services.projects import init_project

LEGION = Path(sys.executable).with_name("legion")
ISSUES = ["LEG-1", "LEG-2", "LEG-3", "LEG-4"]
IDLE = "no step running (a wake-up, a tick)"
LABEL_COMMAND = "legion issue label"
WINDOW_OPENED = "start: open the window"
SHOWN_S = 0.005  # a step whose median share is less (and p95 under 50 ms) is in "the rest"


@dataclass(frozen=True)
class HandOff:
    issue: str
    done_at: float  # when the bench saw `worker-done` (seconds since the epoch)
    window_at: float  # when it saw the next window


def attribute(spans: Sequence[Span], issue: str, start: float, end: float) -> dict[str, float]:
    """Pure: [start, end] split among the spans running in it, each instant going to the
    innermost (the latest started) of them; another issue's spans count as "other issues",
    an instant with none as `IDLE`. The parts sum to `end - start`."""
    inside = [s for s in spans if s.end > start and s.start < end and s.end > s.start]
    edges = sorted({start, end, *(t for s in inside for t in (s.start, s.end) if start < t < end)})
    parts: dict[str, float] = {}
    for left, right in itertools.pairwise(edges):
        running = [s for s in inside if s.start <= left and s.end >= right]
        if running:
            top = max(running, key=lambda s: (s.start, -s.end))
            name = top.name if top.issue in (issue, "-") else f"other issues: {top.name}"
        else:
            name = IDLE
        parts[name] = parts.get(name, 0.0) + (right - left)
    return parts


def hand_off_span(spans: Sequence[Span], hand_off: HandOff) -> tuple[float, float]:
    """From the start of the worker's label command that wrote `worker-done` to the end of the
    next window's opening (what the bench saw, where the trace lacks either)."""
    commands = [
        s.start
        for s in spans
        if s.name == LABEL_COMMAND and s.issue == hand_off.issue and s.start <= hand_off.done_at
    ]
    opened = [
        s.end
        for s in spans
        if s.name == WINDOW_OPENED
        and s.issue == hand_off.issue
        and hand_off.done_at <= s.end <= hand_off.window_at + 0.5
    ]
    return (max(commands, default=hand_off.done_at), min(opened, default=hand_off.window_at))


def breakdown(spans: Sequence[Span], hand_offs: Sequence[HandOff], daemon: int) -> list[str]:
    """Pure: one line per step, the median and p95 of its share of each hand-off, largest
    median first, and the whole. The steps are the daemon's (pid `daemon`; its own command's
    span, the whole run, aside) and the worker's label command: other processes run beside
    the hand-off, not in its way."""
    daemons = [s for s in spans if s.pid == daemon and not s.name.startswith("legion ")]
    shares: list[dict[str, float]] = []
    wholes: list[float] = []
    for hand_off in hand_offs:
        start, end = hand_off_span(spans, hand_off)
        labels = [s for s in spans if s.name == LABEL_COMMAND and s.issue == hand_off.issue]
        shares.append(attribute([*daemons, *labels], hand_off.issue, start, end))
        wholes.append(end - start)
    names = {name for share in shares for name in share}
    rows = [(name, [share.get(name, 0.0) for share in shares]) for name in names]
    rows.sort(key=lambda row: (-statistics.median(row[1]), row[0]))
    # The steps that matter by themselves; the rest, together (each hand-off's sum of them).
    shown = [row for row in rows if statistics.median(row[1]) >= SHOWN_S or p95(row[1]) >= 0.05]
    rest = [row for row in rows if row not in shown]
    if rest:
        together = [sum(values[i] for _, values in rest) for i in range(len(shares))]
        shown.append((f"{len(rest)} other steps, together", together))
    width = max((len(name) for name, _ in shown), default=10)
    lines = [_line("whole (label command start -> window)", wholes, width)] if wholes else []
    return lines + [_line(name, values, width) for name, values in shown]


def _line(name: str, values: Sequence[float], width: int) -> str:
    return f"  {name:{width}}  median {statistics.median(values):.3f} s  p95 {p95(values):.3f} s"


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)] if ordered else float("nan")


def reaction_latency(root: Path, trace: Path) -> tuple[list[HandOff], list[Span], int]:
    repo = make_repo(root / "repo")
    project, _ = init_project(repo)
    sock = Path(tempfile.mkdtemp(prefix="lgb-")) / "sock"
    tmux = ["tmux", "-S", str(sock)]
    samples: list[HandOff] = []
    with FakeModelServer(swarm_script(ISSUES)) as server:
        env = swarm_env(root, server.base_url, sock, find_claude()) | {TRACE_ENV: str(trace)}
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
                now = time.time()
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
                        samples.append(HandOff(issue, pending.pop(issue), now))
                time.sleep(0.02)
        finally:
            daemon.terminate()
            daemon.wait(30)
            subprocess.run(
                ["tmux", "-S", str(sock), "kill-server"], capture_output=True, check=False
            )
    return samples, read_spans(trace), daemon.pid


def main() -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        os.environ["LEGION_CLAUDE_BIN"] = str(find_claude())
        trace = Path(sys.argv[sys.argv.index("--trace") + 1]) if "--trace" in sys.argv else None
        hand_offs, spans, daemon = reaction_latency(
            Path(tmp) / "latency", trace or Path(tmp) / "trace.jsonl"
        )
        counts = {}
        for mode in () if "--latency-only" in sys.argv else ("auto", "llm"):
            result = run_demo(
                Path(tmp) / f"demo-{mode}", issues=5, mode=mode, real=False, timeout=900,
                say=lambda _line: None,
            )  # fmt: skip
            counts[mode] = result
    samples = [h.window_at - h.done_at for h in hand_offs]
    print(
        f"worker-done -> next worker's window: median {statistics.median(samples):.2f} s, "
        f"p95 {p95(samples):.2f} s over {len(samples)} transitions "
        "(target median <= 1 s, p95 <= 2 s)"
    )
    print("where a hand-off's time goes, by step:")
    for line in breakdown(spans, hand_offs, daemon):
        print(line)
    for mode, result in counts.items():
        done = sum(1 for status in result.statuses.values() if status == "Done")
        print(
            f"5-issue demo, {mode:4} mode: {result.requests} model requests, "
            f"{result.controller_requests} by the controller; "
            f"{done}/5 Done in {result.seconds:.0f} s"
        )


if __name__ == "__main__":
    main()
