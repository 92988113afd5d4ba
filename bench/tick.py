"""What one whole daemon tick costs with 50 live workers (printed, never asserted).

Target (issue 23): <= 50 ms of CPU per tick, every step included: the controller's and the
workers' health, the bus steps (agent statuses, deliveries), the follow-up of starts, the
reconcile pass (observe the workers and the tracker, decide, nothing to execute), and the
dispatch pause. Runs Legion's real daemon (`legion.daemon.Daemon.tick`) in auto mode on a real
project and a private tmux server, with
- 50 issues in Todo, each marked `worker-active`, each with a live planner: a tmux window
  running `sleep`, its registry record, its agent on the bus and a ~200 KB transcript whose
  turn has ended (an idle worker waiting for nothing: the table's action is to wait);
- the controller's window (`sleep`) and transcript, idle, with nothing to judge.
CPU seconds of this process and of its children (tmux clients), wall time and subprocesses
spawned, per tick (median over the ticks), and the CPU of each step (median).

Run: .venv/bin/python bench/tick.py [--workers 50] [--ticks 30]
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from delivery import (
    END_TURN,
    SpawnCounter,
    add_worker,
    backdate,
    environment,
    make_daemon,
    ms,
    tmux,
    transcript_lines,
)
from legion.core.model import Label
from legion.daemon import Daemon
from legion.daemon.steps import Step, StepResult
from legion.sessions.observer import CONTROLLER_WINDOW


def timed_steps(daemon: Daemon, cpu: dict[str, list[float]]) -> None:
    """Each of the daemon's steps, timed in CPU seconds of this process into `cpu`."""

    def timed(step: Step) -> Step:
        def run() -> StepResult:
            start = time.process_time()
            try:
                return step.run()
            finally:
                cpu[step.name].append(time.process_time() - start)

        return dataclasses.replace(step, run=run)

    daemon.steps = [timed(step) for step in daemon.steps]


def bench(root: Path, workers: int, ticks: int) -> None:
    with environment(root) as sock:
        daemon = make_daemon(root, sock)
        tracker = daemon.backends.tracker
        body = transcript_lines(500)  # ~200 KB each
        for n in range(1, workers + 1):
            issue = tracker.create_issue(f"Issue {n}", labels=[Label.WORKER_ACTIVE.value])
            assert issue.identifier == f"LEG-{n}", issue.identifier
            add_worker(daemon, sock, n, ["sleep", "3600"], body)
        controller = daemon.supervisor.controller
        transcript = controller.transcript()
        transcript.parent.mkdir(parents=True, exist_ok=True)
        transcript.write_text(body + END_TURN, encoding="utf-8")
        backdate(transcript)
        session = daemon.workers.windows.session
        tmux(
            sock, "new-window", "-d", "-t", f"={session}:", "-n", CONTROLLER_WINDOW, "sleep", "3600"
        )
        cpu: dict[str, list[float]] = defaultdict(list)
        daemon.tick()  # the first tick sets every agent's status from what it sees
        first = daemon.log.tail(200)
        timed_steps(daemon, cpu)
        own, children, wall, spawned = [], [], [], []
        for _ in range(ticks):
            with SpawnCounter() as counter:
                before = time.process_time()
                kids = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.monotonic()
                daemon.tick()
                wall.append(time.monotonic() - start)
                own.append(time.process_time() - before)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                children.append(after.ru_utime - kids.ru_utime + after.ru_stime - kids.ru_stime)
            spawned.append(counter.count)
        acted = [entry for entry in daemon.log.tail(200) if entry not in first]
        if acted:  # the setting is one of pure waiting: anything done is a bench error
            print(f"(tick: the daemon acted: {[(e.issue, e.action, e.detail) for e in acted]})")
        print(
            f"daemon tick, all steps, {workers} live idle workers (~200 KB transcripts) and an "
            f"idle controller, median of {ticks}: CPU {ms(statistics.median(own))} own + "
            f"{ms(statistics.median(children))} children (target <= 50 ms), wall "
            f"{ms(statistics.median(wall))}, {statistics.median(spawned):.0f} subprocesses"
        )
        steps = sorted(cpu.items(), key=lambda item: -statistics.median(item[1]))
        print(
            "  by step (own CPU, median): "
            + ", ".join(f"{name} {ms(statistics.median(values))}" for name, values in steps)
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=50)
    parser.add_argument("--ticks", type=int, default=30)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        bench(Path(tmp) / "tick", options.workers, options.ticks)


if __name__ == "__main__":
    main()
